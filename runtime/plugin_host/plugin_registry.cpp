// PluginRegistry: loads each plugin file once (resolve → file checks → dlopen → manifest),
// keeps it loaded for the life of the process, and runs the validate → create lifecycle.
#include <fmt/format.h>

#include <cstring>

#include "common/utf8.hpp"
#include "plugin_host/loaded_plugin.hpp"

namespace sqlstreams::plugin_host {
namespace {

std::string format_error(const std::string& path, const std::string& symbol,
                         const std::string& expected, const std::string& found,
                         const std::string& hint) {
  std::string m = "plugin '" + path + "'";
  if (!symbol.empty()) m += " (" + symbol + ")";
  m += ": expected " + expected + ", found " + found;
  if (!hint.empty()) m += ". Hint: " + hint;
  return m;
}

}  // namespace

PluginLoadError::PluginLoadError(std::string path, std::string symbol, std::string expected,
                                 std::string found, std::string hint)
    : std::runtime_error(format_error(path, symbol, expected, found, hint)),
      path_(std::move(path)),
      symbol_(std::move(symbol)),
      expected_(std::move(expected)),
      found_(std::move(found)),
      hint_(std::move(hint)) {}

std::string PluginLoadError::without_hint() const {
  return format_error(path_, symbol_, expected_, found_, "");
}

ErrorSlot::ErrorSlot() noexcept {
  slot_.struct_size = sizeof slot_;
  slot_.host_ctx = this;
  slot_.set_error = &ErrorSlot::set;
  slot_.set_error_key = &ErrorSlot::set_key;
}

// What the ABI promises (plugin.h): `text` points to `len` readable bytes of UTF-8, not
// NUL-terminated. What the host does with a plugin that breaks that promise:
//   - a null slot or host_ctx: ignored; a null `text`: the empty text;
//   - at most kMaxErrorBytes bytes are ever read. A `len` above that is not trusted (a plugin
//     passing strlen-less garbage or SIZE_MAX): the text is then read only up to its first NUL
//     within kMaxErrorBytes bytes, so a short C string with a bogus length stays in bounds;
//   - the copy is sanitized (common/utf8): invalid bytes and NUL become U+FFFD, and a text cut
//     at the cap ends at a code point boundary with " ...(truncated)".
void ErrorSlot::set(sqlstreams_type_error* slot, const char* text, size_t len) noexcept {
  if (slot == nullptr || slot->host_ctx == nullptr) return;
  auto* self = static_cast<ErrorSlot*>(slot->host_ctx);
  try {
    std::string copy;
    if (text == nullptr) {
      copy.clear();
    } else if (len <= kMaxErrorBytes) {
      copy = sanitize_utf8(std::string_view(text, len), kMaxErrorBytes);
    } else if (size_t n = strnlen(text, kMaxErrorBytes); n < kMaxErrorBytes) {
      copy = sanitize_utf8(std::string_view(text, n), kMaxErrorBytes);  // a C string, bogus len
    } else {
      // More text follows what is read: a budget one byte short guarantees the cut is marked.
      copy = sanitize_utf8(std::string_view(text, kMaxErrorBytes), kMaxErrorBytes - 1);
    }
    self->text_ = std::move(copy);
    self->key_.clear();
  } catch (...) {  // out of memory: keep whatever was there
  }
}

// As set(); the key path is read like the text but kept to kMaxKeyBytes (a config path).
void ErrorSlot::set_key(sqlstreams_type_error* slot, const char* key, size_t key_len,
                        const char* text, size_t len) noexcept {
  constexpr size_t kMaxKeyBytes = 1024;
  set(slot, text, len);
  if (slot == nullptr || slot->host_ctx == nullptr || key == nullptr) return;
  try {
    const size_t n = key_len <= kMaxKeyBytes ? key_len : strnlen(key, kMaxKeyBytes);
    static_cast<ErrorSlot*>(slot->host_ctx)->key_ =
        sanitize_utf8(std::string_view(key, n), kMaxKeyBytes);
  } catch (...) {
  }
}

const HandlerEntry& LoadedPlugin::handler(const std::string& name) const {
  for (const auto& h : handlers) {
    if (h.name == name) return h;
  }
  throw PluginLoadError(info.path, "handler '" + name + "'",
                        fmt::format("a handler named '{}' in plugin '{}'", name, info.name),
                        fmt::format("only: {}", fmt::join(info.handlers, ", ")),
                        "set the group's `handler` to one of those names");
}

PluginRegistry::PluginRegistry(std::filesystem::path plugin_dir)
    : plugin_dir_(normalize_dir(plugin_dir)) {}

// Libraries stay mapped (RTLD_NODELETE) even after the shared_library objects go.
PluginRegistry::~PluginRegistry() = default;

bool PluginRegistry::loads_from(const std::filesystem::path& dir) const {
  return normalize_dir(dir) == plugin_dir_;
}

std::filesystem::path PluginRegistry::resolve(const std::string& file) const {
  return resolve_plugin_path(plugin_dir_, file);
}

std::unique_ptr<LoadedPlugin> open_loaded_plugin(const std::filesystem::path& path,
                                                 const std::filesystem::path& real,
                                                 const LoadProbe* probe) {
  auto plugin = std::make_unique<LoadedPlugin>();
  plugin->image = copy_plugin_image(real);
  try {
    check_elf_image(plugin->image, path);  // never map a truncated image (SIGBUS)
    if (probe != nullptr) probe_image(*probe, plugin->image, path);  // its constructors, elsewhere
    plugin->library = open_plugin_library(plugin->image, path);
  } catch (...) {
    discard_plugin_image(plugin->image);  // never mapped here: its number may be reused
    throw;
  }
  // From here the image's fd stays open even if the manifest is refused (see plugin_image.cpp).
  read_manifest(path.string(), *plugin);
  plugin->info.sha256 = plugin->image.sha256;
  return plugin;
}

void PluginRegistry::set_load_probe(std::optional<LoadProbe> probe) {
  std::lock_guard<std::mutex> lock(mu_);
  probe_ = std::move(probe);
  if (probe_ && probe_tick_) probe_->while_waiting = probe_tick_;
}

void PluginRegistry::set_load_probe_tick(std::function<void()> tick) {
  std::lock_guard<std::mutex> lock(mu_);
  probe_tick_ = std::move(tick);
  if (probe_) probe_->while_waiting = probe_tick_;
}

const LoadedPlugin& PluginRegistry::load_internal(const std::string& file) {
  const std::filesystem::path path = resolve(file);
  std::lock_guard<std::mutex> lock(mu_);
  if (auto it = staged_.find(path.string()); it != staged_.end()) return *it->second;
  if (auto it = loaded_.find(path.string()); it != loaded_.end()) return *it->second;
  const std::filesystem::path real = check_plugin_file(plugin_dir_, path);  // before dlopen
  return *loaded_
              .emplace(path.string(), open_loaded_plugin(path, real, probe_ ? &*probe_ : nullptr))
              .first->second;
}

std::optional<PluginUpgrade> PluginRegistry::stage(const std::string& file) {
  const std::filesystem::path path = resolve(file);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = loaded_.find(path.string());
  if (it == loaded_.end()) return std::nullopt;  // not loaded yet: its first load reads the file
  auto staged = staged_.find(path.string());
  const LoadedPlugin& visible = staged != staged_.end() ? *staged->second : *it->second;
  const std::filesystem::path real = check_plugin_file(plugin_dir_, path);
  PluginImage copy = copy_plugin_image(real);
  const bool unchanged = copy.sha256 == visible.info.sha256;
  discard_plugin_image(copy);
  if (unchanged) return std::nullopt;
  std::unique_ptr<LoadedPlugin> fresh = open_loaded_plugin(path, real, probe_ ? &*probe_ : nullptr);
  PluginUpgrade upgrade{it->second->info, fresh->info};
  if (staged != staged_.end()) {
    retired_.push_back(std::move(staged->second));  // mapped: stays until the process ends
    staged->second = std::move(fresh);
  } else {
    staged_.emplace(path.string(), std::move(fresh));
  }
  return upgrade;
}

std::vector<PluginUpgrade> PluginRegistry::commit_staged() {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<PluginUpgrade> upgrades;
  for (auto& [path, fresh] : staged_) {
    std::unique_ptr<LoadedPlugin>& current = loaded_[path];
    upgrades.push_back(PluginUpgrade{current->info, fresh->info});
    retired_.push_back(std::move(current));  // instances made from it keep running
    current = std::move(fresh);
  }
  staged_.clear();
  return upgrades;
}

void PluginRegistry::discard_staged() {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [path, fresh] : staged_) retired_.push_back(std::move(fresh));
  staged_.clear();
}

std::optional<PluginUpgrade> PluginRegistry::refresh(const std::string& file) {
  if (!stage(file)) return std::nullopt;
  std::vector<PluginUpgrade> upgrades = commit_staged();
  return upgrades.back();
}

const PluginInfo& PluginRegistry::load(const std::string& file) { return load_internal(file).info; }

SealedImage PluginRegistry::image(const std::string& file) {
  const LoadedPlugin& plugin = load_internal(file);
  return SealedImage{plugin.image.fd, plugin.image.sha256, plugin.info};
}

const PluginInfo& PluginRegistry::adopt_image(const std::string& file, int fd,
                                              const std::string& expected_sha256) {
  const std::filesystem::path path = resolve(file);
  std::lock_guard<std::mutex> lock(mu_);
  if (loaded_.count(path.string()) != 0) {
    throw PluginLoadError(path.string(), "", "a plugin not loaded yet in this process",
                          "it is loaded already", "adopt an image before loading its file");
  }
  auto plugin = std::make_unique<LoadedPlugin>();
  plugin->image = adopt_sealed_image(fd, path, expected_sha256);
  check_elf_image(plugin->image, path);
  if (probe_) probe_image(*probe_, plugin->image, path);
  plugin->library = open_plugin_library(plugin->image, path);
  read_manifest(path.string(), *plugin);
  plugin->info.sha256 = plugin->image.sha256;
  return loaded_.emplace(path.string(), std::move(plugin)).first->second->info;
}

void PluginRegistry::validate(const std::string& file, const std::string& handler,
                              const std::string& config_json) {
  const LoadedPlugin& plugin = load_internal(file);
  const HandlerEntry& entry = plugin.handler(handler);
  ErrorSlot error;
  if (!entry.descriptor.validate(config_json.data(), config_json.size(), error.get())) {
    throw HandlerConfigError(
        PluginLoadError(
            plugin.info.path, "handler '" + handler + "' validate()",
            "a config the handler accepts",
            error.text() ? *error.text() : "plugin bug: validate failed without an error message",
            "fix the group's [groups.config] table"),
        error.key());
  }
}

std::unique_ptr<HandlerInstance> PluginRegistry::create(const std::string& file,
                                                        const std::string& handler,
                                                        const std::string& config_json,
                                                        const std::string& stream,
                                                        const std::string& group) {
  validate(file, handler, config_json);
  const LoadedPlugin& plugin = load_internal(file);
  return make_instance(plugin, plugin.handler(handler), config_json, stream, group);
}

}  // namespace sqlstreams::plugin_host
