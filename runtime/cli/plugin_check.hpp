// cli/plugin_check — `sqlstreams plugin check FILE`: loads a built plugin through the real
// loader (plugin_host::PluginRegistry: file and trust checks, dlopen, manifest checks) in a
// forked child, so a constructor that crashes, hangs up the process or calls exit() cannot hurt
// the caller, and reports the manifest (name, version, ABI, handlers with their schema version
// and concurrency) or the refusal `run` would give.
// Trust checks: the file and every folder up to `/` (owner root or us, not group/other
// writable), with plugin_dir = --plugin-dir, else the file's own folder.
// Threading: main thread only; call before any thread starts (fork).
#pragma once

#include <string>

namespace sqlstreams::cli {

struct PluginCheckOptions {
  std::string file;
  std::string plugin_dir;  // "" = the file's folder
  bool json = false;
  int timeout_s = 60;  // a child with no answer by then is killed (a hung constructor)
};

// Exit 0 and the manifest on stdout; throws plugin_host::PluginLoadError (exit 3) when the
// plugin is refused, crashed or exited while loading.
int check_plugin_file(const PluginCheckOptions& options);

}  // namespace sqlstreams::cli
