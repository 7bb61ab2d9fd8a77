// service/declare — what a host (and `sqlstreams declare`) does to the database before any group
// runs (docs/design.md#the-host): declares the config's streams and groups idempotently
// (declaration never moves a cursor; a group at the head runs the fence, store/schema), and, for
// `run`, migrates first (or refuses under database.migrate = "check") and checks Rule 2 (CACHE 1)
// after. The CLI only parses flags and calls these; errors are ControlPlaneError (exit 4) or
// store::StoreError.
// Threading: the caller's thread, with the caller's Session.
#pragma once

#include "config/config.hpp"
#include "store/connection/session.hpp"
#include "store/group/ordering_mode.hpp"

namespace sqlstreams::service {

// The group's ordering as store/ spells it (declare_group records it; GroupStore::set_ordering
// runs it).
store::OrderingMode ordering_mode(const config::GroupConfig& g);

// Creates every stream and group of the config that does not exist yet; logs what it created.
void declare_all(store::Session& session, const config::Config& config);

// `run`'s start: migrate (database.migrate = "auto") or refuse when migrations are pending
// ("check"), declare_all, then refuse any stream whose id sequence is not CACHE 1.
void prepare_database(store::Session& session, const config::Config& config);

}  // namespace sqlstreams::service
