// plugin_host/emit_registry — the outputs of handler calls that may emit (ABI 1.3,
// docs/operating/emits.md), by call token, process-wide. A call of a group with `emits` opens a
// buffer under its token (a synchronous call: a token drawn for it; an asynchronous one: its
// completion token); the plugin's host_api->emit reaches it by that number, so a stale, repeated
// or invented token reaches no freed memory (CLOSED). Each output is checked when it is emitted
// (check_output), so the commit that writes it never meets a row the database refuses: the
// stream is one the group declares, the payload a JSON object that provably fits the stream's
// max_payload_bytes once stored as jsonb, the keys within the store's limits, the call within its
// budget. Closing the buffer (the call returned or completed, or the host gave up on it) hands
// its outputs to the caller and refuses later emits.
// Owns: one EmitBuffer per open call.
// Threading: every function may be called from any thread; emits to one call are serialised by
// its buffer's lock. Lock order: a shard's lock, then a buffer's.
#pragma once

#include <sqlstreams/plugin.h>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::plugin_host {

// The limits the store enforces on what it writes (store/produce/producer.hpp), restated here
// so that plugin_host does not depend on the store: an output is refused when emitted.
inline constexpr size_t kMaxOutputKeyBytes = 1024;
inline constexpr size_t kMaxOutputIdempotencyKeyBytes = 255;
// JSON nesting an emitted payload may have (PostgreSQL parses jsonb recursively).
inline constexpr size_t kMaxOutputDepth = 1000;
// An exponent beyond this in an emitted payload's number is refused (jsonb stores numbers as
// numeric written out in full: 1e300 takes 301 bytes, and numeric stops near 1e131072).
inline constexpr int kMaxOutputExponent = 1000;

// "" when `json` is a JSON object that PostgreSQL stores as jsonb within `max_bytes`
// (octet_length of its jsonb text, as the SQL functions measure it), else why not. The size is
// an upper bound: the input's bytes, plus the space jsonb writes after each ':' and ',', plus
// what each exponent writes out; a payload whose bound passes max_bytes is refused even if its
// stored form would fit.
std::string check_output_payload(std::string_view json, int64_t max_bytes);

// check_output (plugin_host.hpp) is defined in emit_registry.cpp.

class EmitRegistry {
 public:
  static EmitRegistry& instance();  // never destroyed (plugin threads may emit at exit)

  // Opens a call's buffer under `token` (>= 1, from AsyncRegistry::draw_token()).
  void open(uint64_t token, std::shared_ptr<const EmitPolicy> policy);
  // The plugin's emit: SQLSTREAMS_EMIT_* with `reason` set on a refusal.
  int32_t emit(uint64_t token, const sqlstreams_type_output& output, std::string& reason) noexcept;
  // Closes the call's buffer and returns what it kept (empty for an unknown token).
  std::vector<Output> close(uint64_t token) noexcept;
  size_t open_calls() const;

  struct Shard;  // emit_registry.cpp

 private:
  EmitRegistry() = default;
};

// A new call token from the one counter asynchronous completion tokens come from too
// (AsyncRegistry::draw_token): every token a call has been given so far is below it.
uint64_t draw_call_token();

// The host's sqlstreams_host_emit_fn (ABI 1.3), handed to every instance.
int32_t host_emit(uint64_t call_token, const sqlstreams_type_output* output, char* reason,
                  size_t reason_size) noexcept;

}  // namespace sqlstreams::plugin_host
