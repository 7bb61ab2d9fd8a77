// sqlstreams/testing/fake_host.hpp — unit-test a handler without the daemon or PostgreSQL.
// Owns: FakeHost, which drives one handler descriptor through the C ABI exactly as the host
// does (validate → create → handle → destroy), collecting its log lines and error texts.
// Threading: handle() may be called from several threads when the handler is concurrent;
// logs() must be read only after those calls returned.
//
//   sqlstreams::testing::FakeHost host(sqlstreams::testing::descriptor_of<ChargeCards>(),
//                                      R"({"provider": "unreachable"})");
//   auto out = host.handle({.payload = R"({"order_id":"o-1","amount_cents":5,"currency":"EUR"})"});
//   EXPECT_EQ(out.code, SQLSTREAMS_OUTCOME_RETRY);
//   EXPECT_EQ(out.error, "payment provider unreachable");
//   auto no = sqlstreams::testing::validate_config(d, R"({"provider": "x"})");
//   EXPECT_EQ(no->key, "provider");   // named with ConfigError::at / set_error_key
// Asynchronous handlers (ABI 1.2): handle() waits for the completion; start() returns a future
// completed from whatever thread the handler completes on:
//   auto f = host.start({.payload = R"({"url":"x"})"});
//   EXPECT_EQ(f.get().code, SQLSTREAMS_OUTCOME_OK);
// Emits (ABI 1.3) are recorded with the call's outcome, whatever the outcome is (the host writes
// them only with OK); allow_emits() makes other streams REJECTED, as an undeclared one is:
//   host.allow_emits({"orders.enriched"});
//   auto out = host.handle({.payload = R"({"id": 17})"});
//   EXPECT_EQ(out.outputs.at(0).stream, "orders.enriched");
#pragma once

#include <sqlstreams/plugin.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sqlstreams/plugin.hpp>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace sqlstreams::testing {

// A host-side error slot: owns the copy of whatever text (and config key, set_error_key) the
// plugin sets. `abi_minor` 0 hands out a 1.0-sized slot (no set_error_key), as an old host does.
class FakeErrorSlot {
 public:
  explicit FakeErrorSlot(uint32_t abi_minor = SQLSTREAMS_ABI_MINOR)
      : slot_{abi_minor == 0 ? static_cast<uint32_t>(offsetof(sqlstreams_type_error, set_error_key))
                             : static_cast<uint32_t>(sizeof(sqlstreams_type_error)),
              0, this, &FakeErrorSlot::set, abi_minor == 0 ? nullptr : &FakeErrorSlot::set_key} {}
  FakeErrorSlot(const FakeErrorSlot&) = delete;
  FakeErrorSlot& operator=(const FakeErrorSlot&) = delete;
  sqlstreams_type_error* get() { return &slot_; }
  const std::optional<std::string>& text() const { return text_; }
  const std::string& key() const { return key_; }  // "" when none was named

 private:
  static void set(sqlstreams_type_error* slot, const char* text, size_t len) {
    auto* self = static_cast<FakeErrorSlot*>(slot->host_ctx);
    self->text_.emplace(text, len);
    self->key_.clear();
  }
  static void set_key(sqlstreams_type_error* slot, const char* key, size_t key_len,
                      const char* text, size_t len) {
    set(slot, text, len);
    static_cast<FakeErrorSlot*>(slot->host_ctx)->key_.assign(key, key_len);
  }
  sqlstreams_type_error slot_;
  std::optional<std::string> text_;
  std::string key_;
};

// Why validate() refused a config: its text and the config key it named ("" when none).
struct FakeRejection {
  std::string text;
  std::string key;
};

struct FakeMessage {
  int64_t id = 1;
  std::string payload = "{}";
  int32_t attempt = 1;
  int32_t schema_version = 1;
  std::string stream = "test.stream";
  std::string group = "test-group";
  std::optional<std::string> message_key = std::nullopt;
  int64_t created_at_unix_ms = 0;
};

// One output a call emitted (ABI 1.3).
struct FakeOutput {
  std::string stream;
  std::string payload;
  int32_t schema_version = 0;
  std::optional<std::string> key;
  std::optional<std::string> idempotency_key;
};

struct FakeOutcome {
  int32_t code = SQLSTREAMS_OUTCOME_UNSET;  // SQLSTREAMS_OUTCOME_*
  int64_t delay_ms = 0;
  std::string error;
  std::vector<FakeOutput> outputs;  // what the call emitted, in order
};

struct FakeLogLine {
  int32_t level = 0;  // SQLSTREAMS_LOG_*
  std::string text;
};

// The descriptor of a C++ handler type (sqlstreams/plugin.hpp), without building a .so.
template <class Handler>
const sqlstreams_type_handler& descriptor_of() {
  static const sqlstreams_type_handler d = ::sqlstreams::detail::Adapter<Handler>::descriptor();
  return d;
}

// Runs the handler's validate(); returns its error text, or nullopt when accepted.
inline std::optional<std::string> validate(const sqlstreams_type_handler& d,
                                           std::string_view config) {
  FakeErrorSlot error;
  if (d.validate(config.data(), config.size(), error.get())) return std::nullopt;
  return error.text().value_or("(validate failed without an error message)");
}

// Runs the handler's validate(); returns its text and the key it named, or nullopt when
// accepted. `abi_minor` 0 plays a 1.0 host (no set_error_key in the slot).
inline std::optional<FakeRejection> validate_config(const sqlstreams_type_handler& d,
                                                    std::string_view config,
                                                    uint32_t abi_minor = SQLSTREAMS_ABI_MINOR) {
  FakeErrorSlot error(abi_minor);
  if (d.validate(config.data(), config.size(), error.get())) return std::nullopt;
  return FakeRejection{error.text().value_or("(validate failed without an error message)"),
                       error.key()};
}

class FakeHost {
 public:
  // Calls create(); throws std::runtime_error with the plugin's error when it fails.
  explicit FakeHost(const sqlstreams_type_handler& d, std::string_view config = "{}")
      : d_(d), api_{sizeof(sqlstreams_type_host_api),
                    0,
                    this,
                    &FakeHost::log,
                    &FakeHost::complete,
                    &FakeHost::emit} {
    FakeErrorSlot error;
    if (!d_.create(&api_, config.data(), config.size(), &instance_, error.get())) {
      throw std::runtime_error(error.text().value_or("create failed without an error message"));
    }
  }
  // Messages still pending after destroy() are freed (their futures report a broken promise);
  // a later completion of them is dropped.
  ~FakeHost() {
    d_.destroy(instance_);
    std::lock_guard<std::mutex> lock(registry().mu);
    std::erase_if(registry().pending, [&](const auto& kv) { return kv.second->owner == this; });
  }
  // From now on an emit to a stream outside `streams` is REJECTED (default: any stream).
  void allow_emits(std::vector<std::string> streams) {
    std::lock_guard<std::mutex> lock(registry().mu);
    allowed_ = std::move(streams);
  }
  FakeHost(const FakeHost&) = delete;
  FakeHost& operator=(const FakeHost&) = delete;

  FakeOutcome handle(const FakeMessage& m) {
    sqlstreams_type_message msg = to_message(m);
    FakeErrorSlot error;
    sqlstreams_type_outcome out{};
    out.struct_size = sizeof out;
    out.error = error.get();
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      msg.call_token = registry().next++;
      registry().calls.emplace(msg.call_token, Call{this, {}});
    }
    d_.handle(instance_, &msg, &out);
    FakeOutcome result{out.code, out.delay_ms, error.text().value_or(""), {}};
    std::lock_guard<std::mutex> lock(registry().mu);
    result.outputs = std::move(registry().calls[msg.call_token].outputs);
    registry().calls.erase(msg.call_token);
    return result;
  }

  // ABI 1.2: hands a copy of `m` to handle_async(); the future gets the outcome the handler
  // completes with (from any thread). The copy lives until then. Throws std::logic_error for a
  // handler without handle_async.
  std::future<FakeOutcome> start(const FakeMessage& m) {
    if (d_.handle_async == nullptr) throw std::logic_error("the handler has no handle_async");
    auto p = std::make_unique<Pending>();
    p->owner = this;
    p->copy = m;
    p->message = to_message(p->copy);
    auto future = p->promise.get_future();
    const sqlstreams_type_message* view = &p->message;
    uint64_t token;
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      token = registry().next++;
      p->message.call_token = token;
      registry().pending.emplace(token, std::move(p));
      registry().calls.emplace(token, Call{this, {}});
    }
    d_.handle_async(instance_, view, token);
    return future;
  }
  bool asynchronous() const { return d_.handle_async != nullptr; }
  // Completions of unknown or already completed tokens (all FakeHosts of the process).
  static uint64_t dropped_completions() {
    std::lock_guard<std::mutex> lock(registry().mu);
    return registry().dropped;
  }

 private:
  struct Pending {
    const FakeHost* owner = nullptr;
    FakeMessage copy;
    sqlstreams_type_message message{};
    std::promise<FakeOutcome> promise;
  };
  struct Call {
    const FakeHost* owner = nullptr;
    std::vector<FakeOutput> outputs;
  };
  struct Registry {
    std::mutex mu;
    uint64_t next = 1;
    uint64_t dropped = 0;
    std::map<uint64_t, std::unique_ptr<Pending>> pending;
    std::map<uint64_t, Call> calls;  // calls in progress (emit tokens)
  };
  static Registry& registry() {
    static Registry* r = new Registry();  // completions may come from threads at exit
    return *r;
  }
  static bool complete(uint64_t token, int32_t code, int64_t delay_ms, const char* error,
                       size_t len) {
    std::unique_ptr<Pending> p;
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      auto it = registry().pending.find(token);
      if (it == registry().pending.end()) {
        ++registry().dropped;
        return false;
      }
      p = std::move(it->second);
      registry().pending.erase(it);
    }
    FakeOutcome result{code, delay_ms, error != nullptr ? std::string(error, len) : "", {}};
    {
      std::lock_guard<std::mutex> lock(registry().mu);
      result.outputs = std::move(registry().calls[token].outputs);
      registry().calls.erase(token);
    }
    p->promise.set_value(std::move(result));
    return true;
  }

  static int32_t emit(uint64_t token, const sqlstreams_type_output* o, char* reason,
                      size_t reason_size) {
    auto refuse = [&](int32_t code, std::string_view why) {
      if (reason != nullptr && reason_size > 0) {
        const size_t n = why.size() < reason_size - 1 ? why.size() : reason_size - 1;
        std::memcpy(reason, why.data(), n);
        reason[n] = '\0';
      }
      return code;
    };
    std::lock_guard<std::mutex> lock(registry().mu);
    auto it = registry().calls.find(token);
    if (it == registry().calls.end() || o == nullptr) {
      return refuse(SQLSTREAMS_EMIT_CLOSED, "fake host: no call in progress has this token");
    }
    FakeOutput out;
    out.stream.assign(o->stream.data != nullptr ? o->stream.data : "", o->stream.len);
    const auto& allowed = it->second.owner->allowed_;
    if (allowed && std::find(allowed->begin(), allowed->end(), out.stream) == allowed->end()) {
      return refuse(SQLSTREAMS_EMIT_REJECTED,
                    "fake host: stream '" + out.stream + "' is not one the group emits to");
    }
    out.payload.assign(reinterpret_cast<const char*>(o->payload.data), o->payload.len);
    out.schema_version = o->schema_version;
    if (o->message_key.data != nullptr) out.key.emplace(o->message_key.data, o->message_key.len);
    if (o->idempotency_key.data != nullptr) {
      out.idempotency_key.emplace(o->idempotency_key.data, o->idempotency_key.len);
    }
    it->second.outputs.push_back(std::move(out));
    return SQLSTREAMS_EMIT_OK;
  }

  static sqlstreams_type_message to_message(const FakeMessage& m) {
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
    return msg;
  }

 public:
  bool concurrent() const { return (d_.flags & SQLSTREAMS_HANDLER_CONCURRENT) != 0; }
  const std::vector<FakeLogLine>& logs() const { return logs_; }

 private:
  static void log(void* ctx, int32_t level, const char* text, size_t len) {
    auto* self = static_cast<FakeHost*>(ctx);
    std::lock_guard<std::mutex> lock(self->mu_);
    self->logs_.push_back({level, std::string(text, len)});
  }

  const sqlstreams_type_handler d_;
  sqlstreams_type_host_api api_;
  void* instance_ = nullptr;
  std::mutex mu_;
  std::vector<FakeLogLine> logs_;
  std::optional<std::vector<std::string>> allowed_;  // under registry().mu
};

}  // namespace sqlstreams::testing
