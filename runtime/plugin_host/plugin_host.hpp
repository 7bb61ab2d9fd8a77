// plugin_host — loads handler plugins (Boost.DLL, rtld_now | rtld_local), checks their
// manifest against the C ABI in plugin-sdk/include/sqlstreams/plugin.h, and creates one
// handler instance per consumer group. Libraries are never unloaded.
// Private images (plugin_image.cpp): the host maps a sealed in-memory copy of each checked file,
// never the file itself, so replacing or rewriting the file (cp, mv, install) cannot change the
// code that runs; PluginRegistry::refresh loads a changed file beside the running version.
// Before any dlopen (runtime/plugin_host/README.md#loading-step-by-step): the image's ELF header
// and program headers are checked against its size and the host's class, byte order and machine
// (elf_image.cpp: a truncated file was mapped past its end and killed the host with SIGBUS), and,
// with a LoadProbe set, the image is loaded first by a throwaway child (load_probe.hpp): a
// constructor that crashes, aborts, exits or hangs is refused there instead of ending the process
// that would map it. Trust before code runs (plugin_trust.cpp): nothing of a plugin is dlopened
// unless its real path lies inside the real plugin_dir and the file and every directory up to `/`
// are owned by root or the host's euid and not writable by group/others (sticky directories above
// plugin_dir excepted); the checked real path is what gets loaded. Every handle() call is recorded
// in the calling thread's in-flight record (in_flight.hpp) for the crash handler
// (ops/crash_handler).
// Owns: PluginRegistry (the loaded libraries), HandlerInstance (a created handler).
// Threading: PluginRegistry is used from the control plane only (start-up, reload).
// HandlerInstance::handle() may be called from many worker threads at once: when the plugin's
// descriptor does not allow concurrent calls, the instance serialises them itself.
// Boundary (STYLE L6): everything a plugin hands over is made valid here, once — error and log
// text through common/utf8 (valid UTF-8 cut at a code point, NUL and invalid bytes → U+FFFD,
// at most 8 KiB read even when a larger length is claimed), DELAY clamped to kMaxDelay.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sqlstreams::plugin_host {

enum class OutcomeKind { kOk, kRetry, kDelay, kTerminal };

// The ceiling of a handler's DELAY: a larger delay_ms is clamped to it (logged once per
// handler instance); a negative one is a plugin bug (kRetry). 30 days keeps `now + delay`
// far inside PostgreSQL's timestamp range whatever the plugin returns.
inline constexpr std::chrono::milliseconds kMaxDelay{30LL * 24 * 3600 * 1000};

// ABI 1.3: one message a handler emitted during a call, checked when emitted
// (plugin_host/emit_registry.hpp; docs/operating/emits.md).
struct Output {
  std::string stream;
  std::string payload;  // a JSON object that fits the stream once stored
  int32_t schema_version = 1;
  std::optional<std::string> key;
  std::optional<std::string> idempotency_key;
};

// What one group's handler may emit: its `emits` streams with each one's max_payload_bytes, and
// each call's budget (max_emits_per_message, max_emit_bytes_per_message).
struct EmitPolicy {
  std::map<std::string, int64_t, std::less<>> max_payload_bytes;
  size_t max_count = 100;
  int64_t max_bytes = int64_t{4} << 20;
};

// "" when `output` may be kept under `policy` (besides the call's budget), else why not: the
// check of each emit (emit_registry.cpp), and the host's second check of what a handler process
// sent back (runtime/isolation).
std::string check_output(const EmitPolicy& policy, const Output& output);

// What a handler decided for one message. The runtime owns the policy
// (docs/design.md#retries-exception-rows-and-dead-letters).
struct Outcome {
  OutcomeKind kind = OutcomeKind::kOk;
  std::chrono::milliseconds delay{0};  // kDelay only
  std::string error;  // copied from the plugin, sanitized (valid UTF-8, no NUL, <= 8 KiB)
  // kOk only: what the call emitted, in emit order (a call that did not end OK keeps none).
  std::vector<Output> outputs;
};

// One message handed to a handler; every view is borrowed for the duration of handle().
struct MessageView {
  int64_t id = 0;
  std::string_view stream;
  std::string_view group;
  std::string_view payload;  // JSON text, not NUL-terminated
  int32_t schema_version = 1;
  int32_t attempt = 1;  // 1 = first delivery
  std::optional<std::string_view> message_key;
  int64_t created_at_unix_ms = 0;
};

// Refusal to load or instantiate a plugin: names the file, the symbol, what was expected,
// what was found, and what to do.
class PluginLoadError : public std::runtime_error {
 public:
  PluginLoadError(std::string path, std::string symbol, std::string expected, std::string found,
                  std::string hint);
  const std::string& path() const { return path_; }
  const std::string& symbol() const { return symbol_; }
  const std::string& expected() const { return expected_; }
  const std::string& found() const { return found_; }
  const std::string& hint() const { return hint_; }
  std::string without_hint() const;  // what() minus ". Hint: ..." (to print each hint once)

 private:
  std::string path_, symbol_, expected_, found_, hint_;
};

// A handler's validate() rejected a group's [groups.config]: a config error (exit 2), not a
// load failure. key_path is the key inside the config object the plugin named through
// set_error_key (ABI 1.1; "a.b", "list[2]"), or "" when it named none.
class HandlerConfigError : public PluginLoadError {
 public:
  HandlerConfigError(PluginLoadError error, std::string key_path)
      : PluginLoadError(std::move(error)), key_path_(std::move(key_path)) {}
  const std::string& key_path() const { return key_path_; }

 private:
  std::string key_path_;
};

class LoadedPlugin;  // plugin_host/loaded_plugin.hpp

// Receives the outcome of one message an asynchronous handler accepted (start_async): called at
// most once, on whatever thread the plugin completes from (possibly inside start_async), never
// after cancel_async() of its token returned.
using AsyncDone = std::function<void(const Outcome&)>;

// Receives the outcomes of one HandlerInstance::handle_batch() call, in message order, on the
// calling thread, each as soon as it is known.
class BatchSink {
 public:
  virtual ~BatchSink() = default;
  // The outcome of messages[index]. Returning false stops the batch: no message after `index`
  // is handed to the handler from now on (an isolated handler stops its child, which may have
  // started the next one already: see isolation.hpp).
  virtual bool on_outcome(size_t index, const Outcome& outcome) noexcept = 0;
};

// A created handler for one group; destroys the plugin instance when dropped.
class HandlerInstance {
 public:
  virtual ~HandlerInstance() = default;
  // Never throws: a plugin that misbehaves (no outcome set, unknown code) yields kRetry with
  // an error naming the plugin bug.
  virtual Outcome handle(const MessageView& message) noexcept = 0;
  virtual bool concurrent() const = 0;
  virtual const std::string& plugin_name() const = 0;
  // ABI 1.3: from now on each call may emit under `policy` (set before the first call; null: no
  // call may emit). An isolated handler hands it to its children, which send each OK call's
  // outputs back with the reply (runtime/isolation/README.md#frames).
  virtual void set_emit_policy(std::shared_ptr<const EmitPolicy> /*policy*/) {}

  // The most messages one handle_batch() call is worth giving at once: 1 (the default) means
  // batching buys nothing (an in-process call costs no round trip); an isolated handler takes
  // more, to pay its round trip to the child once per batch instead of once per message.
  virtual size_t max_batch() const { return 1; }
  // A handler that ends a stuck message itself (an isolated handler kills its child at
  // handler_timeout + 1 s, isolation.hpp) returns the longest one message can take in it, from
  // the moment the pipeline hands it over; the pipeline's watchdog then only backs that up, so a
  // timeout has one owner (runtime/isolation/README.md#the-supervisor). nullopt (the default): the
  // watchdog owns it.
  virtual std::optional<std::chrono::milliseconds> enforced_timeout() const { return std::nullopt; }
  // Runs messages in order, passing each outcome to `sink` as it is known (before the next
  // message starts, for the default), and returns how many got an outcome: the messages from
  // the returned index on never reached the handler (the sink stopped the batch, or an isolated
  // handler's child died while running the message before them) and stay the caller's to run.
  // The default calls handle() for each message. Never throws.
  virtual size_t handle_batch(std::span<const MessageView> messages, BatchSink& sink) noexcept;

  // Asynchronous completion (ABI 1.2 handle_async): true when the handler completes messages
  // later from its own threads; the pipeline then calls start_async() instead of handle().
  virtual bool asynchronous() const { return false; }
  // Lines of the handler's own output the host did not log: an isolated group's children past
  // their stderr budget (groups[].child_stderr_*), summed since the handler was created.
  virtual uint64_t stderr_lines_dropped() const { return 0; }
  // Their bytes (what was cut off a long line included).
  virtual uint64_t stderr_bytes_dropped() const { return 0; }
  // Hands `message` to the handler and returns at once with the completion token; `done`
  // receives the outcome (see AsyncDone). The views of `message` must stay valid while
  // `keep_alive` lives: the instance keeps it until the plugin completes the message or the
  // instance is destroyed, whichever comes first (stream and group are copied). Never throws.
  virtual uint64_t start_async(const MessageView& message, std::shared_ptr<const void> keep_alive,
                               AsyncDone done) noexcept;
  // The host gives up on a message (timeout, stop): its later completion is dropped and
  // counted, `done` will not run (if it is running now, this waits for it). True when it was
  // still pending. Never call it while holding a lock that `done` takes.
  virtual bool cancel_async(uint64_t token) noexcept;
  // Completions dropped after cancel_async() or after the instance was destroyed.
  virtual uint64_t dropped_completions() const { return 0; }
};

// What a handler declares in its descriptor.
struct HandlerInfo {
  std::string name;
  int32_t schema_version = 0;  // the descriptor's single version (the newest, with a list)
  std::vector<int32_t> schema_versions;  // every payload version it understands
                                         // (docs/design.md#payload-schema-versions)
  bool concurrent = false;               // handle() may run concurrently on one instance
  bool asynchronous = false;             // ABI 1.2: handle_async() (completes later)
};

struct PluginInfo {
  std::string path;
  std::string name;
  std::string version;
  uint32_t abi_major = 0, abi_minor = 0;
  std::vector<std::string> handlers;
  std::string sdk_build;                   // free text from the manifest
  std::vector<HandlerInfo> handler_infos;  // same order as `handlers`
  std::string sha256;  // of the file's bytes when they were copied (the private image)
};

// A plugin file that changed on disk and was loaded beside the version already running.
struct PluginUpgrade {
  PluginInfo from;
  PluginInfo to;
};

// A registry's sealed image of one plugin file, for a handler process to map instead of the file
// (runtime/isolation/README.md#the-supervisor): `fd` is the memfd (open for the life of the
// process; a child inherits a duplicate), `sha256` what the child must find in it, `info` the
// manifest it carries.
struct SealedImage {
  int fd = -1;
  std::string sha256;
  PluginInfo info;
};

// The throwaway child that loads each new image before a registry maps it
// (runtime/plugin_host/README.md#loading-step-by-step, plugin_host/load_probe.hpp): `executable
// __plugin-probe` (cli/main.cpp) maps the same sealed image and answers; a refusal, crash, exit or
// hang there is the image's PluginLoadError.
struct LoadProbe {
  std::string executable;  // the sqlstreams binary: /proc/self/exe in `run` and `config check`
  std::chrono::seconds timeout{60};
  // Called on the loading thread at least every 250 ms while the child has not answered (a
  // running host pings systemd's watchdog: the wait is bounded by `timeout`, the thread is not
  // hung). It runs with the registry's lock held: it must not call into the registry.
  std::function<void()> while_waiting;
};

// Loads plugins from one directory, and only from it: a name or absolute path whose real path
// (after symlinks) lies outside plugin_dir is refused (PluginLoadError naming the file and the
// directory). There is no process-wide registry: whoever runs plugins (service::Host, a CLI
// command, a handler child, a test) makes its own, and two registries with different
// directories in one process are independent. Loaded libraries stay mapped after the registry
// goes (RTLD_NODELETE, R10); instances copy what they need, so they may outlive it.
class PluginRegistry {
 public:
  explicit PluginRegistry(std::filesystem::path plugin_dir);
  ~PluginRegistry();
  PluginRegistry(const PluginRegistry&) = delete;
  PluginRegistry& operator=(const PluginRegistry&) = delete;

  // The directory plugins load from (absolute, normalized).
  const std::filesystem::path& plugin_dir() const { return plugin_dir_; }
  // True when `dir` names plugin_dir() (compared absolute and normalized).
  bool loads_from(const std::filesystem::path& dir) const;

  // Loads `file` (a name inside plugin_dir, or an absolute path) once; throws PluginLoadError.
  const PluginInfo& load(const std::string& file);

  // From now on every new image (a first load, a staged version) is loaded by `probe`'s
  // throwaway child before this registry maps it; nullopt (the default) maps it directly (a
  // process that is itself a throwaway child: `plugin check`, a handler child).
  void set_load_probe(std::optional<LoadProbe> probe);
  // The probe's while_waiting, now and for a probe set later (service::Host::set_tick: the
  // watchdog pings of a running host).
  void set_load_probe_tick(std::function<void()> tick);

  // SIGHUP, in two steps so that a rejected reload changes nothing
  // (runtime/plugin_host/README.md#upgrades-staging). stage(): when `file` is loaded and its bytes
  // on disk differ from the version load() returns (SHA-256), loads the new bytes beside it
  // (checks, private copy, probe, manifest) as the
  // STAGED version: load/validate/create use it until commit_staged() or discard_staged(), so a
  // reload prepares its groups on it, while the current version stays what commit replaces.
  // Returns the would-be upgrade (from: the current version), or nullopt when the file is
  // unchanged or was never loaded; throws PluginLoadError when the new file is refused (nothing
  // is staged for it).
  std::optional<PluginUpgrade> stage(const std::string& file);
  // Makes every staged version current and returns those upgrades (by file). The replaced
  // versions stay mapped: instances created from them keep running until their group restarts.
  std::vector<PluginUpgrade> commit_staged();
  // Forgets every staged version: the current ones stay what load/validate/create use (the
  // staged libraries stay mapped, R10, unused).
  void discard_staged();
  // stage(file), then commit_staged() (one file, outside a reload).
  std::optional<PluginUpgrade> refresh(const std::string& file);

  // The sealed image load(file) maps (during a reload, the staged version): loads it first.
  // Throws PluginLoadError. A handler process is given this image, never the file.
  SealedImage image(const std::string& file);
  // A handler process's side: makes the host's sealed image inherited at `fd` the version of
  // `file` in this registry, without reading anything from plugin_dir: the image must be sealed
  // and hash to `expected_sha256` (else a PluginLoadError naming both hashes), then the ELF
  // check, dlopen and manifest as load(). Call it before load/validate/create of `file`.
  const PluginInfo& adopt_image(const std::string& file, int fd,
                                const std::string& expected_sha256);

  // Calls the handler's validate(config_json); throws HandlerConfigError with the plugin's
  // message and the key it named when it rejects the config, PluginLoadError when loading fails.
  void validate(const std::string& file, const std::string& handler,
                const std::string& config_json);

  // Creates one instance (validate first). Throws PluginLoadError on failure.
  std::unique_ptr<HandlerInstance> create(const std::string& file, const std::string& handler,
                                          const std::string& config_json, const std::string& stream,
                                          const std::string& group);

 private:
  std::filesystem::path resolve(const std::string& file) const;
  const LoadedPlugin& load_internal(const std::string& file);

  std::filesystem::path plugin_dir_;
  std::mutex mu_;
  std::optional<LoadProbe> probe_;
  std::function<void()> probe_tick_;  // copied into probe_->while_waiting
  std::map<std::string, std::unique_ptr<LoadedPlugin>> loaded_;  // current, by resolved path
  std::map<std::string, std::unique_ptr<LoadedPlugin>> staged_;  // stage(), not committed yet
  std::vector<std::unique_ptr<LoadedPlugin>> retired_;  // replaced or discarded, still mapped
};

// Asynchronous completion (ABI 1.2), process-wide: completions the host dropped because their
// token was unknown or already completed (including those after the instance was destroyed),
// and messages accepted and not yet completed or freed.
uint64_t async_unknown_completions();
size_t async_pending_messages();
// Completes `token` exactly as a plugin's call of host_api->complete does (tests, diagnostics):
// false when the completion was dropped.
bool complete_async(uint64_t token, OutcomeKind kind, std::chrono::milliseconds delay,
                    const std::string& error);

// The payload versions a group runs (docs/design.md#payload-schema-versions). `requested` nullopt
// (the config omits schema_versions) = every version the handler declares. Throws PluginLoadError
// (exit 3) naming the plugin file, handler, group and the versions when the group asks for a
// version the handler does not declare, or the handler declares none (< 1).
std::vector<int32_t> group_schema_versions(PluginRegistry& registry, const std::string& file,
                                           const std::string& handler, const std::string& group,
                                           const std::optional<std::vector<int32_t>>& requested);

}  // namespace sqlstreams::plugin_host
