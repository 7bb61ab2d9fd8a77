// tests/support/payments — the payments workload that the process-level suites (e2e, service)
// drive through real hosts: producing payment requests on `payments.requested`, and reading the
// record files of the test plugin payments_faults.so (tests/plugins/payments_faults: one line
// "<group> <message id> <attempt> <outcome>" per handler call).
// Threading: test thread only; each call opens its own connection.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace sqlstreams::testing {

inline constexpr const char* kPaymentsStream = "payments.requested";

// Produces payments order-<from> .. order-<from + n - 1> (v1 payloads) with produce_batch, in
// transactions of `batch` messages.
void produce_payments(const std::string& url, int64_t n, int64_t from = 1, int64_t batch = 5000);

// group -> message id -> number of handler calls, from record files (complete lines only: a
// host killed mid-write leaves no half line counted).
using Records = std::map<std::string, std::map<int64_t, int>>;
Records read_records(const std::vector<std::string>& files);
// Ids of `group` with a call at attempt >= 2 in the record files: a message that ran again
// because an attempt failed (a RETRY, a handler timeout, a retry row's lease that expired). The
// record is exact where a host's log is not: repeated handler-timeout warnings are rate-limited
// (ops/log_limiter.hpp), so a burst of timeouts logs only its first ids.
std::set<int64_t> retried_ids(const std::vector<std::string>& files, const std::string& group);

}  // namespace sqlstreams::testing
