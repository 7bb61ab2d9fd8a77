// ConfigError, the small Config queries, name grammar and database URL resolution.
#include "config/config.hpp"

#include <cstdlib>

#include "config/text_file.hpp"

namespace sqlstreams::config {
namespace {

std::string join_lines(const std::vector<std::string>& lines) {
  std::string out;
  for (const std::string& line : lines) {
    if (!out.empty()) out += '\n';
    out += line;
  }
  return out;
}

std::string trim(std::string s) {
  const char* kSpace = " \t\r\n\v\f";
  s.erase(0, s.find_first_not_of(kSpace));
  s.erase(s.find_last_not_of(kSpace) + 1);
  return s;
}

}  // namespace

ConfigError::ConfigError(std::vector<std::string> problems)
    : std::runtime_error(join_lines(problems)), problems_(std::move(problems)) {}

std::optional<SourcePosition> KeyPositions::locate(std::string_view key_path) const {
  std::string path(key_path);
  for (;;) {
    if (auto it = at.find(path); it != at.end()) return it->second;
    if (path.empty()) return std::nullopt;
    const size_t cut = path.find_last_of(".[");
    path = cut == std::string::npos ? std::string() : path.substr(0, cut);
  }
}

const StreamConfig* Config::find_stream(std::string_view name) const {
  for (const StreamConfig& stream : streams) {
    if (stream.name == name) return &stream;
  }
  return nullptr;
}

std::filesystem::path Config::plugin_dir() const {
  const std::filesystem::path dir(host.plugin_dir);
  if (dir.is_absolute()) return dir.lexically_normal();
  return (path.parent_path() / dir).lexically_normal();
}

bool is_valid_name(std::string_view name) {
  if (name.empty() || name.size() > 128) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && (i == 0 || (c != '.' && c != '_' && c != '-'))) return false;
  }
  return true;
}

std::filesystem::path url_file_path(const Config& config) {
  if (!config.database.url_file) return {};
  std::filesystem::path file(*config.database.url_file);
  if (file.is_relative()) file = config.path.parent_path() / file;
  return file;
}

std::string resolve_database_url(const Config& config) {
  if (const char* env = std::getenv("SQLSTREAMS_DATABASE_URL"); env && *env) return env;
  const std::string where = config.path.string() + ": database.url_file: ";
  if (!config.database.url_file) {
    throw ConfigError({where +
                       "no database URL: set the environment variable SQLSTREAMS_DATABASE_URL, "
                       "or database.url_file in the config file"});
  }
  const std::filesystem::path file = url_file_path(config);
  std::string text;
  try {
    text = read_text_file(file, kMaxUrlFileBytes, "database.url_file");
  } catch (const ConfigError& e) {
    throw ConfigError({where + e.what() + " (and SQLSTREAMS_DATABASE_URL is not set)"});
  }
  std::string line = text.substr(0, text.find('\n'));
  line = trim(std::move(line));
  if (line.empty()) {
    throw ConfigError({where + "the first line of " + file.string() +
                       " is empty (and SQLSTREAMS_DATABASE_URL is not set)"});
  }
  return line;
}

}  // namespace sqlstreams::config
