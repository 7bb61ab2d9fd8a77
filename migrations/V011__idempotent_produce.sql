-- V011: idempotent produce (issue 30 A, docs/design.md "Idempotent produce").
-- @schema@ is the configured schema, quoted.
--   * streams.idempotency_window: how long a producer-chosen idempotency key is remembered
--     (default 24 hours; fleet-wide like retention: set when the stream is created, then by
--     set_stream_settings / `sqlstreams stream set`).
--   * idempotency_keys: one row per key produced within the window: (stream_id, key) is the
--     primary key, message_id the id the key's message got, created_at when (the producing
--     transaction's start, as messages_N.created_at). A row is written only when a key is
--     given: a produce without one never reads or writes this table. The janitor deletes rows
--     past the window (a BRIN index on created_at finds them; rows arrive in time order).
--   * produce() / produce_batch() gain an optional last parameter idempotency_key /
--     idempotency_keys (DEFAULT NULL). CREATE OR REPLACE cannot add a parameter, and an
--     overload with defaults would make every existing call ambiguous, so the functions are
--     dropped and created again with the grants of V004: every existing call (2 to 4 arguments,
--     positional or named) resolves to the new function and behaves as before.
--   * produce_idempotent(): the keyed path of produce_batch() (one statement, as store::Producer's);
--     produce() with a key runs the same steps as static statements (cached plans). Per key: a live row (within the window,
--     committed or this transaction's own) answers with its message_id — nothing is written and
--     no id is drawn. Otherwise an id is drawn and (key, id) inserted with ON CONFLICT: a
--     concurrent producer of the same key that has not ended makes this insert wait for it
--     (the unique index); if it rolled back, the insert goes on; if it committed, this attempt
--     is undone (a subtransaction: its key rows and messages go) and the lookup runs again, now
--     seeing the committed row. The ids that attempt drew stay unused (gaps, as a rollback
--     leaves), and the sequence's lock, which nextval() takes for the top-level transaction,
--     stays to its end: only in this race does a deduplicated produce draw ids and hold the
--     stream's claims back until its transaction ends. Under REPEATABLE READ or SERIALIZABLE the
--     caller gets SQLSTATE 40001 instead (its snapshot cannot see the other's row). An expired
--     row is taken over (UPDATE … WHERE created_at is past the window). Within one batch the
--     first item of a key wins; later items get its id. Keys are inserted in key order, so two
--     batches sharing keys cannot deadlock on them.
--   * set_stream_settings() gains p_idempotency_window_ms (DEFAULT NULL: leave it), dropped and
--     created again likewise with the grants of V008.

ALTER TABLE @schema@.streams
  ADD COLUMN idempotency_window interval NOT NULL DEFAULT interval '24 hours'
    CONSTRAINT streams_idempotency_window_positive CHECK (idempotency_window > interval '0');

CREATE TABLE @schema@.idempotency_keys (
  stream_id  bigint NOT NULL,
  key        text COLLATE "C" NOT NULL,  -- compared bytewise: an identity, not a word
  message_id bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (stream_id, key)
);
CREATE INDEX idempotency_keys_age ON @schema@.idempotency_keys USING brin (created_at);

-- An idempotency key: NULL (none) or 1 .. 255 bytes (22023 when empty, 22001 when longer),
-- naming the batch item (p_item NULL: produce()).
CREATE FUNCTION @schema@.check_idempotency_key(p_item integer, p_key text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF p_key = '' THEN
    RAISE EXCEPTION 'sqlstreams: idempotency_key%: must not be empty (NULL means no key)',
      CASE WHEN p_item IS NULL THEN '' ELSE ' of batch item ' || p_item END
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF octet_length(p_key) > 255 THEN
    RAISE EXCEPTION 'sqlstreams: idempotency_key%: % bytes exceeds the limit of 255 bytes',
      CASE WHEN p_item IS NULL THEN '' ELSE ' of batch item ' || p_item END, octet_length(p_key)
      USING ERRCODE = 'string_data_right_truncation',
        HINT = 'An idempotency key names one produce attempt (a UUID, "order-17:placed"); keep data in the payload.';
  END IF;
  RETURN true;
END
$fn$;

-- Raised by store::Producer's keyed INSERT (runtime/store/produce/producer.cpp) for an item
-- whose key a concurrent transaction committed while the statement waited for it: the statement
-- fails as a whole (nothing of it stays) and the producer runs it again. SQLSTATE SQ001 is ours
-- (class SQ is no standard's): produce_idempotent() below raises it too, and catches only it.
CREATE FUNCTION @schema@.idempotency_race(p_item bigint)
RETURNS bigint LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  RAISE EXCEPTION 'sqlstreams: idempotency_key of batch item % was committed by a concurrent producer meanwhile; run the produce again (it will return that id)',
    p_item USING ERRCODE = 'SQ001';
END
$fn$;

-- The keyed path of produce() and produce_batch(), which have checked every argument and own
-- an xid (Rule 1). Returns the ids in input order: a deduplicated item gets the id its key's
-- first message got. One statement, as store::Producer's keyed INSERT (producer.cpp): per item,
-- `live` is the id its key got within the window (committed, or earlier in this transaction);
-- an id is drawn, in input order (the sort runs before the volatile nextval), only for keyless
-- items and the first item of a key that is not live; the keys are inserted in key order with
-- ON CONFLICT (waits for a concurrent producer of a key; takes over a row past the window); an
-- item whose key a concurrent producer committed meanwhile calls idempotency_race(), which
-- fails the statement: the subtransaction around it rolls back and the statement runs again
-- (a new snapshot: the lookup now sees that key).
CREATE FUNCTION @schema@.produce_idempotent(st @schema@.streams, p_payloads jsonb[],
                                            p_versions integer[], p_message_keys text[],
                                            p_keys text[])
RETURNS bigint[] LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_ids bigint[];
  v_top bigint;
  v_attempt integer := 0;
  v_sql text := format($q$
    WITH input AS MATERIALIZED (
      SELECT e.n, e.p, coalesce(($2::integer[])[e.n], 1) AS v, ($3::text[])[e.n] AS k,
             ($4::text[])[e.n] AS ik,
             ($4::text[])[e.n] IS NOT NULL AND e.n > min(e.n) OVER (PARTITION BY ($4::text[])[e.n]) AS repeat,
             (SELECT d.message_id FROM %1$s.idempotency_keys d
               WHERE d.stream_id = $5 AND d.key = ($4::text[])[e.n]
                 AND d.created_at > statement_timestamp() - $6::interval) AS live
        FROM unnest($1::jsonb[]) WITH ORDINALITY AS e(p, n) ORDER BY e.n),
    drawn AS MATERIALIZED (
      SELECT n, p, v, k, ik, live,
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
      INSERT INTO %1$s.%3$I (id, schema_version, message_key, payload)
      SELECT id, v, k, p FROM drawn WHERE id IS NOT NULL)
    SELECT array_agg(CASE WHEN dr.ik IS NULL THEN dr.id
                          ELSE coalesce(dr.live, kk.message_id, %1$s.idempotency_race(dr.n)) END
                     ORDER BY dr.n),
           max(dr.id)
      FROM drawn dr LEFT JOIN keyed kk ON kk.key = dr.ik$q$,
    '@schema@', 'messages_' || st.id || '_id_seq', 'messages_' || st.id);
BEGIN
  LOOP
    v_attempt := v_attempt + 1;
    BEGIN
      EXECUTE v_sql INTO v_ids, v_top
        USING p_payloads, p_versions, p_message_keys, p_keys, st.id, st.idempotency_window;
      EXIT;
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

DROP FUNCTION @schema@.produce(text, jsonb, integer, text);
DROP FUNCTION @schema@.produce_batch(text, jsonb[], integer[], text[]);

CREATE FUNCTION @schema@.produce(stream text, payload jsonb, schema_version integer DEFAULT 1,
                                 message_key text DEFAULT NULL, idempotency_key text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  st @schema@.streams%ROWTYPE;
  v_id bigint;
  v_attempt integer;
BEGIN
  PERFORM pg_current_xact_id();  -- Rule 1: own an xid before drawing an id
  SELECT * INTO st FROM @schema@.streams WHERE name = produce.stream;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'sqlstreams: unknown stream "%"', produce.stream USING ERRCODE = 'undefined_object',
      HINT = 'Declare the stream in the host configuration (sqlstreams run / sqlstreams declare).';
  END IF;
  IF payload IS NULL OR jsonb_typeof(payload) <> 'object' THEN
    RAISE EXCEPTION 'sqlstreams: payload must be a JSON object (got %)', coalesce(jsonb_typeof(payload), 'null')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  IF octet_length(payload::text) > st.max_payload_bytes THEN
    RAISE EXCEPTION 'sqlstreams: payload of % bytes exceeds max_payload_bytes % of stream "%"',
      octet_length(payload::text), st.max_payload_bytes, st.name USING ERRCODE = 'program_limit_exceeded';
  END IF;
  IF produce.schema_version IS NULL OR produce.schema_version < 1 THEN
    RAISE EXCEPTION 'sqlstreams: schema_version must be >= 1 (got %)', coalesce(produce.schema_version::text, 'null')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM @schema@.check_message_key(NULL, produce.message_key);
  IF produce.idempotency_key IS NOT NULL THEN
    -- One key: produce_idempotent()'s steps as static statements (plans cached per session).
    PERFORM @schema@.check_idempotency_key(NULL, produce.idempotency_key);
    FOR v_attempt IN 1 .. 5 LOOP
      SELECT k.message_id INTO v_id FROM @schema@.idempotency_keys k
       WHERE k.stream_id = st.id AND k.key = produce.idempotency_key
         AND k.created_at > statement_timestamp() - st.idempotency_window;
      IF FOUND THEN
        RETURN v_id;  -- deduplicated: nothing written, no id drawn
      END IF;
      BEGIN
        v_id := nextval(format('%s.%I', '@schema@', 'messages_' || st.id || '_id_seq')::regclass);
        INSERT INTO @schema@.idempotency_keys AS k (stream_id, key, message_id)
        VALUES (st.id, produce.idempotency_key, v_id)
        ON CONFLICT (stream_id, key) DO UPDATE
          SET message_id = excluded.message_id, created_at = excluded.created_at
          WHERE k.created_at <= statement_timestamp() - st.idempotency_window;
        IF NOT FOUND THEN
          -- A concurrent producer of this key committed while the insert waited for it.
          RAISE EXCEPTION 'idempotency race' USING ERRCODE = 'SQ001';
        END IF;
        EXECUTE format('INSERT INTO %s.%I (id, schema_version, message_key, payload) VALUES ($1, $2, $3, $4)',
                       '@schema@', 'messages_' || st.id)
          USING v_id, produce.schema_version, produce.message_key, produce.payload;
        IF st.notify THEN
          PERFORM pg_notify('sqlstreams_' || st.id, '');
        END IF;
        RETURN v_id;
      EXCEPTION WHEN SQLSTATE 'SQ001' THEN
        NULL;  -- look again: the committed key answers
      END;
    END LOOP;
    RAISE EXCEPTION 'sqlstreams: idempotency key of stream "%" kept changing hands while this produce waited (5 attempts)', st.name
      USING ERRCODE = 'serialization_failure', HINT = 'Retry the transaction.';
  END IF;
  v_id := nextval(format('%s.%I', '@schema@', 'messages_' || st.id || '_id_seq')::regclass);
  IF v_id >= st.partitions_upto THEN
    PERFORM @schema@.check_partition(st, v_id);
  END IF;
  EXECUTE format('INSERT INTO %s.%I (id, schema_version, message_key, payload) VALUES ($1, $2, $3, $4)',
                 '@schema@', 'messages_' || st.id)
    USING v_id, produce.schema_version, produce.message_key, produce.payload;
  IF st.notify THEN
    PERFORM pg_notify('sqlstreams_' || st.id, '');
  END IF;
  RETURN v_id;
END
$fn$;

CREATE FUNCTION @schema@.produce_batch(stream text, payloads jsonb[], schema_versions integer[] DEFAULT NULL,
                                       message_keys text[] DEFAULT NULL, idempotency_keys text[] DEFAULT NULL)
RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  st @schema@.streams%ROWTYPE;
  n integer := coalesce(cardinality(payloads), 0);
  v_ids bigint[];
  v_keyed boolean := false;
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
  FOR i IN 1 .. n LOOP
    IF payloads[i] IS NULL OR jsonb_typeof(payloads[i]) <> 'object' THEN
      RAISE EXCEPTION 'sqlstreams: payload % of the batch must be a JSON object (got %)', i,
        coalesce(jsonb_typeof(payloads[i]), 'null') USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF octet_length(payloads[i]::text) > st.max_payload_bytes THEN
      RAISE EXCEPTION 'sqlstreams: payload % of the batch exceeds max_payload_bytes %', i, st.max_payload_bytes
        USING ERRCODE = 'program_limit_exceeded';
    END IF;
    -- A NULL element means the default version 1.
    IF schema_versions[i] < 1 THEN
      RAISE EXCEPTION 'sqlstreams: schema_version % of the batch must be >= 1 (got %)', i, schema_versions[i]
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM @schema@.check_message_key(i, message_keys[i]);
  END LOOP;
  -- Without keys (the argument NULL) this costs one test: the batch goes as before.
  IF produce_batch.idempotency_keys IS NOT NULL THEN
    FOR i IN 1 .. n LOOP
      -- A NULL element means no key for that item.
      IF produce_batch.idempotency_keys[i] IS NOT NULL THEN
        PERFORM @schema@.check_idempotency_key(i, produce_batch.idempotency_keys[i]);
        v_keyed := true;
      END IF;
    END LOOP;
  END IF;
  IF n = 0 THEN
    RETURN '{}';
  END IF;
  IF v_keyed THEN
    RETURN @schema@.produce_idempotent(st, payloads, schema_versions, message_keys,
                                       produce_batch.idempotency_keys);
  END IF;
  SELECT array_agg(nextval(format('%s.%I', '@schema@', 'messages_' || st.id || '_id_seq')::regclass) ORDER BY g)
    INTO v_ids FROM generate_series(1, n) AS g;
  -- Partitions cover 1 .. partitions_upto contiguously: the highest id decides.
  IF v_ids[n] >= st.partitions_upto THEN
    PERFORM @schema@.check_partition(st, v_ids[n]);
  END IF;
  EXECUTE format($q$INSERT INTO %s.%I (id, schema_version, message_key, payload)
                    SELECT u.id, coalesce(u.v, 1), u.k, u.p FROM unnest($1, $2, $3, $4) AS u(id, p, v, k)$q$,
                 '@schema@', 'messages_' || st.id)
    USING v_ids, payloads, coalesce(schema_versions, array_fill(NULL::integer, ARRAY[n])),
          coalesce(message_keys, array_fill(NULL::text, ARRAY[n]));
  IF st.notify THEN
    PERFORM pg_notify('sqlstreams_' || st.id, '');
  END IF;
  RETURN v_ids;
END
$fn$;

-- set_stream_settings (as in V008) with the window.
DROP FUNCTION @schema@.set_stream_settings(text, boolean, bigint, boolean, integer, boolean, text);
CREATE FUNCTION @schema@.set_stream_settings(
    p_stream text, p_set_retention boolean, p_retention_ms bigint, p_allow_drop boolean,
    p_max_payload_bytes integer, p_notify boolean, p_actor text,
    p_idempotency_window_ms bigint DEFAULT NULL,
    OUT present boolean, OUT changes jsonb, OUT audit_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
  st record;
  v_retention interval;
  v_window interval;
BEGIN
  SELECT * INTO st FROM @schema@.streams WHERE name = p_stream FOR UPDATE;
  present := FOUND;
  changes := '{}'::jsonb;
  IF NOT present THEN
    RETURN;
  END IF;
  IF p_set_retention THEN
    IF p_retention_ms IS NOT NULL AND p_retention_ms <= 0 THEN
      RAISE EXCEPTION 'sqlstreams: retention must be positive (got % ms)', p_retention_ms
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_retention := p_retention_ms * interval '1 millisecond';
    IF st.retention IS DISTINCT FROM v_retention THEN
      changes := changes || jsonb_build_object('retention', jsonb_build_object(
          'from', (extract(epoch FROM st.retention) * 1000)::bigint, 'to', p_retention_ms));
    END IF;
  END IF;
  IF p_allow_drop IS NOT NULL AND p_allow_drop <> st.allow_drop_past_committed THEN
    changes := changes || jsonb_build_object('allow_drop_past_committed', jsonb_build_object(
        'from', st.allow_drop_past_committed, 'to', p_allow_drop));
  END IF;
  IF p_max_payload_bytes IS NOT NULL THEN
    IF p_max_payload_bytes < 1 OR p_max_payload_bytes > 67108864 THEN
      RAISE EXCEPTION 'sqlstreams: max_payload_bytes must be 1 .. 67108864 (64 MiB), got %',
        p_max_payload_bytes USING ERRCODE = 'invalid_parameter_value';
    END IF;
    IF p_max_payload_bytes <> st.max_payload_bytes THEN
      changes := changes || jsonb_build_object('max_payload_bytes', jsonb_build_object(
          'from', st.max_payload_bytes, 'to', p_max_payload_bytes));
    END IF;
  END IF;
  IF p_notify IS NOT NULL AND p_notify <> st.notify THEN
    changes := changes || jsonb_build_object('notify', jsonb_build_object(
        'from', st.notify, 'to', p_notify));
  END IF;
  IF p_idempotency_window_ms IS NOT NULL THEN
    IF p_idempotency_window_ms <= 0 OR p_idempotency_window_ms > 3153600000000 THEN
      RAISE EXCEPTION 'sqlstreams: idempotency_window must be > 0 and <= 36500 days (got % ms)',
        p_idempotency_window_ms USING ERRCODE = 'invalid_parameter_value';
    END IF;
    v_window := p_idempotency_window_ms * interval '1 millisecond';
    IF v_window <> st.idempotency_window THEN
      changes := changes || jsonb_build_object('idempotency_window', jsonb_build_object(
          'from', (extract(epoch FROM st.idempotency_window) * 1000)::bigint,
          'to', p_idempotency_window_ms));
    END IF;
  END IF;
  IF changes = '{}'::jsonb THEN
    RETURN;
  END IF;
  UPDATE @schema@.streams
     SET retention = CASE WHEN p_set_retention THEN v_retention ELSE retention END,
         allow_drop_past_committed = coalesce(p_allow_drop, allow_drop_past_committed),
         max_payload_bytes = coalesce(p_max_payload_bytes, max_payload_bytes),
         notify = coalesce(p_notify, notify),
         idempotency_window = coalesce(v_window, idempotency_window),
         updated_at = now()
   WHERE id = st.id;
  INSERT INTO @schema@.stream_actions (action, stream, stream_id, db_user, actor, detail)
  VALUES ('set', st.name, st.id, session_user, p_actor, changes)
  RETURNING id INTO audit_id;
END
$fn$;

-- Rights (as V004 and V008): nobody but the roles below runs the functions; the SECURITY
-- DEFINER ones run as sqlstreams_host.
REVOKE ALL ON FUNCTION @schema@.check_idempotency_key(integer, text),
                       @schema@.idempotency_race(bigint),
                       @schema@.produce_idempotent(@schema@.streams, jsonb[], integer[], text[], text[]),
                       @schema@.produce(text, jsonb, integer, text, text),
                       @schema@.produce_batch(text, jsonb[], integer[], text[], text[]),
                       @schema@.set_stream_settings(text, boolean, bigint, boolean, integer, boolean, text, bigint)
  FROM PUBLIC;
ALTER FUNCTION @schema@.produce(text, jsonb, integer, text, text) OWNER TO sqlstreams_host;
ALTER FUNCTION @schema@.produce_batch(text, jsonb[], integer[], text[], text[]) OWNER TO sqlstreams_host;
ALTER FUNCTION @schema@.set_stream_settings(text, boolean, bigint, boolean, integer, boolean, text, bigint)
  OWNER TO sqlstreams_host;
GRANT EXECUTE ON FUNCTION @schema@.produce(text, jsonb, integer, text, text),
                          @schema@.produce_batch(text, jsonb[], integer[], text[], text[])
  TO sqlstreams_producer;
GRANT EXECUTE ON FUNCTION @schema@.set_stream_settings(text, boolean, bigint, boolean, integer, boolean, text, bigint)
  TO sqlstreams_operator, sqlstreams_host;
GRANT EXECUTE ON FUNCTION @schema@.check_idempotency_key(integer, text),
                          @schema@.idempotency_race(bigint),
                          @schema@.produce_idempotent(@schema@.streams, jsonb[], integer[], text[], text[]),
                          @schema@.produce(text, jsonb, integer, text, text),
                          @schema@.produce_batch(text, jsonb[], integer[], text[], text[])
  TO sqlstreams_host;
-- The host: store::Producer inserts keys directly (one statement), takes over expired ones, and
-- its janitor deletes them. The operator reads them (status).
GRANT SELECT, INSERT, UPDATE, DELETE ON @schema@.idempotency_keys TO sqlstreams_host;
GRANT SELECT ON @schema@.idempotency_keys TO sqlstreams_operator;
