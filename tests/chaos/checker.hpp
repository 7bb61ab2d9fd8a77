// tests/chaos — the history checker: reads the database (messages, cursors, leases,
// exceptions, the audit trail), the chaos plugin's record files and the workload's History,
// and states every violated invariant with counts and example ids:
//   lost            a committed message gone without allow_drop_past_committed, or never seen
//   skipped         a group's cursor passed a committed message that it neither handled nor
//   dead-lettered stuck           unresolved at the end: behind the cursor, a lease or
//   ready/inflight row left wrong-attempts  a dead letter whose attempts do not match the policy,
//   or a resolution the
//                   message's behaviour cannot produce
//   double-commits  one (group, message, attempt) committed twice in the audit trail
//   phantoms        a rolled-back message delivered or stored
//   backward / passed-lease   what the cursor monitor saw during the run
//   idempotency     an idempotency key stored twice (the idem producers retry failed batches
//                   with the same keys; the key is the tag), or a batch sent twice at once
//                   answered with different ids
//   host-exit       a host that exited by itself (found gone at the end; faults restart what
//                   they stop)
//   child-start     an attempt charged because an isolated group's handler process could not
//                   start (a plugin file replaced in place must not matter: children map the
//                   host's sealed image)
// and, per key, for the ordered groups (CheckInput::ordered; see README.md for the exact rules):
//   order           the first successful completions of a key's messages out of id order
//   overlap         two runs of one key overlapping in time, not attributable to a timed-out
//                   attempt or a SIGSTOPped/SIGKILLed host
//   early           a run of a message started while an earlier message of its key was
//                   unresolved (under "hold": a dead one not yet retried to success or discarded)
//   log-order       the log itself: a key's payload seq not increasing with the id (a producer
//                   or store fault, not the dispatcher's)
// Informational: duplicates (handler calls repeated after a crash, pause or rewind), dropped
// (lost by retention under allow_drop_past_committed), fault-dead (a success-behaviour message
// whose budget faults spent).
// Threading: check() from one thread after the workload ended.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "history.hpp"

namespace sqlstreams::chaos {

struct Verdict {
  std::map<std::string, int64_t> violations;  // invariant -> count (every key always present)
  std::map<std::string, int64_t> info;        // duplicates, dropped, fault-dead, committed, …
  std::map<std::string, std::vector<std::string>> examples;  // invariant -> up to 8 examples

  bool ok() const;
  int64_t count(const std::string& invariant) const;
  void violation(const std::string& invariant, const std::string& example);  // keeps 8 examples
  void add_info(const std::string& what, int64_t n = 1) { info[what] += n; }
  // "lost=0 skipped=0 stuck=0 wrong-attempts=0 double-commits=0 phantoms=0 backward=0
  //  passed-lease=0 duplicates=N"
  std::string line() const;
  std::string report() const;  // line() + info + the examples of every violation
};

struct CheckInput {
  std::string url;
  uint64_t seed = 0;
  int max_retries = 3;
  bool quiescent = true;
  std::vector<std::string> record_files;
  // The ordered groups: "stream/group" -> their ordering_dead, "release" or "hold".
  std::map<std::string, std::string> ordered;
  // A SIGSTOPped host may run on for this long after its SIGCONT before it learns that its
  // leases are gone: its runs in that window are attributable, as during the stop.
  int64_t stop_grace_ns = 3'000'000'000;
};

Verdict check(const CheckInput& in, History& history);

}  // namespace sqlstreams::chaos
