// store/produce/producer — the C++ producer API (docs/design.md#rule-1-an-xid-before-an-id).
// Owns: single and batch produce on one Session. A batch is ONE multi-row INSERT
// (`INSERT … SELECT nextval(…), … FROM unnest($1::jsonb[])`) preceded by
// `SELECT pg_current_xact_id()` in the same transaction (Rule 1), all-or-nothing. Both are
// prepared once per connection; the payloads travel as one binary jsonb[] parameter (no
// escaping, no batch-wide JSON document: bench/results/README.md#producer-transport-issue-14).
// A payload the server cannot parse (bad UTF-8, NUL, not JSON, a number beyond numeric) is
// then located item by item and reported as "payload N of the batch: …". A missing partition
// (SQLSTATE 23514 or
// 55000) is healed in a SEPARATE transaction after the failed one rolled back (ensure_partitions
// past every id drawn so far) and the batch retried (at most twice). No DDL ever runs inside the
// producing transaction (docs/design.md#no-ddl-in-a-producers-transaction); near the end of the
// partitions the producer also creates ahead, after its commit.
// Limits (V004): a message_key is at most kMaxMessageKeyBytes bytes of UTF-8 without NUL (checked
// here before sending, and by the SQL); a payload's size is measured as the SQL functions
// measure it, octet_length(payload::jsonb::text), inside the INSERT (stored_sizes() lets a
// caller measure first) — except for a chunk whose payloads provably are objects that fit
// (needs_no_check): its INSERT skips the per-row type and size checks. Payload text is sent as
// is: jsonb keeps numbers exactly as written.
// Idempotency keys (V011, docs/design.md#idempotent-produce): a batch in which any message has
// one is sent as one keyed INSERT (insert_variant, `keyed`): a key produced within the stream's
// idempotency_window returns its first id and writes nothing (no id drawn); the first message
// of a key in the batch wins, later ones get its id; a key another transaction is producing
// makes the statement wait for it, and when that one committed the statement fails as a whole
// (SQLSTATE SQ001 from idempotency_race()) and is run again (at most kIdempotencyAttempts
// times), then finding the committed key. That full form is the second try: a keyed batch is
// first sent as a plain INSERT of its keys (KeyedForm::kFirstTry), which any key that exists
// (or repeats within the batch, or another transaction commits meanwhile) fails as a whole with
// 23505, and then runs in the full form. The committer's outputs (insert_within) always use
// the full form: a failed statement would end its transaction. A batch without keys is sent
// exactly as before. A large unkeyed output batch goes by COPY instead (kCopyFromRows).
// Threading: one Producer per thread (it uses its Session).
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "store/connection/session.hpp"
#include "store/core/statement.hpp"
#include "store/schema/catalog.hpp"

namespace pqxx {  // libpqxx stays inside store/: only the committer's transaction passes these
class transaction_base;
class connection_base;
class result;
}  // namespace pqxx

namespace sqlstreams::store {

// A message key identifies or orders messages (an order id): 1 KiB is ample, and bounded keys
// keep dead letters, logs and status output small. The SQL functions enforce the same limit.
inline constexpr size_t kMaxMessageKeyBytes = 1024;
// An idempotency key names one produce attempt (a UUID, "order-17:placed") and sits in a unique
// index for the stream's idempotency_window: 1 .. 255 bytes, as the SQL functions enforce.
inline constexpr size_t kMaxIdempotencyKeyBytes = 255;
// Runs of a keyed batch that lost a key to a concurrent producer that committed meanwhile,
// which the keyed INSERT reports with this SQLSTATE (V011 idempotency_race()).
inline constexpr int kIdempotencyAttempts = 5;
inline constexpr const char* kIdempotencyRaceState = "SQ001";
// A keyed batch's first try meets a key that exists (unique_violation): it runs in the full form.
inline constexpr const char* kUniqueViolationState = "23505";

struct NewMessage {
  std::string payload;  // a JSON object, as text
  int32_t schema_version = 1;
  std::optional<std::string> key;
  // Producer-chosen: a second produce of the same key within the stream's idempotency_window
  // returns the first one's id and writes nothing.
  std::optional<std::string> idempotency_key;
};

class Producer {
 public:
  explicit Producer(Session& session);

  // Returns the id. Throws StoreError (kRejected for an unknown stream or a bad payload).
  int64_t produce(const std::string& stream, const NewMessage& message);

  struct BatchOptions {
    // Messages per INSERT statement (0: one statement). One statement runs alone in autocommit;
    // several share one transaction.
    size_t chunk = 0;
    std::function<void(size_t inserted)> progress;  // after each statement
  };
  // Returns the ids in input order; nothing is written when it throws (one transaction).
  std::vector<int64_t> produce_batch(const std::string& stream,
                                     const std::vector<NewMessage>& messages,
                                     const BatchOptions& options);
  std::vector<int64_t> produce_batch(const std::string& stream,
                                     const std::vector<NewMessage>& messages) {
    return produce_batch(stream, messages, BatchOptions{});
  }

  // Outputs committed with the ack (docs/operating/emits.md): the committer produces inside
  // its own commit transaction. prepare() looks the stream up (a statement of its own: call it
  // before that transaction opens); insert_within() then inserts `messages` in `tx` — which
  // owns its xid already (Rule 1) — as one statement (plus the stream's NOTIFY hint) and returns
  // their ids in input order. It creates no partition (no DDL in a producing transaction): an
  // id past them lands in the default partition (V007), and make_room() after the commit
  // creates ahead as produce_batch does. Throws pqxx errors as they come (the caller's commit
  // classifies them).
  // A batch of at least kCopyFromRows outputs that the INSERT would send unchecked
  // (needs_no_check) and without idempotency keys goes in as one COPY after one statement that
  // draws its ids (copy_within.cpp): the same rows, ids and NOTIFY, two more round trips, about
  // a third less server time at 5,000 rows.
  static constexpr size_t kCopyFromRows = 256;
  void prepare(const std::string& stream);
  std::vector<int64_t> insert_within(pqxx::transaction_base& tx, pqxx::connection_base& conn,
                                     const std::string& stream,
                                     const std::vector<NewMessage>& messages);
  void make_room(const std::string& stream, int64_t top, size_t n);

  // Each payload's size as the SQL functions measure it (octet_length(payload::jsonb::text)),
  // in input order. Throws StoreError when PostgreSQL refuses the JSON.
  std::vector<int64_t> stored_sizes(const std::vector<std::string>& payloads);

  // True when `json`, whatever it holds, cannot exceed `max_bytes` once stored
  // (octet_length(payload::jsonb::text)) nor 8 times its stored size (no exponent, no number
  // of more than 32 characters: V012 text_bytes): the INSERT then skips measuring it
  // (serializing every payload back to text cost ~20% of the INSERT's server time). False
  // means "measure it".
  static bool fits_when_stored(std::string_view json, int64_t max_bytes);
  // True when `json`, if PostgreSQL parses it at all, is an object that fits (its first
  // character after whitespace is '{', and fits_when_stored): the INSERT then skips the
  // per-row type and size checks. Anything else is checked by the database, row by row.
  static bool needs_no_check(std::string_view json, int64_t max_bytes);

  // Throws StoreError(kRejected) naming `where` for a key PostgreSQL or V004 would refuse.
  static void check_key(const std::optional<std::string>& key, const std::string& where);
  // Throws StoreError(kRejected) naming `where` for an idempotency key V011 would refuse: empty,
  // longer than kMaxIdempotencyKeyBytes, or not UTF-8 text without NUL bytes.
  static void check_idempotency_key(const std::optional<std::string>& key,
                                    const std::string& where);

 private:
  struct StreamState {
    StreamRef ref;
    int64_t partitions_upto = 0;
    // The prepared INSERT per variant (the form for idempotency keys, KeyedForm, × one statement
    // in autocommit × payloads checked in SQL × schema_version column sent × message_key column
    // sent).
    std::array<Statement, 48> insert;
    Statement draw_ids;  // copy_within's: the ids of a COPY, drawn in one statement
  };
  StreamState& stream_state(const std::string& stream);
  // How a batch with idempotency keys is sent: none in the batch; the first try (every key
  // inserted plainly: any key that exists fails the statement); the full form (keys looked up,
  // ON CONFLICT, within-batch repeats).
  enum class KeyedForm { kNone = 0, kFirstTry = 1, kFull = 2 };
  std::vector<int64_t> insert_batch(StreamState& st, const std::vector<NewMessage>& messages,
                                    const BatchOptions& options, bool first_try);
  // messages[begin, end) as one INSERT in `tx`; appends their ids to `out`. `first_try`: a keyed
  // batch's first-try form (else the full form).
  void insert_rows(pqxx::transaction_base& tx, pqxx::connection_base& conn, StreamState& st,
                   const std::vector<NewMessage>& messages, size_t begin, size_t end, bool single,
                   bool first_try, const std::string& channel, std::vector<int64_t>& out);
  // insert_within's COPY path (copy_within.cpp): whether `messages` go by COPY, and the COPY
  // itself (ids drawn first, appended to `out` in input order).
  static bool copies(const StreamState& st, const std::vector<NewMessage>& messages);
  void copy_within(pqxx::transaction_base& tx, pqxx::connection_base& conn, StreamState& st,
                   const std::vector<NewMessage>& messages, std::vector<int64_t>& out);
  // The unkeyed INSERT's compact answer: one row (first id, count) for contiguous ids, else
  // one row per id (id, 0); appends the ids in input order (ascending) to `out`.
  static void append_compact_ids(const pqxx::result& r, std::vector<int64_t>& out);

  // Builds (once) the INSERT of a variant; returns its index in `insert`.
  static size_t insert_variant(const std::string& schema_sql, StreamState& st, bool single,
                               bool any_version, bool any_key, bool check, KeyedForm keyed);
  // The keyed first try's text: ids drawn for every item, keys inserted plainly.
  static std::string first_try_keyed_insert_sql(const std::string& schema_sql,
                                                const StreamState& st, const std::string& draw,
                                                const std::string& versions,
                                                const std::string& keys, const std::string& check,
                                                const std::string& source,
                                                const std::string& text_bytes);
  // The keyed variant's full text (see the header comment).
  static std::string keyed_insert_sql(const std::string& schema_sql, const StreamState& st,
                                      const std::string& draw, const std::string& versions,
                                      const std::string& keys, const std::string& check,
                                      const std::string& source, const std::string& text_bytes);
  // "payload N of the batch: <why>" for the first payload PostgreSQL refuses to parse.
  std::optional<std::string> locate_bad_payload(const std::vector<NewMessage>& messages);

  Session& session_;
  std::map<std::string, StreamState> streams_;
};

}  // namespace sqlstreams::store
