// plugin_host/in_flight — what the calling thread is running inside a plugin right now, kept in
// plain thread-local memory that a signal handler on that thread can read (the crash handler in
// ops/crash_handler names the group, handler and message of a fault from it).
// Owns: one InFlightCall per thread (constinit, no constructor, no allocation).
// Threading: each thread writes only its own record (set before a plugin call, cleared after);
// only that thread — or a signal handler interrupting it — reads it. `label` points into the
// HandlerInstance, which outlives every call on it (a written-off thread keeps its instance).
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>

namespace sqlstreams::plugin_host {

struct InFlightCall {
  const char* label = nullptr;  // "group S/G handler H (plugin P, file F)"; null when idle
  int64_t message_id = 0;
  int32_t attempt = 0;
};

// The calling thread's record. Async-signal-safe to read from a handler on the same thread.
InFlightCall& this_thread_in_flight() noexcept;

inline void clear_this_thread_in_flight() noexcept { this_thread_in_flight() = InFlightCall{}; }

// Sets the record for the duration of one plugin call (restores the previous one after).
class InFlightScope {
 public:
  InFlightScope(const char* label, int64_t message_id, int32_t attempt) noexcept
      : record_(this_thread_in_flight()), saved_(record_) {
    record_.message_id = message_id;
    record_.attempt = attempt;
    record_.label = label;
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  // An exception leaving the plugin call keeps the record: it is on its way to std::terminate
  // (the handler's noexcept boundary), whose SIGABRT must still name the call. A caller that
  // catches it after all clears the record itself (clear_this_thread_in_flight).
  ~InFlightScope() {
    if (std::uncaught_exceptions() > uncaught_) return;
    std::atomic_signal_fence(std::memory_order_seq_cst);
    record_ = saved_;
  }
  InFlightScope(const InFlightScope&) = delete;
  InFlightScope& operator=(const InFlightScope&) = delete;

 private:
  InFlightCall& record_;
  InFlightCall saved_;
  int uncaught_ = std::uncaught_exceptions();
};

}  // namespace sqlstreams::plugin_host
