// group_schema_versions: a group's payload versions against what its handler declares
// (docs/design.md#payload-schema-versions): defaulted to every version the handler declares,
// refused at load when the group asks for one it does not declare.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::plugin_host {

std::vector<int32_t> group_schema_versions(PluginRegistry& registry, const std::string& file,
                                           const std::string& handler, const std::string& group,
                                           const std::optional<std::vector<int32_t>>& requested) {
  const PluginInfo& info = registry.load(file);
  auto it = std::find_if(info.handler_infos.begin(), info.handler_infos.end(),
                         [&](const HandlerInfo& h) { return h.name == handler; });
  if (it == info.handler_infos.end()) {
    throw PluginLoadError(info.path, "handler '" + handler + "'",
                          fmt::format("a handler named '{}' in plugin '{}'", handler, info.name),
                          fmt::format("only: {}", fmt::join(info.handlers, ", ")),
                          "set the group's `handler` to one of those names");
  }
  const std::vector<int32_t>& declared = it->schema_versions;
  if (declared.size() == 1 && declared[0] < 1) {  // a 1.0 descriptor (a 1.1 list is checked)
    throw PluginLoadError(
        info.path, "handler '" + handler + "' schema_version",
        fmt::format("a payload schema version >= 1 for group '{}'", group),
        fmt::format("{}", declared[0]),
        "declare the version the handler understands (kSchemaVersion in the C++ SDK, "
        "schema_version in the C descriptor) and rebuild the plugin");
  }
  if (!requested) return declared;
  std::vector<int32_t> undeclared;
  for (int32_t v : *requested) {
    if (std::find(declared.begin(), declared.end(), v) == declared.end()) undeclared.push_back(v);
  }
  if (!undeclared.empty()) {
    throw PluginLoadError(
        info.path, "handler '" + handler + "' schema_version",
        fmt::format("group '{}' to ask only for versions handler '{}' declares ({})", group,
                    handler, fmt::join(declared, ", ")),
        fmt::format("schema_versions = [{}] (version(s) {} not declared)",
                    fmt::join(*requested, ", "), fmt::join(undeclared, ", ")),
        fmt::format("set the group's schema_versions to [{}] (or omit it), or run a handler "
                    "built for version(s) {} in a second group",
                    fmt::join(declared, ", "), fmt::join(undeclared, ", ")));
  }
  return *requested;
}

}  // namespace sqlstreams::plugin_host
