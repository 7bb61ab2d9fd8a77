// sqlstreams/detail/adapter.hpp — the exception fence between a C++ handler and the C ABI
// (not for authors; included by sqlstreams/plugin.hpp). Owns the extern-"C"-compatible
// trampolines (validate, create, handle, handle_async, destroy) generated per handler type (the
// manifest that lists them is in manifest.hpp). No exception leaves a trampoline. Threading:
// trampolines are reentrant; handle() adds no locking of its own (the host serialises
// non-concurrent handlers).
#pragma once

#include <sqlstreams/plugin.h>

#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <typeinfo>

#include "sqlstreams/detail/versions.hpp"
#if __has_include(<cxxabi.h>)
#include <cxxabi.h>
#endif

// Hidden even when a plugin forgets -fvisibility=hidden: two plugins must never share these.
#pragma GCC visibility push(hidden)
namespace sqlstreams::detail {

// Copies at most `p->struct_size` bytes of a host struct into a zeroed one (ABI rule).
template <class T>
T read_sized(const T* p) noexcept {
  T value{};
  if (p != nullptr) std::memcpy(&value, p, p->struct_size < sizeof(T) ? p->struct_size : sizeof(T));
  return value;
}

inline void set_error(sqlstreams_type_error* slot, std::string_view text) noexcept {
  const sqlstreams_type_error s = read_sized(slot);
  if (s.set_error != nullptr) s.set_error(slot, text.data(), text.size());
}

// Names the config key too when the host offers set_error_key (ABI 1.1), else set_error.
inline void set_error_key(sqlstreams_type_error* slot, std::string_view key,
                          std::string_view text) noexcept {
  const sqlstreams_type_error s = read_sized(slot);
  if (!key.empty() && s.set_error_key != nullptr) {
    s.set_error_key(slot, key.data(), key.size(), text.data(), text.size());
  } else {
    set_error(slot, text);
  }
}

inline std::string demangled(const std::type_info& t) {
  const char* mangled = t.name();
#if __has_include(<cxxabi.h>)
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> d(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                           std::free);
  if (status == 0 && d) return d.get();
#endif
  return mangled;
}

template <class T>
std::string type_name() {
  return demangled(typeid(T));
}

// The error text of an exception a handler threw: its what(), followed by its type unless that
// is a standard or an SDK one ("card declined (shop::Declined)"); an empty what() names the
// type ("exception of type shop::Quiet without a message").
inline std::string thrown_text(const std::exception& e) {
  const std::string type = demangled(typeid(e));  // the dynamic type
  if (*e.what() == '\0') return "exception of type " + type + " without a message";
  if (type.rfind("std::", 0) == 0 || type.rfind("sqlstreams::", 0) == 0) return e.what();
  return std::string(e.what()) + " (" + type + ")";
}

// The same for an exception that is not a std::exception; call it inside `catch (...)`.
inline std::string thrown_text_of_current() {
#if __has_include(<cxxabi.h>)
  if (const std::type_info* t = abi::__cxa_current_exception_type()) {
    return "exception of type " + demangled(*t) + " (not derived from std::exception)";
  }
#endif
  return "unknown exception";
}

inline std::string what_of(const std::exception& e) {
  return *e.what() != '\0' ? std::string(e.what()) : "exception without a message";
}

inline nlohmann::json parse_config(const char* text, size_t len) {
  if (text == nullptr || len == 0) return nlohmann::json::object();
  try {
    return nlohmann::json::parse(text, text + len);
  } catch (const nlohmann::json::parse_error& e) {
    throw ConfigError(std::string("config is not valid JSON: ") + e.what());
  }
}

template <class Payload>
Payload decode(std::string_view text) {
  if constexpr (std::is_same_v<Payload, std::string_view>) {
    return text;
  } else if constexpr (std::is_same_v<Payload, nlohmann::json>) {
    return nlohmann::json::parse(text.begin(), text.end());
  } else {
    return nlohmann::json::parse(text.begin(), text.end()).template get<Payload>();
  }
}

inline MessageContext context_of(const sqlstreams_type_message& m,
                                 sqlstreams_host_emit_fn emit) noexcept {
  MessageContext c;
  c.call_token = m.call_token;
  c.emit_fn = emit;
  c.id = m.id;
  c.stream = {m.stream.data != nullptr ? m.stream.data : "", m.stream.len};
  c.group = {m.group.data != nullptr ? m.group.data : "", m.group.len};
  c.payload = {m.payload.data != nullptr ? reinterpret_cast<const char*>(m.payload.data) : "",
               m.payload.data != nullptr ? m.payload.len : 0};
  c.schema_version = m.schema_version;
  c.attempt = m.attempt;
  if (m.message_key.data != nullptr) c.message_key.emplace(m.message_key.data, m.message_key.len);
  c.created_at_unix_ms = m.created_at_unix_ms;
  return c;
}

inline void write_outcome(sqlstreams_type_outcome* out, const Result& r) noexcept {
  static constexpr int32_t kCodes[] = {SQLSTREAMS_OUTCOME_OK, SQLSTREAMS_OUTCOME_RETRY,
                                       SQLSTREAMS_OUTCOME_DELAY, SQLSTREAMS_OUTCOME_TERMINAL};
  out->code = kCodes[static_cast<int>(r.code)];
  out->delay_ms = r.code == Code::kDelay && r.delay.count() > 0 ? r.delay.count() : 0;
  if (!r.error.empty()) set_error(out->error, r.error);
}

// True for an AsyncTypedHandler (H::kAsynchronous).
template <class H>
constexpr bool is_asynchronous() {
  if constexpr (requires { H::kAsynchronous; }) {
    return H::kAsynchronous;
  } else {
    return false;
  }
}

template <class H>
struct Adapter {
  using Payload = typename H::payload_type;
  static_assert(
      requires { H::kName; }, "a handler declares static constexpr const char* kName");
  static_assert(
      requires { H::kSchemaVersion; } || PayloadsOf<H>::kListed,
      "a handler declares static constexpr int kSchemaVersion (or using Payloads = Versions<...>)");

  struct Instance {
    Instance(const sqlstreams_type_host_api* api, const nlohmann::json& config)
        : host(api), handler(make(config, host)) {}
    Host host;
    std::unique_ptr<H> handler;
  };

  static std::unique_ptr<H> make(const nlohmann::json& config, const Host& host) {
    if constexpr (std::is_constructible_v<H, const nlohmann::json&, const Host&>) {
      return std::make_unique<H>(config, host);
    } else if constexpr (std::is_constructible_v<H, const nlohmann::json&>) {
      return std::make_unique<H>(config);
    } else {
      return std::make_unique<H>();
    }
  }

  // Runs `fn`; any exception becomes the call's error text and `false` (a ConfigError that
  // names a key also names it to the host).
  template <class Fn>
  static bool fenced(sqlstreams_type_error* error, Fn&& fn) noexcept {
    try {
      try {
        fn();
        return true;
      } catch (const ConfigError& e) {
        set_error_key(error, e.key(), what_of(e));
      } catch (const std::exception& e) {
        set_error(error, thrown_text(e));
      } catch (...) {
        set_error(error, thrown_text_of_current());
      }
    } catch (...) {  // allocation failure while reporting: still no exception across the ABI
    }
    return false;
  }

  static bool validate(const char* config, size_t len, sqlstreams_type_error* error) noexcept {
    return fenced(error, [&] { H::validate(parse_config(config, len)); });
  }

  static bool create(const sqlstreams_type_host_api* api, const char* config, size_t len,
                     void** instance_out, sqlstreams_type_error* error) noexcept {
    return fenced(error, [&] {
      const nlohmann::json parsed = parse_config(config, len);
      H::validate(parsed);
      *instance_out = new Instance(api, parsed);
    });
  }

  using Listed = typename PayloadsOf<H>::type;
  static constexpr bool kListed = PayloadsOf<H>::kListed;

  // Decodes the payload at `version` into its type of the list and upcasts it; nullopt when
  // the list has no such version. Throws what decode or upcast throw.
  template <size_t I = 0, class... Ts>
  static std::optional<Payload> decode_version(H& handler, int32_t version, std::string_view text,
                                               Versions<Ts...>* list, std::string& stage) {
    if constexpr (I == sizeof...(Ts)) {
      return std::nullopt;
    } else {
      using T = std::tuple_element_t<I, std::tuple<Ts...>>;
      if (T::kSchemaVersion != version) {
        return decode_version<I + 1>(handler, version, text, list, stage);
      }
      stage = "payload does not decode into " + type_name<T>() + " (schema version " +
              std::to_string(version) + ")";
      T decoded = decode<T>(text);
      stage = "payload of schema version " + std::to_string(version) + " does not upcast to " +
              type_name<Payload>();
      return to_newest<Payload>(handler, std::move(decoded), list);
    }
  }

  static Result run(H& handler, const MessageContext& context) {
    Result failed;
    std::optional<Payload> payload = decode_payload(handler, context, failed);
    if (!payload) return failed;
    try {
      return handler.handle(*payload, context);
    } catch (const TerminalError& e) {
      return {Code::kTerminal, {}, what_of(e)};
    } catch (const std::exception& e) {
      return {Code::kRetry, {}, thrown_text(e)};
    } catch (...) {
      return {Code::kRetry, {}, thrown_text_of_current()};
    }
  }

  // The payload decoded (and upcast) for handle(); nullopt with `failed` set (TERMINAL) when it
  // does not decode.
  static std::optional<Payload> decode_payload(H& handler, const MessageContext& context,
                                               Result& failed) {
    std::optional<Payload> payload;
    std::string stage = "payload does not decode into " + type_name<Payload>();
    try {
      if constexpr (kListed) {
        static_assert(std::is_same_v<Payload, typename VersionTable<Listed>::Newest>,
                      "the last type of Payloads is the handler's payload type "
                      "(TypedHandler<Newest>)");
        if (auto decoded = decode_version(handler, context.schema_version, context.payload,
                                          static_cast<Listed*>(nullptr), stage)) {
          payload.emplace(std::move(*decoded));
        } else {
          failed = {Code::kTerminal,
                    {},
                    "payload schema version " + std::to_string(context.schema_version) +
                        " is not one handler '" + H::kName + "' declares (" +
                        declared_versions<Listed>() + ")"};
          return std::nullopt;
        }
      } else {
        payload.emplace(decode<Payload>(context.payload));
      }
    } catch (const std::exception& e) {
      failed = {Code::kTerminal, {}, stage + ": " + what_of(e)};
      return std::nullopt;
    } catch (...) {
      failed = {Code::kTerminal, {}, stage + ": " + thrown_text_of_current()};
      return std::nullopt;
    }
    return payload;
  }

  static constexpr bool kAsync = is_asynchronous<H>();

  // Asynchronous (ABI 1.2): decodes, then hands the payload and a Completion to handle_async();
  // a decode failure or an exception it throws completes the message here.
  static void start(H& handler, const MessageContext& context,
                    std::shared_ptr<CompletionState> state) noexcept {
    try {
      Result failed;
      std::optional<Payload> payload;
      try {
        payload = decode_payload(handler, context, failed);
      } catch (...) {
        failed = {Code::kRetry, {}, "out of memory while decoding"};
      }
      if (!payload) {
        state->started(&failed);
        return;
      }
      try {
        handler.handle_async(std::move(*payload), context, Completion(state));
        state->started(nullptr);
      } catch (const TerminalError& e) {
        const Result r{Code::kTerminal, {}, what_of(e)};
        state->started(&r);
      } catch (const std::exception& e) {
        const Result r{Code::kRetry, {}, thrown_text(e)};
        state->started(&r);
      } catch (...) {
        const Result r{Code::kRetry, {}, thrown_text_of_current()};
        state->started(&r);
      }
    } catch (...) {  // allocation failure while reporting: the host times the message out
      state->started(nullptr);
    }
  }

  // Completes through the host's complete(token, ...).
  class HostCompletion final : public CompletionState {
   public:
    HostCompletion(sqlstreams_host_complete_fn fn, uint64_t token) : fn_(fn), token_(token) {}

   private:
    bool deliver(const Result& r) noexcept override {
      if (fn_ == nullptr) return false;
      static constexpr int32_t kCodes[] = {SQLSTREAMS_OUTCOME_OK, SQLSTREAMS_OUTCOME_RETRY,
                                           SQLSTREAMS_OUTCOME_DELAY, SQLSTREAMS_OUTCOME_TERMINAL};
      const int64_t delay = r.code == Code::kDelay && r.delay.count() > 0 ? r.delay.count() : 0;
      return fn_(token_, kCodes[static_cast<int>(r.code)], delay, r.error.data(), r.error.size());
    }
    sqlstreams_host_complete_fn fn_;
    uint64_t token_;
  };

  // The synchronous handle() of an asynchronous handler waits for its own completion here.
  class WaitingCompletion final : public CompletionState {
   public:
    Result wait() {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return result_.has_value(); });
      return *result_;
    }

   private:
    bool deliver(const Result& r) noexcept override {
      try {
        std::lock_guard<std::mutex> lock(mu_);
        result_.emplace(r);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu_);
        result_.emplace(Result{Code::kRetry, {}, {}});
      }
      cv_.notify_all();
      return true;
    }
    std::mutex mu_;
    std::condition_variable cv_;
    std::optional<Result> result_;
  };

  static void handle_async(void* instance, const sqlstreams_type_message* message,
                           uint64_t token) noexcept {
    auto* self = static_cast<Instance*>(instance);
    std::shared_ptr<CompletionState> state;
    try {
      state = std::make_shared<HostCompletion>(self->host.completer(), token);
    } catch (...) {  // no memory for the state: report straight to the host
      if (auto fn = self->host.completer()) fn(token, SQLSTREAMS_OUTCOME_RETRY, 0, nullptr, 0);
      return;
    }
    start(*self->handler, context_of(read_sized(message), self->host.emitter()), std::move(state));
  }

  static void handle(void* instance, const sqlstreams_type_message* message,
                     sqlstreams_type_outcome* outcome) noexcept {
    if (outcome == nullptr) return;
    try {
      auto* self = static_cast<Instance*>(instance);
      if constexpr (kAsync) {
        auto waiting = std::make_shared<WaitingCompletion>();
        start(*self->handler, context_of(read_sized(message), self->host.emitter()), waiting);
        write_outcome(outcome, waiting->wait());
      } else {
        write_outcome(outcome,
                      run(*self->handler, context_of(read_sized(message), self->host.emitter())));
      }
    } catch (...) {  // only allocation failure can get here
      outcome->code = SQLSTREAMS_OUTCOME_RETRY;
    }
  }

  static void destroy(void* instance) noexcept { delete static_cast<Instance*>(instance); }

  static constexpr const int32_t* version_list() {
    if constexpr (kListed) {
      return VersionTable<Listed>::kVersions;
    } else {
      return nullptr;
    }
  }
  static constexpr uint32_t version_count() {
    if constexpr (kListed) {
      return static_cast<uint32_t>(std::size(VersionTable<Listed>::kVersions));
    } else {
      return 0;
    }
  }

  static constexpr sqlstreams_on_handle_async_fn async_entry() {
    if constexpr (kAsync) {
      return &handle_async;
    } else {
      return nullptr;
    }
  }

  static constexpr int32_t newest_version() {
    if constexpr (kListed) {
      constexpr auto& v = VersionTable<Listed>::kVersions;
      return v[std::size(v) - 1];
    } else {
      return static_cast<int32_t>(H::kSchemaVersion);
    }
  }

  static constexpr sqlstreams_type_handler descriptor() noexcept {
    if constexpr (kListed && requires { H::kSchemaVersion; }) {
      static_assert(H::kSchemaVersion == newest_version(),
                    "with Payloads, kSchemaVersion (optional) must be the newest version");
    }
    return {sizeof(sqlstreams_type_handler),
            H::kConcurrent ? SQLSTREAMS_HANDLER_CONCURRENT : 0u,
            H::kName,
            newest_version(),
            0,
            &validate,
            &create,
            &handle,
            &destroy,
            version_list(),
            version_count(),
            0,
            async_entry()};
  }
};

}  // namespace sqlstreams::detail
#pragma GCC visibility pop
