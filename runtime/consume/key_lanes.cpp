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

KeyLanes::Admission KeyLanes::admit(const std::string& key, LaneEntry entry, bool db_free,
                                    uint64_t gate_epoch) {
  forget_markers(gate_epoch);
  // Closed here: a failed or handed-back head whose range's commit the gate may not have seen.
  if (markers_.count(key) != 0) return Admission::kDefer;
  // An open row below, or another holder's earlier lease: the retry path runs it in order.
  if (!db_free) return Admission::kDefer;
  auto it = lanes_.find(key);
  if (it != lanes_.end()) {
    // Never behind a later message (a range reclaimed below the ones held here).
    if (it->second.back().id >= entry.id) return Admission::kDefer;
    it->second.push_back(std::move(entry));
    ++held_;
    return Admission::kQueued;
  }
  lanes_[key].push_back(std::move(entry));
  ++held_;
  return Admission::kRun;
}

std::optional<LaneEntry> KeyLanes::resolve_head(const std::string& key, int64_t id,
                                                const std::string& head_token, bool lane_goes_on,
                                                std::vector<LaneEntry>* rest) {
  auto it = lanes_.find(key);
  if (it == lanes_.end()) return std::nullopt;
  auto& lane = it->second;
  if (lane.front().id != id) {
    // Not the head (resolved out of turn, e.g. handed back with its range): just leaves.
    auto e = std::find_if(lane.begin(), lane.end(), [&](const LaneEntry& x) { return x.id == id; });
    if (e != lane.end()) {
      lane.erase(e);
      --held_;
    }
    return std::nullopt;
  }
  lane.pop_front();
  --held_;
  if (lane_goes_on) {
    if (lane.empty()) {
      lanes_.erase(it);
      return std::nullopt;
    }
    return lane.front();
  }
  held_ -= lane.size();
  for (auto& e : lane) rest->push_back(std::move(e));
  lanes_.erase(it);
  markers_[key] = Marker{head_token, 0};
  by_token_.emplace(head_token, key);
  return std::nullopt;
}

uint64_t KeyLanes::range_released(const std::string& token) {
  ++epoch_;
  auto [first, last] = by_token_.equal_range(token);
  for (auto it = first; it != last; ++it) {
    auto m = markers_.find(it->second);
    if (m != markers_.end() && m->second.token == token && m->second.released == 0) {
      m->second.released = epoch_;
      released_.emplace_back(epoch_, it->second);
    }
  }
  by_token_.erase(first, last);
  return epoch_;
}

}  // namespace sqlstreams::consume
