-- V008: fleet settings change only when someone means it; group actions only through audited
-- functions (issue 27 §3). @schema@ is the configured schema, quoted.
--
--   * A stream's retention, allow_drop_past_committed, max_payload_bytes and notify are
--     fleet-wide: before V008 every `run` and reload wrote its own config's values over them, so
--     one host with a stale TOML changed them for every host, silently. Now declaring an existing
--     stream never writes them (the host logs `stream-setting-differs` and uses the database's
--     value); set_stream_settings() changes them, called by `sqlstreams stream set`, and writes
--     a stream_actions row (who, when, from what to what) in the same transaction.
--   * pause_group / resume_group / drop_group, rewind_group, dead_retry / dead_discard: SECURITY
--     DEFINER functions that make the change and write its audit row (group_actions,
--     deliveries_N) in one transaction. sqlstreams_operator loses every write right it had
--     (UPDATE and DELETE on groups, DELETE on workers, UPDATE/DELETE on each family's
--     exceptions_N and cursors_N, DELETE on leases_N, INSERT on deliveries_N and group_actions):
--     it reads, and changes things only through these functions, so no operator action goes
--     unrecorded and no audit row is written by hand.
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

-- The dead letters of group p_group (stream p_stream) a filter names, as `dead list` reads them
-- (store/reporting/operator_actions.cpp): the error a literal case-insensitive substring, ids
-- from/to inclusive, died at least p_older_ms ago (database clock), the first p_limit by id.
-- dead_retry sends them back to ready with a fresh budget, dead_discard deletes them; each
-- writes one deliveries_N audit row per message in the same transaction and returns the ids.
-- `status = 'dead'` again on the row being changed: the subquery's snapshot may be older than a
-- concurrent claim that made it `inflight`; only the outer WHERE is re-checked.
CREATE FUNCTION @schema@.dead_retry(p_group bigint, p_error text, p_from bigint, p_to bigint,
                                    p_older_ms bigint, p_limit integer, p_actor text)
RETURNS SETOF bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  v_stream bigint;
  v_ids bigint[];
BEGIN
  SELECT stream_id INTO v_stream FROM @schema@.groups WHERE id = p_group;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  EXECUTE format(
      'WITH c AS (UPDATE %1$s.exceptions_%2$s SET status = ''ready'', attempts = 0, delays = 0, '
      'can_run_after = statement_timestamp(), lease_token = NULL, lease_expires_at = NULL, '
      'updated_at = now() WHERE message_id IN (SELECT message_id FROM %1$s.exceptions_%2$s '
      'WHERE %3$s ORDER BY message_id LIMIT $6) AND group_id = $1 AND status = ''dead'' '
      'RETURNING message_id) SELECT coalesce(array_agg(message_id ORDER BY message_id), '
      '''{}'') FROM c', '@schema@', v_stream, @schema@.dead_filter_sql())
    INTO v_ids USING p_group, p_error, p_from, p_to, p_older_ms, p_limit;
  EXECUTE format('INSERT INTO %s.deliveries_%s (group_id, message_id, attempt, outcome, error, '
                 'host) SELECT $1, id, 0, ''operator-retry'', ''sent back to ready with a fresh '
                 'budget'', $2 FROM unnest($3::bigint[]) AS id', '@schema@', v_stream)
    USING p_group, p_actor, v_ids;
  RETURN QUERY SELECT unnest(v_ids);
END
$fn$;

CREATE FUNCTION @schema@.dead_discard(p_group bigint, p_error text, p_from bigint, p_to bigint,
                                      p_older_ms bigint, p_limit integer, p_actor text)
RETURNS SETOF bigint LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp
AS $fn$
DECLARE
  v_stream bigint;
  v_ids bigint[];
BEGIN
  SELECT stream_id INTO v_stream FROM @schema@.groups WHERE id = p_group;
  IF NOT FOUND THEN
    RETURN;
  END IF;
  EXECUTE format(
      'WITH c AS (DELETE FROM %1$s.exceptions_%2$s WHERE message_id IN (SELECT message_id FROM '
      '%1$s.exceptions_%2$s WHERE %3$s ORDER BY message_id LIMIT $6) AND group_id = $1 AND '
      'status = ''dead'' RETURNING message_id) SELECT coalesce(array_agg(message_id ORDER BY '
      'message_id), ''{}'') FROM c', '@schema@', v_stream, @schema@.dead_filter_sql())
    INTO v_ids USING p_group, p_error, p_from, p_to, p_older_ms, p_limit;
  EXECUTE format('INSERT INTO %s.deliveries_%s (group_id, message_id, attempt, outcome, error, '
                 'host) SELECT $1, id, 0, ''operator-discard'', ''dead letter discarded'', $2 '
                 'FROM unnest($3::bigint[]) AS id', '@schema@', v_stream)
    USING p_group, p_actor, v_ids;
  RETURN QUERY SELECT unnest(v_ids);
END
$fn$;

-- The WHERE clause both use; parameters $1 group, $2 error, $3 from, $4 to, $5 older (ms).
CREATE FUNCTION @schema@.dead_filter_sql() RETURNS text LANGUAGE sql IMMUTABLE
SET search_path = pg_catalog, pg_temp AS $fn$
  SELECT 'group_id = $1 AND status = ''dead'' AND ($2::text IS NULL OR '
         'strpos(lower(last_error), lower($2::text)) > 0) AND ($3::bigint IS NULL OR message_id '
         '>= $3) AND ($4::bigint IS NULL OR message_id <= $4) AND ($5::bigint IS NULL OR '
         'updated_at <= statement_timestamp() - $5::bigint * interval ''1 millisecond'')'
$fn$;

-- Rewind (store/reporting/operator_actions.hpp): moves the cursor back so every message with
-- id > position is delivered again, bumps its generation (an advancer that read its target
-- before cannot skip ahead) and writes the deliveries_N audit row. p_to_id, or the position
-- just before the first message created at or after p_to_time. refused: 'negative' (p_to_id <
-- 0) or 'forward' (past what the group has claimed); then nothing changed.
CREATE FUNCTION @schema@.rewind_group(p_group bigint, p_to_id bigint, p_to_time timestamptz,
    p_actor text, OUT present boolean, OUT claimed_before bigint, OUT committed_before bigint,
    OUT to_position bigint, OUT refused text)
LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
#variable_conflict use_column
DECLARE
  v_stream bigint;
  s text := '@schema@';
BEGIN
  SELECT stream_id INTO v_stream FROM @schema@.groups WHERE id = p_group;
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
  EXECUTE format('INSERT INTO %s.deliveries_%s (group_id, message_id, attempt, outcome, error, '
                 'host) VALUES ($1, $2, 0, ''operator-rewind'', $3, $4)', s, v_stream)
    USING p_group, to_position,
          format('rewound from claimed %s / committed %s to %s', claimed_before,
                 committed_before, to_position),
          p_actor;
END
$fn$;

-- The operator's rights on stream p_stream's family: reading only. Every change goes through
-- the functions above (V005's UPDATE/DELETE on exceptions_N, UPDATE/DELETE on cursors_N, DELETE
-- on leases_N and INSERT on deliveries_N are revoked).
CREATE OR REPLACE FUNCTION @schema@.grant_family(p_stream bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  s text := '@schema@';
  n text := p_stream::text;
BEGIN
  EXECUTE format('GRANT SELECT ON %1$s.messages_%2$s, %1$s.cursors_%2$s, %1$s.leases_%2$s, '
                 '%1$s.exceptions_%2$s, %1$s.deliveries_%2$s, %1$s.messages_%2$s_id_seq '
                 'TO sqlstreams_operator', s, n);
  EXECUTE format('REVOKE INSERT, UPDATE, DELETE ON %1$s.exceptions_%2$s, %1$s.cursors_%2$s, '
                 '%1$s.leases_%2$s, %1$s.deliveries_%2$s FROM sqlstreams_operator', s, n);
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

ALTER FUNCTION @schema@.dead_retry(bigint, text, bigint, bigint, bigint, integer, text)
  OWNER TO sqlstreams_host;
ALTER FUNCTION @schema@.dead_discard(bigint, text, bigint, bigint, bigint, integer, text)
  OWNER TO sqlstreams_host;
ALTER FUNCTION @schema@.rewind_group(bigint, bigint, timestamptz, text) OWNER TO sqlstreams_host;
ALTER FUNCTION @schema@.dead_filter_sql() OWNER TO sqlstreams_host;

REVOKE ALL ON FUNCTION
    @schema@.set_stream_settings(text, boolean, bigint, boolean, integer, boolean, text),
    @schema@.pause_group(bigint, text), @schema@.resume_group(bigint, text),
    @schema@.drop_group(bigint, text),
    @schema@.dead_retry(bigint, text, bigint, bigint, bigint, integer, text),
    @schema@.dead_discard(bigint, text, bigint, bigint, bigint, integer, text),
    @schema@.rewind_group(bigint, bigint, timestamptz, text), @schema@.dead_filter_sql()
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION
    @schema@.set_stream_settings(text, boolean, bigint, boolean, integer, boolean, text),
    @schema@.pause_group(bigint, text), @schema@.resume_group(bigint, text),
    @schema@.drop_group(bigint, text),
    @schema@.dead_retry(bigint, text, bigint, bigint, bigint, integer, text),
    @schema@.dead_discard(bigint, text, bigint, bigint, bigint, integer, text),
    @schema@.rewind_group(bigint, bigint, timestamptz, text)
  TO sqlstreams_operator, sqlstreams_host;
GRANT EXECUTE ON FUNCTION @schema@.dead_filter_sql() TO sqlstreams_host;
