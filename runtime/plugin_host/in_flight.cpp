// The per-thread record of the plugin call in flight (see in_flight.hpp).
#include "plugin_host/in_flight.hpp"

namespace sqlstreams::plugin_host {
namespace {
constinit thread_local InFlightCall t_in_flight{};
}  // namespace

InFlightCall& this_thread_in_flight() noexcept { return t_in_flight; }

}  // namespace sqlstreams::plugin_host
