// `sqlstreams plugin new NAME [--lang cpp|c] [--dir D]` (plugin_scaffold) and
// `sqlstreams plugin check FILE [--plugin-dir D] [--json]` (plugin_check): the plugin author's
// tools. Exit codes: 0, 3 (check: refused or crashed while loading), 64 (usage: bad name,
// language or a non-empty folder).
#include <fmt/format.h>

#include <cstdio>

#include "cli/commands.hpp"
#include "cli/plugin_check.hpp"
#include "cli/plugin_scaffold.hpp"

namespace sqlstreams::cli {
namespace {

int new_plugin(const std::string& name, const std::string& lang, const std::string& dir_flag) {
  const std::filesystem::path dir(dir_flag.empty() ? name : dir_flag);
  const std::vector<std::string> files = write_plugin_project(name, lang, dir);
  std::printf("created %s (a %s plugin):\n", dir.c_str(), lang == "c" ? "C" : "C++");
  for (const auto& f : files) std::printf("  %s\n", f.c_str());
  std::printf(
      "next (see %s/README.md):\n"
      "  cd %s\n"
      "  cmake -S . -B build && cmake --build build      # -DCMAKE_PREFIX_PATH=<SDK prefix>\n"
      "  ctest --test-dir build --output-on-failure && sqlstreams plugin check build/%s.so\n"
      "  SQLSTREAMS_DATABASE_URL=... sqlstreams run --config sqlstreams.toml\n",
      dir.c_str(), dir.c_str(), name.c_str());
  return 0;
}

}  // namespace

void register_plugin(CLI::App& app, Action& action) {
  auto* cmd = app.add_subcommand("plugin", "Plugin author tools: scaffold a plugin, check a .so");
  cmd->require_subcommand(1);

  auto* nw =
      cmd->add_subcommand("new", "Write a buildable plugin project (C++ or C) into a folder");
  auto name = std::make_shared<std::string>();
  auto lang = std::make_shared<std::string>("cpp");
  auto dir = std::make_shared<std::string>();
  nw->add_option("name", *name, "plugin name: a letter, then letters, digits or '_'")->required();
  nw->add_option("--lang", *lang, "cpp (default) or c");
  nw->add_option("--dir", *dir, "folder to create (default: ./NAME); must not exist or be empty");
  nw->callback([&action, name, lang, dir] {
    action = [name, lang, dir] { return new_plugin(*name, *lang, *dir); };
  });

  auto* chk = cmd->add_subcommand(
      "check", "Load a built plugin as `run` would (in a child process) and print its manifest");
  auto opts = std::make_shared<PluginCheckOptions>();
  chk->add_option("file", opts->file, "the plugin's .so file")->required();
  chk->add_option("--plugin-dir", opts->plugin_dir,
                  "apply the trust checks as if this were host.plugin_dir (default: the file's "
                  "folder)");
  chk->add_flag("--json", opts->json, "print the manifest as JSON");
  chk->add_option("--timeout", opts->timeout_s,
                  "seconds to wait for the plugin to load before killing it (default 60)")
      ->check(CLI::Range(1, 3600));
  chk->callback([&action, opts] { action = [opts] { return check_plugin_file(*opts); }; });
}

}  // namespace sqlstreams::cli
