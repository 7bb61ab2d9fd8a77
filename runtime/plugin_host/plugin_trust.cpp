// Trust before code runs (runtime/plugin_host/README.md#loading-step-by-step): whoever can write a
// plugin, or rename any directory on the way to it, runs code inside the host. Before dlopen (which
// runs the plugin's constructors) the host checks, on the *resolved* path:
//   - the real path of the file lies inside the real path of plugin_dir (a symlink inside
//     plugin_dir may point to another file inside it, never out of it);
//   - the file is owned by root or by the host's effective user and is not writable by group
//     or others;
//   - plugin_dir and every directory between it and the file are owned by root or the host's
//     user and not writable by group or others;
//   - every directory above plugin_dir, up to `/`, is owned by root or the host's user and not
//     writable by group or others — unless it has the sticky bit (/tmp): there only an entry's
//     owner can rename or remove it, and the entry below it is checked to be root's or ours,
//     so nobody else can swap it.
// Every such problem is reported at once, not one per run
// (runtime/plugin_host/README.md#loading-step-by-step).
// The caller dlopens the real path it returns, so a symlink swapped after the check does not
// matter: every component of that path was checked to be unchangeable by anybody else.
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "plugin_host/loaded_plugin.hpp"

namespace sqlstreams::plugin_host {
namespace fs = std::filesystem;

namespace {

std::string owner_problem(const struct stat& st) {
  const uid_t me = ::geteuid();
  if (st.st_uid == 0 || st.st_uid == me) return "";
  return fmt::format("owned by uid {} (neither root nor the host's user, uid {})", st.st_uid, me);
}

std::string mode_problem(const struct stat& st) {
  const unsigned mode = st.st_mode & 07777u;
  if ((mode & 022u) == 0) return "";
  return fmt::format("mode {:04o} (writable by {})", mode,
                     (mode & 002u) != 0 ? "others" : "its group");
}

[[noreturn]] void refuse(const fs::path& plugin, const fs::path& what, const std::string& kind,
                         const std::string& found, const std::string& hint) {
  throw PluginLoadError(plugin.string(), "",
                        kind + " '" + what.string() +
                            "' owned by root or the host's user and not writable by group or "
                            "others",
                        found,
                        hint +
                            ": whoever can change a plugin or a directory on its path runs "
                            "code inside the host");
}

// One path of the chain that someone else could change.
struct Problem {
  fs::path path;
  bool directory = false;
  std::string found;  // "owned by uid …" / "mode 0775 (writable by its group)"
  bool mode = false;  // fixed by chmod go-w (else by chown)
  bool sticky_ok = false;
};

// Checks one directory of the chain; `sticky_ok` for directories above plugin_dir.
void check_dir(const fs::path& plugin, const fs::path& dir, bool sticky_ok,
               std::vector<Problem>& problems) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    refuse(plugin, dir, "a directory", "no directory at this path (it changed while checking)",
           "check the path of host.plugin_dir");
  }
  if (auto p = owner_problem(st); !p.empty()) problems.push_back({dir, true, p, false, sticky_ok});
  const bool sticky = (st.st_mode & S_ISVTX) != 0;
  if (auto p = mode_problem(st); !p.empty() && !(sticky_ok && sticky)) {
    problems.push_back({dir, true, p, true, sticky_ok});
  }
}

// One problem: its own message, as it always was. Several: every one of them at once, with
// the commands that fix them all, so an author does not fix them one run at a time.
[[noreturn]] void refuse_all(const fs::path& plugin, const std::vector<Problem>& problems) {
  if (problems.size() == 1) {
    const Problem& p = problems.front();
    if (!p.directory && p.mode) {
      throw PluginLoadError(plugin.string(), "", "a file writable only by its owner", p.found,
                            "run `chmod go-w " + p.path.string() +
                                "`: whoever can write a plugin runs code inside the host");
    }
    refuse(plugin, p.path, p.directory ? "a directory" : "a file", p.found,
           p.mode ? "run `chmod go-w " + p.path.string() + "`" +
                        (p.sticky_ok ? " (or `chmod +t` for a shared folder such as /tmp)" : "")
                  : "run `chown root " + p.path.string() + "`");
  }
  std::string found = std::to_string(problems.size()) + " paths others could change:";
  std::string chmod, chown;
  for (const Problem& p : problems) {
    found +=
        fmt::format(" {} '{}' {};", p.directory ? "directory" : "file", p.path.string(), p.found);
    (p.mode ? chmod : chown) += " " + p.path.string();
  }
  found.pop_back();
  std::string hint;
  if (!chmod.empty()) hint = "run `chmod go-w" + chmod + "`";
  if (!chown.empty()) hint += (hint.empty() ? "run `chown root" : " and `chown root") + chown + "`";
  throw PluginLoadError(plugin.string(), "",
                        "the plugin file and every folder on its path owned by root or the "
                        "host's user and not writable by group or others",
                        found,
                        hint +
                            ": whoever can change a plugin or a directory on its path runs "
                            "code inside the host");
}

}  // namespace

fs::path check_plugin_trust(const fs::path& plugin_dir, const fs::path& path) {
  std::error_code ec;
  const fs::path real_dir = fs::canonical(plugin_dir, ec);
  if (ec) {
    throw PluginLoadError(path.string(), "", "an existing host.plugin_dir",
                          "'" + plugin_dir.string() + "': " + ec.message(),
                          "create host.plugin_dir or point it at the plugin folder");
  }
  const fs::path real = fs::canonical(path, ec);
  if (ec) {
    throw PluginLoadError(path.string(), "", "an existing plugin file", ec.message(),
                          "fix the group's `plugin`");
  }
  const fs::path rel = real.lexically_relative(real_dir);
  if (rel.empty() || rel == "." || *rel.begin() == "..") {
    throw PluginLoadError(
        path.string(), "",
        "a file whose real path lies inside plugin_dir '" + real_dir.string() + "'",
        (real == fs::absolute(path).lexically_normal() ? "a file at '" : "a link to '") +
            real.string() + "', outside it",
        "copy the plugin into plugin_dir instead of linking to it");
  }
  struct stat st {};
  if (::lstat(real.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) {
    throw PluginLoadError(path.string(), "", "a regular file at '" + real.string() + "'",
                          "something else (it changed while checking)",
                          "point the group's `plugin` at the plugin's .so file");
  }
  std::vector<Problem> problems;
  if (auto p = owner_problem(st); !p.empty()) problems.push_back({real, false, p, false, false});
  if (auto p = mode_problem(st); !p.empty()) problems.push_back({real, false, p, true, false});
  // plugin_dir and below: no group/other write at all; above it: sticky directories are fine.
  bool at_or_below_dir = true;
  for (fs::path dir = real.parent_path();; dir = dir.parent_path()) {
    check_dir(path, dir, !at_or_below_dir, problems);
    if (dir == real_dir) at_or_below_dir = false;
    if (dir == dir.root_path() || dir.parent_path() == dir) break;
  }
  if (!problems.empty()) refuse_all(path, problems);
  return real;
}

}  // namespace sqlstreams::plugin_host
