// cli/plugin_scaffold — `sqlstreams plugin new`: writes a buildable plugin project from the
// templates embedded at build time (plugin-sdk/templates/<lang>/, embed_templates.cmake).
// In file names and contents {{name}} becomes the plugin name, {{handler}} the handler and
// group name (the name lower-cased, '_' → '-') and {{stream}} "<handler>.events".
// Threading: main thread only.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace sqlstreams::cli {

struct TemplateFile {
  const char* lang;  // "cpp" or "c"
  const char* path;  // relative, may hold {{name}}
  const char* text;
};
// Generated into the build folder (embedded_templates.cpp).
const std::vector<TemplateFile>& plugin_templates();

// An identifier: a letter, then letters, digits or '_', at most 64 characters.
bool valid_plugin_name(const std::string& name);

// Writes the project into `dir` (created; must not exist or be empty) and returns the files
// written, relative to `dir`. Throws ControlPlaneError(kUsage) for a bad name, language or dir.
std::vector<std::string> write_plugin_project(const std::string& name, const std::string& lang,
                                              const std::filesystem::path& dir);

}  // namespace sqlstreams::cli
