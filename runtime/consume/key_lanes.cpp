// KeyLanes: per-key lanes of one ordered group on this host (see key_lanes.hpp).
#include "consume/key_lanes.hpp"

#include <algorithm>

namespace sqlstreams::consume {

void KeyLanes::forget_markers(uint64_t gate_epoch) {
  while (!released_.empty() && released_.front().first <= gate_epoch) {
    auto it = markers_.find(released_.front().second);
    // A key closed again since keeps its newer marker.
    if (it != markers_.end() && it->second.released == released_.front().first) markers_.erase(it);
    released_.pop_front();
  }
}

void KeyLanes::close(const std::string& key, const std::string& token) {
  Marker& m = markers_[key];
  m.released = 0;  // (re)opened: a newer release epoch is set when the last one goes
  if (m.pending.insert(token).second) by_token_.emplace(token, key);
}

KeyLanes::Admission KeyLanes::admit(const std::string& key, LaneEntry entry,
                                    const std::string& token, bool db_free, uint64_t gate_epoch) {
  forget_markers(gate_epoch);
  // Closed here: a failed or handed-back head, or a deferred message, whose range's commit the
  // gate may not have seen. An open row below, or another holder's earlier lease: the retry
  // path runs it in order. A lane here with a later message: never queued behind it (a range
  // reclaimed below the ones held here).
  if (!db_free || (!markers_.empty() && markers_.count(key) != 0)) {
    close(key, token);
    return Admission::kDefer;
  }
  // One lookup for the usual case, a key with no lane here yet.
  auto [it, fresh] = lanes_.try_emplace(key);
  Lane& lane = it->second;
  if (fresh) {
    lane.head = std::move(entry);
    ++held_;
    return Admission::kRun;
  }
  if (lane.last_id() >= entry.id) {
    close(key, token);
    return Admission::kDefer;
  }
  ++held_;
  entry.token = token;  // should the lane end, its range keeps the key closed (resolve_head)
  lane.waiting.push_back(std::move(entry));
  return Admission::kQueued;
}

std::optional<LaneEntry> KeyLanes::resolve_head(const std::string& key, int64_t id,
                                                const std::string& head_token, bool lane_goes_on,
                                                std::vector<LaneEntry>* rest) {
  auto it = lanes_.find(key);
  if (it == lanes_.end()) return std::nullopt;
  Lane& lane = it->second;
  if (lane.head.id != id) {
    // Not the head (resolved out of turn, e.g. handed back with its range): just leaves.
    auto first = lane.waiting.begin() + static_cast<std::ptrdiff_t>(lane.next);
    auto e =
        std::find_if(first, lane.waiting.end(), [&](const LaneEntry& x) { return x.id == id; });
    if (e != lane.waiting.end()) {
      lane.waiting.erase(e);
      --held_;
    }
    return std::nullopt;
  }
  --held_;
  if (lane_goes_on) {
    if (lane.queued() == 0) {
      lanes_.erase(it);
      return std::nullopt;
    }
    lane.head = std::move(lane.waiting[lane.next++]);
    if (lane.next == lane.waiting.size()) {
      lane.waiting.clear();
      lane.next = 0;
    } else if (lane.next >= 64 && 2 * lane.next >= lane.waiting.size()) {
      // Drop the consumed prefix now and then: a hot key's long lane stays linear.
      lane.waiting.erase(lane.waiting.begin(),
                         lane.waiting.begin() + static_cast<std::ptrdiff_t>(lane.next));
      lane.next = 0;
    }
    return lane.head;
  }
  held_ -= lane.queued();
  close(key, head_token);
  // Each rest entry's range writes its `deferred` row (or its hand-back) only when it commits:
  // until then neither the database nor the head's marker alone keeps the key closed here.
  for (size_t i = lane.next; i < lane.waiting.size(); ++i) {
    close(key, lane.waiting[i].token);
    rest->push_back(std::move(lane.waiting[i]));
  }
  lanes_.erase(it);
  return std::nullopt;
}

uint64_t KeyLanes::range_released(const std::string& token) {
  ++epoch_;
  auto [first, last] = by_token_.equal_range(token);
  for (auto it = first; it != last; ++it) {
    auto m = markers_.find(it->second);
    if (m == markers_.end() || m->second.pending.erase(token) == 0) continue;
    if (m->second.pending.empty()) {
      m->second.released = epoch_;
      released_.emplace_back(epoch_, it->second);
    }
  }
  by_token_.erase(first, last);
  return epoch_;
}

}  // namespace sqlstreams::consume
