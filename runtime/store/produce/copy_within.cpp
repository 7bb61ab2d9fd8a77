// store/produce/copy_within — the committer's large output batches as one COPY
// (docs/operating/emits.md#cost, bench/results/README.md "Outputs by COPY"): inside the commit
// transaction, which owns its xid already (Rule 1), the ids are drawn in one statement
// (`nextval()` in output order, answered compactly), then the rows go in as one `COPY … FROM
// STDIN` of text lines. COPY parses each payload straight into its row and inserts in batches:
// at 5,000 rows it costs the server about two-thirds of the `unnest($1::jsonb[])` INSERT
// (which builds and then takes apart one array of every payload). Only for batches the INSERT
// would send unchecked (needs_no_check) and without idempotency keys; anything else keeps the
// INSERT (insert_rows).
// Threading: a Producer's, one per thread.
#include <fmt/format.h>

#include <pqxx/pqxx>

#include "store/core/pq.hpp"
#include "store/core/stream_tables.hpp"
#include "store/produce/producer.hpp"

// libpqxx 6.4's only COPY writer that takes lines already formatted (its stream_to keeps
// write_raw_line private and formats every field through to_string): deprecated there in
// favour of stream_to, kept in 6.x.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
#include <pqxx/tablewriter>

namespace sqlstreams::store {
namespace {

constexpr StatementName kDrawIds{"draw_ids"};
// A COPY data chunk handed to libpq at a time: bounds the chunk's memory and the extra copy
// write_raw_line makes (64 KiB, so that the server parses while the rest is formatted, measured
// no faster: bench/results/README.md "Outputs by COPY").
constexpr size_t kCopyChunkBytes = 1 << 20;

// COPY's text format: a backslash, and the three characters that end a field or a line.
void append_copy_text(std::string& out, std::string_view text) {
  size_t from = 0;
  for (size_t at = text.find_first_of("\\\t\n\r"); at != std::string_view::npos;
       at = text.find_first_of("\\\t\n\r", from)) {
    out.append(text, from, at - from);
    const char c = text[at];
    out += '\\';
    out += c == '\t' ? 't' : c == '\n' ? 'n' : c == '\r' ? 'r' : '\\';
    from = at + 1;
  }
  out.append(text, from);
}

}  // namespace

bool Producer::copies(const StreamState& st, const std::vector<NewMessage>& messages) {
  if (messages.size() < kCopyFromRows) return false;
  for (const auto& m : messages) {
    if (m.idempotency_key || !needs_no_check(m.payload, st.ref.max_payload_bytes)) return false;
  }
  return true;
}

void Producer::copy_within(pqxx::transaction_base& tx, pqxx::connection_base& conn, StreamState& st,
                           const std::vector<NewMessage>& messages, std::vector<int64_t>& out) {
  const StreamTables tables(session_.schema_sql(), st.ref.id);
  // One statement draws every id, in output order (the CTE runs once): the rows then take them
  // in that order, as the INSERT's `nextval()` per row would have given them.
  if (st.draw_ids.sql.empty()) {
    st.draw_ids = Statement{
        prepared_name(kDrawIds, st.ref.id),
        fmt::format("WITH d AS MATERIALIZED (SELECT nextval('{}') AS id FROM generate_series(1, "
                    "$1::integer)), s AS (SELECT min(id) AS lo, max(id) AS hi, count(*) AS n FROM "
                    "d) SELECT lo, n FROM s WHERE hi - lo + 1 = n "
                    "UNION ALL SELECT d.id, 0 FROM d, s WHERE hi - lo + 1 <> n",
                    tables.id_seq)};
  }
  const size_t from = out.size();
  append_compact_ids(exec_prepared(tx, conn, st.draw_ids, static_cast<int64_t>(messages.size())),
                     out);
  if (out.size() - from != messages.size()) {
    throw std::logic_error(
        fmt::format("copy_within: {} ids drawn for {} rows", out.size() - from, messages.size()));
  }
  static const std::vector<std::string> kColumns{"id", "schema_version", "message_key", "payload"};
  pqxx::tablewriter writer(tx, tables.messages, kColumns.begin(), kColumns.end());
  std::string chunk;
  chunk.reserve(kCopyChunkBytes + 4096);
  for (size_t i = 0; i < messages.size(); ++i) {
    const auto& m = messages[i];
    if (!chunk.empty()) chunk += '\n';
    const fmt::format_int id(out[from + i]), version(m.schema_version);
    chunk.append(id.data(), id.size()).append(1, '\t');
    chunk.append(version.data(), version.size()).append(1, '\t');
    if (m.key) {
      append_copy_text(chunk, *m.key);
    } else {
      chunk += "\\N";
    }
    chunk += '\t';
    append_copy_text(chunk, m.payload);
    // Whole lines per chunk: write_raw_line ends the chunk with the line's newline.
    if (chunk.size() >= kCopyChunkBytes) {
      writer.write_raw_line(chunk);
      chunk.clear();
    }
  }
  if (!chunk.empty()) writer.write_raw_line(chunk);
  writer.complete();
}

}  // namespace sqlstreams::store

#pragma GCC diagnostic pop
