// common/host_name — this machine's name, the one way the runtime asks for it: the default of
// `host.name` (config), the host's name in leases and status (service) and the operator's
// audit actor `cli:<user>@<machine>` (cli). gethostname(2); "localhost" when it fails or is
// empty, so a name is never blank.
// Threading: any thread.
#pragma once

#include <string>

namespace sqlstreams {

std::string machine_host_name();

}  // namespace sqlstreams
