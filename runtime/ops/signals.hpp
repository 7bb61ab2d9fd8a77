// ops/signals — signal handling for the host (docs/design.md#signals-reload-and-a-lost-database).
// SIGTERM/SIGINT/SIGHUP are blocked in every thread (call block_signals() before starting any) and
// received synchronously by the control thread with wait_for_signal().
// Threading: block_signals() once in main before threads exist; wait_for_signal() from main.
#pragma once

#include <chrono>
#include <optional>

namespace sqlstreams::ops {

void block_signals();
// Returns the signal number, or nullopt after `timeout`.
std::optional<int> wait_for_signal(std::chrono::milliseconds timeout);

}  // namespace sqlstreams::ops
