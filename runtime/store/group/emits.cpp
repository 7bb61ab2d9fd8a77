// The outputs side of GroupStore's commits (docs/operating/emits.md): a handler's emitted
// messages are written in the transaction that commits their call's OK outcome, after the lease
// or row token was checked, through a Producer on the committer's own session.
#include <fmt/format.h>

#include <pqxx/pqxx>

#include "store/core/pq.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::store {
namespace {
constexpr StatementName kOwnXidForOutputs{"outputs_xid"};
}  // namespace

void GroupStore::prepare_outputs(const std::vector<const EmittedMessage*>& outputs) {
  if (outputs.empty()) return;
  if (!emitter_) emitter_ = std::make_unique<Producer>(session_);
  std::string last;
  for (const auto* o : outputs) {
    if (o->stream == last) continue;
    last = o->stream;
    emitter_->prepare(o->stream);
  }
}

std::map<std::string, std::pair<int64_t, size_t>> GroupStore::write_outputs(
    pqxx::dbtransaction& tx, const std::vector<const EmittedMessage*>& outputs) {
  std::map<std::string, std::pair<int64_t, size_t>> written;
  if (outputs.empty()) return written;
  // Rule 1 for the committer as a producer: own an xid before the first id is drawn. The token
  // statements before it usually took one (a DELETE that removed a row), but one that removed
  // nothing did not, and this must not depend on them.
  exec(tx, kOwnXidForOutputs, "SELECT pg_current_xact_id()");
  // One INSERT per target stream, each in the outputs' order (source id, then emit order): ids
  // follow it (INSERT … SELECT nextval() FROM unnest … WITH ORDINALITY).
  std::map<std::string, std::vector<NewMessage>> by_stream;
  for (const auto* o : outputs) by_stream[o->stream].push_back(o->message);
  auto& conn = tx.conn();
  for (const auto& [stream, messages] : by_stream) {
    const auto ids = emitter_->insert_within(tx, conn, stream, messages);
    int64_t top = 0;
    for (int64_t id : ids) top = std::max(top, id);
    written[stream] = {top, messages.size()};
  }
  return written;
}

void GroupStore::make_room_after(const std::map<std::string, std::pair<int64_t, size_t>>& written) {
  for (const auto& [stream, top_count] : written) {
    try {
      emitter_->make_room(stream, top_count.first, top_count.second);
    } catch (const StoreError&) {
      // Not the commit's business: an id past the partitions lands in the default partition
      // (V007), and the janitor creates ahead too.
    }
  }
}

}  // namespace sqlstreams::store
