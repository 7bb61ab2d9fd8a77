// cli/group_plugins — the plugin side of a config, checked for every group before anything
// starts (`run`, `config check`): each group's plugin loads, its handler's validate() accepts
// the group's [groups.config], and its schema_versions are ones the handler declares.
// Owns: GroupProblems, every group's problem at once, located at `file:line:col` (a config
// key a handler names through set_error_key points at that key), with each distinct hint kept
// once; main() prints it. A validate() rejection is a config error (exit 2); anything else (a
// plugin that does not load, an undeclared version) is a plugin error (exit 3).
// Threading: main thread, control plane only.
#pragma once

#include <stdexcept>
#include <string>
#include <vector>

#include "common/errors.hpp"
#include "config/config.hpp"
#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::cli {

class GroupProblems : public std::runtime_error {
 public:
  GroupProblems(ExitCode code, std::vector<std::string> lines, std::vector<std::string> hints);
  ExitCode code() const { return code_; }
  const std::vector<std::string>& lines() const { return lines_; }  // one per problem
  const std::vector<std::string>& hints() const { return hints_; }  // distinct, first seen first

 private:
  ExitCode code_;
  std::vector<std::string> lines_, hints_;
};

// Loads and validates every group's plugin through `registry`, and resolves (in `config`)
// each group's schema_versions as the host does. Throws GroupProblems listing every problem.
void check_group_plugins(plugin_host::PluginRegistry& registry, config::Config& config);

}  // namespace sqlstreams::cli
