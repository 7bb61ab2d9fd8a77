// service/run_host — the control loop of `sqlstreams run`
// (docs/design.md#signals-reload-and-a-lost-database): starts the Host, tells systemd READY=1, then
// waits for signals while pinging the systemd watchdog:
//   SIGHUP           RELOADING=1, Host::reload(), READY=1 (also when the reload was rejected:
//                    the old config keeps running)
//   SIGTERM/SIGINT   STOPPING=1, drain within host.shutdown_timeout, exit 0; a second signal
//                    during the drain exits at once (1)
// Returns the process exit code. Call ops::block_signals() before any thread starts.
// Threading: the calling (main) thread is the control thread.
#pragma once

#include "service/host.hpp"

namespace sqlstreams::service {

int run_host(Host& host);

}  // namespace sqlstreams::service
