// consume/key_lanes — per-key ordering on this host (`ordering = "key"`,
// runtime/consume/README.md#per-key-ordering-ordering--key): the messages of one key that this host
// holds, across all of its claimed ranges, form a lane and run one at a time in id order. Only a
// lane's head is handed to the workers; when it resolves (success, dead under `ordering_dead =
// "release"`, a schema version the group passes over) the next entry becomes the head. When it does
// not (a failed attempt, a DELAY, a timeout, dead under "hold", or a hand-back), the lane ends: the
// caller defers or hands back the rest, and a marker keeps the key closed on this host until the
// head's range and the ranges of the rest have been committed — after that the database (an open
// exception row of the key, or the handed-back lease) says the key is blocked. The cross-host part
// (another host's earlier lease, open rows) is the database gate (store/group/README.md "Per-key
// ordering"); the caller passes its verdict to admit().
//
// Why a gate epoch: the claimer reads the epoch, then runs the gate statement, then admits. A
// range released (committed) after the epoch was read may have written the row that blocks a
// key after the statement's snapshot was taken, so its markers still close the key for that
// admission; a range released before it was visible to the statement.
//
// Pure bookkeeping: no threads, no clock, no database. Threading: the owner (RangeQueue) calls
// every function under its lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sqlstreams::consume {

class RangeWork;

struct LaneEntry {
  std::shared_ptr<RangeWork> range;
  size_t index = 0;   // the message's slot in its range
  int64_t id = 0;     // the message id
  std::string token;  // its range's lease token: set by admit() when queued behind a head
};

class KeyLanes {
 public:
  enum class Admission {
    kRun,     // the new head of its lane: hand it to the workers
    kQueued,  // waits behind the lane's head
    kDefer,   // must not run here now: record it `deferred` (the retry path runs it in order)
  };

  // One message of a newly claimed (or reclaimed) range leased under `token`, in id order
  // within the range. `db_free`: the database gate found neither an open row of the key below
  // the range nor an earlier lease of another holder that may hold it. `gate_epoch`: epoch()
  // read before that gate statement ran. A deferred message closes its key here until its range
  // is committed (its `deferred` row is what blocks the key's later messages from then on).
  Admission admit(const std::string& key, LaneEntry entry, const std::string& token, bool db_free,
                  uint64_t gate_epoch);

  // The head of `key`'s lane (message `id`, in the range leased under `head_token`) was
  // resolved. `lane_goes_on`: it no longer holds the key back (success, dead under "release",
  // passed over). Returns the next head to run, if any. Otherwise the lane ends: its other
  // entries are moved to `rest` in id order (the caller defers or hands them back) and the key
  // stays closed here until range_released() of head_token and of every rest entry's range:
  // their `deferred` rows (or hand-backs) block the key in the database only once their ranges
  // commit, which may be long after the head's range did (and the head's row may be retried
  // and resolved elsewhere in between).
  std::optional<LaneEntry> resolve_head(const std::string& key, int64_t id,
                                        const std::string& head_token, bool lane_goes_on,
                                        std::vector<LaneEntry>* rest);

  // The range with this lease token was committed or given up (no longer held here). Returns
  // the new epoch.
  uint64_t range_released(const std::string& token);
  uint64_t epoch() const { return epoch_; }

  size_t lanes() const { return lanes_.size(); }
  size_t closed_keys() const { return markers_.size(); }
  // Entries held in lanes, heads included.
  size_t held() const { return held_; }

 private:
  struct Marker {
    // The ranges whose commits make the database say "blocked" (a failed or handed-back head,
    // deferred messages); the key is closed until every one of them is released.
    std::set<std::string> pending;
    uint64_t released = 0;  // the epoch of the last release; 0 = some still pending
  };
  void close(const std::string& key, const std::string& token);
  // Drops markers released no later than `gate_epoch`: the database saw their commits.
  void forget_markers(uint64_t gate_epoch);

  // A lane: its head (running or about to) and the entries queued behind it, in id order from
  // `next`. No allocation beyond the map's node for the usual lane of one message (every key
  // distinct): a std::deque per lane cost ~1.4 ms of the claim loop per 5,000-key range.
  struct Lane {
    LaneEntry head;
    std::vector<LaneEntry> waiting;
    size_t next = 0;
    size_t queued() const { return waiting.size() - next; }
    int64_t last_id() const { return queued() ? waiting.back().id : head.id; }
  };
  std::unordered_map<std::string, Lane> lanes_;
  std::unordered_map<std::string, Marker> markers_;             // by key
  std::unordered_multimap<std::string, std::string> by_token_;  // token -> keys it closes
  std::deque<std::pair<uint64_t, std::string>> released_;       // (epoch, key), by epoch
  uint64_t epoch_ = 0;
  size_t held_ = 0;
};

}  // namespace sqlstreams::consume
