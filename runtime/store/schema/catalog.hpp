// store/schema/catalog — streams and groups as the database knows them
// (docs/design.md#the-log-and-its-id-sequence).
// Owns: idempotent declaration (the per-stream family is created on first declaration;
// re-declaring never moves a cursor; partition_size is immutable), lookups, and the Rule 2
// start-up check (every stream's id sequence has CACHE 1). A group declared at the head
// starts behind the fence (docs/design.md#declaring-a-group-at-the-head): declaration waits for
// earlier producers to end.
// Threading: uses the caller's Session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/duration.hpp"
#include "store/connection/session.hpp"
#include "store/group/ordering_mode.hpp"

namespace sqlstreams::store {

struct StreamSpec {
  std::string name;
  int64_t partition_size = 1'000'000;
  std::optional<Millis> retention;
  bool allow_drop_past_committed = false;
  int32_t max_payload_bytes = 1 << 20;
  bool notify = false;
  Millis idempotency_window{86'400'000};  // V011
};

struct StreamRef {
  int64_t id = 0;
  std::string name;
  int64_t partition_size = 0;
  int32_t max_payload_bytes = 0;
  bool notify = false;
};

struct GroupRef {
  int64_t id = 0;
  int64_t stream_id = 0;
  std::string stream;
  std::string name;
};

enum class StartAt { kBeginning, kHead };

// A fleet-wide setting (retention, allow_drop_past_committed, max_payload_bytes, notify,
// idempotency_window) whose
// value in the database differs from what the declaring config says; the database's is kept.
struct SettingDifference {
  std::string setting;
  std::string database;  // as the config would spell it ("7d", "forever", "true", "2048")
  std::string config;
};

struct DeclaredStream {
  StreamRef stream;
  bool created = false;
  std::vector<SettingDifference> differences;  // existing stream only
};

struct DeclaredGroup {
  GroupRef group;
  bool created = false;
  int64_t start_position = 0;  // the cursor a new group started at (0 = beginning)
};

// Creates the stream (and its table family + first partitions) with the spec's settings. An
// existing stream keeps its fleet-wide settings (V008: only set_stream_settings, i.e.
// `sqlstreams stream set`, changes them) and the spec's differing values are returned in
// `differences`; it then gets kDeclarePartitionsAhead partitions past its head (a separate
// transaction). Throws StoreError kRejected when partition_size differs.
DeclaredStream declare_stream(Session& session, const StreamSpec& spec);

// How long declaring a group at the head waits for the fence's proof
// (docs/design.md#declaring-a-group-at-the-head).
inline constexpr Millis kDeclareProofTimeout{30'000};

// Creates the group and its cursor row, at the beginning or at the current head, recording its
// `ordering` (groups.ordering / ordering_dead); an existing group is left exactly as it is (and
// never waits). Its ordering is fixed at creation: when the recorded one differs from
// `ordering`, throws StoreError kRejected naming the group, both settings and what to do
// (the host must not run an ordered group unordered, or the reverse, silently).
// At the head: observes (head, xid) alone and waits until every transaction that could still
// commit an id <= head has ended, then starts the cursor at head — so the group delivers every
// message that becomes visible after this returns. No transaction is open while it waits.
// Throws StoreError kTransient naming the oldest xid-owning backend (or prepared transaction)
// when the proof takes longer than `proof_timeout`; the group is then not created.
DeclaredGroup declare_group(Session& session, const StreamRef& stream, const std::string& name,
                            StartAt start, Millis proof_timeout = kDeclareProofTimeout,
                            OrderingMode ordering = OrderingMode::kNone);

std::optional<StreamRef> find_stream(Session& session, const std::string& name);
std::optional<GroupRef> find_group(Session& session, const std::string& stream,
                                   const std::string& group);
std::vector<StreamRef> list_streams(Session& session);

// Rule 2: names every stream whose id sequence is not CACHE 1 (empty = all good).
std::vector<std::string> streams_violating_cache_rule(Session& session);

// Partitions `declare`/`migrate` keep ready past the last id drawn (the janitor sizes its own).
inline constexpr int32_t kDeclarePartitionsAhead = 2;
// How long a heal / declare / migrate waits for the stream's lock before failing (55P03).
inline constexpr Millis kPartitionLockTimeout{10'000};

// Creates partitions so that ids up to `upto_id` have one. Returns the new exclusive bound.
// Its own transaction; never call it inside a producing transaction
// (docs/design.md#no-ddl-in-a-producers-transaction). Takes the stream's advisory lock, then the
// parent table (waiting up to kPartitionLockTimeout).
int64_t ensure_partitions(Session& session, int64_t stream_id, int64_t upto_id);

// ensure_partitions() up to `partitions_ahead` × partition_size ids past the last id drawn.
int64_t create_ahead_of_head(Session& session, int64_t stream_id, int32_t partitions_ahead);

}  // namespace sqlstreams::store
