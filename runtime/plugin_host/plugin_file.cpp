// Where a plugin file may come from and whether it may be loaded at all
// (runtime/plugin_host/README.md#loading-step-by-step): inside plugin_dir, a regular file, trusted
// (plugin_trust.cpp: owner and modes of the file and of every directory up to `/`), an ELF object
// that dlopen accepts with RTLD_NOW.
#include <dlfcn.h>
#include <fmt/format.h>

#include <algorithm>
#include <fstream>

#include "plugin_host/loaded_plugin.hpp"

namespace sqlstreams::plugin_host {
namespace fs = std::filesystem;

namespace {

// "a.so, b.so" — the plugins an operator could have meant.
std::string list_plugins(const fs::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (it->path().extension() == ".so") names.push_back(it->path().filename().string());
  }
  if (names.empty()) return "no .so files";
  std::sort(names.begin(), names.end());
  constexpr size_t kMaxListed = 20;
  if (names.size() <= kMaxListed) return fmt::format("{}", fmt::join(names, ", "));
  return fmt::format("{}, ... ({} more)",
                     fmt::join(names.begin(), names.begin() + kMaxListed, ", "),
                     names.size() - kMaxListed);
}

std::string printable_prefix(const std::string& bytes) {
  std::string out;
  for (unsigned char c : bytes) out += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '.';
  return out;
}

}  // namespace

fs::path normalize_dir(const fs::path& dir) {
  fs::path p = fs::absolute(dir).lexically_normal();
  if (!p.has_filename() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p;
}

fs::path resolve_plugin_path(const fs::path& plugin_dir, const std::string& file) {
  if (file.empty()) {
    throw PluginLoadError("", "", "a plugin file name such as payments.so", "an empty name",
                          "set the group's `plugin` to a file in host.plugin_dir");
  }
  const fs::path p(file);
  if (p.is_absolute()) return p.lexically_normal();
  const fs::path full = (plugin_dir / p).lexically_normal();
  const fs::path rel = full.lexically_relative(plugin_dir);
  if (rel.empty() || *rel.begin() == "..") {
    throw PluginLoadError(full.string(), "",
                          "a file inside plugin_dir '" + plugin_dir.string() + "'",
                          "the name '" + file + "', which points outside it",
                          "copy the plugin into plugin_dir and name it without '..'");
  }
  return full;
}

fs::path check_plugin_file(const fs::path& plugin_dir, const fs::path& path) {
  std::error_code ec;
  const fs::file_status st = fs::status(path, ec);
  if (!fs::exists(st)) {
    throw PluginLoadError(path.string(), "", "an existing plugin file", "no file at this path",
                          "build the plugin (cmake --build <build> --target <name>) or fix the "
                          "group's `plugin`; plugin_dir '" +
                              plugin_dir.string() + "' holds: " + list_plugins(plugin_dir));
  }
  if (!fs::is_regular_file(st)) {
    throw PluginLoadError(path.string(), "", "a regular file",
                          fs::is_directory(st) ? "a directory" : "a special file",
                          "point the group's `plugin` at the plugin's .so file");
  }
  const fs::path real = check_plugin_trust(plugin_dir, path);  // before anything is read
  std::ifstream in(real, std::ios::binary);
  std::string head(4, '\0');
  in.read(head.data(), 4);
  head.resize(static_cast<size_t>(in.gcount()));
  if (head !=
      "\x7f"
      "ELF") {
    throw PluginLoadError(
        path.string(), "", "an ELF shared library built with sqlstreams_add_plugin",
        head.empty() ? std::string("an empty file")
                     : "a file that is not ELF (starts with '" + printable_prefix(head) + "')",
        "point the group's `plugin` at the .so the plugin build produced");
  }
  return real;
}

boost::dll::shared_library open_plugin_library(const PluginImage& image,
                                               const fs::path& shown_path) {
  namespace dll = boost::dll;
  // RTLD_NODELETE: the library stays mapped even when the shared_library is destroyed, so no
  // function pointer or instance can ever outlive its code (plugins are never unloaded).
  const auto mode = dll::load_mode::rtld_now | dll::load_mode::rtld_local |
                    static_cast<dll::load_mode::type>(RTLD_NODELETE);
  dlerror();  // clear any stale message
  std::error_code ec;
  dll::shared_library lib(fs::path(image.load_path), mode, ec);
  if (ec || !lib.is_loaded()) {
    const char* why = dlerror();
    std::string found = why != nullptr ? std::string(why) : ec.message();
    // dlerror names the private copy (/proc/<pid>/fd/<n>): name the operator's file instead.
    for (size_t at = found.find(image.load_path); at != std::string::npos;
         at = found.find(image.load_path, at + 1)) {
      found.replace(at, image.load_path.size(), shown_path.string());
    }
    throw PluginLoadError(shown_path.string(), "", "a shared library that loads with RTLD_NOW",
                          found,
                          "rebuild it with sqlstreams_add_plugin against plugin-sdk and check "
                          "its dependencies with `ldd`");
  }
  return lib;
}

}  // namespace sqlstreams::plugin_host
