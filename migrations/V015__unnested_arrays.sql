-- V015: an idempotent batch costs in proportion to its size (bench/results/README.md "Arrays
-- unnested, not subscripted"). @schema@ is the configured schema, quoted.
--   * produce_idempotent() (the keyed path of produce_batch()) read each item's version, message
--     key, idempotency key and text_bytes as ($N::type[])[e.n]: a subscript of an array whose
--     elements vary in length walks it from its first element, so a batch of n items cost O(n^2)
--     (5,000 keyed items: 185 ms; 50,000: 10.4 s). The arrays are now unnested together with the
--     payloads, one pass. produce_batch() has checked that they all have the payloads' length (or
--     are NULL: unnest pads a NULL array with NULLs, a NULL version meaning 1, as before).
--     Signature, result, grants and every other step are as in V012.

CREATE OR REPLACE FUNCTION @schema@.produce_idempotent(st @schema@.streams, p_payloads jsonb[],
                                                       p_versions integer[], p_message_keys text[],
                                                       p_keys text[], p_text_bytes integer[])
RETURNS bigint[] LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
DECLARE
  v_ids bigint[];
  v_top bigint;
  v_attempt integer := 0;
  v_sql text := format($q$
    WITH input AS MATERIALIZED (
      SELECT e.n, e.p, coalesce(e.v, 1) AS v, e.k, e.ik, e.tb,
             e.ik IS NOT NULL AND e.n > min(e.n) OVER (PARTITION BY e.ik) AS repeat,
             (SELECT d.message_id FROM %1$s.idempotency_keys d
               WHERE d.stream_id = $5 AND d.key = e.ik
                 AND d.created_at > statement_timestamp() - $6::interval) AS live
        FROM unnest($1::jsonb[], $2::integer[], $3::text[], $4::text[], $7::integer[])
               WITH ORDINALITY AS e(p, v, k, ik, tb, n)
       ORDER BY e.n),
    drawn AS MATERIALIZED (
      SELECT n, p, v, k, ik, tb, live,
             CASE WHEN NOT repeat AND live IS NULL THEN nextval('%1$s.%2$I'::regclass) END AS id
        FROM input ORDER BY n),
    keyed AS (
      INSERT INTO %1$s.idempotency_keys AS d (stream_id, key, message_id)
      SELECT $5, ik, id FROM drawn WHERE ik IS NOT NULL AND id IS NOT NULL ORDER BY ik
      ON CONFLICT (stream_id, key) DO UPDATE
        SET message_id = excluded.message_id, created_at = excluded.created_at
        WHERE d.created_at <= statement_timestamp() - $6::interval
      RETURNING d.key, d.message_id),
    written AS (
      INSERT INTO %1$s.%3$I (id, schema_version, message_key, payload, text_bytes)
      SELECT id, v, k, p, tb FROM drawn WHERE id IS NOT NULL)
    SELECT array_agg(CASE WHEN dr.ik IS NULL THEN dr.id
                          ELSE coalesce(dr.live, kk.message_id, %1$s.idempotency_race(dr.n)) END
                     ORDER BY dr.n),
           max(dr.id)
      FROM drawn dr LEFT JOIN keyed kk ON kk.key = dr.ik$q$,
    '@schema@', 'messages_' || st.id || '_id_seq', 'messages_' || st.id);
BEGIN
  LOOP
    v_attempt := v_attempt + 1;
    BEGIN
      EXECUTE v_sql INTO v_ids, v_top
        USING p_payloads, p_versions, p_message_keys, p_keys, st.id, st.idempotency_window,
              p_text_bytes;
      EXIT;
    EXCEPTION WHEN SQLSTATE 'SQ001' THEN
      -- A concurrent producer of one of these keys committed while this insert waited.
      IF v_attempt >= 5 THEN
        RAISE EXCEPTION 'sqlstreams: idempotency keys of stream "%" kept changing hands while this produce waited (5 attempts)', st.name
          USING ERRCODE = 'serialization_failure', HINT = 'Retry the transaction.';
      END IF;
    END;
  END LOOP;
  IF v_top IS NOT NULL THEN
    -- Partitions cover 1 .. partitions_upto contiguously: the highest id decides.
    IF v_top >= st.partitions_upto THEN
      PERFORM @schema@.check_partition(st, v_top);
    END IF;
    IF st.notify THEN
      PERFORM pg_notify('sqlstreams_' || st.id, '');
    END IF;
  END IF;
  RETURN v_ids;
END
$fn$;
