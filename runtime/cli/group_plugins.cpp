// check_group_plugins: load → validate → schema versions for each group, collecting every
// problem with its location (docs/design.md#configuration: all at once, file:line:col).
#include "cli/group_plugins.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "service/host.hpp"

namespace sqlstreams::cli {
namespace {

std::string at(const config::SourcePosition& pos) {
  return fmt::format("{}:{}:{}", pos.file, pos.line, pos.column);
}

// "groups[2].config.limits.mode" / "groups[2].config" / "groups[2].config[1]".
std::string config_key_path(size_t index, const std::string& key) {
  std::string path = fmt::format("groups[{}].config", index);
  if (!key.empty()) path += (key.front() == '[' ? "" : ".") + key;
  return path;
}

}  // namespace

GroupProblems::GroupProblems(ExitCode code, std::vector<std::string> lines,
                             std::vector<std::string> hints)
    : std::runtime_error(fmt::format("{} problem(s) with the groups' plugins", lines.size())),
      code_(code),
      lines_(std::move(lines)),
      hints_(std::move(hints)) {}

void check_group_plugins(plugin_host::PluginRegistry& registry, config::Config& config) {
  std::vector<std::string> lines, hints;
  bool plugin_problem = false;
  auto hint = [&](const std::string& h) {
    if (!h.empty() && std::find(hints.begin(), hints.end(), h) == hints.end()) hints.push_back(h);
  };
  for (size_t i = 0; i < config.groups.size(); ++i) {
    config::GroupConfig& g = config.groups[i];
    try {
      registry.validate(g.plugin, g.handler, g.plugin_config_json);  // loads it first
      service::resolve_schema_versions(registry, g);
    } catch (const plugin_host::HandlerConfigError& e) {
      // The key's own position, else its nearest written parent's, else the group's.
      const config::SourcePosition pos = g.config_keys.locate(e.key_path()).value_or(g.pos);
      lines.push_back(fmt::format("{}: {} (group '{}'): handler '{}' of plugin '{}' rejects it: {}",
                                  at(pos), config_key_path(i, e.key_path()), g.name, g.handler,
                                  e.path(), e.found()));
      hint(e.hint());
    } catch (const plugin_host::PluginLoadError& e) {
      plugin_problem = true;
      lines.push_back(
          fmt::format("{}: groups[{}] (group '{}'): {}", at(g.pos), i, g.name, e.without_hint()));
      hint(e.hint());
    }
  }
  if (lines.empty()) return;
  throw GroupProblems(plugin_problem ? ExitCode::kPlugin : ExitCode::kConfig, std::move(lines),
                      std::move(hints));
}

}  // namespace sqlstreams::cli
