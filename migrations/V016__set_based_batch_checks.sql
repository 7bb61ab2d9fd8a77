-- V016: produce_batch() checks its items in one statement (bench/results/README.md "SQL
-- produce_batch(): the checks set-based"). @schema@ is the configured schema, quoted.
--   * The checks ran as a PL/pgSQL loop, several statements per item: ~5 us an item, about as
--     much as the INSERT itself. One query over unnest() now measures every payload's text, fills
--     text_bytes and finds the first item that fails a check. Only when one does, the per-item
--     checks of V012 run on that item, so every error names the same item with the same message,
--     SQLSTATE and hint as before: the items' own checks (payload type, size, schema_version,
--     message_key) in item order first, then the idempotency keys in item order.
--   * The stream's sequence is looked up once, not once per id.
--   Signature, result, grants and every other step are as in V012.

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
