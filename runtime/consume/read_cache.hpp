// consume/read_cache — the fan-out read cache (docs/design.md#sharing-a-range-read): per stream and
// per host, the range reads of its groups' claims, kept so that the other groups of the stream on
// this host claim the same spans without reading (and decoding) them again.
// Owns: spans (low, high] of final ids with their messages (immutable once stored, shared by
// the lookups that copy out of them, never overlapping), a byte budget, and the last `claimed`
// position of each group that shares it (one Member per claiming GroupStore).
// Stores only what store::GroupStore::claim() fills: reads of (low, high] with high <= a proven
// head by a statement no older than the proof. A read nobody else on the host still needs (every
// other member is past it) is not stored.
// Serves: lookup(low, high) returns the stored spans that chain without a gap from `low`, cut at
// `high` — never a span wider than one that was filled, nothing when id low + 1 is not stored.
// One read per span: a lookup that finds nothing marks (low, high] as being read by its member
// (until that member's next fill, lookup or claim, or kReadWait). Another member's await_read
// (before its claim transaction, holding no lock or xid) that finds id low + 1 being read and
// not stored waits for that read (at most kReadWait), so that its lookup then finds it instead
// of reading it too — groups that claim at the same moment share the first one's read. A
// lookup itself never waits.
// Evicts: at once every span all members have passed (claimed >= its high; a member that has not
// claimed yet holds everything); then, when a new span would exceed the budget, the lowest spans.
// A span larger than the whole budget is not stored. Forgets (forget_below) every span that
// starts below a lookup's end when the claim found that retention removed ids of it: the
// store checks each answer against the log before using it (store/group/range_cache.hpp). Bytes are
// counted per message: payload + key + sizeof(StoredMessage), plus kSpanOverhead per span. Not
// shared across processes: every host has its own caches. A group's rewind or a reclaim may find an
// old span gone: it then reads, as without a cache. Threading: every method is thread-safe (one
// mutex; messages are copied outside it). A Member is used by one claimer thread; it keeps its
// cache alive.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <utility>
#include <vector>

#include "store/group/group_store.hpp"
#include "store/group/range_cache.hpp"

namespace sqlstreams::consume {

class ReadCache : public std::enable_shared_from_this<ReadCache> {
 public:
  static constexpr int64_t kSpanOverhead = 128;
  // The longest a lookup waits for another member's read of the same ids.
  static constexpr std::chrono::milliseconds kReadWait{100};

  struct Stats {
    uint64_t hits = 0;     // lookups answered (a prefix or all of what was asked)
    uint64_t misses = 0;   // lookups that found id low + 1 not stored
    uint64_t stored = 0;   // spans stored by fills
    uint64_t skipped = 0;  // fills not stored: nobody else needs them, or over the budget
    uint64_t evicted = 0;  // spans evicted (passed by every member, or for the budget)
    uint64_t stale = 0;    // spans forgotten: retention removed ids a lookup returned
    int64_t bytes = 0;     // what the stored spans count now
    size_t spans = 0;      // stored spans now
    size_t members = 0;    // groups claiming through it now
    uint64_t waits = 0;    // await_reads that waited for another member's read
    size_t waiting = 0;    // await_reads waiting now
  };

  // One group's claims through the cache (store::RangeCache for its GroupStore).
  class Member final : public store::RangeCache {
   public:
    explicit Member(std::shared_ptr<ReadCache> cache);
    ~Member() override;
    Member(const Member&) = delete;
    Member& operator=(const Member&) = delete;

    void await_read(int64_t low) override;
    std::optional<store::CachedSpan> lookup(int64_t low, int64_t high) override;
    void fill(int64_t low, int64_t high,
              const std::vector<store::StoredMessage>& messages) override;
    void note_claimed(int64_t claimed) override;
    void forget_below(int64_t high) override;

   private:
    std::shared_ptr<ReadCache> cache_;
  };

  // budget_bytes > 0.
  // `read_wait`: how long a claim waits for another member's read (kReadWait; tests widen it).
  explicit ReadCache(int64_t budget_bytes, std::chrono::milliseconds read_wait = kReadWait);
  ReadCache(const ReadCache&) = delete;
  ReadCache& operator=(const ReadCache&) = delete;

  std::unique_ptr<Member> join();

  int64_t budget() const { return budget_; }
  Stats stats() const;
  // The stored spans (low, high], ascending.
  std::vector<std::pair<int64_t, int64_t>> spans() const;
  static int64_t bytes_of(const store::StoredMessage& message);

 private:
  struct Span {
    int64_t low = 0;
    int64_t high = 0;
    std::vector<store::StoredMessage> messages;  // ascending ids, all in (low, high]
    int64_t bytes = 0;
  };

  void await_read(const Member* who, int64_t low);
  std::optional<store::CachedSpan> lookup(const Member* who, int64_t low, int64_t high);
  // The stored spans that chain from `low` up to `high` (empty: id low + 1 is not stored).
  std::vector<std::shared_ptr<const Span>> chain(int64_t low, int64_t high) const;  // mu_
  bool being_read(const Member* who, int64_t low) const;                            // mu_
  void fill(const Member* who, int64_t low, int64_t high,
            const std::vector<store::StoredMessage>& messages);
  void note(const Member* who, int64_t claimed);
  void forget_below(int64_t high);
  void leave(const Member* who);
  bool others_need(const Member* who, int64_t high) const;  // requires mu_
  void store_span(std::shared_ptr<const Span> span);        // requires mu_
  void evict_passed();                                      // requires mu_

  const int64_t budget_;
  const std::chrono::milliseconds read_wait_;
  mutable std::mutex mu_;
  std::map<int64_t, std::shared_ptr<const Span>> spans_;  // by low; never overlapping (mu_)
  std::condition_variable read_done_;                     // a marked read was filled or dropped
  // Each member's last claimed position; nullopt until its first claim (mu_).
  std::map<const Member*, std::optional<int64_t>> members_;
  // The span each member is reading now (marked by its missed lookup) and since when (mu_).
  struct Reading {
    int64_t low = 0;
    int64_t high = 0;
    std::chrono::steady_clock::time_point since;
  };
  std::map<const Member*, Reading> reading_;
  Stats stats_;  // mu_
};

// A host's caches, one per stream id, created on first use and gone with their last member.
// Threading: thread-safe.
class ReadCaches {
 public:
  // The stream's cache; nullptr when budget_bytes <= 0 (the cache is off). A cache that exists
  // keeps the budget it was created with.
  std::shared_ptr<ReadCache> for_stream(int64_t stream_id, int64_t budget_bytes);

 private:
  std::mutex mu_;
  std::map<int64_t, std::weak_ptr<ReadCache>> caches_;
};

}  // namespace sqlstreams::consume
