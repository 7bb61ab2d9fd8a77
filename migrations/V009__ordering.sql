-- V009: per-key ordering (runtime/store/group/README.md#per-key-ordering).
-- @schema@ is the configured schema, quoted.
--   * groups.ordering ('none' | 'key') and groups.ordering_dead ('release' | 'hold'): recorded
--     when a group is created (store/schema/catalog.cpp); fixed from then on — a host whose
--     config says otherwise refuses the group.
--   * exceptions_N: status 'deferred' (a message of an ordered group that waited behind an
--     unresolved earlier message of its key: never run, attempts 0, due at once) and lane_key,
--     the message_key of a row of an ordered group (NULL for every row of an unordered group,
--     which so pays nothing), with a partial index (group_id, lane_key, message_id) for the key
--     checks. The cursor advancer counts every non-dead row as open, deferred ones included.
--   * leases_N.key_hashes: the distinct hashtext(message_key) of a range of an ordered group
--     (NULL for unordered groups), so a later range of another host waits for the keys an
--     earlier open range holds.
-- Operators read the new columns through their table-wide SELECT (grant_family); nothing else
-- changes hands.

ALTER TABLE @schema@.groups
  ADD COLUMN ordering text NOT NULL DEFAULT 'none'
    CONSTRAINT groups_ordering_valid CHECK (ordering IN ('none', 'key')),
  ADD COLUMN ordering_dead text NOT NULL DEFAULT 'release'
    CONSTRAINT groups_ordering_dead_valid CHECK (ordering_dead IN ('release', 'hold'));

-- The family template (as in V004), for streams declared from now on.
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
      key_hashes int4[],
      PRIMARY KEY (group_id, token)
    ) WITH (fillfactor = 70)$q$, s, n);
  EXECUTE format('CREATE INDEX leases_%2$s_expiry ON %1$s.leases_%2$s (group_id, expires_at)', s, n);
  EXECUTE format($q$CREATE TABLE %1$s.exceptions_%2$s (
      group_id           bigint NOT NULL,
      message_id         bigint NOT NULL,
      status             text NOT NULL CONSTRAINT exceptions_%2$s_status_check
                         CHECK (status IN ('ready', 'inflight', 'deferred', 'dead')),
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

-- Existing families get the same columns, status and index. The status CHECK is replaced under
-- the name PostgreSQL gave the column's constraint (and the template now gives it).
DO $do$
DECLARE
  v_id bigint;
  v_check text;
  v_table regclass;
BEGIN
  FOR v_id IN SELECT id FROM @schema@.streams ORDER BY id LOOP
    v_table := format('%s.exceptions_%s', '@schema@', v_id)::regclass;
    FOR v_check IN
      SELECT conname FROM pg_constraint
       WHERE conrelid = v_table AND contype = 'c'
         AND pg_get_constraintdef(oid) LIKE '%status%'
    LOOP
      EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', v_table, v_check);
    END LOOP;
    EXECUTE format($q$ALTER TABLE %1$s ADD CONSTRAINT %2$I
                      CHECK (status IN ('ready', 'inflight', 'deferred', 'dead')),
                      ADD COLUMN IF NOT EXISTS lane_key text$q$,
                   v_table, 'exceptions_' || v_id || '_status_check');
    EXECUTE format($q$CREATE INDEX IF NOT EXISTS %2$I ON %1$s (group_id, lane_key, message_id)
                      WHERE lane_key IS NOT NULL$q$, v_table, 'exceptions_' || v_id || '_lane');
    EXECUTE format('ALTER TABLE %s.leases_%s ADD COLUMN IF NOT EXISTS key_hashes int4[]',
                   '@schema@', v_id);
  END LOOP;
END
$do$;

-- Rewind (as in V008) — for an ordered group it also revokes (deletes) the group's leases that
-- start at or above the new position, in the same transaction: the cursor row's lock orders it
-- with every claim. Such a lease would not gate the fresh claims of its own ids (its low is not
-- below theirs), so its holder and the re-delivery could run one key's messages at once and out
-- of order; revoked, its holder's commit finds no token (lease-lost) and its outcomes are
-- discarded. A lease that starts below the position stays: it gates the re-delivered keys it
-- holds until it commits. Unordered groups: as in V008 (their leases finish normally).
CREATE OR REPLACE FUNCTION @schema@.rewind_group(p_group bigint, p_to_id bigint,
    p_to_time timestamptz, p_actor text, OUT present boolean, OUT claimed_before bigint,
    OUT committed_before bigint, OUT to_position bigint, OUT refused text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
  v_stream bigint;
  v_ordering text;
  v_revoked bigint := 0;
  s text := '@schema@';
BEGIN
  SELECT stream_id, ordering INTO v_stream, v_ordering FROM @schema@.groups WHERE id = p_group;
  present := FOUND;
  IF NOT present THEN
    RETURN;
  END IF;
  EXECUTE format('SELECT claimed, committed FROM %s.cursors_%s WHERE group_id = $1 FOR UPDATE',
                 s, v_stream)
    INTO claimed_before, committed_before USING p_group;
  IF claimed_before IS NULL THEN
    present := false;
    RETURN;
  END IF;
  IF p_to_id IS NOT NULL AND p_to_id < 0 THEN
    refused := 'negative';
    RETURN;
  END IF;
  IF p_to_id IS NOT NULL THEN
    to_position := p_to_id;
  ELSE
    EXECUTE format('SELECT coalesce((SELECT min(id) - 1 FROM %1$s.messages_%2$s WHERE created_at '
                   '>= $1), (SELECT coalesce(max(id), 0) FROM %1$s.messages_%2$s))', s, v_stream)
      INTO to_position USING p_to_time;
  END IF;
  IF to_position > claimed_before THEN
    refused := 'forward';
    RETURN;
  END IF;
  -- settled_head stays: it is a proven bound and still true.
  EXECUTE format('UPDATE %s.cursors_%s SET claimed = $2, committed = LEAST(committed, $2), '
                 'generation = generation + 1 WHERE group_id = $1', s, v_stream)
    USING p_group, to_position;
  IF v_ordering = 'key' THEN
    EXECUTE format('WITH d AS (DELETE FROM %s.leases_%s WHERE group_id = $1 AND low >= $2 '
                   'RETURNING 1) SELECT count(*) FROM d', s, v_stream)
      INTO v_revoked USING p_group, to_position;
  END IF;
  EXECUTE format('INSERT INTO %s.deliveries_%s (group_id, message_id, attempt, outcome, error, '
                 'host) VALUES ($1, $2, 0, ''operator-rewind'', $3, $4)', s, v_stream)
    USING p_group, to_position,
          format('rewound from claimed %s / committed %s to %s', claimed_before,
                 committed_before, to_position)
            || CASE WHEN v_revoked > 0
                    THEN format('; revoked %s lease(s) at or above it (ordered group)', v_revoked)
                    ELSE '' END,
          p_actor;
END
$fn$;
