// common/chaos_plant — planted defects for the chaos checker's self-test (tests/chaos): each is
// a known bug the checker must report. Compiled only with SQLSTREAMS_CHAOS_PLANTS (the asan test
// preset); a release build has no switch at all. At run time a host plants the one named by
// SQLSTREAMS_CHAOS_PLANT: claim-without-proof, commit-without-token (the range commit applies
// outcomes of a lease it no longer holds, and consume's committer commits a range its renewal
// found lost), advance-without-guard,
// ordering-ignore-lanes (consume: an ordered group dispatched as if unordered),
// ordering-split-gate (GroupStore::gate_keys reads rows and leases in two statements, 200 ms
// apart),
// ordering-retry-any-row (an ordered group's retry claim takes rows without the key predicate),
// ordering-chain-past-failure (consume: a retry chain runs its next row after one that failed).
// idempotency-ignore-live (store::Producer's keyed insert neither finds a key's live row nor
// keeps it: a repeat writes its messages again; in the producing process, tests/chaos sets it),
// child-loads-plugin-file (service: isolated groups' children load the plugin file on disk,
// not the host's sealed image, as they once did: runtime/isolation/README.md#the-supervisor),
// isolated-outputs-repeated (a handler process sends an OK reply's outputs again with its next OK
// reply, as a buffer never cleared would). Each module that holds a plant compiles with
// SQLSTREAMS_CHAOS_PLANTS (its CMakeLists.txt).
// Threading: the environment is read once; thread-safe.
#pragma once

#ifdef SQLSTREAMS_CHAOS_PLANTS
#include <cstdlib>
#include <string>
#endif

namespace sqlstreams {

inline bool chaos_plant(const char* name) {
#ifdef SQLSTREAMS_CHAOS_PLANTS
  static const std::string planted = [] {
    const char* v = std::getenv("SQLSTREAMS_CHAOS_PLANT");
    return std::string(v ? v : "");
  }();
  return planted == name;
#else
  (void)name;
  return false;
#endif
}

}  // namespace sqlstreams
