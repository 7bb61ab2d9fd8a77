-- V005: group lifecycle (issue 13). @schema@ is the configured schema, quoted.
--   * groups.paused_at / paused_by: `sqlstreams group pause` sets them, `resume` clears them;
--     every running host stops claiming for a paused group within about a poll interval.
--   * groups.last_seen_at: refreshed by each running host's heartbeat for the groups it runs
--     (one statement per heartbeat, nothing per message); `status` and the janitor's log name a
--     group no running host has seen recently.
--   * group_actions: the audit of pause, resume and drop (who: the database role, the
--     application and the client address as the server saw them, and the operator's OS user
--     and machine as the CLI reports them; when; which group; what a drop removed).
--   * sqlstreams_operator may now pause, resume and drop groups: UPDATE of the pause columns
--     and DELETE on groups, DELETE on each family's cursors_N and leases_N (exceptions_N it
--     could delete already), DELETE on workers (the dropped group's advancer lease row), and
--     INSERT/SELECT on group_actions.

ALTER TABLE @schema@.groups
  ADD COLUMN paused_at    timestamptz,
  ADD COLUMN paused_by    text,
  ADD COLUMN last_seen_at timestamptz;

CREATE TABLE @schema@.group_actions (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  action           text NOT NULL CHECK (action IN ('pause', 'resume', 'drop')),
  stream           text NOT NULL,
  group_name       text NOT NULL,
  group_id         bigint NOT NULL,
  at               timestamptz NOT NULL DEFAULT now(),
  db_user          text NOT NULL DEFAULT current_user,
  application_name text DEFAULT current_setting('application_name', true),
  client_addr      text DEFAULT host(inet_client_addr()),  -- NULL over a Unix socket
  actor            text,   -- "cli:<os user>@<machine>", as the CLI reports it
  detail           jsonb   -- drop: the cursor and what was removed
);
CREATE INDEX group_actions_group ON @schema@.group_actions (stream, group_name, at);

-- The operator's rights on stream p_stream's family (as in V004, plus what `group drop` needs).
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
  EXECUTE format('GRANT UPDATE, DELETE ON %1$s.cursors_%2$s TO sqlstreams_operator', s, n);
  EXECUTE format('GRANT DELETE ON %1$s.leases_%2$s TO sqlstreams_operator', s, n);
  EXECUTE format('GRANT INSERT ON %1$s.deliveries_%2$s TO sqlstreams_operator', s, n);
END
$fn$;
REVOKE ALL ON FUNCTION @schema@.grant_family(bigint) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @schema@.grant_family(bigint) TO sqlstreams_host;

DO $do$
DECLARE
  v_id bigint;
BEGIN
  FOR v_id IN SELECT id FROM @schema@.streams ORDER BY id LOOP
    PERFORM @schema@.grant_family(v_id);
  END LOOP;
END
$do$;

GRANT UPDATE (paused_at, paused_by, updated_at), DELETE ON @schema@.groups TO sqlstreams_operator;
GRANT DELETE ON @schema@.workers TO sqlstreams_operator;
GRANT SELECT, INSERT ON @schema@.group_actions TO sqlstreams_operator;
GRANT SELECT ON @schema@.group_actions TO sqlstreams_host;
