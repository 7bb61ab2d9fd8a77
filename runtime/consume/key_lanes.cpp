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
  entry.token = token;
  auto it = lanes_.find(key);
  // Closed here: a failed or handed-back head, or a deferred message, whose range's commit the
  // gate may not have seen. An open row below, or another holder's earlier lease: the retry
  // path runs it in order. A lane here with a later message: never queued behind it (a range
  // reclaimed below the ones held here).
  if (markers_.count(key) != 0 || !db_free ||
      (it != lanes_.end() && it->second.back().id >= entry.id)) {
    close(key, token);
    return Admission::kDefer;
  }
  if (it != lanes_.end()) {
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
  close(key, head_token);
  // Each rest entry's range writes its `deferred` row (or its hand-back) only when it commits:
  // until then neither the database nor the head's marker alone keeps the key closed here.
  for (auto& e : lane) {
    close(key, e.token);
    rest->push_back(std::move(e));
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
