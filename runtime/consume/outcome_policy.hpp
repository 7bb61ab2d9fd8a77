// consume/outcome_policy — what the runtime records for a handler outcome
// (docs/design.md#retries-exception-rows-and-dead-letters). The plugin only classifies (OK / RETRY
// / DELAY / TERMINAL); this decides: nothing for OK, a `ready` exception with backoff for RETRY, a
// `ready` exception that does not spend the budget for DELAY, `dead` for TERMINAL or a spent budget
// (attempts - delays > max_retries).
// Threading: pure.
#pragma once

#include <optional>
#include <string>

#include "common/clock.hpp"
#include "config/config.hpp"
#include "plugin_host/plugin_host.hpp"
#include "store/group/group_store.hpp"

namespace sqlstreams::consume {

struct AttemptState {
  int32_t attempts = 0;  // attempts before this one
  int32_t delays = 0;    // delays before this one
};

// The exception row to write after this attempt, or nullopt for success. Its due time is a
// delay (backoff, or the handler's DELAY) that the store adds to the database's clock when the
// row is written.
std::optional<store::FailedMessage> decide(const plugin_host::Outcome& outcome,
                                           const AttemptState& before,
                                           const config::RetryPolicy& policy, int64_t message_id,
                                           const std::string& payload, double random01);

// "ok" | "retry" | "delay" | "dead" for the audit trail.
std::string audit_outcome(const std::optional<store::FailedMessage>& decision,
                          const plugin_host::Outcome& outcome);

}  // namespace sqlstreams::consume
