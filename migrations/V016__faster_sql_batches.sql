-- V016: faster SQL batches (bench/results/README.md "SQL produce_batch(): the checks
-- set-based"). @schema@ is the configured schema, quoted.
-- produce_batch() checks its items in one statement:
--   * The checks ran as a PL/pgSQL loop, several statements per item: ~5 us an item, about as
--     much as the INSERT itself. One query over unnest() now measures every payload's text, fills
--     text_bytes and finds the first item that fails a check. Only when one does, the per-item
--     checks of V012 run on that item, so every error names the same item with the same message,
--     SQLSTATE and hint as before: the items' own checks (payload type, size, schema_version,
--     message_key) in item order first, then the idempotency keys in item order.
--   * The stream's sequence is looked up once, not once per id.
--   Signature, result, grants and every other step are as in V012.
-- produce_idempotent() (its keyed path) first tries the batch as if every key were new, as
-- store::Producer does (producer.cpp first_try_keyed_insert_sql), when a lookup of each key finds
-- none of them and none repeats within the batch: one plain INSERT of the keys, no window,
-- no join back and no conflict clause, about half the full form's time. Otherwise, or when a
-- key in flight is committed meanwhile (unique_violation, inside the try's own subtransaction),
-- the full form of V015 runs unchanged.

CREATE OR REPLACE FUNCTION @schema@.produce_batch(stream text, payloads jsonb[], schema_versions integer[] DEFAULT NULL,
                                       message_keys text[] DEFAULT NULL, idempotency_keys text[] DEFAULT NULL)
RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  st @schema@.streams%ROWTYPE;
  n integer := coalesce(cardinality(payloads), 0);
  v_ids bigint[];
  v_keyed boolean;
  v_bytes integer;
  v_text_bytes integer[];  -- as produce()'s: the text's length when it is long, else NULL
  v_bad integer;           -- the first item that fails its own checks
  v_bad_key integer;       -- the first item whose idempotency key fails its check
  v_seq regclass;
  i integer;
BEGIN
  PERFORM pg_current_xact_id();  -- Rule 1
  SELECT * INTO st FROM @schema@.streams WHERE name = produce_batch.stream;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'sqlstreams: unknown stream "%"', produce_batch.stream USING ERRCODE = 'undefined_object';
  END IF;
  IF schema_versions IS NOT NULL AND cardinality(schema_versions) <> n
     OR message_keys IS NOT NULL AND cardinality(message_keys) <> n
     OR produce_batch.idempotency_keys IS NOT NULL AND cardinality(produce_batch.idempotency_keys) <> n THEN
    RAISE EXCEPTION 'sqlstreams: payloads, schema_versions, message_keys and idempotency_keys must have the same length (got %, %, %, %)',
      n, cardinality(schema_versions), cardinality(message_keys), cardinality(produce_batch.idempotency_keys)
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF n = 0 THEN
    RETURN '{}';
  END IF;
  -- Every item at once (a NULL array unnests as NULLs: no version means 1, no key none). Each
  -- payload is printed once, as before, for its size and its text_bytes.
  SELECT array_agg(CASE WHEN e.b > 4 * pg_column_size(e.p) THEN e.b END ORDER BY e.n),
         min(e.n) FILTER (WHERE e.p IS NULL OR jsonb_typeof(e.p) <> 'object'
                             OR e.b > st.max_payload_bytes OR e.v < 1
                             OR octet_length(e.k) > 1024),
         min(e.n) FILTER (WHERE e.ik = '' OR octet_length(e.ik) > 255),
         coalesce(bool_or(e.ik IS NOT NULL), false)
    INTO v_text_bytes, v_bad, v_bad_key, v_keyed
    FROM (SELECT u.n, u.p, u.v, u.k, u.ik, octet_length(u.p::text) AS b
            FROM unnest(payloads, schema_versions, message_keys, produce_batch.idempotency_keys)
                   WITH ORDINALITY AS u(p, v, k, ik, n)) e;
  IF v_bad IS NOT NULL THEN
    -- V012's checks on that item: the same error as before.
    i := v_bad;
    IF payloads[i] IS NULL OR jsonb_typeof(payloads[i]) <> 'object' THEN
      RAISE EXCEPTION 'sqlstreams: payload % of the batch must be a JSON object (got %)', i,
        coalesce(jsonb_typeof(payloads[i]), 'null') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_bytes := octet_length(payloads[i]::text);
    IF v_bytes > st.max_payload_bytes THEN
      RAISE EXCEPTION 'sqlstreams: payload % of the batch exceeds max_payload_bytes %', i, st.max_payload_bytes
        USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF schema_versions[i] < 1 THEN
      RAISE EXCEPTION 'sqlstreams: schema_version % of the batch must be >= 1 (got %)', i, schema_versions[i]
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM @schema@.check_message_key(i, message_keys[i]);
    RAISE EXCEPTION 'sqlstreams: item % of the batch failed a check that names no error (a bug)', i
      USING ERRCODE = 'internal_error';
  END IF;
  IF v_bad_key IS NOT NULL THEN
    PERFORM @schema@.check_idempotency_key(v_bad_key, produce_batch.idempotency_keys[v_bad_key]);
    RAISE EXCEPTION 'sqlstreams: idempotency_key of batch item % failed a check that names no error (a bug)', v_bad_key
      USING ERRCODE = 'internal_error';
  END IF;
  IF v_keyed THEN
    RETURN @schema@.produce_idempotent(st, payloads, schema_versions, message_keys,
                                       produce_batch.idempotency_keys, v_text_bytes);
  END IF;
  v_seq := format('%s.%I', '@schema@', 'messages_' || st.id || '_id_seq')::regclass;
  SELECT array_agg(nextval(v_seq) ORDER BY g) INTO v_ids FROM generate_series(1, n) AS g;
  -- Partitions cover 1 .. partitions_upto contiguously: the highest id decides.
  IF v_ids[n] >= st.partitions_upto THEN
    PERFORM @schema@.check_partition(st, v_ids[n]);
  END IF;
  EXECUTE format($q$INSERT INTO %s.%I (id, schema_version, message_key, payload, text_bytes)
                    SELECT u.id, coalesce(u.v, 1), u.k, u.p, u.t FROM unnest($1, $2, $3, $4, $5) AS u(id, p, v, k, t)$q$,
                 '@schema@', 'messages_' || st.id)
    USING v_ids, payloads, coalesce(schema_versions, array_fill(NULL::integer, ARRAY[n])),
          coalesce(message_keys, array_fill(NULL::text, ARRAY[n])), v_text_bytes;
  IF st.notify THEN
    PERFORM pg_notify('sqlstreams_' || st.id, '');
  END IF;
  RETURN v_ids;
END
$fn$;

CREATE OR REPLACE FUNCTION @schema@.produce_idempotent(st @schema@.streams, p_payloads jsonb[],
                                                       p_versions integer[], p_message_keys text[],
                                                       p_keys text[], p_text_bytes integer[])
RETURNS bigint[] LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_ids bigint[];
  v_top bigint;
  v_attempt integer := 0;
  v_done boolean := false;
  -- The first try: every key is new (the common case). A probe of the keys' index for any row
  -- of them (live or past the window) and a look for a key repeated in the batch; when there is
  -- neither, a plain INSERT of the keys (no window, no conflict clause); otherwise it draws no
  -- id and writes nothing, and the full form (v_sql) decides, as before: a batch that only
  -- repeats committed keys still draws no id and holds no claim back. A key another transaction
  -- is producing and then commits fails the plain INSERT with unique_violation; the full form
  -- then runs, and the ids the try drew are permanent gaps (the full form draws them as well in
  -- that race). The probe is one correlated lookup per key, (stream_id, key) both in the index
  -- condition: `key = ANY(keys)` let the planner, whose statistics had not seen a new stream's
  -- keys yet, scan all of the stream's keys and filter them (165 ms for 500 keys against a
  -- stream of 320,000; 0.7 ms as lookups).
  v_first text := format($q$
    WITH fresh AS (
      SELECT NOT EXISTS (SELECT 1 FROM unnest($4::text[]) AS q(k)
                          WHERE q.k IS NOT NULL
                            AND (SELECT true FROM %1$s.idempotency_keys d
                                  WHERE d.stream_id = $5 AND d.key = q.k) IS NOT NULL)
             AND NOT EXISTS (SELECT 1 FROM unnest($4::text[]) AS r(k) WHERE r.k IS NOT NULL
                              GROUP BY r.k HAVING count(*) > 1) AS ok),
    drawn AS MATERIALIZED (
      SELECT e.n, e.p, coalesce(e.v, 1) AS v, e.k, e.ik, e.tb, nextval('%1$s.%2$I'::regclass) AS id
        FROM unnest($1::jsonb[], $2::integer[], $3::text[], $4::text[], $7::integer[])
               WITH ORDINALITY AS e(p, v, k, ik, tb, n)
       WHERE (SELECT ok FROM fresh)
       ORDER BY e.n),
    keyed AS (
      INSERT INTO %1$s.idempotency_keys (stream_id, key, message_id)
      SELECT $5, ik, id FROM drawn WHERE ik IS NOT NULL ORDER BY ik),
    written AS (
      INSERT INTO %1$s.%3$I (id, schema_version, message_key, payload, text_bytes)
      SELECT id, v, k, p, tb FROM drawn)
    SELECT array_agg(id ORDER BY n), max(id) FROM drawn$q$,
    '@schema@', 'messages_' || st.id || '_id_seq', 'messages_' || st.id);
  v_sql text := format($q$
    WITH input AS MATERIALIZED (
      SELECT e.n, e.p, coalesce(e.v, 1) AS v, e.k, e.ik, e.tb,
             e.ik IS NOT NULL AND e.n > min(e.n) OVER (PARTITION BY e.ik) AS repeat,
             (SELECT d.message_id FROM %1$s.idempotency_keys d
               WHERE d.stream_id = $5 AND d.key = e.ik
                 AND d.created_at > statement_timestamp() - $6::interval) AS live
        FROM unnest($1::jsonb[], $2::integer[], $3::text[], $4::text[], $7::integer[])
               WITH ORDINALITY AS e(p, v, k, ik, tb, n)
       ORDER BY e.n),
    drawn AS MATERIALIZED (
      SELECT n, p, v, k, ik, tb, live,
             CASE WHEN NOT repeat AND live IS NULL THEN nextval('%1$s.%2$I'::regclass) END AS id
        FROM input ORDER BY n),
    keyed AS (
      INSERT INTO %1$s.idempotency_keys AS d (stream_id, key, message_id)
      SELECT $5, ik, id FROM drawn WHERE ik IS NOT NULL AND id IS NOT NULL ORDER BY ik
      ON CONFLICT (stream_id, key) DO UPDATE
        SET message_id = excluded.message_id, created_at = excluded.created_at
        WHERE d.created_at <= statement_timestamp() - $6::interval
      RETURNING d.key, d.message_id),
    written AS (
      INSERT INTO %1$s.%3$I (id, schema_version, message_key, payload, text_bytes)
      SELECT id, v, k, p, tb FROM drawn WHERE id IS NOT NULL)
    SELECT array_agg(CASE WHEN dr.ik IS NULL THEN dr.id
                          ELSE coalesce(dr.live, kk.message_id, %1$s.idempotency_race(dr.n)) END
                     ORDER BY dr.n),
           max(dr.id)
      FROM drawn dr LEFT JOIN keyed kk ON kk.key = dr.ik$q$,
    '@schema@', 'messages_' || st.id || '_id_seq', 'messages_' || st.id);
BEGIN
  BEGIN
    EXECUTE v_first INTO v_ids, v_top
      USING p_payloads, p_versions, p_message_keys, p_keys, st.id, st.idempotency_window,
            p_text_bytes;
    v_done := v_ids IS NOT NULL;  -- NULL: a key exists or repeats (nothing drawn, nothing written)
  EXCEPTION WHEN unique_violation THEN
    NULL;  -- a key in flight was committed meanwhile: the full form below
  END;
  WHILE NOT v_done LOOP
    v_attempt := v_attempt + 1;
    BEGIN
      EXECUTE v_sql INTO v_ids, v_top
        USING p_payloads, p_versions, p_message_keys, p_keys, st.id, st.idempotency_window,
              p_text_bytes;
      v_done := true;
    EXCEPTION WHEN SQLSTATE 'SQ001' THEN
      -- A concurrent producer of one of these keys committed while this insert waited.
      IF v_attempt >= 5 THEN
        RAISE EXCEPTION 'sqlstreams: idempotency keys of stream "%" kept changing hands while this produce waited (5 attempts)', st.name
          USING ERRCODE = 'serialization_failure', HINT = 'Retry the transaction.';
      END IF;
    END;
  END LOOP;
  IF v_top IS NOT NULL THEN
    -- Partitions cover 1 .. partitions_upto contiguously: the highest id decides.
    IF v_top >= st.partitions_upto THEN
      PERFORM @schema@.check_partition(st, v_top);
    END IF;
    IF st.notify THEN
      PERFORM pg_notify('sqlstreams_' || st.id, '');
    END IF;
  END IF;
  RETURN v_ids;
END
$fn$;
