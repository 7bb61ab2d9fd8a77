-- V012: the claim's byte budget sees payloads whose text is far longer than their stored form
-- (issue 27 §2.2, runtime/store/group/README.md "The byte budget").
-- @schema@ is the configured schema, quoted.
--   * messages_N.text_bytes: the payload's text length (octet_length(payload::text), what the
--     host holds and what the budget counts), written only when it is more than 4 times the
--     payload's binary size (pg_column_size of the jsonb as produced): a number written with a
--     huge exponent ({"a":1e131071} is 30 bytes stored and 131,079 bytes of text), a long run of
--     zeros. NULL otherwise — by far the common case, and free: a NULL integer costs a message
--     row no byte (the null bitmap of a row of 6 columns fits the header's alignment padding).
--     A claim's size check (store/group/group_store.cpp, read_checked_) counts a row at its
--     text_bytes, or at 8 times its stored size when NULL, without printing any payload.
--   * produce() / produce_batch() (and produce_idempotent(), which gains p_text_bytes) write it
--     from the length they already measure against max_payload_bytes; store::Producer writes it
--     from the same measure in its checked INSERTs, and sends only payloads whose text provably
--     stays within 8 times their stored size through the unchecked one.
--   * Existing families gain the column (NULL: messages produced before V012 are counted by
--     their stored size, as before).

-- Existing families: a nullable column without a default changes only the catalog.
DO $do$
DECLARE
  v_id bigint;
BEGIN
  FOR v_id IN SELECT id FROM @schema@.streams ORDER BY id LOOP
    EXECUTE format('ALTER TABLE %s.%I ADD COLUMN text_bytes integer', '@schema@', 'messages_' || v_id);
  END LOOP;
END
$do$;

-- The family template (as in V010), for streams declared from now on: messages_N.text_bytes.
CREATE OR REPLACE FUNCTION @schema@.create_stream_family(p_stream bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  s text := '@schema@';
  n text := p_stream::text;
BEGIN
  -- Rule 2: CACHE 1, so ids are drawn in time order.
  EXECUTE format('CREATE SEQUENCE %1$s.messages_%2$s_id_seq AS bigint MINVALUE 1 CACHE 1 NO CYCLE', s, n);
  -- Rule 1 for every writer: own an xid before drawing an id.
  EXECUTE format($q$CREATE FUNCTION %1$s.next_id_%2$s() RETURNS bigint LANGUAGE plpgsql VOLATILE
                    SET search_path = pg_catalog, pg_temp AS $b$
                    BEGIN PERFORM pg_current_xact_id(); RETURN nextval('%1$s.messages_%2$s_id_seq'); END
                    $b$$q$, s, n);
  EXECUTE format('REVOKE ALL ON FUNCTION %1$s.next_id_%2$s() FROM PUBLIC', s, n);
  EXECUTE format($q$CREATE TABLE %1$s.messages_%2$s (
      id             bigint NOT NULL DEFAULT %1$s.next_id_%2$s(),
      created_at     timestamptz NOT NULL DEFAULT now(),
      schema_version integer NOT NULL DEFAULT 1,
      message_key    text,
      payload        jsonb NOT NULL,
      text_bytes     integer,
      PRIMARY KEY (id)
    ) PARTITION BY RANGE (id)$q$, s, n);
  EXECUTE format('ALTER SEQUENCE %1$s.messages_%2$s_id_seq OWNED BY %1$s.messages_%2$s.id', s, n);
  -- One narrow, hot row per group; fillfactor leaves room for HOT updates.
  EXECUTE format($q$CREATE TABLE %1$s.cursors_%2$s (
      group_id     bigint PRIMARY KEY,
      claimed      bigint NOT NULL DEFAULT 0,
      committed    bigint NOT NULL DEFAULT 0,
      settled_head bigint NOT NULL DEFAULT 0,
      pending_head bigint,
      pending_xid  xid8,
      generation   bigint NOT NULL DEFAULT 0
    ) WITH (fillfactor = 50)$q$, s, n);
  EXECUTE format($q$CREATE TABLE %1$s.leases_%2$s (
      group_id   bigint NOT NULL,
      token      uuid NOT NULL,
      low        bigint NOT NULL,
      high       bigint NOT NULL,
      expires_at timestamptz NOT NULL,
      reclaims   integer NOT NULL DEFAULT 0,
      holder     text,
      key_hashes int4[],
      PRIMARY KEY (group_id, token)
    ) WITH (fillfactor = 70)$q$, s, n);
  EXECUTE format('CREATE INDEX leases_%2$s_expiry ON %1$s.leases_%2$s (group_id, expires_at)', s, n);
  EXECUTE format($q$CREATE TABLE %1$s.exceptions_%2$s (
      group_id           bigint NOT NULL,
      message_id         bigint NOT NULL,
      status             text NOT NULL CONSTRAINT exceptions_%2$s_status_check
                         CHECK (status IN ('ready', 'inflight', 'deferred', 'parked', 'dead')),
      attempts           integer NOT NULL DEFAULT 0,
      delays             integer NOT NULL DEFAULT 0,
      can_run_after      timestamptz NOT NULL,
      last_error         text,
      lease_token        uuid,
      lease_expires_at   timestamptz,
      payload            jsonb,
      created_at         timestamptz NOT NULL DEFAULT now(),
      updated_at         timestamptz NOT NULL DEFAULT now(),
      schema_version     integer,
      message_key        text,
      message_created_at timestamptz,
      lane_key           text,
      PRIMARY KEY (group_id, message_id)
    )$q$, s, n);
  EXECUTE format($q$CREATE INDEX exceptions_%2$s_due ON %1$s.exceptions_%2$s (group_id, can_run_after)
                    WHERE status <> 'dead'$q$, s, n);
  EXECUTE format($q$CREATE INDEX exceptions_%2$s_lane ON %1$s.exceptions_%2$s (group_id, lane_key, message_id)
                    WHERE lane_key IS NOT NULL$q$, s, n);
  EXECUTE format($q$CREATE TABLE %1$s.deliveries_%2$s (
      id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      group_id   bigint NOT NULL,
      message_id bigint NOT NULL,
      attempt    integer NOT NULL,
      outcome    text NOT NULL,
      error      text,
      host       text,
      at         timestamptz NOT NULL DEFAULT now()
    )$q$, s, n);
  EXECUTE format('CREATE INDEX deliveries_%2$s_message ON %1$s.deliveries_%2$s (group_id, message_id)', s, n);
  PERFORM @schema@.give_to_host(p_stream);
  PERFORM @schema@.grant_family(p_stream);
END
$fn$;

-- produce_batch()'s keyed path (as in V011) with the batch's text_bytes.
DROP FUNCTION @schema@.produce_idempotent(@schema@.streams, jsonb[], integer[], text[], text[]);
CREATE FUNCTION @schema@.produce_idempotent(st @schema@.streams, p_payloads jsonb[],
                                            p_versions integer[], p_message_keys text[],
                                            p_keys text[], p_text_bytes integer[])
RETURNS bigint[] LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_ids bigint[];
  v_top bigint;
  v_attempt integer := 0;
  v_sql text := format($q$
    WITH input AS MATERIALIZED (
      SELECT e.n, e.p, coalesce(($2::integer[])[e.n], 1) AS v, ($3::text[])[e.n] AS k,
             ($4::text[])[e.n] AS ik, ($7::integer[])[e.n] AS tb,
             ($4::text[])[e.n] IS NOT NULL AND e.n > min(e.n) OVER (PARTITION BY ($4::text[])[e.n]) AS repeat,
             (SELECT d.message_id FROM %1$s.idempotency_keys d
               WHERE d.stream_id = $5 AND d.key = ($4::text[])[e.n]
                 AND d.created_at > statement_timestamp() - $6::interval) AS live
        FROM unnest($1::jsonb[]) WITH ORDINALITY AS e(p, n) ORDER BY e.n),
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
  LOOP
    v_attempt := v_attempt + 1;
    BEGIN
      EXECUTE v_sql INTO v_ids, v_top
        USING p_payloads, p_versions, p_message_keys, p_keys, st.id, st.idempotency_window,
              p_text_bytes;
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

-- produce() and produce_batch() as in V011, writing text_bytes (owner and grants stay).
CREATE OR REPLACE FUNCTION @schema@.produce(stream text, payload jsonb, schema_version integer DEFAULT 1,
                                 message_key text DEFAULT NULL, idempotency_key text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  st @schema@.streams%ROWTYPE;
  v_id bigint;
  v_attempt integer;
  v_bytes integer;
  v_text_bytes integer;  -- text_bytes (the claim's byte budget): NULL unless the text is long
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
  v_bytes := octet_length(payload::text);
  IF v_bytes > st.max_payload_bytes THEN
    RAISE EXCEPTION 'sqlstreams: payload of % bytes exceeds max_payload_bytes % of stream "%"',
      v_bytes, st.max_payload_bytes, st.name USING ERRCODE = 'program_limit_exceeded';
  END IF;
  IF v_bytes > 4 * pg_column_size(payload) THEN
    v_text_bytes := v_bytes;
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
        EXECUTE format('INSERT INTO %s.%I (id, schema_version, message_key, payload, text_bytes) VALUES ($1, $2, $3, $4, $5)',
                       '@schema@', 'messages_' || st.id)
          USING v_id, produce.schema_version, produce.message_key, produce.payload, v_text_bytes;
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
  EXECUTE format('INSERT INTO %s.%I (id, schema_version, message_key, payload, text_bytes) VALUES ($1, $2, $3, $4, $5)',
                 '@schema@', 'messages_' || st.id)
    USING v_id, produce.schema_version, produce.message_key, produce.payload, v_text_bytes;
  IF st.notify THEN
    PERFORM pg_notify('sqlstreams_' || st.id, '');
  END IF;
  RETURN v_id;
END
$fn$;

CREATE OR REPLACE FUNCTION @schema@.produce_batch(stream text, payloads jsonb[], schema_versions integer[] DEFAULT NULL,
                                       message_keys text[] DEFAULT NULL, idempotency_keys text[] DEFAULT NULL)
RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  st @schema@.streams%ROWTYPE;
  n integer := coalesce(cardinality(payloads), 0);
  v_ids bigint[];
  v_keyed boolean := false;
  v_bytes integer;
  v_text_bytes integer[] := array_fill(NULL::integer, ARRAY[n]);  -- as produce()'s
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
    v_bytes := octet_length(payloads[i]::text);
    IF v_bytes > st.max_payload_bytes THEN
      RAISE EXCEPTION 'sqlstreams: payload % of the batch exceeds max_payload_bytes %', i, st.max_payload_bytes
        USING ERRCODE = 'program_limit_exceeded';
    END IF;
    IF v_bytes > 4 * pg_column_size(payloads[i]) THEN
      v_text_bytes[i] := v_bytes;
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
                                       produce_batch.idempotency_keys, v_text_bytes);
  END IF;
  SELECT array_agg(nextval(format('%s.%I', '@schema@', 'messages_' || st.id || '_id_seq')::regclass) ORDER BY g)
    INTO v_ids FROM generate_series(1, n) AS g;
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

REVOKE ALL ON FUNCTION
    @schema@.produce_idempotent(@schema@.streams, jsonb[], integer[], text[], text[], integer[])
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @schema@.produce_idempotent(@schema@.streams, jsonb[], integer[], text[], text[], integer[])
  TO sqlstreams_host;
