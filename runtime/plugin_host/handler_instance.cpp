// One created handler: the host API it was given (logging through spdlog), the C call per
// message, and the translation of the plugin's outcome into Outcome — a missing or unknown
// outcome is a plugin bug and becomes kRetry. Non-concurrent handlers are serialised here.
// An instance copies what it needs from its LoadedPlugin (the code stays mapped: RTLD_NODELETE),
// so it stays valid even if it outlives the PluginRegistry.
// Asynchronous handlers (ABI 1.2 handle_async): start_async() registers the message in the
// process-wide AsyncRegistry (async_registry.hpp) and calls handle_async with its token; the
// plugin's complete() reaches the entry by token. Destroying the instance cancels its pending
// entries, calls destroy() and then frees them.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstring>

#include "common/utf8.hpp"
#include "plugin_host/async_registry.hpp"
#include "plugin_host/emit_registry.hpp"
#include "plugin_host/in_flight.hpp"
#include "plugin_host/loaded_plugin.hpp"

namespace sqlstreams::plugin_host {
namespace {

constexpr size_t kMaxLogBytes = 8192;  // a plugin log line is read and kept up to this

// At most kMaxLogBytes of `text`; a larger claimed length is not trusted: read up to a NUL.
std::string_view readable_text(const char* text, size_t len) {
  if (len <= kMaxLogBytes) return {text, len};
  return {text, strnlen(text, kMaxLogBytes)};
}

// A value for a `key=value` log field (ops/logging): bare when it is a plain name, else in
// double quotes with any double quote inside turned into a single one (the log parser ends a
// quoted value at a quote followed by a space or colon).
std::string field_value(std::string_view v) {
  const bool bare = !v.empty() && std::all_of(v.begin(), v.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-' || c == '/';
  });
  if (bare) return std::string(v);
  std::string out = "\"";
  for (char c : v) out += c == '"' ? '\'' : c;
  return out + "\"";
}

spdlog::level::level_enum to_spdlog(int32_t level) {
  switch (level) {
    case SQLSTREAMS_LOG_TRACE:
      return spdlog::level::trace;
    case SQLSTREAMS_LOG_DEBUG:
      return spdlog::level::debug;
    case SQLSTREAMS_LOG_INFO:
      return spdlog::level::info;
    case SQLSTREAMS_LOG_WARN:
      return spdlog::level::warn;
    case SQLSTREAMS_LOG_ERROR:
      return spdlog::level::err;
    default:
      return spdlog::level::warn;
  }
}

class PluginHandlerInstance final : public HandlerInstance {
 public:
  PluginHandlerInstance(const LoadedPlugin& plugin, const HandlerEntry& handler,
                        const std::string& stream, const std::string& group)
      : plugin_name_(plugin.info.name),
        plugin_path_(plugin.info.path),
        handler_(handler),
        label_(fmt::format("plugin {} handler {} group {}/{}", plugin.info.name, handler.name,
                           stream, group)),
        log_prefix_(fmt::format("plugin-log plugin={} handler={} stream={} group={}",
                                field_value(sanitize_utf8(plugin.info.name, 256)),
                                field_value(sanitize_utf8(handler.name, 256)), field_value(stream),
                                field_value(group))),
        crash_label_(fmt::format("group {}/{} handler {} (plugin {}, {})", stream, group,
                                 handler.name, plugin.info.name, plugin.info.path)),
        stream_(stream),
        group_(group) {
    api_.struct_size = sizeof api_;
    api_.host_ctx = this;
    api_.log = &PluginHandlerInstance::log;
    api_.complete = &host_complete;
    api_.emit = &host_emit;
  }

  ~PluginHandlerInstance() override {
    auto& registry = AsyncRegistry::instance();
    registry.cancel_owner(serial_);  // completions from now on (even inside destroy) are dropped
    if (created_) handler_.descriptor.destroy(instance_);
    // The messages it never completed are freed now, and what they emitted dropped.
    for (uint64_t token : registry.erase_owner(serial_)) EmitRegistry::instance().close(token);
  }

  void set_emit_policy(std::shared_ptr<const EmitPolicy> policy) override {
    emit_policy_ = std::move(policy);
  }

  void create(const std::string& config_json) {
    ErrorSlot error;
    if (!handler_.descriptor.create(&api_, config_json.data(), config_json.size(), &instance_,
                                    error.get())) {
      throw PluginLoadError(
          plugin_path_, fmt::format("handler '{}' create()", handler_.name),
          "a created handler instance",
          error.text() ? *error.text() : "plugin bug: create failed without an error message",
          "check the group's [groups.config] and what the handler needs at start-up");
    }
    created_ = true;
  }

  Outcome handle(const MessageView& m) noexcept override {
    try {
      sqlstreams_type_message msg{};
      msg.struct_size = sizeof msg;
      msg.schema_version = m.schema_version;
      msg.id = m.id;
      msg.attempt = m.attempt;
      msg.created_at_unix_ms = m.created_at_unix_ms;
      msg.stream = {m.stream.data(), m.stream.size()};
      msg.group = {m.group.data(), m.group.size()};
      msg.payload = {reinterpret_cast<const uint8_t*>(m.payload.data()), m.payload.size()};
      if (m.message_key) msg.message_key = {m.message_key->data(), m.message_key->size()};
      ErrorSlot error;
      sqlstreams_type_outcome out{};
      out.struct_size = sizeof out;
      out.error = error.get();
      // A group that emits: this call's outputs are kept under a token of its own until it
      // returns (emit_registry.hpp).
      if (emit_policy_) {
        msg.call_token = AsyncRegistry::instance().draw_token();
        EmitRegistry::instance().open(msg.call_token, emit_policy_);
      }
      {
        std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
        if (!handler_.concurrent()) lock.lock();
        InFlightScope in_flight(crash_label_.c_str(), m.id, m.attempt);  // read by a crash
        handler_.descriptor.handle(instance_, &msg, &out);
      }
      Outcome outcome = to_outcome(out, error.text().value_or(""));
      if (msg.call_token != 0) {
        auto outputs = EmitRegistry::instance().close(msg.call_token);
        if (outcome.kind == OutcomeKind::kOk) outcome.outputs = std::move(outputs);
      }
      return outcome;
    } catch (const std::exception& e) {
      clear_this_thread_in_flight();  // the call is over after all
      return {OutcomeKind::kRetry,
              {},
              sanitize_utf8(std::string("host error while handling: ") + e.what(), 8192)};
    }
  }

  bool concurrent() const override { return handler_.concurrent(); }
  const std::string& plugin_name() const override { return plugin_name_; }

  bool asynchronous() const override { return handler_.descriptor.handle_async != nullptr; }

  uint64_t start_async(const MessageView& m, std::shared_ptr<const void> keep_alive,
                       AsyncDone done) noexcept override {
    uint64_t token = 0;
    try {
      auto entry = std::make_unique<AsyncEntry>();
      sqlstreams_type_message& msg = entry->message;
      msg.struct_size = sizeof msg;
      msg.schema_version = m.schema_version;
      msg.id = m.id;
      msg.attempt = m.attempt;
      msg.created_at_unix_ms = m.created_at_unix_ms;
      msg.stream = {stream_.data(), stream_.size()};  // the instance outlives its entries
      msg.group = {group_.data(), group_.size()};
      msg.payload = {reinterpret_cast<const uint8_t*>(m.payload.data()), m.payload.size()};
      if (m.message_key) msg.message_key = {m.message_key->data(), m.message_key->size()};
      entry->owner = serial_;
      entry->keep_alive = std::move(keep_alive);
      entry->done = std::move(done);
      entry->dropped = dropped_;
      auto& registry = AsyncRegistry::instance();
      const uint64_t drawn = registry.draw_token();
      const bool emits = emit_policy_ != nullptr;
      if (emits) msg.call_token = drawn;  // emits name the call by its completion token
      // Runs only while the entry is not cancelled, so before this instance is destroyed.
      entry->to_outcome = [this, drawn, emits](int32_t code, int64_t delay_ms, std::string error) {
        sqlstreams_type_outcome out{};
        out.code = code;
        out.delay_ms = delay_ms;
        Outcome outcome = to_outcome(out, std::move(error));
        if (emits) {
          auto outputs = EmitRegistry::instance().close(drawn);
          if (outcome.kind == OutcomeKind::kOk) outcome.outputs = std::move(outputs);
        }
        return outcome;
      };
      const sqlstreams_type_message* view = &entry->message;
      if (emits) EmitRegistry::instance().open(drawn, emit_policy_);
      token = registry.add(drawn, std::move(entry));
      std::unique_lock<std::mutex> lock(mu_, std::defer_lock);
      if (!handler_.concurrent()) lock.lock();
      InFlightScope in_flight(crash_label_.c_str(), m.id, m.attempt);  // read by a crash
      handler_.descriptor.handle_async(instance_, view, token);        // may complete (and free) it
    } catch (const std::exception& e) {  // before the plugin saw the token: complete it here
      clear_this_thread_in_flight();
      if (token != 0) {
        AsyncRegistry::instance().complete(token, SQLSTREAMS_OUTCOME_RETRY, 0,
                                           std::string("host error while handling: ") + e.what());
      }
    }
    return token;
  }

  bool cancel_async(uint64_t token) noexcept override {
    const bool pending = AsyncRegistry::instance().cancel(token);
    if (emit_policy_) EmitRegistry::instance().close(token);  // its outputs are dropped
    return pending;
  }
  uint64_t dropped_completions() const override { return dropped_->load(); }

 private:
  Outcome plugin_bug(const std::string& what) {
    std::string error = fmt::format("plugin bug: handler '{}' of plugin '{}' {}", handler_.name,
                                    plugin_name_, what);
    if (!warned_.exchange(true)) spdlog::warn("{}: {}", label_, error);
    return {OutcomeKind::kRetry, {}, std::move(error)};
  }

  Outcome to_outcome(const sqlstreams_type_outcome& out, std::string error) {
    auto or_default = [&](const char* code) {
      return error.empty() ? fmt::format("handler returned {} without an error message", code)
                           : std::move(error);
    };
    switch (out.code) {
      case SQLSTREAMS_OUTCOME_OK:
        return {OutcomeKind::kOk, {}, {}};
      case SQLSTREAMS_OUTCOME_RETRY:
        return {OutcomeKind::kRetry, {}, or_default("RETRY")};
      case SQLSTREAMS_OUTCOME_DELAY:
        if (out.delay_ms < 0) {
          return plugin_bug(
              fmt::format("returned DELAY with a negative delay_ms ({})", out.delay_ms));
        }
        if (out.delay_ms > kMaxDelay.count()) {
          if (!delay_warned_.exchange(true)) {
            spdlog::warn("{}: DELAY of {} ms clamped to the ceiling of {} ms (30 days)", label_,
                         out.delay_ms, kMaxDelay.count());
          }
          return {OutcomeKind::kDelay, kMaxDelay, std::move(error)};
        }
        return {OutcomeKind::kDelay, std::chrono::milliseconds(out.delay_ms), std::move(error)};
      case SQLSTREAMS_OUTCOME_TERMINAL:
        return {OutcomeKind::kTerminal, {}, or_default("TERMINAL")};
      case SQLSTREAMS_OUTCOME_UNSET:
        return plugin_bug("returned without setting an outcome");
      default:
        return plugin_bug(fmt::format("returned unknown outcome code {}", out.code));
    }
  }

  static void log(void* ctx, int32_t level, const char* text, size_t len) noexcept {
    try {
      const auto* self = static_cast<const PluginHandlerInstance*>(ctx);
      spdlog::log(
          to_spdlog(level), "{}: {}", self->log_prefix_,
          text == nullptr ? std::string() : sanitize_utf8(readable_text(text, len), kMaxLogBytes));
    } catch (...) {  // logging must never throw into the plugin
    }
  }

  const std::string plugin_name_;
  const std::string plugin_path_;
  const HandlerEntry handler_;  // a copy: name, flags and function pointers
  const std::string label_;
  // "plugin-log plugin=P handler=H stream=S group=G": the plugin's own lines as fields
  // (ops/logging turns them into JSON fields; text lines keep key=value, escaped).
  const std::string log_prefix_;
  const std::string crash_label_;  // what the crash handler names (in_flight.hpp)
  sqlstreams_type_host_api api_{};
  void* instance_ = nullptr;
  bool created_ = false;
  std::mutex mu_;  // serialises handle() unless the handler is concurrent
  std::atomic<bool> warned_{false};
  std::atomic<bool> delay_warned_{false};
  const std::string stream_, group_;               // what async messages' views point at
  std::shared_ptr<const EmitPolicy> emit_policy_;  // set before the first call; null: no emits
  const uint64_t serial_ = next_serial_.fetch_add(1);
  const std::shared_ptr<std::atomic<uint64_t>> dropped_ =
      std::make_shared<std::atomic<uint64_t>>(0);
  static inline std::atomic<uint64_t> next_serial_{1};
};

}  // namespace

uint64_t HandlerInstance::start_async(const MessageView& message,
                                      std::shared_ptr<const void> /*keep_alive*/,
                                      AsyncDone done) noexcept {
  // A synchronous handler: run it here and report at once.
  const Outcome outcome = handle(message);
  try {
    done(outcome);
  } catch (...) {
  }
  return 0;
}

bool HandlerInstance::cancel_async(uint64_t /*token*/) noexcept { return false; }

size_t HandlerInstance::handle_batch(std::span<const MessageView> messages,
                                     BatchSink& sink) noexcept {
  for (size_t i = 0; i < messages.size(); ++i) {
    if (!sink.on_outcome(i, handle(messages[i]))) return i + 1;
  }
  return messages.size();
}

std::unique_ptr<HandlerInstance> make_instance(const LoadedPlugin& plugin,
                                               const HandlerEntry& handler,
                                               const std::string& config_json,
                                               const std::string& stream,
                                               const std::string& group) {
  auto instance = std::make_unique<PluginHandlerInstance>(plugin, handler, stream, group);
  instance->create(config_json);
  return instance;
}

}  // namespace sqlstreams::plugin_host
