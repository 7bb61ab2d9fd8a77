-- V014: the ordered retry claim costs what its room costs, not what the group's backlog does
-- (issue 29, runtime/store/group/README.md "What a claim costs with a backlog").
-- @schema@ is the configured schema, quoted.
--   * exceptions_N_due leaves `deferred` rows out (WHERE status NOT IN ('dead', 'deferred')).
--     A deferred row waits behind an earlier unresolved row of its key, so no query looks for it
--     by due time; the ordered claim used to walk past tens of thousands of them to find the
--     keyless rows that are due. Unordered groups never write a deferred row: their entries are
--     the same. Every query that reads the index names a status it covers (ready, inflight,
--     parked).
--   * exceptions_N_open_keys (group_id, lane_key COLLATE "C") WHERE lane_key IS NOT NULL AND
--     status <> 'dead': the keys that have an open row, in byte order. The ordered claim walks
--     them one index probe at a time from where its last walk stopped, and stops when its room is
--     full; a key with only dead rows (under hold: until an operator discards them) is not in it,
--     so thousands of them cost the walk nothing. Unordered groups write no lane_key: no entry.

-- Existing families: the due index rebuilt with the new predicate, the key index added.
DO $do$
DECLARE
  v_id bigint;
BEGIN
  FOR v_id IN SELECT id FROM @schema@.streams ORDER BY id LOOP
    EXECUTE format('DROP INDEX %s.%I', '@schema@', 'exceptions_' || v_id || '_due');
    EXECUTE format($q$CREATE INDEX %2$I ON %1$s.%3$I (group_id, can_run_after)
                      WHERE status NOT IN ('dead', 'deferred')$q$,
                   '@schema@', 'exceptions_' || v_id || '_due', 'exceptions_' || v_id);
    EXECUTE format($q$CREATE INDEX %2$I ON %1$s.%3$I (group_id, lane_key COLLATE "C")
                      WHERE lane_key IS NOT NULL AND status <> 'dead'$q$,
                   '@schema@', 'exceptions_' || v_id || '_open_keys', 'exceptions_' || v_id);
  END LOOP;
END
$do$;

-- The family template (as in V012), for streams declared from now on: the same two indexes.
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
                    WHERE status NOT IN ('dead', 'deferred')$q$, s, n);
  EXECUTE format($q$CREATE INDEX exceptions_%2$s_lane ON %1$s.exceptions_%2$s (group_id, lane_key, message_id)
                    WHERE lane_key IS NOT NULL$q$, s, n);
  EXECUTE format($q$CREATE INDEX exceptions_%2$s_open_keys ON %1$s.exceptions_%2$s (group_id, lane_key COLLATE "C")
                    WHERE lane_key IS NOT NULL AND status <> 'dead'$q$, s, n);
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
