// ReadCache: spans of final messages shared by the groups of one stream on this host.
#include "consume/read_cache.hpp"

#include <algorithm>
#include <iterator>
#include <limits>

namespace sqlstreams::consume {
namespace {

using Messages = std::vector<store::StoredMessage>;

// The first message with id > after.
Messages::const_iterator first_after(const Messages& m, int64_t after) {
  return std::partition_point(m.begin(), m.end(),
                              [&](const store::StoredMessage& x) { return x.id <= after; });
}

}  // namespace

ReadCache::Member::Member(std::shared_ptr<ReadCache> cache) : cache_(std::move(cache)) {}

ReadCache::Member::~Member() { cache_->leave(this); }

void ReadCache::Member::await_read(int64_t low) { cache_->await_read(this, low); }

std::optional<store::CachedSpan> ReadCache::Member::lookup(int64_t low, int64_t high) {
  return cache_->lookup(this, low, high);
}

void ReadCache::Member::fill(int64_t low, int64_t high, const Messages& messages) {
  cache_->fill(this, low, high, messages);
}

void ReadCache::Member::note_claimed(int64_t claimed) { cache_->note(this, claimed); }

void ReadCache::Member::forget_below(int64_t high) { cache_->forget_below(high); }

ReadCache::ReadCache(int64_t budget_bytes, std::chrono::milliseconds read_wait)
    : budget_(budget_bytes), read_wait_(read_wait) {}

std::unique_ptr<ReadCache::Member> ReadCache::join() {
  auto member = std::make_unique<Member>(shared_from_this());
  std::lock_guard lock(mu_);
  members_.emplace(member.get(), std::nullopt);
  return member;
}

void ReadCache::leave(const Member* who) {
  std::lock_guard lock(mu_);
  members_.erase(who);
  if (reading_.erase(who)) read_done_.notify_all();
  evict_passed();
}

void ReadCache::note(const Member* who, int64_t claimed) {
  std::lock_guard lock(mu_);
  members_[who] = claimed;
  if (reading_.erase(who)) read_done_.notify_all();
  evict_passed();
}

void ReadCache::forget_below(int64_t high) {
  std::lock_guard lock(mu_);
  while (!spans_.empty() && spans_.begin()->first < high) {
    stats_.bytes -= spans_.begin()->second->bytes;
    spans_.erase(spans_.begin());
    stats_.stale++;
  }
}

int64_t ReadCache::bytes_of(const store::StoredMessage& message) {
  return static_cast<int64_t>(sizeof(store::StoredMessage) + message.payload.size() +
                              (message.key ? message.key->size() : 0));
}

ReadCache::Stats ReadCache::stats() const {
  std::lock_guard lock(mu_);
  Stats s = stats_;
  s.spans = spans_.size();
  s.members = members_.size();
  return s;
}

std::vector<std::pair<int64_t, int64_t>> ReadCache::spans() const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<int64_t, int64_t>> out;
  for (const auto& [low, span] : spans_) out.emplace_back(low, span->high);
  return out;
}

std::vector<std::shared_ptr<const ReadCache::Span>> ReadCache::chain(int64_t low,
                                                                     int64_t high) const {
  // The span holding id low + 1 (spans never overlap: at most one), then the spans that start
  // exactly where the previous one ends.
  std::vector<std::shared_ptr<const Span>> out;
  auto it = spans_.upper_bound(low);
  if (it == spans_.begin() || std::prev(it)->second->high <= low) return out;
  int64_t at = std::prev(it)->second->high;
  out.push_back(std::prev(it)->second);
  for (; at < high && it != spans_.end() && it->first == at; ++it) {
    out.push_back(it->second);
    at = it->second->high;
  }
  return out;
}

bool ReadCache::being_read(const Member* who, int64_t low) const {
  const auto now = std::chrono::steady_clock::now();
  for (const auto& [member, r] : reading_) {
    if (member != who && r.low <= low && low < r.high && now - r.since < read_wait_) return true;
  }
  return false;
}

void ReadCache::await_read(const Member* who, int64_t low) {
  std::unique_lock lock(mu_);
  if (reading_.erase(who)) read_done_.notify_all();  // its earlier read is over
  if (!chain(low, low + 1).empty() || !being_read(who, low)) return;
  // Another group is reading these ids right now: wait for its read, not read them too.
  stats_.waits++;
  stats_.waiting++;
  read_done_.wait_for(lock, read_wait_,
                      [&] { return !chain(low, low + 1).empty() || !being_read(who, low); });
  stats_.waiting--;
}

std::optional<store::CachedSpan> ReadCache::lookup(const Member* who, int64_t low, int64_t high) {
  if (high <= low) return std::nullopt;
  std::vector<std::shared_ptr<const Span>> found;
  {
    std::unique_lock lock(mu_);
    if (reading_.erase(who)) read_done_.notify_all();  // its earlier read is over
    found = chain(low, high);
    if (found.empty()) {
      stats_.misses++;
      reading_[who] = Reading{low, high, std::chrono::steady_clock::now()};
      return std::nullopt;
    }
    stats_.hits++;
  }
  store::CachedSpan out;
  out.high = std::min(high, found.back()->high);
  for (const auto& span : found) {
    auto first = first_after(span->messages, low);
    auto last = first_after(span->messages, out.high);
    out.messages.insert(out.messages.end(), first, last);
  }
  return out;
}

bool ReadCache::others_need(const Member* who, int64_t high) const {
  for (const auto& [member, claimed] : members_) {
    if (member != who && (!claimed || *claimed < high)) return true;
  }
  return false;
}

void ReadCache::fill(const Member* who, int64_t low, int64_t high, const Messages& messages) {
  if (high <= low) return;
  {
    std::lock_guard lock(mu_);
    if (!others_need(who, high)) {
      stats_.skipped++;
      if (reading_.erase(who)) read_done_.notify_all();
      return;
    }
  }
  // Copy outside the lock; only what lies in (low, high] (all of it, from a range read).
  auto whole = std::make_shared<Span>();
  whole->low = low;
  whole->high = high;
  whole->messages.assign(first_after(messages, low), first_after(messages, high));

  std::lock_guard lock(mu_);
  // The parts of (low, high] no stored span covers (another group may have stored some of it
  // meanwhile): spans never overlap.
  std::vector<std::pair<int64_t, int64_t>> gaps;
  int64_t at = low;
  auto it = spans_.upper_bound(low);
  if (it != spans_.begin() && std::prev(it)->second->high > low) {
    at = std::prev(it)->second->high;
  }
  for (; at < high; ++it) {
    const int64_t next = it == spans_.end() ? std::numeric_limits<int64_t>::max() : it->first;
    if (next > at) gaps.emplace_back(at, std::min(next, high));
    if (it == spans_.end()) break;
    at = std::max(at, it->second->high);
  }
  for (const auto& [a, b] : gaps) {
    std::shared_ptr<Span> part;
    if (a == low && b == high) {
      part = whole;
    } else {
      part = std::make_shared<Span>();
      part->low = a;
      part->high = b;
      auto& all = whole->messages;
      const auto first = all.begin() + (first_after(all, a) - all.cbegin());
      const auto last = all.begin() + (first_after(all, b) - all.cbegin());
      part->messages.assign(std::make_move_iterator(first), std::make_move_iterator(last));
    }
    part->bytes = kSpanOverhead;
    for (const auto& m : part->messages) part->bytes += bytes_of(m);
    store_span(std::move(part));
  }
  if (reading_.erase(who)) read_done_.notify_all();
  evict_passed();
}

void ReadCache::store_span(std::shared_ptr<const Span> span) {
  if (span->bytes > budget_) {
    stats_.skipped++;
    return;
  }
  // Then the lowest spans: the ones the members reach first are the ones most likely read
  // already by everyone who is going to.
  while (stats_.bytes + span->bytes > budget_ && !spans_.empty()) {
    stats_.bytes -= spans_.begin()->second->bytes;
    spans_.erase(spans_.begin());
    stats_.evicted++;
  }
  stats_.bytes += span->bytes;
  stats_.stored++;
  spans_.emplace(span->low, std::move(span));
}

void ReadCache::evict_passed() {
  int64_t passed = std::numeric_limits<int64_t>::max();
  for (const auto& [member, claimed] : members_) {
    if (!claimed) return;  // a member that has not claimed yet may need any span
    passed = std::min(passed, *claimed);
  }
  while (!spans_.empty() && spans_.begin()->second->high <= passed) {
    stats_.bytes -= spans_.begin()->second->bytes;
    spans_.erase(spans_.begin());
    stats_.evicted++;
  }
  // Spans are ordered by low and never overlap: the first one not passed ends the walk.
}

std::shared_ptr<ReadCache> ReadCaches::for_stream(int64_t stream_id, int64_t budget_bytes) {
  if (budget_bytes <= 0) return nullptr;
  std::lock_guard lock(mu_);
  std::erase_if(caches_, [](const auto& entry) { return entry.second.expired(); });
  if (auto cache = caches_[stream_id].lock()) return cache;
  auto cache = std::make_shared<ReadCache>(budget_bytes);
  caches_[stream_id] = cache;
  return cache;
}

}  // namespace sqlstreams::consume
