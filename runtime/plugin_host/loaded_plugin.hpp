// plugin_host/loaded_plugin — internal to plugin_host: one loaded library with its checked
// manifest, the host side of the ABI's error slot, and the steps of loading a plugin
// (resolve → file and trust checks → dlopen of the real path → entry → manifest checks). Every step
// throws PluginLoadError naming the file, the symbol, what was expected and found, and what to do.
// Threading: a LoadedPlugin is immutable once built; ErrorSlot is used by one call at a time.
#pragma once

#include <sqlstreams/plugin.h>

#include <boost/dll/shared_library.hpp>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::plugin_host {

inline constexpr const char* kEntrySymbol = SQLSTREAMS_PLUGIN_ENTRY;
// The most bytes of a plugin's error text the host ever reads (sync error slot and async
// completions alike); a longer or unterminated text is cut there.
inline constexpr size_t kMaxErrorBytes = 8192;

struct HandlerEntry {
  std::string name;
  sqlstreams_type_handler descriptor{};  // copied at most struct_size bytes, zero-filled
  std::vector<int32_t> schema_versions;  // checked (manifest_check.hpp)
  bool concurrent() const { return (descriptor.flags & SQLSTREAMS_HANDLER_CONCURRENT) != 0; }
};

// A sealed private copy of a plugin file (plugin_image.cpp); dlopen maps `load_path`.
struct PluginImage {
  int fd = -1;            // the memfd; kept open for the life of the process once dlopened
  std::string load_path;  // /proc/<pid>/fd/<fd>
  std::string sha256;     // of the bytes copied (hex)
  uint64_t size = 0;
};

class LoadedPlugin {
 public:
  PluginInfo info;
  PluginImage image;                   // what `library` maps; its fd is never closed
  boost::dll::shared_library library;  // loaded with RTLD_NODELETE: never unmapped
  std::vector<HandlerEntry> handlers;

  // Throws PluginLoadError listing the available handlers when `name` is unknown.
  const HandlerEntry& handler(const std::string& name) const;
};

// The host's sqlstreams_type_error: keeps a copy of the last text the plugin set, and the
// config key it named (set_error_key, ABI 1.1; set_error clears it).
class ErrorSlot {
 public:
  ErrorSlot() noexcept;
  ErrorSlot(const ErrorSlot&) = delete;
  ErrorSlot& operator=(const ErrorSlot&) = delete;
  sqlstreams_type_error* get() noexcept { return &slot_; }
  const std::optional<std::string>& text() const { return text_; }
  const std::string& key() const { return key_; }  // "" when none was named

 private:
  static void set(sqlstreams_type_error* slot, const char* text, size_t len) noexcept;
  static void set_key(sqlstreams_type_error* slot, const char* key, size_t key_len,
                      const char* text, size_t len) noexcept;
  sqlstreams_type_error slot_{};
  std::optional<std::string> text_;
  std::string key_;
};

// plugin_file.cpp
std::filesystem::path normalize_dir(const std::filesystem::path& dir);
std::filesystem::path resolve_plugin_path(const std::filesystem::path& plugin_dir,
                                          const std::string& file);
// Existence, type, trust and ELF checks; returns the real path to dlopen (nothing of the file
// has run yet).
std::filesystem::path check_plugin_file(const std::filesystem::path& plugin_dir,
                                        const std::filesystem::path& path);
// plugin_trust.cpp: the real path lies inside the real plugin_dir; the file and every directory
// up to `/` are owned by root or the host's euid and not writable by group/others (sticky
// directories above plugin_dir excepted). Returns the real path; throws PluginLoadError.
std::filesystem::path check_plugin_trust(const std::filesystem::path& plugin_dir,
                                         const std::filesystem::path& path);
// plugin_image.cpp: reads the checked file `real` (re-checking owner and mode on the opened
// inode) into a sealed memfd and hashes it. Throws PluginLoadError.
PluginImage copy_plugin_image(const std::filesystem::path& real);
// A handler process's side (isolation): the host's sealed image inherited at `fd`; checks that it
// is sealed against writes, growth and shrinking and that its SHA-256 is `expected_sha256`.
// Throws PluginLoadError naming `shown_path` (a mismatch names both hashes).
PluginImage adopt_sealed_image(int fd, const std::filesystem::path& shown_path,
                               const std::string& expected_sha256);
// Closes an image that was never dlopened (an unchanged file on refresh, a failed dlopen).
void discard_plugin_image(PluginImage& image);
// elf_image.cpp: the image's ELF64 header and program headers (and the section header table's
// place) lie inside the image and match the host's class, byte order and machine; throws
// PluginLoadError naming `shown_path` otherwise. Before any dlopen of the image.
void check_elf_image(const PluginImage& image, const std::filesystem::path& shown_path);
// load_probe.cpp: loads the image in `probe`'s throwaway child; throws PluginLoadError (the
// child's refusal, or a crash, exit or hang while loading) naming `shown_path`.
void probe_image(const LoadProbe& probe, const PluginImage& image,
                 const std::filesystem::path& shown_path);
// dlopens `image.load_path`; errors name `shown_path` (the file the operator configured).
boost::dll::shared_library open_plugin_library(const PluginImage& image,
                                               const std::filesystem::path& shown_path);
// plugin_registry.cpp: copy → ELF check → probe (when `probe`) → dlopen → manifest of the
// checked file `real`.
std::unique_ptr<LoadedPlugin> open_loaded_plugin(const std::filesystem::path& path,
                                                 const std::filesystem::path& real,
                                                 const LoadProbe* probe);

// manifest.cpp: calls the entry function and checks what it returns.
void read_manifest(const std::string& path, LoadedPlugin& plugin);

// handler_instance.cpp: creates the plugin's instance; throws PluginLoadError on failure.
std::unique_ptr<HandlerInstance> make_instance(const LoadedPlugin& plugin,
                                               const HandlerEntry& handler,
                                               const std::string& config_json,
                                               const std::string& stream, const std::string& group);

}  // namespace sqlstreams::plugin_host
