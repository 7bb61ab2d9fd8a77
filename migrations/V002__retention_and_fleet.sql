-- V002: retention accounting and the maintenance fleet (docs/design.md#retention-and-partitions).
-- @schema@ is replaced by the configured schema as a quoted identifier.

-- What retention took from a group that had not committed it (allow_drop_past_committed):
-- the number of messages dropped past its cursor, and the last id it lost.
ALTER TABLE @schema@.groups
  ADD COLUMN lost_messages bigint NOT NULL DEFAULT 0,
  ADD COLUMN lost_through  bigint;

-- A host is live while expires_at is in the future (renewed with every heartbeat). `stats`
-- holds the host's in-process counters (e.g. per-group skipped schema versions) for status.
ALTER TABLE @schema@.hosts
  ADD COLUMN expires_at timestamptz,
  ADD COLUMN stats      jsonb;

CREATE INDEX hosts_expiry ON @schema@.hosts (expires_at);
