// `sqlstreams plugin new NAME [--lang cpp|c] [--dir D]`: validates the name and the folder
// first, then writes every template file with its placeholders filled in.
#include "cli/plugin_scaffold.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>

#include "cli/commands.hpp"
#include "common/errors.hpp"

namespace sqlstreams::cli {
namespace fs = std::filesystem;

namespace {

constexpr size_t kMaxNameLength = 64;

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

std::string fill(const std::string& text, const std::string& name, const std::string& handler) {
  std::string out = replace_all(text, "{{name}}", name);
  out = replace_all(out, "{{stream}}", handler + ".events");
  return replace_all(out, "{{handler}}", handler);
}

void check_target_dir(const fs::path& dir) {
  std::error_code ec;
  const fs::file_status st = fs::symlink_status(dir, ec);
  if (!fs::exists(st)) return;
  if (!fs::is_directory(st)) {
    throw ControlPlaneError(
        ExitCode::kUsage, fmt::format("plugin new: '{}' exists and is not a folder", dir.string()),
        "pick another --dir");
  }
  if (!fs::is_empty(dir, ec) || ec) {
    throw ControlPlaneError(
        ExitCode::kUsage, fmt::format("plugin new: folder '{}' is not empty", dir.string()),
        "nothing was written; pick a new or empty folder with --dir (plugin new never "
        "overwrites files)");
  }
}

}  // namespace

bool valid_plugin_name(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameLength) return false;
  if (!std::isalpha(static_cast<unsigned char>(name[0])) ||
      static_cast<unsigned char>(name[0]) > 0x7f) {
    return false;
  }
  return std::all_of(name.begin(), name.end(), [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u < 0x80 && (std::isalnum(u) || c == '_');
  });
}

std::vector<std::string> write_plugin_project(const std::string& name, const std::string& lang,
                                              const fs::path& dir) {
  if (!valid_plugin_name(name)) {
    throw ControlPlaneError(
        ExitCode::kUsage, fmt::format("plugin new: {} is not a valid plugin name", printable(name)),
        fmt::format("use an identifier: a letter, then letters, digits or '_' (at most {} "
                    "characters), e.g. order_audit; it names the .so, the CMake target and the "
                    "C/C++ symbols",
                    kMaxNameLength));
  }
  if (lang != "cpp" && lang != "c") {
    throw ControlPlaneError(ExitCode::kUsage,
                            fmt::format("plugin new: --lang {} is not known", printable(lang)),
                            "use --lang cpp (the default) or --lang c");
  }
  check_target_dir(dir);
  std::string handler = name;
  std::transform(handler.begin(), handler.end(), handler.begin(), [](char c) {
    return c == '_' ? '-' : static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  });
  // Explicit modes, whatever the umask (0002 is the default for users on Ubuntu and Fedora):
  // the host refuses plugins under folders or files its group may write.
  constexpr auto kDirMode = fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                            fs::perms::others_read | fs::perms::others_exec;
  constexpr auto kFileMode = fs::perms::owner_read | fs::perms::owner_write |
                             fs::perms::group_read | fs::perms::others_read;
  fs::create_directories(dir);
  fs::permissions(dir, kDirMode);
  std::vector<std::string> written;
  for (const TemplateFile& t : plugin_templates()) {
    if (lang != t.lang) continue;
    const std::string rel = fill(t.path, name, handler);
    const fs::path file = dir / rel;
    fs::create_directories(file.parent_path());
    fs::permissions(file.parent_path(), kDirMode);
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << fill(t.text, name, handler);
    out.close();
    std::error_code ec;
    fs::permissions(file, kFileMode, ec);
    if (!out || ec) {
      throw ControlPlaneError(ExitCode::kOther,
                              fmt::format("plugin new: cannot write '{}'", file.string()));
    }
    written.push_back(rel);
  }
  return written;
}

}  // namespace sqlstreams::cli
