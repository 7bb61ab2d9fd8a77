-- V004: hostile input and least trust (issue 11). @schema@ is the configured schema, quoted.
--   * produce() / produce_batch(): message_key at most 1024 bytes (octet_length, SQLSTATE 22001);
--     produce_batch() refuses a schema_versions element < 1 like produce() does (22023).
--   * The roles (cluster-wide, NOLOGIN, created once): sqlstreams_producer (USAGE on the schema,
--     EXECUTE on produce/produce_batch — nothing else), sqlstreams_operator (reads everything;
--     acts on dead letters, rewinds, writes the audit trail: the status/dead/group commands),
--     sqlstreams_host (what `sqlstreams run` needs). Grant them to LOGIN roles.
--   * sqlstreams_host owns every stream's table family (partitions are DDL on the family:
--     creating one requires owning the parent, dropping one owning the partition), and the
--     SECURITY DEFINER produce functions, which so run with the host's rights, not the
--     migrator's. give_to_host() hands newly created family objects over.

DO $do$
DECLARE
  r text;
BEGIN
  FOREACH r IN ARRAY ARRAY['sqlstreams_producer', 'sqlstreams_operator', 'sqlstreams_host'] LOOP
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = r) THEN
      BEGIN
        EXECUTE format('CREATE ROLE %I NOLOGIN', r);
      EXCEPTION
        -- Another database's (or schema's) migration created it meanwhile.
        WHEN duplicate_object OR unique_violation THEN NULL;
        WHEN insufficient_privilege THEN
          RAISE EXCEPTION 'sqlstreams: migration V004 must create role % and may not', r
            USING ERRCODE = 'insufficient_privilege',
              HINT = 'Run sqlstreams migrate as a superuser or a role with CREATEROLE, or create '
                     'the NOLOGIN roles sqlstreams_producer, sqlstreams_operator and '
                     'sqlstreams_host first.';
      END;
    END IF;
  END LOOP;
  -- Handing objects to sqlstreams_host requires membership in it (superusers have it).
  IF NOT pg_catalog.pg_has_role(current_user, 'sqlstreams_host', 'MEMBER') THEN
    EXECUTE format('GRANT sqlstreams_host TO %I', current_user);
  END IF;
END
$do$;

-- Hands stream p_stream's family (messages_N and its partitions with the id sequence,
-- cursors_N, leases_N, exceptions_N, deliveries_N, next_id_N()) to sqlstreams_host. Only objects
-- owned by someone else are altered (ALTER … OWNER locks the object).
CREATE FUNCTION @schema@.give_to_host(p_stream bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_host oid := 'sqlstreams_host'::regrole;
  v_rel regclass;
  v_fn regprocedure := format('%s.next_id_%s()', '@schema@', p_stream)::regprocedure;
BEGIN
  FOR v_rel IN
    SELECT c.oid FROM pg_class c
     WHERE c.relnamespace = '@schema@'::regnamespace AND c.relkind IN ('r', 'p')
       AND c.relowner <> v_host
       AND c.relname ~ ('^((messages|cursors|leases|exceptions|deliveries)_' || p_stream
                        || '|messages_' || p_stream || '_p[0-9]+)$')
     ORDER BY c.relname
  LOOP
    -- Also moves the table's owned sequences (the id sequence, identity columns) and indexes.
    EXECUTE format('ALTER TABLE %s OWNER TO sqlstreams_host', v_rel);
  END LOOP;
  IF (SELECT proowner FROM pg_proc WHERE oid = v_fn) <> v_host THEN
    EXECUTE format('ALTER FUNCTION %s OWNER TO sqlstreams_host', v_fn);
  END IF;
END
$fn$;

-- The operator's rights on stream p_stream's family: status and dead-letter views read it;
-- dead retry/discard change exception rows; group rewind moves the cursor; every action is
-- written to the audit trail.
CREATE FUNCTION @schema@.grant_family(p_stream bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  s text := '@schema@';
  n text := p_stream::text;
BEGIN
  EXECUTE format('GRANT SELECT ON %1$s.messages_%2$s, %1$s.cursors_%2$s, %1$s.leases_%2$s, '
                 '%1$s.exceptions_%2$s, %1$s.deliveries_%2$s, %1$s.messages_%2$s_id_seq '
                 'TO sqlstreams_operator', s, n);
  EXECUTE format('GRANT UPDATE, DELETE ON %1$s.exceptions_%2$s TO sqlstreams_operator', s, n);
  EXECUTE format('GRANT UPDATE ON %1$s.cursors_%2$s TO sqlstreams_operator', s, n);
  EXECUTE format('GRANT INSERT ON %1$s.deliveries_%2$s TO sqlstreams_operator', s, n);
END
$fn$;

-- create_stream_family (as in V003), then the hand-over and the operator's grants.
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
  PERFORM @schema@.give_to_host(p_stream);
  PERFORM @schema@.grant_family(p_stream);
END
$fn$;

-- ensure_partitions (as in V001), then the new partitions go to sqlstreams_host, so any host
-- of the fleet (another LOGIN role) can drop them later.
CREATE OR REPLACE FUNCTION @schema@.ensure_partitions(p_stream bigint, p_upto_id bigint)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_size bigint;
  v_upto bigint;
BEGIN
  SELECT partition_size, partitions_upto INTO v_size, v_upto
    FROM @schema@.streams WHERE id = p_stream;
  IF NOT FOUND THEN
    RAISE EXCEPTION 'sqlstreams: no stream with id %', p_stream USING ERRCODE = 'undefined_object';
  END IF;
  IF p_upto_id < v_upto THEN
    RETURN v_upto;
  END IF;
  PERFORM pg_advisory_xact_lock(hashtext('sqlstreams.partitions'), p_stream::integer);
  SELECT partitions_upto INTO v_upto FROM @schema@.streams WHERE id = p_stream FOR UPDATE;
  WHILE v_upto <= p_upto_id LOOP
    EXECUTE format('CREATE TABLE IF NOT EXISTS %s.%I PARTITION OF %s.%I FOR VALUES FROM (%s) TO (%s)',
                   '@schema@', 'messages_' || p_stream || '_p' || ((v_upto - 1) / v_size),
                   '@schema@', 'messages_' || p_stream, v_upto, v_upto + v_size);
    v_upto := v_upto + v_size;
  END LOOP;
  UPDATE @schema@.streams SET partitions_upto = v_upto WHERE id = p_stream;
  PERFORM @schema@.give_to_host(p_stream);
  RETURN v_upto;
END
$fn$;

-- Raises the error for a batch item the C++ producer may not insert (its INSERT calls this
-- from a CASE, so the measure is the SQL functions' own: octet_length(payload::text)).
CREATE FUNCTION @schema@.reject_oversize(p_item bigint, p_bytes bigint, p_max integer)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  RAISE EXCEPTION 'sqlstreams: payload % of the batch: % bytes exceeds max_payload_bytes %',
    p_item, p_bytes, p_max USING ERRCODE = 'program_limit_exceeded';
END
$fn$;

-- The key limit, one place: raises 22001 naming the batch item (p_item NULL: produce()).
CREATE FUNCTION @schema@.check_message_key(p_item integer, p_key text)
RETURNS boolean LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF octet_length(p_key) > 1024 THEN
    RAISE EXCEPTION 'sqlstreams: message_key%: % bytes exceeds the limit of 1024 bytes',
      CASE WHEN p_item IS NULL THEN '' ELSE ' of batch item ' || p_item END, octet_length(p_key)
      USING ERRCODE = 'string_data_right_truncation',
        HINT = 'A key identifies or orders messages (an order id, a customer id); keep large data in the payload.';
  END IF;
  RETURN true;
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
    RAISE EXCEPTION 'sqlstreams: schema_version must be >= 1 (got %)', coalesce(produce.schema_version::text, 'null')
      USING ERRCODE = 'invalid_parameter_value';
  END IF;
  PERFORM @schema@.check_message_key(NULL, produce.message_key);
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
    -- A NULL element means the default version 1.
    IF schema_versions[i] < 1 THEN
      RAISE EXCEPTION 'sqlstreams: schema_version % of the batch must be >= 1 (got %)', i, schema_versions[i]
        USING ERRCODE = 'invalid_parameter_value';
    END IF;
    PERFORM @schema@.check_message_key(i, message_keys[i]);
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

-- Existing families: hand them over and grant the operator.
DO $do$
DECLARE
  v_id bigint;
BEGIN
  FOR v_id IN SELECT id FROM @schema@.streams ORDER BY id LOOP
    PERFORM @schema@.give_to_host(v_id);
    PERFORM @schema@.grant_family(v_id);
  END LOOP;
END
$do$;

-- Functions: nobody but the roles below runs them (PostgreSQL grants EXECUTE to PUBLIC).
REVOKE ALL ON ALL FUNCTIONS IN SCHEMA @schema@ FROM PUBLIC;
-- The SECURITY DEFINER producer API runs as sqlstreams_host (owner of the families), never as
-- the migrating (often superuser) role.
ALTER FUNCTION @schema@.produce(text, jsonb, integer, text) OWNER TO sqlstreams_host;
ALTER FUNCTION @schema@.produce_batch(text, jsonb[], integer[], text[]) OWNER TO sqlstreams_host;

-- sqlstreams_producer: the two produce functions, nothing else.
GRANT USAGE ON SCHEMA @schema@ TO sqlstreams_producer;
GRANT EXECUTE ON FUNCTION @schema@.produce(text, jsonb, integer, text),
                          @schema@.produce_batch(text, jsonb[], integer[], text[])
  TO sqlstreams_producer;

-- sqlstreams_operator: status, dead list/show/retry/discard, group rewind (family rights are
-- granted per stream by grant_family()).
GRANT USAGE ON SCHEMA @schema@ TO sqlstreams_operator;
GRANT SELECT ON @schema@.streams, @schema@.groups, @schema@.workers, @schema@.hosts,
                @schema@.migrations TO sqlstreams_operator;

-- sqlstreams_host: `sqlstreams run` (with database.migrate = "check": migrating stays with the
-- schema's owner). Declaring a stream creates its family in the schema (CREATE), then hands it
-- over; the janitor creates and drops partitions as the families' owner.
GRANT USAGE, CREATE ON SCHEMA @schema@ TO sqlstreams_host;
GRANT SELECT, INSERT, UPDATE, DELETE ON @schema@.streams, @schema@.groups, @schema@.workers,
                                        @schema@.hosts TO sqlstreams_host;
GRANT SELECT ON @schema@.migrations TO sqlstreams_host;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA @schema@ TO sqlstreams_host;
