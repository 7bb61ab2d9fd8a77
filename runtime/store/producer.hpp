// store/producer — the C++ producer API (DESIGN §6.1).
// Owns: single and batch produce on one Session. A batch is ONE multi-row INSERT
// (`INSERT … SELECT nextval(…), … FROM jsonb_array_elements(…)`) preceded by
// `SELECT pg_current_xact_id()` in the same transaction (Rule 1), all-or-nothing. A missing
// partition (SQLSTATE 23514 or 55000) is healed in a SEPARATE transaction after the failed one
// rolled back (ensure_partitions past every id drawn so far) and the batch retried (at most
// twice). No DDL ever runs inside the producing transaction (DESIGN §9); near the end of the
// partitions the producer also creates ahead, after its commit.
// Threading: one Producer per thread (it uses its Session).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "store/catalog.hpp"
#include "store/session.hpp"

namespace sqlstreams::store {

struct NewMessage {
  std::string payload;  // a JSON object, as text
  int32_t schema_version = 1;
  std::optional<std::string> key;
};

class Producer {
 public:
  explicit Producer(Session& session);

  // Returns the id. Throws StoreError (kRejected for an unknown stream or a bad payload).
  int64_t produce(const std::string& stream, const NewMessage& message);

  // Returns the ids in input order; nothing is written when it throws.
  std::vector<int64_t> produce_batch(const std::string& stream,
                                     const std::vector<NewMessage>& messages);

 private:
  struct StreamState {
    StreamRef ref;
    int64_t partitions_upto = 0;
  };
  StreamState& stream_state(const std::string& stream);
  std::vector<int64_t> insert_batch(StreamState& st, const std::vector<NewMessage>& messages);

  Session& session_;
  std::map<std::string, StreamState> streams_;
};

}  // namespace sqlstreams::store
