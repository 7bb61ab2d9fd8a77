// The manifest checks (STYLE R2/R3/R5): the entry symbol exists, then magic, ABI major,
// ABI minor, struct sizes, strings, handler descriptors and their names — refusing, never
// warning, on any mismatch. Structs are copied at most struct_size bytes into zeroed ones.
#include <fmt/format.h>

#include <cstring>
#include <set>

#include "plugin_host/loaded_plugin.hpp"

namespace sqlstreams::plugin_host {
namespace {

constexpr size_t kMaxHandlers = 1024;
// Sizes of ABI v1.0, the oldest layout this host accepts; a newer minor may only append.
constexpr size_t kManifestSizeV10 = sizeof(sqlstreams_type_manifest);
constexpr size_t kHandlerSizeV10 = sizeof(sqlstreams_type_handler);

// The fields that keep their offsets in every ABI major.
struct ManifestPrefix {
  uint64_t magic;
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
};
static_assert(offsetof(sqlstreams_type_manifest, abi_minor) == offsetof(ManifestPrefix, abi_minor));

std::string host_range() {
  return fmt::format("v{}.0 to v{}.{}", SQLSTREAMS_ABI_MAJOR, SQLSTREAMS_ABI_MAJOR,
                     SQLSTREAMS_ABI_MINOR);
}

const sqlstreams_type_manifest* call_entry(const std::string& path,
                                           boost::dll::shared_library& lib) {
  if (!lib.has(kEntrySymbol)) {
    for (int major = 0; major <= 9; ++major) {
      const std::string other = fmt::format("sqlstreams_plugin_manifest_v{}", major);
      if (major != SQLSTREAMS_ABI_MAJOR && lib.has(other)) {
        throw PluginLoadError(path, kEntrySymbol, "an exported entry function (plugin ABI v1)",
                              fmt::format("only {} (a plugin for ABI v{})", other, major),
                              fmt::format("rebuild the plugin against plugin-sdk {}.x, or run a "
                                          "runtime that loads ABI v{}",
                                          SQLSTREAMS_ABI_MAJOR, major));
      }
    }
    throw PluginLoadError(path, kEntrySymbol, "an exported entry function (a SQLStreams plugin)",
                          "no such exported symbol",
                          "not a SQLStreams plugin: add SQLSTREAMS_PLUGIN(...) to one source "
                          "file and build it with sqlstreams_add_plugin from plugin-sdk");
  }
  const sqlstreams_type_manifest* m = lib.get<const sqlstreams_type_manifest*()>(kEntrySymbol)();
  if (m == nullptr) {
    throw PluginLoadError(path, kEntrySymbol, "a pointer to the plugin's manifest", "NULL",
                          "plugin bug: the entry function must return its static manifest");
  }
  return m;
}

void check_prefix(const std::string& path, const ManifestPrefix& p) {
  if (p.magic != SQLSTREAMS_PLUGIN_MAGIC) {
    throw PluginLoadError(path, kEntrySymbol,
                          fmt::format("manifest magic {:#018x}", SQLSTREAMS_PLUGIN_MAGIC),
                          fmt::format("{:#018x}", p.magic),
                          "not a SQLStreams manifest or a corrupted build: rebuild the plugin "
                          "with SQLSTREAMS_PLUGIN from plugin-sdk");
  }
  if (p.abi_major != SQLSTREAMS_ABI_MAJOR) {
    throw PluginLoadError(path, kEntrySymbol, "plugin ABI " + host_range(),
                          fmt::format("a plugin built for ABI v{}.{}", p.abi_major, p.abi_minor),
                          fmt::format("rebuild the plugin against plugin-sdk {}.x, or run a "
                                      "runtime that loads ABI v{}",
                                      SQLSTREAMS_ABI_MAJOR, p.abi_major));
  }
  if (p.abi_minor > SQLSTREAMS_ABI_MINOR) {
    throw PluginLoadError(
        path, kEntrySymbol, "plugin ABI " + host_range(),
        fmt::format("ABI v{}.{}, newer than this runtime", p.abi_major, p.abi_minor),
        fmt::format("upgrade the SQLStreams runtime, or rebuild the plugin "
                    "against plugin-sdk {}.{}",
                    SQLSTREAMS_ABI_MAJOR, SQLSTREAMS_ABI_MINOR));
  }
  if (p.struct_size > sizeof(sqlstreams_type_manifest) || p.struct_size < kManifestSizeV10) {
    throw PluginLoadError(
        path, kEntrySymbol,
        fmt::format("manifest struct_size {} bytes (sqlstreams_type_manifest, ABI v{}.{})",
                    sizeof(sqlstreams_type_manifest), SQLSTREAMS_ABI_MAJOR, SQLSTREAMS_ABI_MINOR),
        fmt::format("struct_size {} bytes", p.struct_size),
        "the manifest does not match its declared ABI version: rebuild the plugin against an "
        "unmodified plugin-sdk");
  }
}

const char* require_string(const std::string& path, const std::string& symbol, const char* s,
                           const char* what) {
  if (s == nullptr || *s == '\0') {
    throw PluginLoadError(path, symbol, fmt::format("a non-empty {}", what),
                          s == nullptr ? "NULL" : "an empty string",
                          "plugin bug: fill it in SQLSTREAMS_PLUGIN / the handler's kName");
  }
  return s;
}

HandlerEntry read_handler(const std::string& path, const sqlstreams_type_handler* raw,
                          size_t index) {
  const std::string symbol = fmt::format("{} handlers[{}]", kEntrySymbol, index);
  if (raw == nullptr) {
    throw PluginLoadError(path, symbol, "a handler descriptor", "NULL",
                          "plugin bug: the manifest's handler array has a hole");
  }
  if (raw->struct_size > sizeof(sqlstreams_type_handler) || raw->struct_size < kHandlerSizeV10) {
    throw PluginLoadError(path, symbol,
                          fmt::format("handler struct_size {} bytes (sqlstreams_type_handler)",
                                      sizeof(sqlstreams_type_handler)),
                          fmt::format("struct_size {} bytes", raw->struct_size),
                          "rebuild the plugin against an unmodified plugin-sdk");
  }
  HandlerEntry entry;
  std::memcpy(&entry.descriptor, raw, raw->struct_size);
  const sqlstreams_type_handler& d = entry.descriptor;
  entry.name = require_string(path, symbol, d.name, "handler name");
  const std::string named = fmt::format("{} ('{}')", symbol, entry.name);
  if ((d.flags & ~SQLSTREAMS_HANDLER_CONCURRENT) != 0) {
    throw PluginLoadError(path, named,
                          fmt::format("flags within {:#x}", SQLSTREAMS_HANDLER_CONCURRENT),
                          fmt::format("flags {:#x}", d.flags),
                          "rebuild the plugin against plugin-sdk; unknown flags are refused");
  }
  if (d.validate == nullptr || d.create == nullptr || d.handle == nullptr || d.destroy == nullptr) {
    throw PluginLoadError(path, named, "validate, create, handle and destroy functions",
                          "a NULL function pointer", "plugin bug: fill every descriptor function");
  }
  return entry;
}

}  // namespace

void read_manifest(const std::string& path, LoadedPlugin& plugin) {
  const sqlstreams_type_manifest* raw = call_entry(path, plugin.library);
  ManifestPrefix prefix;
  std::memcpy(&prefix, raw, sizeof prefix);
  check_prefix(path, prefix);
  sqlstreams_type_manifest m{};
  std::memcpy(&m, raw, prefix.struct_size);

  PluginInfo& info = plugin.info;
  info.path = path;
  info.name = require_string(path, kEntrySymbol, m.plugin_name, "plugin_name");
  info.version = require_string(path, kEntrySymbol, m.plugin_version, "plugin_version");
  info.sdk_build = m.sdk_build != nullptr ? m.sdk_build : "";
  info.abi_major = prefix.abi_major;
  info.abi_minor = prefix.abi_minor;
  if (m.handlers == nullptr || m.handler_count == 0 || m.handler_count > kMaxHandlers) {
    throw PluginLoadError(
        path, kEntrySymbol, fmt::format("1 to {} handlers", kMaxHandlers),
        m.handlers == nullptr ? "no handler array" : fmt::format("{} handlers", m.handler_count),
        "list the plugin's handlers in SQLSTREAMS_PLUGIN(name, version, ...)");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < m.handler_count; ++i) {
    HandlerEntry entry = read_handler(path, m.handlers[i], i);
    if (!seen.insert(entry.name).second) {
      throw PluginLoadError(path, fmt::format("{} handlers[{}]", kEntrySymbol, i),
                            "handler names unique within the plugin",
                            fmt::format("a second handler named '{}'", entry.name),
                            "plugin bug: give each handler its own name");
    }
    info.handlers.push_back(entry.name);
    info.handler_infos.push_back({entry.name, entry.descriptor.schema_version, entry.concurrent()});
    plugin.handlers.push_back(std::move(entry));
  }
}

}  // namespace sqlstreams::plugin_host
