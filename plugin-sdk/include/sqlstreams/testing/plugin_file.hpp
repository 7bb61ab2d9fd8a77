// sqlstreams/testing/plugin_file.hpp — load a BUILT plugin (.so) in a unit test through the
// host's own manifest checks (sqlstreams/manifest_check.hpp), so a test catches what
// `sqlstreams run` would refuse: a missing or hidden entry function (visibility, a missing
// extern "C"), another ABI major, a newer minor, bad sizes, duplicate or nameless handlers.
// Header-only; links nothing of the runtime (dlopen with RTLD_NOW | RTLD_LOCAL; link the test
// with ${CMAKE_DL_LIBS}). The host's file-trust checks (owner and modes of plugin_dir) are not
// applied here: `sqlstreams plugin check FILE` applies them.
// Owns: PluginFile — the library stays loaded for the life of the process, as in the host.
// Threading: construct on one thread; the accessors are const and thread-safe.
//
//   sqlstreams::testing::PluginFile plugin(PLUGIN_FILE);   // throws std::runtime_error
//   sqlstreams::testing::FakeHost host(plugin.handler("charge-cards"), "{}");
#pragma once

#include <dlfcn.h>
#include <sqlstreams/plugin.h>

#include <sqlstreams/manifest_check.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sqlstreams::testing {

class PluginFile {
 public:
  // Throws std::runtime_error worded as the host's refusal: "plugin '<path>' (<symbol>):
  // expected ..., found .... Hint: ...".
  explicit PluginFile(const std::string& path) : path_(path) {
    dlerror();
    handle_ = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    if (handle_ == nullptr) {
      const char* why = dlerror();
      throw std::runtime_error("plugin '" + path +
                               "': expected a shared library that loads with RTLD_NOW, found " +
                               (why != nullptr ? why : "an unloadable file") +
                               ". Hint: rebuild it with sqlstreams_add_plugin against plugin-sdk "
                               "and check its dependencies with `ldd`");
    }
    try {
      manifest_check::check_entry_exported(
          [this](const std::string& s) { return ::dlsym(handle_, s.c_str()) != nullptr; }, path);
      auto entry = reinterpret_cast<sqlstreams_on_manifest_fn>(
          ::dlsym(handle_, manifest_check::kEntrySymbol));
      manifest_ = manifest_check::check_manifest(entry());
    } catch (const manifest_check::Refused& e) {
      throw std::runtime_error("plugin '" + path + "' " + e.what());
    }
  }
  PluginFile(const PluginFile&) = delete;
  PluginFile& operator=(const PluginFile&) = delete;

  const std::string& path() const { return path_; }
  const std::string& name() const { return manifest_.name; }
  const std::string& version() const { return manifest_.version; }
  uint32_t abi_major() const { return manifest_.abi_major; }
  uint32_t abi_minor() const { return manifest_.abi_minor; }
  const std::vector<manifest_check::Handler>& handlers() const { return manifest_.handlers; }

  // The checked descriptor of handler `name`; throws std::runtime_error listing the handlers.
  const sqlstreams_type_handler& handler(std::string_view name) const {
    std::string names;
    for (const auto& h : manifest_.handlers) {
      if (h.name == name) return h.descriptor;
      names += (names.empty() ? "'" : ", '") + h.name + "'";
    }
    throw std::runtime_error("plugin '" + path_ + "': no handler '" + std::string(name) +
                             "' (it has " + names + ")");
  }

 private:
  std::string path_;
  void* handle_ = nullptr;  // never dlclose()d: descriptors point into the library
  manifest_check::Manifest manifest_;
};

}  // namespace sqlstreams::testing
