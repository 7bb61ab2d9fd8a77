#include "ops/status_history.hpp"

#include <algorithm>
#include <cmath>
#include <optional>

namespace sqlstreams::ops {
namespace {

int64_t ms_of(SysTime t) { return t.time_since_epoch().count(); }

uint64_t counter_of(const HistoryPoint& p, HistoryCounter c) {
  switch (c) {
    case HistoryCounter::kSucceeded:
      return p.succeeded;
    case HistoryCounter::kRetried:
      return p.retried;
    case HistoryCounter::kDead:
      return p.dead;
  }
  return 0;
}

// A ring's map node and keys, beside its points.
constexpr size_t kRingOverhead = 96;

}  // namespace

std::vector<HistoryInput> history_inputs(const store::FleetStatus* fleet, bool fleet_current,
                                         const std::vector<GroupSample>& local) {
  std::vector<HistoryInput> out;
  std::map<std::pair<std::string, std::string>, size_t> index;
  if (fleet != nullptr) {
    for (const auto& s : fleet->streams) {
      for (const auto& g : s.groups) {
        index[std::make_pair(s.name, g.name)] = out.size();
        HistoryInput in{s.name, g.name, {}};
        if (fleet_current) in.point.lag = static_cast<double>(g.lag);
        out.push_back(std::move(in));
      }
    }
  }
  for (const auto& g : local) {
    auto [it, added] = index.try_emplace(std::make_pair(g.stream, g.group), out.size());
    if (added) out.push_back(HistoryInput{g.stream, g.group, {}});
    HistoryPoint& p = out[it->second].point;
    p.local = true;
    p.succeeded = g[GroupCounter::kSucceeded];
    p.retried = g[GroupCounter::kRetried];
    p.dead = g[GroupCounter::kDead];
  }
  return out;
}

void StatusHistory::Ring::push(const HistoryPoint& p, size_t capacity) {
  if (size == capacity) {  // full: the oldest goes
    buf[head] = p;
    head = (head + 1) % buf.size();
    return;
  }
  if (size == buf.size()) {  // grow (never past capacity)
    std::rotate(buf.begin(), buf.begin() + static_cast<std::ptrdiff_t>(head), buf.end());
    head = 0;
    if (buf.size() == buf.capacity())
      buf.reserve(std::min(capacity, std::max<size_t>(16, 2 * buf.size())));
    buf.push_back(p);
  } else {
    buf[(head + size) % buf.size()] = p;
  }
  ++size;
}

void StatusHistory::Ring::pop_front() {
  head = (head + 1) % buf.size();
  --size;
}

StatusHistory::StatusHistory(HistoryLimits limits) : limits_(limits) {
  limits_.max_points = std::max<size_t>(limits_.max_points, 2);
  if (limits_.window <= Millis(0)) limits_.window = Millis(1);
}

size_t StatusHistory::ring_bytes(const std::string& stream, const std::string& group) const {
  return limits_.max_points * sizeof(HistoryPoint) + sizeof(Ring) + kRingOverhead + stream.size() +
         group.size();
}

void StatusHistory::prune(SysTime at) {
  const SysTime oldest = at - limits_.window;
  for (auto it = rings_.begin(); it != rings_.end();) {
    Ring& r = it->second;
    while (r.size > 0 && r.at(0).at < oldest) r.pop_front();
    if (r.size == 0) {
      bytes_ -= r.budget;
      it = rings_.erase(it);
    } else {
      ++it;
    }
  }
}

void StatusHistory::append(Ring& r, const HistoryPoint& point, SysTime at) {
  const Millis spacing =
      std::max(Millis(1), limits_.window / static_cast<int64_t>(limits_.max_points));
  HistoryPoint p = point;
  p.at = at;
  // The newest point stays the latest sample until it is `spacing` past the one before it.
  if (r.size >= 1 && r.at(r.size - 1).at == at) {
    r.at(r.size - 1) = p;
  } else if (r.size >= 2 && r.at(r.size - 1).at - r.at(r.size - 2).at < spacing) {
    r.at(r.size - 1) = p;
  } else {
    r.push(p, limits_.max_points);
  }
}

void StatusHistory::record(SysTime at, const std::vector<HistoryInput>& groups) {
  if (at < last_at_) {  // the wall clock stepped back: the times no longer line up
    rings_.clear();
    bytes_ = 0;
  }
  last_at_ = at;
  prune(at);
  refused_ = 0;
  // The groups that have a ring first: after them, a ring whose newest point is older than `at`
  // belongs to a group absent from this sample.
  std::vector<const HistoryInput*> added;
  for (const auto& in : groups) {
    auto it = rings_.find({in.stream, in.group});
    if (it == rings_.end()) {
      added.push_back(&in);
    } else {
      append(it->second, in.point, at);
    }
  }
  // Absent rings, the longest unseen last: evicted from the back when a new group does not fit
  // (listed once, when first needed).
  std::optional<std::vector<std::pair<SysTime, Key>>> evictable;
  for (const HistoryInput* in : added) {
    const size_t need = ring_bytes(in->stream, in->group);
    if (bytes_ + need > limits_.max_bytes && !evictable) {
      evictable.emplace();
      for (const auto& [key, ring] : rings_) {
        const SysTime newest = ring.at(ring.size - 1).at;
        if (newest < at) evictable->emplace_back(newest, key);
      }
      std::sort(evictable->begin(), evictable->end(),
                [](const auto& a, const auto& b) { return a.first > b.first; });
    }
    while (bytes_ + need > limits_.max_bytes && evictable && !evictable->empty()) {
      auto gone = rings_.find(evictable->back().second);
      bytes_ -= gone->second.budget;
      rings_.erase(gone);
      evictable->pop_back();
    }
    if (bytes_ + need > limits_.max_bytes) {
      ++refused_;
      continue;
    }
    auto it = rings_.emplace(Key{in->stream, in->group}, Ring{}).first;
    it->second.budget = need;
    bytes_ += need;
    append(it->second, in->point, at);
  }
}

std::vector<HistoryPoint> StatusHistory::points(const std::string& stream,
                                                const std::string& group) const {
  std::vector<HistoryPoint> out;
  auto it = rings_.find({stream, group});
  if (it == rings_.end()) return out;
  out.reserve(it->second.size);
  for (size_t i = 0; i < it->second.size; ++i) out.push_back(it->second.at(i));
  return out;
}

GroupHistories StatusHistory::all(size_t max_points) const {
  GroupHistories out;
  max_points = std::max<size_t>(max_points, 2);
  for (const auto& [key, ring] : rings_) {
    std::vector<HistoryPoint>& points = out[key];
    const size_t n = ring.size;
    const size_t keep = std::min(n, max_points);
    points.reserve(keep);
    for (size_t j = 0; j < keep; ++j) {
      points.push_back(ring.at(keep == n ? j : (j * (n - 1) + (keep - 1) / 2) / (keep - 1)));
    }
  }
  return out;
}

std::vector<ChartPoint> lag_series(const std::vector<HistoryPoint>& points) {
  std::vector<ChartPoint> out;
  out.reserve(points.size());
  for (const auto& p : points) out.push_back({ms_of(p.at), p.lag});
  return out;
}

std::vector<ChartPoint> rate_series(const std::vector<HistoryPoint>& points, HistoryCounter c) {
  std::vector<ChartPoint> out;
  if (points.size() < 2) return out;
  out.reserve(points.size() - 1);
  for (size_t i = 1; i < points.size(); ++i) {
    const HistoryPoint& a = points[i - 1];
    const HistoryPoint& b = points[i];
    const double seconds = static_cast<double>(ms_of(b.at) - ms_of(a.at)) / 1000.0;
    double rate = std::nan("");
    if (a.local && b.local && seconds > 0) {
      const uint64_t x = counter_of(a, c), y = counter_of(b, c);
      rate = static_cast<double>(y >= x ? y - x : y) / seconds;
    }
    out.push_back({ms_of(b.at), rate});
  }
  return out;
}

}  // namespace sqlstreams::ops
