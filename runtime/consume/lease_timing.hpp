// consume/lease_timing — how a group's range and row leases are kept
// (docs/design.md#range-leases-and-token-guarded-transitions): a worker starts a message only while
// its lease has `start_needed` left (a whole handler run plus a margin), and the committer renews
// every `renew_every`. Chosen together so that a lease renewed on time never drops below
// `start_needed` before its next renewal, for every valid config (lease_ttl > handler_timeout): no
// valid config hands work back without a failure. Pure; threading: none.
#pragma once

#include <algorithm>
#include <chrono>

namespace sqlstreams::consume {

struct LeaseTiming {
  std::chrono::milliseconds start_needed;  // lease time a message needs left to start
  std::chrono::milliseconds renew_every;   // committer's renewal period
};

inline LeaseTiming lease_timing(std::chrono::milliseconds lease_ttl,
                                std::chrono::milliseconds handler_timeout) {
  using std::chrono::milliseconds;
  const milliseconds slack = std::max(milliseconds(0), lease_ttl - handler_timeout);
  // Half of the slack is the margin a start keeps for its own commit (at most 1 s) …
  const milliseconds margin = std::min(milliseconds(1000), slack / 2);
  const milliseconds needed = handler_timeout + margin;
  // … the rest is the window a renewal has to land in; renew twice per window (a renewal is a
  // round trip that may be late), and never less often than three times per lease.
  const milliseconds window = lease_ttl - needed;
  const milliseconds renew = std::max(milliseconds(1), std::min(lease_ttl / 3, window / 2));
  return {needed, renew};
}

}  // namespace sqlstreams::consume
