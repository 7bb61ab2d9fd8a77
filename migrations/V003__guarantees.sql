-- V003: schema for the guarantees at the edges (issue 9): docs/design.md#the-committed-cursor-and-the-advancer,
-- docs/design.md#retries-exception-rows-and-dead-letters, docs/design.md#payload-schema-versions,
-- docs/design.md#no-ddl-in-a-producers-transaction.
-- @schema@ is replaced by the configured schema as a quoted identifier.
--   * cursors_N.generation: bumped by every operator rewind; the cursor advancer applies its
--     target only when the generation it read is unchanged (docs/design.md#the-committed-cursor-and-the-advancer).
--   * exceptions_N.schema_version / message_key / message_created_at: a dead letter keeps the
--     message's metadata with its payload, so a retry after retention runs it as produced (docs/design.md#payload-schema-versions).
--   * produce() / produce_batch(): no DDL in the caller's transaction (docs/design.md#no-ddl-in-a-producers-transaction). A producer that
--     finds no partition for its id gets one clear error (SQLSTATE 55000) instead.

-- The family template, for streams declared from now on.
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
  EXECUTE format($q$CREATE TABLE %1$s.messages_%2$s (
      id             bigint NOT NULL DEFAULT %1$s.next_id_%2$s(),
      created_at     timestamptz NOT NULL DEFAULT now(),
      schema_version integer NOT NULL DEFAULT 1,
      message_key    text,
      payload        jsonb NOT NULL,
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
      PRIMARY KEY (group_id, token)
    ) WITH (fillfactor = 70)$q$, s, n);
  EXECUTE format('CREATE INDEX leases_%2$s_expiry ON %1$s.leases_%2$s (group_id, expires_at)', s, n);
  EXECUTE format($q$CREATE TABLE %1$s.exceptions_%2$s (
      group_id           bigint NOT NULL,
      message_id         bigint NOT NULL,
      status             text NOT NULL CHECK (status IN ('ready', 'inflight', 'dead')),
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
      PRIMARY KEY (group_id, message_id)
    )$q$, s, n);
  EXECUTE format($q$CREATE INDEX exceptions_%2$s_due ON %1$s.exceptions_%2$s (group_id, can_run_after)
                    WHERE status <> 'dead'$q$, s, n);
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
END
$fn$;

-- Existing families get the same columns.
DO $do$
DECLARE
  v_id bigint;
BEGIN
  FOR v_id IN SELECT id FROM @schema@.streams ORDER BY id LOOP
    EXECUTE format('ALTER TABLE %1$s.cursors_%2$s ADD COLUMN IF NOT EXISTS generation bigint NOT NULL DEFAULT 0',
                   '@schema@', v_id);
    EXECUTE format('ALTER TABLE %1$s.exceptions_%2$s ADD COLUMN IF NOT EXISTS schema_version integer, '
                   'ADD COLUMN IF NOT EXISTS message_key text, '
                   'ADD COLUMN IF NOT EXISTS message_created_at timestamptz', '@schema@', v_id);
  END LOOP;
END
$do$;

-- Raises the one error a producer sees when the fleet has not created a partition for its id
-- (no host has run for a long time). Never creates one: DDL inside the caller's transaction
-- would hold ACCESS EXCLUSIVE on the stream until the caller commits (docs/design.md#no-ddl-in-a-producers-transaction).
CREATE FUNCTION @schema@.check_partition(p_stream @schema@.streams, p_id bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  -- partitions_upto may be stale in the caller's snapshot; the catalog is always current.
  IF to_regclass(format('%s.%I', '@schema@',
                        'messages_' || p_stream.id || '_p' || ((p_id - 1) / p_stream.partition_size))) IS NULL THEN
    RAISE EXCEPTION 'sqlstreams: stream "%" has no partition for message id % yet', p_stream.name, p_id
      USING ERRCODE = 'object_not_in_prerequisite_state',
        DETAIL = 'Partitions are created ahead of the head by running hosts (the janitor), by sqlstreams migrate and by sqlstreams declare; none has run for a long time.',
        HINT = 'Roll back and retry after an operator has started a host (sqlstreams run) or run sqlstreams declare or sqlstreams migrate; the C++ producer and sqlstreams produce heal by themselves.';
  END IF;
END
$fn$;

CREATE OR REPLACE FUNCTION @schema@.produce(stream text, payload jsonb, schema_version integer DEFAULT 1,
                                            message_key text DEFAULT NULL)
RETURNS bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  st @schema@.streams%ROWTYPE;
  v_id bigint;
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
    RAISE EXCEPTION 'sqlstreams: schema_version must be >= 1' USING ERRCODE = 'invalid_parameter_value';
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

CREATE OR REPLACE FUNCTION @schema@.produce_batch(stream text, payloads jsonb[], schema_versions integer[] DEFAULT NULL,
                                                  message_keys text[] DEFAULT NULL)
RETURNS bigint[] LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  st @schema@.streams%ROWTYPE;
  n integer := coalesce(cardinality(payloads), 0);
  v_ids bigint[];
  i integer;
BEGIN
  PERFORM pg_current_xact_id();  -- Rule 1
  SELECT * INTO st FROM @schema@.streams WHERE name = produce_batch.stream;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'sqlstreams: unknown stream "%"', produce_batch.stream USING ERRCODE = 'undefined_object';
  END IF;
  IF schema_versions IS NOT NULL AND cardinality(schema_versions) <> n
     OR message_keys IS NOT NULL AND cardinality(message_keys) <> n THEN
    RAISE EXCEPTION 'sqlstreams: payloads, schema_versions and message_keys must have the same length'
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
  END LOOP;
  IF n = 0 THEN
    RETURN '{}';
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

REVOKE ALL ON FUNCTION @schema@.check_partition(@schema@.streams, bigint) FROM PUBLIC;
