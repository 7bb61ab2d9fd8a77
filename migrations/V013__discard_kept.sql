-- V013: an operator discards kept messages explicitly (issue 27 §5.2, README "Versions a group
-- does not accept (yet)"). @schema@ is the configured schema, quoted.
--   * kept_discard(): as dead_discard() (V008) for the rows with status 'parked' — a message of a
--     schema version its group does not accept, kept with its payload. Deletes the rows a
--     filter names (the reason a literal case-insensitive substring, ids from/to inclusive, kept
--     at least p_older_ms ago on the database clock, the first p_limit by id), each only while
--     it is still 'parked' when the DELETE reaches it (a host that released it meanwhile owns
--     it: a claim makes it 'inflight' under its own lease token), and writes one deliveries_N
--     audit row per message (outcome 'operator-discard') in the same transaction; returns the
--     ids. The group's cursor already passes a kept row; a discarded one no longer blocks its
--     key in an ordered group, and is never delivered.
CREATE FUNCTION @schema@.kept_discard(p_group bigint, p_error text, p_from bigint, p_to bigint,
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
  -- The filter is dead_filter_sql()'s with the status 'parked'; the outer WHERE checks the
  -- status again on the row being deleted (the subquery's snapshot may be older).
  EXECUTE format(
      'WITH c AS (DELETE FROM %1$s.exceptions_%2$s WHERE message_id IN (SELECT message_id FROM '
      '%1$s.exceptions_%2$s WHERE %3$s ORDER BY message_id LIMIT $6) AND group_id = $1 AND '
      'status = ''parked'' RETURNING message_id) SELECT coalesce(array_agg(message_id ORDER BY '
      'message_id), ''{}'') FROM c', '@schema@', v_stream,
      replace(@schema@.dead_filter_sql(), 'status = ''dead''', 'status = ''parked'''))
    INTO v_ids USING p_group, p_error, p_from, p_to, p_older_ms, p_limit;
  EXECUTE format('INSERT INTO %s.deliveries_%s (group_id, message_id, attempt, outcome, error, '
                 'host) SELECT $1, id, 0, ''operator-discard'', ''kept message discarded'', $2 '
                 'FROM unnest($3::bigint[]) AS id', '@schema@', v_stream)
    USING p_group, p_actor, v_ids;
  RETURN QUERY SELECT unnest(v_ids);
END
$fn$;

-- Rights (as dead_discard in V008): it runs as sqlstreams_host; the operator and the host call it.
ALTER FUNCTION @schema@.kept_discard(bigint, text, bigint, bigint, bigint, integer, text)
  OWNER TO sqlstreams_host;
REVOKE ALL ON FUNCTION @schema@.kept_discard(bigint, text, bigint, bigint, bigint, integer, text)
  FROM PUBLIC;
GRANT EXECUTE ON FUNCTION @schema@.kept_discard(bigint, text, bigint, bigint, bigint, integer, text)
  TO sqlstreams_operator, sqlstreams_host;
