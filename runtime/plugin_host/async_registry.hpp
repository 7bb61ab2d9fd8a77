// plugin_host/async_registry — the messages that asynchronous handlers (ABI 1.2 handle_async)
// accepted and have not completed yet, by completion token, process-wide. The token handed to a
// plugin is a plain number drawn from one counter (never reused), so a plugin calling the host's
// complete() with a stale, repeated or invented token reaches no freed memory: an unknown token,
// a second completion or one for a message the host gave up on (cancel(), or its instance being
// destroyed) is dropped and counted.
// Owns: one AsyncEntry per accepted message — the sqlstreams_type_message the plugin reads and
// what keeps its bytes alive — until the plugin completes it or its instance is destroyed.
// Threading: every function may be called from any thread. An entry's `done` runs under its
// shard's lock, on the completing thread: cancel() of that token waits for it, so once cancel()
// returns `done` has either run or never will. Lock order: shard lock, then whatever `done`
// takes; never call add/cancel/complete while holding a lock `done` takes.
#pragma once

#include <sqlstreams/plugin.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::plugin_host {

struct AsyncEntry {
  uint64_t owner = 0;                      // the instance's serial number
  sqlstreams_type_message message{};       // what the plugin reads until it completes
  std::shared_ptr<const void> keep_alive;  // owns the bytes `message` points at
  std::function<Outcome(int32_t code, int64_t delay_ms, std::string error)> to_outcome;
  AsyncDone done;                                  // empty once cancelled
  std::shared_ptr<std::atomic<uint64_t>> dropped;  // the instance's dropped-completion count
  bool cancelled = false;
};

class AsyncRegistry {
 public:
  static AsyncRegistry& instance();  // never destroyed (plugin threads may complete at exit)

  // A new token (>= 1, never reused in the process): asynchronous messages and the emit tokens
  // of synchronous calls (emit_registry.hpp) draw from this one counter.
  uint64_t draw_token() { return next_.fetch_add(1); }
  // Registers an entry and returns its token (>= 1). The entry's message stays where it is
  // until the entry is completed or erased.
  uint64_t add(std::unique_ptr<AsyncEntry> entry) { return add(draw_token(), std::move(entry)); }
  // The same under a token drawn beforehand.
  uint64_t add(uint64_t token, std::unique_ptr<AsyncEntry> entry);
  // The plugin's completion: false when dropped (see above).
  bool complete(uint64_t token, int32_t code, int64_t delay_ms, std::string error) noexcept;
  // The host gives up on a message: a later completion is dropped. True when it was pending.
  bool cancel(uint64_t token) noexcept;
  // cancel() for every entry of `owner` (before destroy()); then erase_owner() frees them.
  void cancel_owner(uint64_t owner) noexcept;
  // Returns the tokens it erased.
  std::vector<uint64_t> erase_owner(uint64_t owner) noexcept;

  uint64_t unknown_completions() const { return unknown_.load(); }  // unknown or repeated tokens
  size_t pending() const;                                           // entries held now

  struct Shard;  // async_registry.cpp

 private:
  AsyncRegistry() = default;
  Shard& shard(uint64_t token) const;
  std::atomic<uint64_t> next_{1};
  std::atomic<uint64_t> unknown_{0};
};

// The host's sqlstreams_host_complete_fn (ABI 1.2), handed to every instance.
bool host_complete(uint64_t token, int32_t code, int64_t delay_ms, const char* error,
                   size_t error_len) noexcept;

}  // namespace sqlstreams::plugin_host
