// store/group/range_cache — what GroupStore::claim() asks before it reads a range, and tells
// after it read one (docs/design.md#sharing-a-range-read). Messages with ids in a span
// (low, high] that a claim read with high <= its proven head, by a statement whose snapshot is
// no older than the proof, are final: no later commit can add an id in that span. Such a read
// is exactly what any other group of the stream would read for any sub-span, so a cache of
// these reads (consume/read_cache) can stand in for the range read of the other groups —
// until retention removes some of those ids: a final span only ever loses rows, so the claim
// uses a lookup only when the log still holds as many ids in it as the lookup returned
// (one count, only when a lookup answered), and otherwise calls forget_below() and reads.
// The store only calls this interface; it never keeps what it hands over. The cache decides
// what to keep and for how long (a byte budget, the positions of the groups that share it).
// Threading: one RangeCache per GroupStore (per claiming thread); implementations that are
// shared between groups synchronise inside.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace sqlstreams::store {

struct StoredMessage;

// The messages of (low, high] for the `low` the claim asked about: every message of the log in
// that span, ascending by id (ids absent from it are permanent gaps).
struct CachedSpan {
  int64_t high = 0;
  std::vector<StoredMessage> messages;
};

class RangeCache {
 public:
  virtual ~RangeCache() = default;
  // Called before the claim's transaction begins, so that no row lock and no xid is held while
  // it waits (an open xid would hold back every other claimer's proof,
  // runtime/store/group/README.md#the-fence): when id low + 1 is not stored but another claim is
  // reading it right now, wait (bounded) for that read, so that the lookup inside the transaction
  // finds it instead of reading it again.
  virtual void await_read(int64_t low) = 0;
  // The longest known-final prefix (low, h] of (low, high], low < h <= high, with its messages;
  // nullopt when id low + 1 is not covered. Never a span wider than one that was filled. Never
  // waits (it runs inside the claim's transaction).
  virtual std::optional<CachedSpan> lookup(int64_t low, int64_t high) = 0;
  // A range read of (low, high] that obeyed docs/design.md#sharing-a-range-read (high <= a proven
  // head, read by a later statement than the proof). Never called with anything else.
  virtual void fill(int64_t low, int64_t high, const std::vector<StoredMessage>& messages) = 0;
  // The group's `claimed` cursor as this claim left it (an eviction hint: what it has passed).
  virtual void note_claimed(int64_t claimed) = 0;
  // A lookup's answer no longer matches the log: retention (a partition drop or the sweep, by
  // any host's janitor) removed some of its ids. Retention removes the oldest ids first, so
  // every stored span that starts below `high` is suspect and goes.
  virtual void forget_below(int64_t high) = 0;
};

}  // namespace sqlstreams::store
