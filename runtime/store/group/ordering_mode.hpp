// store/group/ordering_mode — a group's per-key ordering as store/ knows it (config `ordering` /
// `ordering_dead`, kept free of config here): what GroupStore::set_ordering() runs and what
// declare_group() records (groups.ordering, groups.ordering_dead, V009).
// Threading: a value.
#pragma once

#include <string_view>

namespace sqlstreams::store {

// kNone: every statement is exactly the unordered one (lease key_hashes and row lane_key NULL).
// kKeyRelease: a dead row releases its key; kKeyHold: a dead row holds its key until an
// operator retries or discards it. runtime/store/group/README.md "Per-key ordering".
enum class OrderingMode { kNone, kKeyRelease, kKeyHold };

// The groups table's spelling: ordering ('none' | 'key'), ordering_dead ('release' | 'hold').
inline std::string_view ordering_text(OrderingMode m) {
  return m == OrderingMode::kNone ? "none" : "key";
}
inline std::string_view ordering_dead_text(OrderingMode m) {
  return m == OrderingMode::kKeyHold ? "hold" : "release";
}

}  // namespace sqlstreams::store
