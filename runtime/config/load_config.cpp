// load_config(): file → toml++ tree → walk_table(root) → cross-item checks → Config or
// ConfigError with every problem (R12).

#include <map>
#include <nlohmann/json.hpp>

#include "common/host_name.hpp"
#include "config/config.hpp"
#include "config/listen.hpp"
#include "config/problems.hpp"
#include "config/suggest.hpp"
#include "config/text_file.hpp"
#include "config/walk.hpp"

namespace sqlstreams::config {
namespace {

std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

// Where `key` is written inside the index-th table of root[array], for cross-item problems.
toml::source_position key_position(const toml::table& root, std::string_view array, size_t index,
                                   std::string_view key) {
  const toml::table* item = nullptr;
  if (const toml::array* items = root[array].as_array()) {
    if (index < items->size()) item = items->get(index)->as_table();
  }
  if (!item) return {1, 1};
  auto it = item->find(key);
  return it != item->end() ? it->first.source().begin : item->source().begin;
}

void check_streams(const Config& config, const toml::table& root, Problems& problems) {
  std::map<std::string, const StreamConfig*> seen;
  for (size_t i = 0; i < config.streams.size(); ++i) {
    const StreamConfig& stream = config.streams[i];
    if (stream.name.empty()) continue;  // already reported
    auto [first, inserted] = seen.emplace(stream.name, &stream);
    if (inserted) continue;
    problems.add(key_position(root, "streams", i, "name"), index_path("streams", i) + ".name",
                 "duplicate stream name; already declared at line " +
                     std::to_string(first->second->pos.line),
                 quoted(stream.name));
  }
}

// A group's `emits` (docs/operating/emits.md): declared streams only; the budgets only beside
// `emits`.
void check_emits(const Config& config, const toml::table& root, size_t i,
                 const std::vector<std::string_view>& stream_names, Problems& problems) {
  const GroupConfig& group = config.groups[i];
  const std::string path = index_path("groups", i);
  const toml::array* items = root["groups"].as_array();
  const toml::table* item = items && i < items->size() ? items->get(i)->as_table() : nullptr;
  for (const auto& name : group.emits) {
    if (config.find_stream(name)) continue;
    std::string problem = "emits to '" + name + "', which no [[streams]] entry declares";
    if (auto near = suggest(name, stream_names)) {
      problem += "; did you mean '" + std::string(*near) + "'?";
    }
    problems.add(key_position(root, "groups", i, "emits"), path + ".emits", problem, quoted(name));
  }
  if (group.emits.empty() && item) {
    for (const char* key : {"max_emits_per_message", "max_emit_bytes_per_message"}) {
      if (item->contains(key)) {
        problems.add(key_position(root, "groups", i, key), path + "." + key,
                     "applies only to a group that emits; list its streams in emits or remove it",
                     render_node(*item->get(key)));
      }
    }
  }
}

void check_groups(const Config& config, const toml::table& root, Problems& problems) {
  std::vector<std::string_view> stream_names;
  for (const StreamConfig& stream : config.streams) stream_names.push_back(stream.name);
  std::map<std::pair<std::string, std::string>, const GroupConfig*> seen;
  for (size_t i = 0; i < config.groups.size(); ++i) {
    const GroupConfig& group = config.groups[i];
    const std::string path = index_path("groups", i);
    if (!group.stream.empty() && !config.find_stream(group.stream)) {
      std::string problem = "no [[streams]] entry declares this stream";
      if (auto near = suggest(group.stream, stream_names)) {
        problem += "; did you mean '" + std::string(*near) + "'?";
      }
      problems.add(key_position(root, "groups", i, "stream"), path + ".stream", problem,
                   quoted(group.stream));
    }
    // ordering_dead means something only for an ordered group: written elsewhere it is a
    // mistake (the group would silently run unordered), never a default.
    if (group.ordering != Ordering::kKey) {
      const toml::array* items = root["groups"].as_array();
      const toml::table* item = items && i < items->size() ? items->get(i)->as_table() : nullptr;
      const toml::node* ordering = item ? item->get("ordering") : nullptr;
      // A misspelt or mistyped `ordering` is reported already; this would only add noise.
      const bool ordering_valid =
          !ordering || (ordering->is_string() && ordering->value_or(std::string()) == "none");
      if (item && ordering_valid && item->contains("ordering_dead")) {
        problems.add(key_position(root, "groups", i, "ordering_dead"), path + ".ordering_dead",
                     "applies only to an ordered group; set ordering = \"key\" or remove it",
                     render_node(*item->get("ordering_dead")));
      }
    }
    // The child stderr budget means something only for isolated groups (the same rule).
    if (group.isolation != Isolation::kProcess) {
      const toml::array* items = root["groups"].as_array();
      const toml::table* item = items && i < items->size() ? items->get(i)->as_table() : nullptr;
      const toml::node* isolation = item ? item->get("isolation") : nullptr;
      const bool isolation_valid =
          !isolation ||
          (isolation->is_string() && isolation->value_or(std::string()) == "inprocess");
      for (const char* key : {"child_stderr_lines_per_second", "child_stderr_bytes_per_second"}) {
        if (item && isolation_valid && item->contains(key)) {
          problems.add(key_position(root, "groups", i, key), path + "." + key,
                       "applies only to an isolated group; set isolation = \"process\" or "
                       "remove it",
                       render_node(*item->get(key)));
        }
      }
    }
    check_emits(config, root, i, stream_names, problems);
    if (group.name.empty() || group.stream.empty()) continue;  // already reported
    auto [first, inserted] = seen.emplace(std::pair(group.stream, group.name), &group);
    if (inserted) continue;
    problems.add(key_position(root, "groups", i, "name"), path + ".name",
                 "duplicate group name on stream \"" + group.stream +
                     "\"; already declared at line " + std::to_string(first->second->pos.line),
                 quoted(group.name));
  }
}

// A non-loopback http_listen must be asked for: the dead-letter view shows payloads.
void check_http(const Config& config, const toml::table& root, Problems& problems) {
  std::string error;
  auto listen = parse_listen(config.host.http_listen, &error);
  if (!listen || listen->loopback || config.host.http_allow_remote) return;
  toml::source_position where{1, 1};
  if (const toml::table* host = root["host"].as_table()) {
    if (auto it = host->find("http_listen"); it != host->end()) where = it->first.source().begin;
  }
  problems.add(where, "host.http_listen",
               "is not a loopback address: anyone who can reach it sees dead-letter payloads; "
               "set host.http_allow_remote = true to allow it (behind a firewall or proxy)",
               quoted(config.host.http_listen));
}

}  // namespace

Config load_config(const std::filesystem::path& file) {
  const std::string name = file.string();
  const std::string text = read_text_file(file, kMaxConfigBytes, "config file");
  // toml++ parses recursively: refuse deep nesting before it can exhaust the stack.
  if (std::string deep = check_toml_depth(text); !deep.empty()) {
    throw ConfigError({name + ":" + deep});
  }
  toml::table root;
  try {
    root = toml::parse(std::string_view(text), std::string_view(name));
  } catch (const toml::parse_error& e) {
    const toml::source_position at = e.source().begin;
    throw ConfigError({name + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) +
                       ": TOML syntax error: " + std::string(e.description())});
  }

  Problems problems(name);
  Config config;
  config.path = std::filesystem::absolute(file).lexically_normal();
  schema::walk_table(schema::root_table(), root, "", toml::source_position{1, 1}, config, problems);
  if (config.host.name.empty()) config.host.name = machine_host_name();  // "" given is reported
  check_streams(config, root, problems);
  check_groups(config, root, problems);
  check_http(config, root, problems);
  if (!problems.empty()) throw ConfigError(problems.sorted());
  return config;
}

}  // namespace sqlstreams::config
