-- V008: fleet settings change only when someone means it; group actions only through audited
-- functions (issue 27 §3). @schema@ is the configured schema, quoted.
--
--   * A stream's retention, allow_drop_past_committed, max_payload_bytes and notify are
--     fleet-wide: before V008 every `run` and reload wrote its own config's values over them, so
--     one host with a stale TOML changed them for every host, silently. Now declaring an existing
--     stream never writes them (the host logs `stream-setting-differs` and uses the database's
--     value); set_stream_settings() changes them, called by `sqlstreams stream set`, and writes
--     a stream_actions row (who, when, from what to what) in the same transaction.
--   * pause_group / resume_group / drop_group: SECURITY DEFINER functions that change the group
--     and write its group_actions row in one transaction. sqlstreams_operator loses the table
--     rights it had for them (UPDATE and DELETE on groups, DELETE on workers and on each family's
--     cursors_N and leases_N, INSERT on group_actions), so a pause, resume or drop through plain
--     SQL is refused, and nobody but these functions writes group_actions.
--   * The functions are owned by sqlstreams_host, as produce() is (V004): they run with the
--     host's rights, never the migrator's; the host role may now INSERT the audit rows.
--   * Audit rows name session_user (the role that logged in): inside a SECURITY DEFINER function
--     current_user is the function's owner.
-- Every function here: SET search_path = pg_catalog, pg_temp and fully qualified names, so a
-- caller's objects cannot stand in for ours.

ALTER TABLE @schema@.group_actions ALTER COLUMN db_user SET DEFAULT session_user;

CREATE TABLE @schema@.stream_actions (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  action           text NOT NULL CHECK (action IN ('set')),
  stream           text NOT NULL,
  stream_id        bigint NOT NULL,
  at               timestamptz NOT NULL DEFAULT now(),
  db_user          text NOT NULL DEFAULT session_user,
  application_name text DEFAULT current_setting('application_name', true),
  client_addr      text DEFAULT host(inet_client_addr()),  -- NULL over a Unix socket
  actor            text,   -- "cli:<os user>@<machine>", as the CLI reports it
  detail           jsonb   -- {"setting": {"from": old, "to": new}, ...} for what changed
);
CREATE INDEX stream_actions_stream ON @schema@.stream_actions (stream, at);

-- Changes the named settings of stream p_stream (NULL: leave it; retention: p_set_retention with
-- p_retention_ms NULL means keep messages forever). Returns whether the stream exists (present), what
-- changed (the stream_actions detail, '{}' when nothing did) and the audit row's id (NULL when
-- nothing changed: an idempotent call writes no row).
CREATE FUNCTION @schema@.set_stream_settings(
    p_stream text, p_set_retention boolean, p_retention_ms bigint, p_allow_drop boolean,
    p_max_payload_bytes integer, p_notify boolean, p_actor text,
    OUT present boolean, OUT changes jsonb, OUT audit_id bigint)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
  st record;
  v_retention interval;
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
  IF changes = '{}'::jsonb THEN
    RETURN;
  END IF;
  UPDATE @schema@.streams
     SET retention = CASE WHEN p_set_retention THEN v_retention ELSE retention END,
         allow_drop_past_committed = coalesce(p_allow_drop, allow_drop_past_committed),
         max_payload_bytes = coalesce(p_max_payload_bytes, max_payload_bytes),
         notify = coalesce(p_notify, notify),
         updated_at = now()
   WHERE id = st.id;
  INSERT INTO @schema@.stream_actions (action, stream, stream_id, db_user, actor, detail)
  VALUES ('set', st.name, st.id, session_user, p_actor, changes)
  RETURNING id INTO audit_id;
END
$fn$;

-- Pause: present = false when group p_group no longer exists; changed = false when it was paused
-- already (paused_at / paused_by then say since when and by whom).
CREATE FUNCTION @schema@.pause_group(p_group bigint, p_actor text,
    OUT present boolean, OUT changed boolean, OUT paused_at timestamptz, OUT paused_by text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
  g record;
BEGIN
  SELECT gr.id, gr.name, gr.paused_at, gr.paused_by, s.name AS stream
    INTO g FROM @schema@.groups gr JOIN @schema@.streams s ON s.id = gr.stream_id
   WHERE gr.id = p_group FOR UPDATE OF gr;
  present := FOUND;
  changed := false;
  IF NOT present THEN
    RETURN;
  END IF;
  IF g.paused_at IS NOT NULL THEN
    paused_at := g.paused_at;
    paused_by := g.paused_by;
    RETURN;
  END IF;
  UPDATE @schema@.groups SET paused_at = statement_timestamp(), paused_by = p_actor,
         updated_at = now()
   WHERE id = p_group RETURNING groups.paused_at INTO paused_at;
  paused_by := p_actor;
  changed := true;
  INSERT INTO @schema@.group_actions (action, stream, group_name, group_id, db_user, actor)
  VALUES ('pause', g.stream, g.name, g.id, session_user, p_actor);
END
$fn$;

CREATE FUNCTION @schema@.resume_group(p_group bigint, p_actor text,
    OUT present boolean, OUT changed boolean)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
  g record;
BEGIN
  SELECT gr.id, gr.name, gr.paused_at, s.name AS stream
    INTO g FROM @schema@.groups gr JOIN @schema@.streams s ON s.id = gr.stream_id
   WHERE gr.id = p_group FOR UPDATE OF gr;
  present := FOUND;
  changed := false;
  IF NOT present OR g.paused_at IS NULL THEN
    RETURN;
  END IF;
  UPDATE @schema@.groups SET paused_at = NULL, paused_by = NULL, updated_at = now()
   WHERE id = p_group;
  changed := true;
  INSERT INTO @schema@.group_actions (action, stream, group_name, group_id, db_user, actor)
  VALUES ('resume', g.stream, g.name, g.id, session_user, p_actor);
END
$fn$;

-- Drop (store/reporting/group_lifecycle.hpp): the group row first (by id: a group dropped and
-- declared again has a new id), then the cursor row, which every claim locks, so a claim in
-- flight commits its lease before the leases are deleted; then exception rows, the advancer's
-- lease row, the audit row and the group row.
CREATE FUNCTION @schema@.drop_group(p_group bigint, p_actor text,
    OUT present boolean, OUT claimed bigint, OUT committed bigint, OUT leases bigint,
    OUT ready bigint, OUT dead bigint, OUT audit_id bigint, OUT db_user text,
    OUT application_name text, OUT client_addr text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
  g record;
  s text := '@schema@';
BEGIN
  SELECT gr.id, gr.name, gr.stream_id, st.name AS stream
    INTO g FROM @schema@.groups gr JOIN @schema@.streams st ON st.id = gr.stream_id
   WHERE gr.id = p_group FOR UPDATE OF gr;
  present := FOUND;
  IF NOT present THEN
    RETURN;
  END IF;
  EXECUTE format('DELETE FROM %s.cursors_%s WHERE group_id = $1 RETURNING claimed, committed',
                 s, g.stream_id)
     INTO claimed, committed USING p_group;
  claimed := coalesce(claimed, 0);
  committed := coalesce(committed, 0);
  EXECUTE format('WITH d AS (DELETE FROM %s.leases_%s WHERE group_id = $1 RETURNING 1) '
                 'SELECT count(*) FROM d', s, g.stream_id)
     INTO leases USING p_group;
  EXECUTE format('WITH d AS (DELETE FROM %s.exceptions_%s WHERE group_id = $1 RETURNING status) '
                 'SELECT count(*) FILTER (WHERE status <> ''dead''), '
                 'count(*) FILTER (WHERE status = ''dead'') FROM d', s, g.stream_id)
     INTO ready, dead USING p_group;
  DELETE FROM @schema@.workers WHERE kind = 'advancer' AND owner = 'group:' || p_group;
  INSERT INTO @schema@.group_actions AS a (action, stream, group_name, group_id, db_user, actor,
                                           detail)
  VALUES ('drop', g.stream, g.name, g.id, session_user, p_actor,
          jsonb_build_object('claimed', claimed, 'committed', committed, 'leases_removed', leases,
                             'retries_removed', ready, 'dead_letters_removed', dead))
  RETURNING a.id, a.db_user, coalesce(a.application_name, ''), coalesce(a.client_addr, 'local')
       INTO audit_id, db_user, application_name, client_addr;
  DELETE FROM @schema@.groups WHERE id = p_group;
END
$fn$;

-- The operator's rights on stream p_stream's family (V005's, without DELETE on cursors_N and
-- leases_N: only drop_group() removes them).
CREATE OR REPLACE FUNCTION @schema@.grant_family(p_stream bigint)
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
  EXECUTE format('REVOKE DELETE ON %1$s.cursors_%2$s, %1$s.leases_%2$s FROM sqlstreams_operator',
                 s, n);
  EXECUTE format('GRANT INSERT ON %1$s.deliveries_%2$s TO sqlstreams_operator', s, n);
END
$fn$;

DO $do$
DECLARE
  v_id bigint;
BEGIN
  FOR v_id IN SELECT id FROM @schema@.streams ORDER BY id LOOP
    PERFORM @schema@.grant_family(v_id);
  END LOOP;
END
$do$;

REVOKE UPDATE (paused_at, paused_by, updated_at), DELETE ON @schema@.groups
  FROM sqlstreams_operator;
REVOKE DELETE ON @schema@.workers FROM sqlstreams_operator;
REVOKE INSERT ON @schema@.group_actions FROM sqlstreams_operator;
GRANT SELECT ON @schema@.stream_actions TO sqlstreams_operator;
GRANT SELECT, INSERT ON @schema@.stream_actions, @schema@.group_actions TO sqlstreams_host;
ALTER FUNCTION @schema@.set_stream_settings(text, boolean, bigint, boolean, integer, boolean, text)
  OWNER TO sqlstreams_host;
ALTER FUNCTION @schema@.pause_group(bigint, text) OWNER TO sqlstreams_host;
ALTER FUNCTION @schema@.resume_group(bigint, text) OWNER TO sqlstreams_host;
ALTER FUNCTION @schema@.drop_group(bigint, text) OWNER TO sqlstreams_host;

REVOKE ALL ON FUNCTION
    @schema@.set_stream_settings(text, boolean, bigint, boolean, integer, boolean, text),
    @schema@.pause_group(bigint, text), @schema@.resume_group(bigint, text),
    @schema@.drop_group(bigint, text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @schema@.set_stream_settings(text, boolean, bigint, boolean, integer, boolean, text),
    @schema@.pause_group(bigint, text), @schema@.resume_group(bigint, text),
    @schema@.drop_group(bigint, text)
  TO sqlstreams_operator, sqlstreams_host;
