// store/reporting/group_lifecycle — a group's life after declaration
// (docs/operating/service.md#group-lifecycle): pause, resume and drop by an operator, the state a
// running pipeline polls, and the `last_seen_at` that running hosts refresh with their heartbeat
// (store/worker_leases heartbeat_host).
//   pause   groups.paused_at/paused_by set; every running host stops claiming for the group
//           within about a poll interval (consume/ polls read_group_state), finishes and
//           commits its in-flight work and hands the rest back.
//   resume  clears them; claiming restarts.
//   drop    one transaction removes the group's cursor, range leases, exception rows (ready,
//           in-flight and dead letters), its advancer's lease row and the group row itself, so
//           retention no longer waits for it. The audit trail (deliveries_N) stays and ages out
//           with audit_retention. A host still running the group sees it gone and stops that
//           pipeline; declaring the group again (restart, SIGHUP) creates a new one.
// Each action is one call of its SECURITY DEFINER function (V008: pause_group, resume_group,
// drop_group), which changes the group and writes its group_actions row (session role,
// application, client address, the operator's actor text, when, what) in one transaction; the
// operator role has no table rights to do either by hand. The functions find the group by id: a
// group dropped (or dropped and declared again, with a new id) meanwhile is reported as gone,
// never touched.
// Threading: free functions on the caller's Session.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.hpp"
#include "store/connection/session.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::store {

// What a running pipeline needs to know about its group, by id.
struct GroupState {
  enum class Kind { kActive, kPaused, kGone };
  Kind kind = Kind::kActive;
  std::string paused_by;  // kPaused: the actor who paused it
};
GroupState read_group_state(Session& session, int64_t group_id);

struct PauseResult {
  bool changed = false;   // false: it was already paused (pause) / not paused (resume)
  SysTime paused_at{};    // pause: since when (database clock)
  std::string paused_by;  // pause: by whom
};

// Throws StoreError kRejected when the group no longer exists (dropped meanwhile).
PauseResult pause_group(Session& session, const GroupRef& group, const std::string& actor);
PauseResult resume_group(Session& session, const GroupRef& group, const std::string& actor);

// What a drop would remove / removed.
struct GroupFootprint {
  int64_t claimed = 0;
  int64_t committed = 0;
  int64_t leases = 0;
  int64_t ready = 0;  // ready and in-flight exception rows
  int64_t dead = 0;   // dead letters
};
// Read-only: what drop_group() would remove now (for the confirmation prompt).
GroupFootprint group_footprint(Session& session, const GroupRef& group);

struct DropResult {
  GroupFootprint removed;
  int64_t audit_id = 0;                                // the group_actions row
  std::string db_user, application_name, client_addr;  // as the server recorded them
};
// Throws StoreError kRejected when the group no longer exists.
DropResult drop_group(Session& session, const GroupRef& group, const std::string& actor);

}  // namespace sqlstreams::store
