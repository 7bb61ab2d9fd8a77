#include "consume/outcome_policy.hpp"

#include "consume/backoff.hpp"

namespace sqlstreams::consume {

std::optional<store::FailedMessage> decide(const plugin_host::Outcome& outcome,
                                           const AttemptState& before,
                                           const config::RetryPolicy& policy, int64_t message_id,
                                           const std::string& payload, double random01) {
  using plugin_host::OutcomeKind;
  if (outcome.kind == OutcomeKind::kOk) return std::nullopt;
  store::FailedMessage f;
  f.message_id = message_id;
  f.attempts = before.attempts + 1;
  f.delays = before.delays;
  f.error = outcome.error;
  f.run_after = Millis(0);
  switch (outcome.kind) {
    case OutcomeKind::kDelay:
      f.delays += 1;
      f.status = store::ExceptionStatus::kReady;
      f.run_after = outcome.delay;
      if (f.error.empty()) f.error = "delayed by the handler";
      return f;
    case OutcomeKind::kTerminal:
      f.status = store::ExceptionStatus::kDead;
      f.payload = payload;
      return f;
    default: {
      int failures = f.attempts - f.delays;
      if (failures > policy.max_retries) {
        f.status = store::ExceptionStatus::kDead;
        f.payload = payload;
      } else {
        f.status = store::ExceptionStatus::kReady;
        f.run_after = next_backoff(policy, failures, random01);
      }
      return f;
    }
  }
}

std::string audit_outcome(const std::optional<store::FailedMessage>& decision,
                          const plugin_host::Outcome& outcome) {
  if (!decision) return "ok";
  if (decision->status == store::ExceptionStatus::kDead) return "dead";
  return outcome.kind == plugin_host::OutcomeKind::kDelay ? "delay" : "retry";
}

}  // namespace sqlstreams::consume
