// sqlstreams/plugin.hpp — the C++ layer for handler authors; header-only, compiled INTO the
// plugin, on top of the C ABI in sqlstreams/plugin.h (nothing from here crosses the boundary).
// Owns: Result and its helpers (ok, retry, delay, terminal), MessageContext (with emit, ABI
// 1.3), Host (logging), TypedHandler<Payload>, AsyncTypedHandler<Payload> with Completion (ABI
// 1.2) and the SQLSTREAMS_PLUGIN export macro.
// Threading: a handler declaring `static constexpr bool kConcurrent = true` gets handle()
// called from many threads at once on one object; otherwise the host serialises the calls.
//
//   struct Payment { std::string order_id; };                     // + from_json(json, Payment&)
//   class Charge : public sqlstreams::TypedHandler<Payment> {
//    public:
//     static constexpr const char* kName = "charge-cards";
//     static constexpr int kSchemaVersion = 1;
//     Charge(const nlohmann::json& config, const sqlstreams::Host& host);
//     sqlstreams::Result handle(const Payment& p, const sqlstreams::MessageContext& m) override;
//   };
//   SQLSTREAMS_PLUGIN("payments", "1.0.0", Charge)
//
// Several payload versions (ABI 1.1): list them oldest first, each type declaring its
// kSchemaVersion; each version gets its own typed decode, and upcast() (yours) turns an older
// payload into a newer one until handle() receives the newest:
//   struct PaymentV1 { static constexpr int kSchemaVersion = 1; ... };
//   struct PaymentV2 { static constexpr int kSchemaVersion = 2; ... };
//   class Charge : public sqlstreams::TypedHandler<PaymentV2> {
//    public:
//     using Payloads = sqlstreams::Versions<PaymentV1, PaymentV2>;
//     static PaymentV2 upcast(const PaymentV1& v1);
//     ...
//   };
//
// Asynchronous completion (ABI 1.2): derive from AsyncTypedHandler<Payload> instead and complete
// each message later, from any thread, through its Completion (move-only, completes once; one
// destroyed without completing is a RETRY "handler dropped the completion"):
//   class Fetch : public sqlstreams::AsyncTypedHandler<Order> {
//    public:
//     static constexpr const char* kName = "fetch-orders";
//     static constexpr int kSchemaVersion = 1;
//     static constexpr bool kConcurrent = true;
//     void handle_async(Order o, const sqlstreams::MessageContext& m,
//                       sqlstreams::Completion done) override {
//       client_.get(o.url, [done = std::move(done)](Response r) mutable {
//         done.complete(r.ok ? sqlstreams::ok() : sqlstreams::retry(r.error));
//       });
//     }
//   };
//
// Outputs committed with the ack (ABI 1.3): a handler of a group that declares `emits` hands
// messages to other streams through its context; the host writes them in the transaction that
// commits the call's OK outcome, and only then (docs/operating/emits.md):
//   m.emit("orders.enriched", Enriched{...});                    // T::kSchemaVersion, or 1
//   m.emit("orders.enriched", Enriched{...}, {.key = "o-17"});   // keyed like its source
//   m.emit_json("audit", R"({"seen": 17})");
// A refused emit throws EmitError (uncaught: a RETRY with its reason).
#pragma once

#include <sqlstreams/plugin.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include "sqlstreams/config_reader.hpp"

#define SQLSTREAMS_SDK_VERSION "1.3.0"

namespace sqlstreams {

enum class Code { kOk, kRetry, kDelay, kTerminal };

// A handler's decision for one message. Build it with ok(), retry(), delay(); throw
// terminal() to dead-letter.
struct Result {
  Code code = Code::kOk;
  std::chrono::milliseconds delay{0};  // kDelay only
  std::string error;                   // kRetry / kTerminal
};

inline Result ok() { return {}; }
// Transient failure: the runtime retries after backoff, then dead-letters when the budget is spent.
inline Result retry(std::string error) { return {Code::kRetry, {}, std::move(error)}; }
// Not now: try again after `d`; spends no retry budget.
inline Result delay(std::chrono::milliseconds d) { return {Code::kDelay, d, {}}; }
inline Result delay(int64_t ms) { return delay(std::chrono::milliseconds(ms)); }

// Thrown by terminal(); the SDK turns it into a TERMINAL outcome (dead-letter now).
class TerminalError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// No retry can fix this message: dead-letter it now with `error`.
[[noreturn]] inline void terminal(const std::string& error) { throw TerminalError(error); }

// An emit the host refused (ABI 1.3): code() is SQLSTREAMS_EMIT_REJECTED, _LIMIT or _CLOSED,
// what() the host's reason. A handler that lets it escape gets a RETRY carrying that reason.
class EmitError : public std::runtime_error {
 public:
  EmitError(int32_t code, const std::string& reason) : std::runtime_error(reason), code_(code) {}
  int32_t code() const noexcept { return code_; }

 private:
  int32_t code_;
};

// What an output carries besides its stream and payload. schema_version nullopt: the emitted
// type's kSchemaVersion when it declares one, else 1.
struct EmitOptions {
  std::optional<std::string_view> key;              // the output's message_key
  std::optional<int32_t> schema_version;            // >= 1
  std::optional<std::string_view> idempotency_key;  // 1 .. 255 bytes (the stream's window)
};

// Everything about one message except its decoded payload. Views are borrowed for the call.
struct MessageContext {
  int64_t id = 0;
  std::string_view stream;
  std::string_view group;
  std::string_view payload;  // the raw JSON text
  int32_t schema_version = 0;
  int32_t attempt = 1;  // 1 = first delivery
  std::optional<std::string_view> message_key;
  int64_t created_at_unix_ms = 0;
  // ABI 1.3: what emit() reaches (0 / NULL: this call may not emit; emit() throws CLOSED).
  uint64_t call_token = 0;
  sqlstreams_host_emit_fn emit_fn = nullptr;

  // Emits `json` (a JSON object as text) to the stream `to`, one of the group's `emits`: written
  // iff this call's OK outcome commits. Any thread, until the call returns (an async handler: until
  // it completes). Throws EmitError when the host refuses it.
  void emit_json(std::string_view to, std::string_view json,
                 const EmitOptions& options = {}) const {
    sqlstreams_type_output out{};
    out.struct_size = sizeof out;
    out.schema_version = options.schema_version.value_or(1);
    out.stream = {to.data(), to.size()};
    out.payload = {reinterpret_cast<const uint8_t*>(json.data()), json.size()};
    if (options.key) out.message_key = {options.key->data(), options.key->size()};
    if (options.idempotency_key) {
      out.idempotency_key = {options.idempotency_key->data(), options.idempotency_key->size()};
    }
    if (emit_fn == nullptr) {
      throw EmitError(SQLSTREAMS_EMIT_CLOSED,
                      "this host cannot emit (it speaks plugin ABI 1.2 or older)");
    }
    char reason[512] = {0};
    const int32_t code = emit_fn(call_token, &out, reason, sizeof reason);
    if (code != SQLSTREAMS_EMIT_OK) {
      throw EmitError(code, reason[0] != '\0' ? std::string(reason)
                                              : "emit refused with code " + std::to_string(code));
    }
  }
  // Emits `value` serialised with nlohmann/json (to_json) as above.
  template <class T>
  void emit(std::string_view to, const T& value, EmitOptions options = {}) const {
    if (!options.schema_version) {
      if constexpr (requires { T::kSchemaVersion; }) {
        options.schema_version = static_cast<int32_t>(T::kSchemaVersion);
      }
    }
    emit_json(to, nlohmann::json(value).dump(), options);
  }
};

enum class LogLevel : int32_t {
  kTrace = SQLSTREAMS_LOG_TRACE,
  kDebug = SQLSTREAMS_LOG_DEBUG,
  kInfo = SQLSTREAMS_LOG_INFO,
  kWarn = SQLSTREAMS_LOG_WARN,
  kError = SQLSTREAMS_LOG_ERROR,
};

// The host's services for one instance (today: logging). Cheap to copy; valid until the
// instance is destroyed. A default-constructed Host logs nowhere. Thread-safe.
class Host {
 public:
  Host() = default;
  explicit Host(const sqlstreams_type_host_api* api) noexcept {
    if (api != nullptr) {  // copy at most what the host declared (ABI rule)
      const size_t n = api->struct_size < sizeof(api_) ? api->struct_size : sizeof(api_);
      std::memcpy(&api_, api, n);
    }
  }
  // The host's completion function (ABI 1.2; NULL from an older or fake host without it).
  sqlstreams_host_complete_fn completer() const noexcept { return api_.complete; }
  // The host's emit function (ABI 1.3; NULL from an older host).
  sqlstreams_host_emit_fn emitter() const noexcept { return api_.emit; }
  void log(LogLevel level, std::string_view text) const noexcept {
    if (api_.log != nullptr)
      api_.log(api_.host_ctx, static_cast<int32_t>(level), text.data(), text.size());
  }
  void debug(std::string_view text) const noexcept { log(LogLevel::kDebug, text); }
  void info(std::string_view text) const noexcept { log(LogLevel::kInfo, text); }
  void warn(std::string_view text) const noexcept { log(LogLevel::kWarn, text); }
  void error(std::string_view text) const noexcept { log(LogLevel::kError, text); }

 private:
  sqlstreams_type_host_api api_{};
};

namespace detail {
// What one Completion reaches: the host (by token) or, for the synchronous handle() of an
// asynchronous handler, a waiting thread. Completes at most once; a drop (the Completion
// destroyed without completing) during handle_async() waits for the call to end, so an
// exception it throws is reported instead.
class CompletionState {
 public:
  virtual ~CompletionState() = default;
  bool complete(const Result& r) noexcept {
    if (done_.exchange(true)) return false;
    return deliver(r);
  }
  bool done() const noexcept { return done_.load(); }
  void drop() noexcept {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (starting_) {
        dropped_ = true;
        return;
      }
    }
    complete_dropped();
  }
  // handle_async() returned (failure empty) or threw (failure: its outcome).
  void started(const Result* failure) noexcept {
    bool dropped;
    {
      std::lock_guard<std::mutex> lock(mu_);
      starting_ = false;
      dropped = dropped_;
    }
    if (failure != nullptr) {
      complete(*failure);
    } else if (dropped) {
      complete_dropped();
    }
  }

 protected:
  virtual bool deliver(const Result& r) noexcept = 0;

 private:
  void complete_dropped() noexcept {
    try {
      complete(Result{Code::kRetry, {}, "handler dropped the completion"});
    } catch (...) {
      complete(Result{Code::kRetry, {}, {}});
    }
  }
  std::atomic<bool> done_{false};
  std::mutex mu_;
  bool starting_ = true;
  bool dropped_ = false;
};
}  // namespace detail

// The pending outcome of one message an AsyncTypedHandler accepted. Move-only; complete it
// exactly once, from any thread, even after the handler instance was destroyed (the host then
// drops it). Destroyed without completing, it completes with a RETRY "handler dropped the
// completion". complete() returns true when the host took the outcome; false when it was
// completed before or the host had given up on the message (timeout, lease lost, stop).
class Completion {
 public:
  Completion() = default;  // empty: complete() does nothing
  explicit Completion(std::shared_ptr<detail::CompletionState> state) noexcept
      : state_(std::move(state)) {}
  Completion(Completion&& other) noexcept = default;
  Completion& operator=(Completion&& other) noexcept {
    if (this != &other) {
      release();
      state_ = std::move(other.state_);
    }
    return *this;
  }
  Completion(const Completion&) = delete;
  Completion& operator=(const Completion&) = delete;
  ~Completion() { release(); }

  bool complete(const Result& r) noexcept {
    if (!state_) return false;
    auto state = std::move(state_);
    return state->complete(r);
  }
  // Not completed yet (and not moved from).
  bool pending() const noexcept { return state_ && !state_->done(); }

 private:
  void release() noexcept {
    if (state_ && !state_->done()) state_->drop();
    state_.reset();
  }
  std::shared_ptr<detail::CompletionState> state_;
};

// The payload versions one handler understands, oldest first: each type declares
// `static constexpr int kSchemaVersion` (>= 1, strictly increasing along the list), and the last
// one is the handler's Payload. A handler lists them as `using Payloads = Versions<...>;` and
// declares `upcast(const Older&)` returning a later type of the list for every type but the
// last (a static or a non-static member). An upcast that throws dead-letters the message
// (TERMINAL), as a payload that does not decode does: no retry can change its result.
template <class... Payloads>
struct Versions {
  static_assert(sizeof...(Payloads) > 0, "Versions<> needs at least one payload type");
};

// Base of a typed handler. The author derives from it and declares:
//   static constexpr const char* kName;      the handler name operators put in `handler =`
//   static constexpr int kSchemaVersion;     the payload schema version it understands
//                                            (or `using Payloads = Versions<...>`, above)
//   static constexpr bool kConcurrent;       optional (default false)
//   static void validate(const nlohmann::json& config);  optional: throw ConfigError to reject
//   a constructor taking (const nlohmann::json& config, const Host&), (config) or nothing
// Payload is decoded with nlohmann/json (from_json); `std::string_view` skips decoding and
// `nlohmann::json` hands over the parsed document. A payload that does not decode is TERMINAL.
// With Payloads, a message at a version the list does not hold is TERMINAL too (the host passes
// such messages over before they reach the handler; docs/design.md#payload-schema-versions). A
// single-version handler gets every message the host hands it.
template <class Payload>
class TypedHandler {
 public:
  using payload_type = Payload;
  static constexpr bool kConcurrent = false;

  virtual ~TypedHandler() = default;

  // Default: every config is accepted. Pure: no side effects (used by `config check`).
  static void validate(const nlohmann::json& /*config*/) {}

  // Return ok()/retry()/delay(); throw terminal() to dead-letter. Any other exception is a
  // RETRY carrying its what().
  virtual Result handle(const Payload& payload, const MessageContext& message) = 0;
};

// Base of an asynchronous typed handler (ABI 1.2): declares what TypedHandler does (kName,
// kSchemaVersion or Payloads, kConcurrent, validate, constructor) and implements handle_async.
// handle_async() must return at once; the message's views (MessageContext: payload, key,
// stream, group) stay valid until `done` is completed, so copy the context (it is a few views)
// if the work needs it later. The payload is decoded before the call (a payload that does not
// decode is TERMINAL and never reaches handle_async). An exception thrown by handle_async()
// completes the message as in TypedHandler (TerminalError → TERMINAL, other → RETRY) unless it
// was completed already. The group's max_in_flight bounds the messages held at once.
// With isolation = "process" the host runs each message synchronously in the child: the SDK
// then calls handle_async() and waits for its completion.
template <class Payload>
class AsyncTypedHandler {
 public:
  using payload_type = Payload;
  static constexpr bool kConcurrent = false;
  static constexpr bool kAsynchronous = true;

  virtual ~AsyncTypedHandler() = default;
  static void validate(const nlohmann::json& /*config*/) {}
  virtual void handle_async(Payload payload, const MessageContext& message, Completion done) = 0;
};

}  // namespace sqlstreams

#include "sqlstreams/detail/adapter.hpp"
#include "sqlstreams/detail/manifest.hpp"

// Exports the plugin's manifest: one line in one source file of the plugin.
//   SQLSTREAMS_PLUGIN("payments", "1.0.0", ChargeCards, AuditPayments)
#define SQLSTREAMS_PLUGIN(plugin_name, plugin_version, ...)                                   \
  extern "C" SQLSTREAMS_EXPORT const sqlstreams_type_manifest* sqlstreams_plugin_manifest_v1( \
      void) {                                                                                 \
    static const ::sqlstreams::detail::Manifest<__VA_ARGS__> manifest((plugin_name),          \
                                                                      (plugin_version));      \
    return manifest.get();                                                                    \
  }
