#!/usr/bin/env bash
# bench/payload_column.sh URL [ROWS] — the payload column choice, measured
# (bench/results/README.md#the-payload-column-jsonb-or-json-kept-verbatim): the same rows in a
# `jsonb` column (what messages_N uses) and in a `json` column (the producer's text kept verbatim,
# validated only), on the given database, in a scratch schema it drops at the end.
# For 100 B and 1 KB payloads (an order-like object), each a median of 3 runs (ms):
#   produce     INSERT … SELECT text::jsonb / text::json from a staged text column (the parse and
#               store cost; WAL bytes per row from pg_current_wal_insert_lsn)
#   range read  payload::text of every row by id ranges of 5000 (the claim's range read: jsonb →
#               text is a conversion, json → text a copy)
#   ->> filter  count(*) WHERE payload->>'customer' = 'c-7' (a full scan: json re-parses each row)
#   @> filter   count(*) WHERE payload @> '{"customer":"c-7"}' (json: needs payload::jsonb)
#   expr index  CREATE INDEX ((payload->>'customer')) build time; the indexed ->> lookup
#   GIN index   CREATE INDEX USING gin (… jsonb_path_ops) build time (json: on payload::jsonb);
#               the @> lookup through it
#   size        pg_table_size of the table
# Prints a Markdown table. Needs psql; the role must be able to CREATE SCHEMA.
set -euo pipefail
URL=${1:?usage: bench/payload_column.sh URL [ROWS]}
ROWS=${2:-200000}

psql "$URL" -X -q -v ON_ERROR_STOP=1 -v rows="$ROWS" <<'SQL'
\pset format unaligned
\pset tuples_only on
SET client_min_messages = warning;
DROP SCHEMA IF EXISTS payload_bench CASCADE;
CREATE SCHEMA payload_bench;
SET search_path = payload_bench;

-- An order-like object of about `bytes` bytes (the note pads it).
CREATE FUNCTION payload(i bigint, bytes int) RETURNS text LANGUAGE sql IMMUTABLE AS $$
  SELECT format('{"order_id":"o-%s","customer":"c-%s","amount":%s,"currency":"EUR",'
                '"items":[{"sku":"s-%s","qty":%s}],"note":"%s"}',
                i, i % 1000, (i % 10000) / 100.0, i % 97, 1 + i % 5,
                repeat('x', greatest(bytes - 120, 1)));
$$;

CREATE FUNCTION ms(t0 timestamptz) RETURNS numeric LANGUAGE sql AS $$
  SELECT round(extract(epoch FROM clock_timestamp() - t0)::numeric * 1000, 1);
$$;

CREATE TABLE results (seq bigserial, bytes int, measure text, kind text, run int, value numeric);

CREATE PROCEDURE measure(bytes int, kind text, n bigint, run int) LANGUAGE plpgsql AS $$
DECLARE
  t0 timestamptz;
  lsn pg_lsn;
  c bigint;
  tbl text := format('t_%s_%s', kind, bytes);
BEGIN
  EXECUTE format('DROP TABLE IF EXISTS %I', tbl);
  EXECUTE format('CREATE TABLE %I (id bigint PRIMARY KEY, payload %s)', tbl, kind);
  COMMIT;
  lsn := pg_current_wal_insert_lsn();
  t0 := clock_timestamp();
  EXECUTE format('INSERT INTO %I SELECT i, p::%s FROM src_%s', tbl, kind, bytes);
  INSERT INTO results (bytes, measure, kind, run, value) VALUES (bytes, 'produce (ms)', kind, run, ms(t0));
  INSERT INTO results (bytes, measure, kind, run, value) VALUES (bytes, 'produce WAL per row (B)', kind, run,
                              round(pg_wal_lsn_diff(pg_current_wal_insert_lsn(), lsn) / n));
  COMMIT;
  EXECUTE format('ANALYZE %I', tbl);
  t0 := clock_timestamp();
  FOR lo IN 0 .. n - 1 BY 5000 LOOP
    EXECUTE format('SELECT sum(length(payload::text)) FROM %I WHERE id > $1 AND id <= $2', tbl)
      INTO c USING lo, lo + 5000;
  END LOOP;
  INSERT INTO results (bytes, measure, kind, run, value) VALUES (bytes, 'range read, payload::text (ms)', kind, run, ms(t0));
  t0 := clock_timestamp();
  EXECUTE format('SELECT count(*) FROM %I WHERE payload->>''customer'' = ''c-7''', tbl) INTO c;
  INSERT INTO results (bytes, measure, kind, run, value) VALUES (bytes, '->> filter, full scan (ms)', kind, run, ms(t0));
  t0 := clock_timestamp();
  EXECUTE format('SELECT count(*) FROM %I WHERE payload%s @> ''{"customer":"c-7"}''', tbl,
                 CASE kind WHEN 'json' THEN '::jsonb' ELSE '' END) INTO c;
  INSERT INTO results (bytes, measure, kind, run, value) VALUES (bytes, '@> filter, full scan (ms)', kind, run, ms(t0));
  t0 := clock_timestamp();
  EXECUTE format('CREATE INDEX ON %I ((payload->>''customer''))', tbl);
  INSERT INTO results (bytes, measure, kind, run, value) VALUES (bytes, 'expression index build (ms)', kind, run, ms(t0));
  t0 := clock_timestamp();
  FOR k IN 1 .. 200 LOOP
    EXECUTE format('SELECT count(*) FROM %I WHERE payload->>''customer'' = $1', tbl)
      INTO c USING 'c-' || k;
  END LOOP;
  INSERT INTO results (bytes, measure, kind, run, value) VALUES (bytes, '200 ->> lookups via the index (ms)', kind, run, ms(t0));
  t0 := clock_timestamp();
  EXECUTE format('CREATE INDEX ON %I USING gin ((payload%s) jsonb_path_ops)', tbl,
                 CASE kind WHEN 'json' THEN '::jsonb' ELSE '' END);
  INSERT INTO results (bytes, measure, kind, run, value) VALUES (bytes, 'GIN index build (ms)', kind, run, ms(t0));
  COMMIT;
  EXECUTE format('ANALYZE %I', tbl);
  t0 := clock_timestamp();
  FOR k IN 1 .. 200 LOOP
    EXECUTE format('SELECT count(*) FROM %I WHERE payload%s @> jsonb_build_object(''customer'', $1::text)',
                   tbl, CASE kind WHEN 'json' THEN '::jsonb' ELSE '' END)
      INTO c USING 'c-' || k;
  END LOOP;
  INSERT INTO results (bytes, measure, kind, run, value) VALUES (bytes, '200 @> lookups via the GIN index (ms)', kind, run, ms(t0));
  INSERT INTO results (bytes, measure, kind, run, value) VALUES (bytes, 'table size (MB)', kind, run,
                              round(pg_table_size(tbl::regclass) / 1048576.0, 1));
  COMMIT;
END $$;

CREATE TABLE src_100 AS SELECT i, payload(i, 100) AS p FROM generate_series(1, :rows) i;
CREATE TABLE src_1024 AS SELECT i, payload(i, 1024) AS p FROM generate_series(1, :rows) i;

-- Alternate the kinds so that drift (other load, checkpoints) hits both alike.
CALL measure(100, 'jsonb', :rows, 1);
CALL measure(100, 'json', :rows, 1);
CALL measure(100, 'jsonb', :rows, 2);
CALL measure(100, 'json', :rows, 2);
CALL measure(100, 'jsonb', :rows, 3);
CALL measure(100, 'json', :rows, 3);
CALL measure(1024, 'jsonb', :rows, 1);
CALL measure(1024, 'json', :rows, 1);
CALL measure(1024, 'jsonb', :rows, 2);
CALL measure(1024, 'json', :rows, 2);
CALL measure(1024, 'jsonb', :rows, 3);
CALL measure(1024, 'json', :rows, 3);

\echo '| payload | measure | jsonb | json | json ÷ jsonb |'
\echo '|---|---|---|---|---|'
WITH med AS (
  SELECT bytes, measure, kind,
         percentile_disc(0.5) WITHIN GROUP (ORDER BY value) AS v, min(seq) AS first
  FROM results GROUP BY bytes, measure, kind)
SELECT format('| %s | %s | %s | %s | %s× |',
              CASE b.bytes WHEN 1024 THEN '1 KB' ELSE b.bytes || ' B' END, b.measure, b.v, j.v,
              CASE WHEN b.v > 0 THEN round(j.v / b.v, 2)::text ELSE '—' END)
FROM med b JOIN med j USING (bytes, measure)
WHERE b.kind = 'jsonb' AND j.kind = 'json'
ORDER BY b.bytes, b.first;
DROP SCHEMA payload_bench CASCADE;
SQL
