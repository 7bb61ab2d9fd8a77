// plugins/http — what an HTTP answer means for the message: the pure decision from a response
// (or a transport failure) to OK, RETRY, DELAY or TERMINAL, and the helpers it uses (status
// classes, Retry-After, a printable body prefix). No I/O and no clock of its own (the caller
// passes "now"); table-tested in tests/plugins/http.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sqlstreams_http {

enum class Verdict { kOk, kRetry, kDelay, kTerminal };

struct Decision {
  Verdict verdict = Verdict::kOk;
  int64_t delay_ms = 0;  // kDelay only
  std::string error;     // kRetry / kTerminal: what the operator reads (`dead show`, the log)
};

// One status class as configured: "NNN" (one status) or "Nxx" (a hundred of them).
struct StatusPattern {
  int first = 0;
  int last = 0;
  bool matches(int status) const { return status >= first && status <= last; }
};
// Parses "404" or "5xx"; throws std::invalid_argument naming the text otherwise.
StatusPattern parse_status_pattern(std::string_view text);

struct AnswerPolicy {
  std::vector<StatusPattern> ok = {{200, 299}};
  std::vector<StatusPattern> retry = {{408, 408}, {425, 425}, {429, 429}, {500, 599}};
  size_t error_body_bytes = 256;         // of the body, in the TERMINAL/RETRY error
  int64_t max_retry_after_ms = 3600000;  // a longer Retry-After is cut to this
};

struct Answer {
  std::string transport_error;  // non-empty: no HTTP answer (connection, TLS, timeout)
  int status = 0;
  std::optional<std::string> retry_after;  // the header's value, as received
  std::string body;                        // a prefix of it is enough
};

// Retry-After as milliseconds from `now_unix_s`: delta-seconds or an HTTP-date (IMF-fixdate);
// nullopt when it is neither. A date in the past is 0.
std::optional<int64_t> parse_retry_after(std::string_view value, int64_t now_unix_s);

// At most `max_bytes` of `body`, cut on a UTF-8 boundary, with control bytes, backslashes and
// invalid UTF-8 escaped (\n, \xNN): safe in a log line and a dead letter's error.
std::string printable_prefix(std::string_view body, size_t max_bytes);

Decision decide(const Answer& answer, const AnswerPolicy& policy, int64_t now_unix_s);

// Batch mode: one decision per message of the request, in `ids` order. The answer's status
// decides for all (all or nothing), but a 2xx answer whose body is a JSON object with a
// "results" array may name an outcome per message:
//   {"results": [{"id": 17, "outcome": "retry", "error": "..."},
//                {"id": 18, "outcome": "delay", "delay_ms": 5000},
//                {"id": 19, "outcome": "terminal", "error": "..."}, {"id": 20, "outcome": "ok"}]}
// A message it does not name is OK; an entry it cannot read makes that message RETRY.
std::vector<Decision> decide_batch(const Answer& answer, const AnswerPolicy& policy,
                                   int64_t now_unix_s, const std::vector<int64_t>& ids);

}  // namespace sqlstreams_http
