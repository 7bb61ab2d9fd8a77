// sqlstreams/manifest_check.hpp — the host's manifest checks (STYLE R2/R3/R5) as header-only
// C++20 with no dependency but plugin.h: the entry symbol exists, then magic, ABI major, ABI
// minor, struct sizes, strings, handler descriptors, their names and payload schema version
// lists (ABI 1.1) — refusing, never warning, on any mismatch. Structs are copied at most
// struct_size bytes into zeroed ones. Used by the host (runtime/plugin_host/manifest.cpp, which
// adds the file path and throws its PluginLoadError) and by sqlstreams/testing/plugin_file.hpp, so
// a plugin's own unit test refuses exactly what `sqlstreams run` refuses. Threading: pure
// functions; call from any thread.
#pragma once

#include <sqlstreams/plugin.h>

#include <cinttypes>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <set>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "sqlstreams/elf_symbols.hpp"

namespace sqlstreams::manifest_check {

inline constexpr const char* kEntrySymbol = SQLSTREAMS_PLUGIN_ENTRY;
inline constexpr size_t kMaxHandlers = 1024;
// Sizes of ABI v1.0, the oldest layout a 1.x host accepts; a newer minor may only append.
inline constexpr size_t kManifestSizeV10 = sizeof(sqlstreams_type_manifest);
inline constexpr size_t kHandlerSizeV10 = offsetof(sqlstreams_type_handler, schema_versions);
inline constexpr size_t kMaxSchemaVersions = SQLSTREAMS_MAX_SCHEMA_VERSIONS;

// Why a plugin is refused: the symbol, what was expected and found, and what to do.
struct Refusal {
  std::string symbol, expected, found, hint;
};

class Refused : public std::runtime_error {
 public:
  explicit Refused(Refusal r)
      : std::runtime_error("(" + r.symbol + "): expected " + r.expected + ", found " + r.found +
                           (r.hint.empty() ? "" : ". Hint: " + r.hint)),
        refusal_(std::move(r)) {}
  const Refusal& refusal() const { return refusal_; }

 private:
  Refusal refusal_;
};

struct Handler {
  std::string name;
  sqlstreams_type_handler descriptor{};  // copied at most struct_size bytes, zero-filled
  // Every payload schema version it understands: the 1.1 list, else {schema_version}. The
  // list is checked (each >= 1, no duplicates, at most kMaxSchemaVersions); the single 1.0
  // field is not (the host names a version < 1 per group: plugin_host::group_schema_versions).
  std::vector<int32_t> schema_versions;
  bool concurrent() const { return (descriptor.flags & SQLSTREAMS_HANDLER_CONCURRENT) != 0; }
};

struct Manifest {
  std::string name, version, sdk_build;
  uint32_t abi_major = 0, abi_minor = 0;
  std::vector<Handler> handlers;
};

namespace detail {

[[noreturn]] inline void refuse(std::string symbol, std::string expected, std::string found,
                                std::string hint) {
  throw Refused({std::move(symbol), std::move(expected), std::move(found), std::move(hint)});
}

inline std::string hex(uint64_t v, int digits) {  // fmt's {:#0Nx}: "0x" + zero-padded digits
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*" PRIx64, digits, v);
  return buf;
}

inline std::string host_range() {
  return "v" + std::to_string(SQLSTREAMS_ABI_MAJOR) + ".0 to v" +
         std::to_string(SQLSTREAMS_ABI_MAJOR) + "." + std::to_string(SQLSTREAMS_ABI_MINOR);
}

// The fields that keep their offsets in every ABI major.
struct ManifestPrefix {
  uint64_t magic;
  uint32_t struct_size;
  uint32_t abi_major;
  uint32_t abi_minor;
};
static_assert(offsetof(sqlstreams_type_manifest, abi_minor) == offsetof(ManifestPrefix, abi_minor));

inline const char* require_string(const std::string& symbol, const char* s, const char* what) {
  if (s == nullptr || *s == '\0') {
    refuse(symbol, std::string("a non-empty ") + what, s == nullptr ? "NULL" : "an empty string",
           "plugin bug: fill it in SQLSTREAMS_PLUGIN / the handler's kName");
  }
  return s;
}

inline void check_prefix(const ManifestPrefix& p) {
  const std::string major = std::to_string(SQLSTREAMS_ABI_MAJOR);
  const std::string found_abi = std::to_string(p.abi_major) + "." + std::to_string(p.abi_minor);
  if (p.magic != SQLSTREAMS_PLUGIN_MAGIC) {
    refuse(kEntrySymbol, "manifest magic " + hex(SQLSTREAMS_PLUGIN_MAGIC, 16), hex(p.magic, 16),
           "not a SQLStreams manifest or a corrupted build: rebuild the plugin with "
           "SQLSTREAMS_PLUGIN from plugin-sdk");
  }
  if (p.abi_major != SQLSTREAMS_ABI_MAJOR) {
    refuse(kEntrySymbol, "plugin ABI " + host_range(), "a plugin built for ABI v" + found_abi,
           "rebuild the plugin against plugin-sdk " + major +
               ".x, or run a runtime that loads ABI v" + std::to_string(p.abi_major));
  }
  if (p.abi_minor > SQLSTREAMS_ABI_MINOR) {
    refuse(kEntrySymbol, "plugin ABI " + host_range(),
           "ABI v" + found_abi + ", newer than this runtime",
           "upgrade the SQLStreams runtime, or rebuild the plugin against plugin-sdk " + major +
               "." + std::to_string(SQLSTREAMS_ABI_MINOR));
  }
  if (p.struct_size > sizeof(sqlstreams_type_manifest) || p.struct_size < kManifestSizeV10) {
    refuse(kEntrySymbol,
           "manifest struct_size " + std::to_string(sizeof(sqlstreams_type_manifest)) +
               " bytes (sqlstreams_type_manifest, ABI v" + major + "." +
               std::to_string(SQLSTREAMS_ABI_MINOR) + ")",
           "struct_size " + std::to_string(p.struct_size) + " bytes",
           "the manifest does not match its declared ABI version: rebuild the plugin against an "
           "unmodified plugin-sdk");
  }
}

// The handler's payload schema versions (ABI 1.1 list, else the 1.0 field); refuses a bad list.
inline std::vector<int32_t> read_schema_versions(const std::string& named,
                                                 const sqlstreams_type_handler& d) {
  if (d.schema_version_count == 0) return {d.schema_version};
  const std::string hint =
      "plugin bug: list each payload schema version the handler understands once, each >= 1 "
      "(sqlstreams::Versions<...> in the C++ SDK, schema_versions in the C descriptor)";
  if (d.schema_version_count > kMaxSchemaVersions) {
    refuse(named + " schema_versions",
           "at most " + std::to_string(kMaxSchemaVersions) + " versions",
           std::to_string(d.schema_version_count) + " versions", hint);
  }
  if (d.schema_versions == nullptr) {
    refuse(named + " schema_versions",
           "a list of " + std::to_string(d.schema_version_count) + " versions",
           "a NULL schema_versions pointer", hint);
  }
  std::vector<int32_t> out(d.schema_versions, d.schema_versions + d.schema_version_count);
  std::set<int32_t> seen;
  for (size_t i = 0; i < out.size(); ++i) {
    const std::string at = named + " schema_versions[" + std::to_string(i) + "]";
    if (out[i] < 1) refuse(at, "a payload schema version >= 1", std::to_string(out[i]), hint);
    if (!seen.insert(out[i]).second) {
      refuse(at, "each version listed once", "version " + std::to_string(out[i]) + " again", hint);
    }
  }
  return out;
}

inline Handler read_handler(const sqlstreams_type_handler* raw, size_t index) {
  const std::string symbol = std::string(kEntrySymbol) + " handlers[" + std::to_string(index) + "]";
  if (raw == nullptr) {
    refuse(symbol, "a handler descriptor", "NULL",
           "plugin bug: the manifest's handler array has a hole");
  }
  if (raw->struct_size > sizeof(sqlstreams_type_handler) || raw->struct_size < kHandlerSizeV10) {
    refuse(symbol,
           "handler struct_size " + std::to_string(sizeof(sqlstreams_type_handler)) +
               " bytes (sqlstreams_type_handler)",
           "struct_size " + std::to_string(raw->struct_size) + " bytes",
           "rebuild the plugin against an unmodified plugin-sdk");
  }
  Handler entry;
  std::memcpy(&entry.descriptor, raw, raw->struct_size);
  const sqlstreams_type_handler& d = entry.descriptor;
  entry.name = require_string(symbol, d.name, "handler name");
  const std::string named = symbol + " ('" + entry.name + "')";
  if ((d.flags & ~SQLSTREAMS_HANDLER_CONCURRENT) != 0) {
    refuse(named, "flags within " + hex(SQLSTREAMS_HANDLER_CONCURRENT, 0),
           "flags " + hex(d.flags, 0),
           "rebuild the plugin against plugin-sdk; unknown flags are refused");
  }
  if (d.validate == nullptr || d.create == nullptr || d.handle == nullptr || d.destroy == nullptr) {
    refuse(named, "validate, create, handle and destroy functions", "a NULL function pointer",
           "plugin bug: fill every descriptor function");
  }
  entry.schema_versions = read_schema_versions(named, d);
  return entry;
}

}  // namespace detail

// Is the entry function exported? `has(symbol)` answers for the loaded library. Throws Refused
// naming another major's entry when that is what the library exports; otherwise, when `file`
// (the plugin's ELF file) is given, its symbol tables say whether the entry is there but
// C++-mangled (a missing extern "C") or not exported (visibility), each with its own hint.
template <class HasSymbol>
void check_entry_exported(const HasSymbol& has, const std::string& file = {}) {
  if (has(std::string(kEntrySymbol))) return;
  for (int major = 0; major <= 9; ++major) {
    const std::string other = "sqlstreams_plugin_manifest_v" + std::to_string(major);
    if (major != SQLSTREAMS_ABI_MAJOR && has(other)) {
      detail::refuse(kEntrySymbol, "an exported entry function (plugin ABI v1)",
                     "only " + other + " (a plugin for ABI v" + std::to_string(major) + ")",
                     "rebuild the plugin against plugin-sdk " +
                         std::to_string(SQLSTREAMS_ABI_MAJOR) +
                         ".x, or run a runtime that loads ABI v" + std::to_string(major));
    }
  }
  const elf_symbols::EntryClues clues =
      file.empty() ? elf_symbols::EntryClues{} : elf_symbols::find_entry_clues(file, kEntrySymbol);
  if (!clues.mangled.empty()) {
    detail::refuse(kEntrySymbol, "an exported entry function with C linkage",
                   "only the C++ symbol " + clues.mangled + " (" + clues.demangled + ")",
                   "declare it extern \"C\" (and outside any namespace), or let "
                   "SQLSTREAMS_PLUGIN(...) write it: a C++ name is mangled, so the host cannot "
                   "find it");
  }
  if (clues.present_not_exported) {
    detail::refuse(kEntrySymbol, "an exported entry function",
                   "the function in the file, but not exported (hidden visibility or a local "
                   "symbol)",
                   "give it default visibility (SQLSTREAMS_EXPORT, as plugin.h declares it) and "
                   "keep it out of any version script's local: list; sqlstreams_add_plugin "
                   "exports it for you");
  }
  detail::refuse(kEntrySymbol, "an exported entry function (a SQLStreams plugin)",
                 "no such exported symbol",
                 "not a SQLStreams plugin: add SQLSTREAMS_PLUGIN(...) to one source file and "
                 "build it with sqlstreams_add_plugin from plugin-sdk");
}

// Checks what the entry function returned and copies it; throws Refused.
inline Manifest check_manifest(const sqlstreams_type_manifest* raw) {
  if (raw == nullptr) {
    detail::refuse(kEntrySymbol, "a pointer to the plugin's manifest", "NULL",
                   "plugin bug: the entry function must return its static manifest");
  }
  detail::ManifestPrefix prefix;
  std::memcpy(&prefix, raw, sizeof prefix);
  detail::check_prefix(prefix);
  sqlstreams_type_manifest m{};
  std::memcpy(&m, raw, prefix.struct_size);

  Manifest out;
  out.name = detail::require_string(kEntrySymbol, m.plugin_name, "plugin_name");
  out.version = detail::require_string(kEntrySymbol, m.plugin_version, "plugin_version");
  out.sdk_build = m.sdk_build != nullptr ? m.sdk_build : "";
  out.abi_major = prefix.abi_major;
  out.abi_minor = prefix.abi_minor;
  if (m.handlers == nullptr || m.handler_count == 0 || m.handler_count > kMaxHandlers) {
    detail::refuse(
        kEntrySymbol, "1 to " + std::to_string(kMaxHandlers) + " handlers",
        m.handlers == nullptr ? "no handler array" : std::to_string(m.handler_count) + " handlers",
        "list the plugin's handlers in SQLSTREAMS_PLUGIN(name, version, ...)");
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < m.handler_count; ++i) {
    Handler entry = detail::read_handler(m.handlers[i], i);
    if (!seen.insert(entry.name).second) {
      detail::refuse(std::string(kEntrySymbol) + " handlers[" + std::to_string(i) + "]",
                     "handler names unique within the plugin",
                     "a second handler named '" + entry.name + "'",
                     "plugin bug: give each handler its own name");
    }
    out.handlers.push_back(std::move(entry));
  }
  return out;
}

}  // namespace sqlstreams::manifest_check
