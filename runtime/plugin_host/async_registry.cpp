// AsyncRegistry: 64 shards of token → entry maps, each under its own mutex.
#include "plugin_host/async_registry.hpp"

#include <array>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "common/utf8.hpp"
#include "plugin_host/loaded_plugin.hpp"

namespace sqlstreams::plugin_host {

namespace {
constexpr size_t kShards = 64;
}  // namespace

struct AsyncRegistry::Shard {
  std::mutex mu;
  std::unordered_map<uint64_t, std::unique_ptr<AsyncEntry>> entries;
};

namespace {
std::array<AsyncRegistry::Shard*, kShards>& shards() {
  static auto* all = [] {
    auto* a = new std::array<AsyncRegistry::Shard*, kShards>();
    for (auto& s : *a) s = new AsyncRegistry::Shard();
    return a;
  }();
  return *all;
}
}  // namespace

AsyncRegistry& AsyncRegistry::instance() {
  static auto* registry = new AsyncRegistry();  // never destroyed: see the header
  return *registry;
}

AsyncRegistry::Shard& AsyncRegistry::shard(uint64_t token) const {
  return *shards()[token % kShards];
}

uint64_t AsyncRegistry::add(uint64_t token, std::unique_ptr<AsyncEntry> entry) {
  Shard& s = shard(token);
  std::lock_guard lock(s.mu);
  s.entries.emplace(token, std::move(entry));
  return token;
}

bool AsyncRegistry::complete(uint64_t token, int32_t code, int64_t delay_ms,
                             std::string error) noexcept {
  try {
    Shard& s = shard(token);
    std::lock_guard lock(s.mu);
    auto it = s.entries.find(token);
    if (it == s.entries.end()) {
      unknown_.fetch_add(1);
      return false;
    }
    std::unique_ptr<AsyncEntry> entry = std::move(it->second);
    s.entries.erase(it);
    if (entry->cancelled) {
      entry->dropped->fetch_add(1);
      return false;
    }
    const Outcome outcome = entry->to_outcome(code, delay_ms, std::move(error));
    entry->done(outcome);  // under the shard lock: cancel() waits for it
    return true;
  } catch (...) {  // allocation failure: the message times out instead
    return false;
  }
}

bool AsyncRegistry::cancel(uint64_t token) noexcept {
  Shard& s = shard(token);
  std::lock_guard lock(s.mu);
  auto it = s.entries.find(token);
  if (it == s.entries.end() || it->second->cancelled) return false;
  it->second->cancelled = true;
  it->second->done = nullptr;  // releases what the host captured (the bytes stay: keep_alive)
  return true;
}

void AsyncRegistry::cancel_owner(uint64_t owner) noexcept {
  for (Shard* s : shards()) {
    std::lock_guard lock(s->mu);
    for (auto& [token, e] : s->entries) {
      if (e->owner == owner && !e->cancelled) {
        e->cancelled = true;
        e->done = nullptr;
      }
    }
  }
}

std::vector<uint64_t> AsyncRegistry::erase_owner(uint64_t owner) noexcept {
  std::vector<uint64_t> erased;
  for (Shard* s : shards()) {
    std::lock_guard lock(s->mu);
    std::erase_if(s->entries, [&](const auto& kv) {
      if (kv.second->owner != owner) return false;
      try {
        erased.push_back(kv.first);
      } catch (...) {  // out of memory: that call's emit buffer stays until the process ends
      }
      return true;
    });
  }
  return erased;
}

size_t AsyncRegistry::pending() const {
  size_t n = 0;
  for (Shard* s : shards()) {
    std::lock_guard lock(s->mu);
    n += s->entries.size();
  }
  return n;
}

bool host_complete(uint64_t token, int32_t code, int64_t delay_ms, const char* error,
                   size_t error_len) noexcept {
  try {
    std::string text;
    if (error != nullptr) {
      const size_t len = error_len <= kMaxErrorBytes ? error_len : strnlen(error, kMaxErrorBytes);
      text = sanitize_utf8(std::string_view(error, len), kMaxErrorBytes);
    }
    return AsyncRegistry::instance().complete(token, code, delay_ms, std::move(text));
  } catch (...) {
    return false;
  }
}

uint64_t async_unknown_completions() { return AsyncRegistry::instance().unknown_completions(); }
size_t async_pending_messages() { return AsyncRegistry::instance().pending(); }

bool complete_async(uint64_t token, OutcomeKind kind, std::chrono::milliseconds delay,
                    const std::string& error) {
  static constexpr int32_t kCodes[] = {SQLSTREAMS_OUTCOME_OK, SQLSTREAMS_OUTCOME_RETRY,
                                       SQLSTREAMS_OUTCOME_DELAY, SQLSTREAMS_OUTCOME_TERMINAL};
  return host_complete(token, kCodes[static_cast<int>(kind)], delay.count(), error.data(),
                       error.size());
}

}  // namespace sqlstreams::plugin_host
