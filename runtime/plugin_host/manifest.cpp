// The manifest checks (STYLE R2/R3/R5): the entry symbol exists, then magic, ABI major,
// ABI minor, struct sizes, strings, handler descriptors and their names — refusing, never
// warning, on any mismatch. The checks themselves live in the SDK
// (plugin-sdk/include/sqlstreams/manifest_check.hpp) so a plugin's unit test applies the same
// ones (sqlstreams/testing/plugin_file.hpp); here they get the file path and become
// PluginLoadError.
#include <sqlstreams/manifest_check.hpp>

#include "plugin_host/loaded_plugin.hpp"

namespace sqlstreams::plugin_host {

void read_manifest(const std::string& path, LoadedPlugin& plugin) {
  namespace mc = sqlstreams::manifest_check;
  mc::Manifest m;
  try {
    mc::check_entry_exported([&](const std::string& s) { return plugin.library.has(s); },
                             path);  // the ELF file's symbol tables explain a missing entry
    m = mc::check_manifest(plugin.library.get<const sqlstreams_type_manifest*()>(kEntrySymbol)());
  } catch (const mc::Refused& e) {
    const mc::Refusal& r = e.refusal();
    throw PluginLoadError(path, r.symbol, r.expected, r.found, r.hint);
  }
  PluginInfo& info = plugin.info;
  info.path = path;
  info.name = std::move(m.name);
  info.version = std::move(m.version);
  info.sdk_build = std::move(m.sdk_build);
  info.abi_major = m.abi_major;
  info.abi_minor = m.abi_minor;
  for (mc::Handler& h : m.handlers) {
    HandlerEntry entry{std::move(h.name), h.descriptor, std::move(h.schema_versions)};
    info.handlers.push_back(entry.name);
    info.handler_infos.push_back({entry.name, entry.descriptor.schema_version,
                                  entry.schema_versions, entry.concurrent(),
                                  entry.descriptor.handle_async != nullptr});
    plugin.handlers.push_back(std::move(entry));
  }
}

}  // namespace sqlstreams::plugin_host
