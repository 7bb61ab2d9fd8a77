-- V006: the log stops for nothing outside it (runtime/store/group/README.md#why-the-proof-is-sound). @schema@ is the configured schema, quoted.
--   * fence_proven(xid, sequence): the claim fence's proof waits only for the transactions that
--     drew an id of that stream's sequence, not for every transaction of the database (the
--     argument is in runtime/store/group/README.md, "The fence").
--   * fence_holders(xid, sequence): who holds a proof back, for the `fence-held` log line, the
--     declaration timeout and `status`.

-- True when every transaction that can still commit an id drawn before p_xid was taken has
-- ended. The cheap test first: p_xid <= xmin means every older transaction of the cluster has
-- ended. Otherwise the lock manager is asked: nextval() takes RowExclusiveLock on the sequence
-- and keeps it to the end of the top-level transaction, and Rule 1 gave the drawer an xid before
-- it drew, so a drawer that is still running holds both that lock and the ExclusiveLock on its
-- own xid (prepared transactions keep theirs under the same virtual transaction). The proof
-- fails while one such transaction has an xid older than p_xid (TransactionIdPrecedes on the 32
-- bits pg_locks shows: every live xid is within 2^31 of every other). NULL proves nothing.
-- PL/pgSQL, so the lock query's plan is cached per session; the claim's statements test the
-- cheap case inline and call this only when it fails (store/group/fence_sql.hpp).
CREATE FUNCTION @schema@.fence_proven(p_xid xid8, p_seq regclass)
RETURNS boolean LANGUAGE plpgsql VOLATILE SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
  IF p_xid IS NULL THEN
    RETURN false;
  END IF;
  IF p_xid <= pg_snapshot_xmin(pg_current_snapshot()) THEN
    RETURN true;
  END IF;
  RETURN NOT EXISTS (
    SELECT 1 FROM pg_locks l
     WHERE l.granted
       AND (l.locktype = 'relation' AND l.relation = p_seq::oid AND l.mode = 'RowExclusiveLock'
            AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
         OR l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock'
            AND (l.transactionid::text::bigint - p_xid::text::bigint % 4294967296 + 4294967296)
                % 4294967296 >= 2147483648)
     GROUP BY l.virtualtransaction
    HAVING bool_or(l.locktype = 'relation') AND bool_or(l.locktype = 'transactionid'));
END
$fn$;

-- The transactions fence_proven() waits for, oldest first: a backend (pid, role, application,
-- client address, when its transaction started, its state) or a prepared transaction (gid).
-- Without pg_read_all_stats a role sees the pid only of other roles' backends.
CREATE FUNCTION @schema@.fence_holders(p_xid xid8, p_seq regclass)
RETURNS TABLE (pid integer, role text, application_name text, client_addr text,
               xact_start timestamptz, state text, prepared_gid text)
LANGUAGE sql VOLATILE SET search_path = pg_catalog, pg_temp AS $fn$
  WITH h AS (
    SELECT max(l.pid) AS pid,
           array_agg(l.transactionid::text) FILTER (WHERE l.locktype = 'transactionid') AS xids
      FROM pg_locks l
     WHERE l.granted
       AND (l.locktype = 'relation' AND l.relation = p_seq::oid AND l.mode = 'RowExclusiveLock'
            AND l.database = (SELECT d.oid FROM pg_database d WHERE d.datname = current_database())
         OR l.locktype = 'transactionid' AND l.mode = 'ExclusiveLock'
            AND (l.transactionid::text::bigint - p_xid::text::bigint % 4294967296 + 4294967296)
                % 4294967296 >= 2147483648)
     GROUP BY l.virtualtransaction
    HAVING bool_or(l.locktype = 'relation') AND bool_or(l.locktype = 'transactionid'))
  SELECT h.pid, coalesce(a.usename::text, p.owner::text), a.application_name,
         host(a.client_addr), coalesce(a.xact_start, p.prepared),
         CASE WHEN h.pid IS NULL THEN 'prepared' ELSE a.state END, p.gid
    FROM h
    LEFT JOIN pg_stat_activity a ON a.pid = h.pid
    LEFT JOIN pg_prepared_xacts p ON h.pid IS NULL AND p.transaction::text = ANY (h.xids)
   ORDER BY 5 NULLS LAST
$fn$;

REVOKE ALL ON FUNCTION @schema@.fence_proven(xid8, regclass) FROM PUBLIC;
REVOKE ALL ON FUNCTION @schema@.fence_holders(xid8, regclass) FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @schema@.fence_proven(xid8, regclass),
                          @schema@.fence_holders(xid8, regclass) TO sqlstreams_host;
GRANT EXECUTE ON FUNCTION @schema@.fence_holders(xid8, regclass) TO sqlstreams_operator;
