-- V007: a producer never fails because no host ran (runtime/store/fleet/README.md#the-default-partition-v007).
--
-- Each stream's log gets a DEFAULT partition, messages_<id>_default. An id past the partitions
-- made ahead (no janitor, declare or migrate has run for a long time) lands there and its
-- transaction commits as any other; readers read the parent, so claims, the read cache and
-- `status` see it like any id. ensure_partitions() re-homes: creating the partition of a range
-- that has rows in the default moves them (DELETE … RETURNING into a new table, then ATTACH),
-- all in the transaction that creates it, under the ACCESS EXCLUSIVE lock on the log that every
-- partition creation holds anyway. The janitor creates one such range per transaction, so a
-- re-home holds producers back for at most one partition's worth of rows (measured in the
-- README).
--
-- The floor: once retention dropped a partition, an id of it must never become visible again
-- (the cursor floor relies on it, janitor_cleanup.cpp). Before V007 a straggler holding such an
-- id failed for want of a partition; now the default would take it. drop_oldest() therefore
-- keeps a NOT VALID check constraint `id > <last id dropped>` on the default partition:
-- enforced for every new row, and never a scan.

-- The tables a host owns (V004), the default partition included.
CREATE OR REPLACE FUNCTION @schema@.give_to_host(p_stream bigint)
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
                        || '|messages_' || p_stream || '_p[0-9]+|messages_' || p_stream
                        || '_default)$')
     ORDER BY c.relname
  LOOP
    EXECUTE format('ALTER TABLE %s OWNER TO sqlstreams_host', v_rel);
  END LOOP;
  IF (SELECT proowner FROM pg_proc WHERE oid = v_fn) <> v_host THEN
    EXECUTE format('ALTER FUNCTION %s OWNER TO sqlstreams_host', v_fn);
  END IF;
END
$fn$;

-- Creates the partition of ids [p_from, p_from + p_size) of stream p_stream, moving the rows
-- of that range out of the default partition first (the caller holds the advisory partitions
-- lock; the DDL takes ACCESS EXCLUSIVE on the log). Returns the number of rows moved.
CREATE FUNCTION @schema@.create_partition(p_stream bigint, p_from bigint, p_size bigint)
RETURNS bigint LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_parent text := format('%s.%I', '@schema@', 'messages_' || p_stream);
  v_default text := format('%s.%I', '@schema@', 'messages_' || p_stream || '_default');
  v_name text := 'messages_' || p_stream || '_p' || ((p_from - 1) / p_size);
  v_part text := format('%s.%I', '@schema@', v_name);
  v_moved bigint := 0;
BEGIN
  IF to_regclass(v_part) IS NOT NULL THEN
    RETURN 0;
  END IF;
  IF to_regclass(v_default) IS NOT NULL THEN
    EXECUTE format('SELECT count(*) FROM %s WHERE id >= $1 AND id < $2', v_default)
      INTO v_moved USING p_from, p_from + p_size;
  END IF;
  IF v_moved = 0 THEN
    EXECUTE format('CREATE TABLE %s PARTITION OF %s FOR VALUES FROM (%s) TO (%s)',
                   v_part, v_parent, p_from, p_from + p_size);
    RETURN 0;
  END IF;
  -- Re-home: the rows leave the default and arrive in the new table in one transaction; the
  -- range constraint lets ATTACH skip its scan of the new table.
  EXECUTE format('CREATE TABLE %s (LIKE %s INCLUDING DEFAULTS INCLUDING STORAGE)', v_part, v_parent);
  EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I CHECK (id >= %s AND id < %s)',
                 v_part, v_name || '_range', p_from, p_from + p_size);
  EXECUTE format('WITH m AS (DELETE FROM %s WHERE id >= $1 AND id < $2 '
                 'RETURNING id, created_at, schema_version, message_key, payload) '
                 'INSERT INTO %s (id, created_at, schema_version, message_key, payload) '
                 'SELECT id, created_at, schema_version, message_key, payload FROM m',
                 v_default, v_part) USING p_from, p_from + p_size;
  EXECUTE format('ALTER TABLE %s ATTACH PARTITION %s FOR VALUES FROM (%s) TO (%s)',
                 v_parent, v_part, p_from, p_from + p_size);
  EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', v_part, v_name || '_range');
  RETURN v_moved;
END
$fn$;

-- As V004, through create_partition(), and the default partition made if missing.
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
  IF to_regclass(format('%s.%I', '@schema@', 'messages_' || p_stream || '_default')) IS NULL THEN
    EXECUTE format('CREATE TABLE %s.%I PARTITION OF %s.%I DEFAULT', '@schema@',
                   'messages_' || p_stream || '_default', '@schema@', 'messages_' || p_stream);
  END IF;
  WHILE v_upto <= p_upto_id LOOP
    PERFORM @schema@.create_partition(p_stream, v_upto, v_size);
    v_upto := v_upto + v_size;
  END LOOP;
  UPDATE @schema@.streams SET partitions_upto = v_upto WHERE id = p_stream;
  PERFORM @schema@.give_to_host(p_stream);
  RETURN v_upto;
END
$fn$;

-- Since V007 an id past the partitions lands in the default partition: nothing to check.
CREATE OR REPLACE FUNCTION @schema@.check_partition(p_stream @schema@.streams, p_id bigint)
RETURNS void LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
BEGIN
END
$fn$;

-- Existing streams: the default partition, its floor below the oldest partition kept.
DO $do$
DECLARE
  st record;
  v_first bigint;
BEGIN
  FOR st IN SELECT id, partition_size FROM @schema@.streams ORDER BY id LOOP
    EXECUTE format('CREATE TABLE IF NOT EXISTS %s.%I PARTITION OF %s.%I DEFAULT',
                   '@schema@', 'messages_' || st.id || '_default', '@schema@', 'messages_' || st.id);
    SELECT min(substring(c.relname FROM '_p([0-9]+)$')::bigint) INTO v_first
      FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
     WHERE i.inhparent = format('%s.%I', '@schema@', 'messages_' || st.id)::regclass
       AND c.relname ~ '_p[0-9]+$';
    IF v_first > 0 THEN
      EXECUTE format('ALTER TABLE %s.%I ADD CONSTRAINT %I CHECK (id > %s) NOT VALID', '@schema@',
                     'messages_' || st.id || '_default', 'messages_' || st.id || '_default_floor',
                     v_first * st.partition_size);
    END IF;
    PERFORM @schema@.give_to_host(st.id);
  END LOOP;
END
$do$;
