// EmitRegistry: 64 shards of token → buffer maps; check_output's JSON pass (nlohmann's SAX
// parser, no document built).
#include "plugin_host/emit_registry.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <nlohmann/json.hpp>
#include <unordered_map>

#include "common/utf8.hpp"
#include "plugin_host/async_registry.hpp"

namespace sqlstreams::plugin_host {

// One open call's outputs (a named namespace: EmitRegistry::Shard holds them).
namespace emit_detail {
struct EmitBuffer {
  std::mutex mu;
  std::shared_ptr<const EmitPolicy> policy;
  std::vector<Output> outputs;
  int64_t bytes = 0;
  bool closed = false;
};
}  // namespace emit_detail
using emit_detail::EmitBuffer;

namespace {
constexpr size_t kEmitShards = 64;

// Walks a JSON text once: the first value must be an object; no string or key may hold NUL
// (jsonb cannot store U+0000); bounds what jsonb's text form can take.
class PayloadCheck : public nlohmann::json_sax<nlohmann::json> {
 public:
  explicit PayloadCheck(size_t input_bytes) : bound_(static_cast<int64_t>(input_bytes)) {}
  std::string error;
  int64_t bound() const { return bound_; }

  bool null() override { return value(); }
  bool boolean(bool) override { return value(); }
  bool number_integer(number_integer_t) override { return value(); }
  bool number_unsigned(number_unsigned_t) override { return value(); }
  bool number_float(number_float_t, const string_t& raw) override {
    const auto e = raw.find_first_of("eE");
    if (e != string_t::npos) {
      long exponent = 0;
      try {
        exponent = std::stol(raw.substr(e + 1));
      } catch (const std::exception&) {
        exponent = kMaxOutputExponent + 1;  // out of long's range: far too large
      }
      if (exponent > kMaxOutputExponent || exponent < -kMaxOutputExponent) {
        return fail(fmt::format("the number {} has an exponent beyond ±{}", raw.substr(0, 40),
                                kMaxOutputExponent));
      }
      bound_ += std::labs(exponent) + 2;  // written out: the zeros, "0." and a sign at most
    }
    return value();
  }
  bool string(string_t& s) override {
    if (s.find('\0') != string_t::npos) return fail("a string holds \\u0000 (jsonb cannot)");
    return value();
  }
  bool binary(binary_t&) override { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) override {
    if (depth_ == 0 && seen_first_) return fail("more than one JSON value");
    if (depth_ == 0) seen_first_ = true;
    value_in_array();
    return push(true);
  }
  bool key(string_t& k) override {
    if (k.find('\0') != string_t::npos) return fail("a key holds \\u0000 (jsonb cannot)");
    bound_ += 1;                             // the space of ": "
    if (members_.back()++ > 0) bound_ += 1;  // the space of ", " before it
    return true;
  }
  bool end_object() override { return pop(); }
  bool start_array(std::size_t) override {
    if (depth_ == 0) return fail("the payload is a JSON array, not an object");
    value_in_array();
    return push(false);
  }
  bool end_array() override { return pop(); }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& ex) override {
    if (error.empty() && ex.id == 406) {  // out_of_range.406: beyond a double
      error = "a number is too large (beyond a double's range)";
    } else if (error.empty()) {
      std::string what = ex.what();
      if (auto at = what.find("syntax error"); at != std::string::npos) what = what.substr(at);
      error = fmt::format("not valid JSON at byte {}: {}", position, sanitize_utf8(what, 300));
    }
    return false;
  }

 private:
  bool value() {
    if (depth_ == 0) return fail("the payload is not a JSON object");
    value_in_array();
    return true;
  }
  void value_in_array() {
    // An array's element after the first: the space of ", " before it.
    if (!in_object_.empty() && !in_object_.back() && members_.back()++ > 0) bound_ += 1;
  }
  bool push(bool object) {
    if (++depth_ > kMaxOutputDepth) {
      return fail(fmt::format("nested deeper than {} levels", kMaxOutputDepth));
    }
    in_object_.push_back(object);
    members_.push_back(0);
    return true;
  }
  bool pop() {
    --depth_;
    in_object_.pop_back();
    members_.pop_back();
    return true;
  }
  bool fail(std::string why) {
    if (error.empty()) error = std::move(why);
    return false;
  }
  int64_t bound_;
  size_t depth_ = 0;
  bool seen_first_ = false;
  std::vector<bool> in_object_;  // per open container: an object (else an array)
  std::vector<size_t> members_;  // per open container: members or elements so far
};

// "" when `text` is 1..max bytes of UTF-8 without NUL.
std::string check_text(std::string_view what, std::string_view text, size_t max) {
  if (text.empty()) return fmt::format("{} is empty", what);
  if (text.size() > max) return fmt::format("{} has {} bytes (at most {})", what, text.size(), max);
  if (text.find('\0') != std::string_view::npos) return fmt::format("{} holds a NUL byte", what);
  if (!is_clean_utf8(text)) return fmt::format("{} is not valid UTF-8", what);
  return {};
}

}  // namespace

std::string check_output_payload(std::string_view json, int64_t max_bytes) {
  PayloadCheck check(json.size());
  const bool ok = nlohmann::json::sax_parse(json.begin(), json.end(), &check,
                                            nlohmann::json::input_format_t::json, true);
  if (!ok || !check.error.empty()) {
    return check.error.empty() ? std::string("not a JSON object") : check.error;
  }
  if (check.bound() > max_bytes) {
    return fmt::format(
        "the payload may take up to {} bytes once stored, past the stream's max_payload_bytes "
        "{} (the bound counts {} bytes sent plus jsonb's spacing and written-out exponents)",
        check.bound(), max_bytes, json.size());
  }
  return {};
}

std::string check_output(const EmitPolicy& policy, const Output& output) {
  auto stream = policy.max_payload_bytes.find(output.stream);
  if (stream == policy.max_payload_bytes.end()) {
    std::string declared;
    for (const auto& [name, max] : policy.max_payload_bytes) {
      declared += (declared.empty() ? "" : ", ") + name;
    }
    return fmt::format("stream '{}' is not one the group emits to (emits: {})",
                       sanitize_utf8(output.stream, 256), declared);
  }
  if (output.schema_version < 1) {
    return fmt::format("schema_version {} (must be >= 1)", output.schema_version);
  }
  if (output.key) {
    if (auto why = check_text("the message_key", *output.key, kMaxOutputKeyBytes); !why.empty()) {
      return why;
    }
  }
  if (output.idempotency_key) {
    if (auto why = check_text("the idempotency_key", *output.idempotency_key,
                              kMaxOutputIdempotencyKeyBytes);
        !why.empty()) {
      return why;
    }
  }
  if (auto why = check_output_payload(output.payload, stream->second); !why.empty()) {
    return "payload to '" + output.stream + "': " + why;
  }
  return {};
}

struct EmitRegistry::Shard {
  std::mutex mu;
  std::unordered_map<uint64_t, std::shared_ptr<EmitBuffer>> buffers;
};

namespace {
std::array<EmitRegistry::Shard*, kEmitShards>& emit_shards() {
  static auto* all = [] {
    auto* a = new std::array<EmitRegistry::Shard*, kEmitShards>();
    for (auto& s : *a) s = new EmitRegistry::Shard();
    return a;
  }();
  return *all;
}
EmitRegistry::Shard& shard_of(uint64_t token) { return *emit_shards()[token % kEmitShards]; }
}  // namespace

EmitRegistry& EmitRegistry::instance() {
  static auto* registry = new EmitRegistry();
  return *registry;
}

void EmitRegistry::open(uint64_t token, std::shared_ptr<const EmitPolicy> policy) {
  auto buffer = std::make_shared<EmitBuffer>();
  buffer->policy = std::move(policy);
  Shard& s = shard_of(token);
  std::lock_guard lock(s.mu);
  s.buffers[token] = std::move(buffer);
}

int32_t EmitRegistry::emit(uint64_t token, const sqlstreams_type_output& o,
                           std::string& reason) noexcept {
  try {
    std::shared_ptr<EmitBuffer> buffer;
    {
      Shard& s = shard_of(token);
      std::lock_guard lock(s.mu);
      if (auto it = s.buffers.find(token); it != s.buffers.end()) buffer = it->second;
    }
    if (!buffer) {
      reason = token == 0 ? "this call may not emit: its group declares no emits"
                          : "no call in progress has this token (it returned, completed, timed "
                            "out or was given up)";
      return SQLSTREAMS_EMIT_CLOSED;
    }
    Output out;
    if (o.stream.data != nullptr) out.stream.assign(o.stream.data, o.stream.len);
    if (o.payload.data != nullptr) {
      out.payload.assign(reinterpret_cast<const char*>(o.payload.data), o.payload.len);
    }
    out.schema_version = o.schema_version;
    if (o.message_key.data != nullptr) out.key.emplace(o.message_key.data, o.message_key.len);
    if (o.idempotency_key.data != nullptr) {
      out.idempotency_key.emplace(o.idempotency_key.data, o.idempotency_key.len);
    }
    std::lock_guard lock(buffer->mu);
    if (buffer->closed) {
      reason = "the call is over";
      return SQLSTREAMS_EMIT_CLOSED;
    }
    const EmitPolicy& policy = *buffer->policy;
    if (buffer->outputs.size() >= policy.max_count) {
      reason = fmt::format("the call emitted max_emits_per_message ({}) already", policy.max_count);
      return SQLSTREAMS_EMIT_LIMIT;
    }
    const auto bytes = static_cast<int64_t>(out.payload.size());
    if (buffer->bytes + bytes > policy.max_bytes) {
      reason = fmt::format(
          "this output's {} payload bytes would pass max_emit_bytes_per_message ({}; {} emitted)",
          bytes, policy.max_bytes, buffer->bytes);
      return SQLSTREAMS_EMIT_LIMIT;
    }
    if (auto why = check_output(policy, out); !why.empty()) {
      reason = std::move(why);
      return SQLSTREAMS_EMIT_REJECTED;
    }
    buffer->bytes += bytes;
    buffer->outputs.push_back(std::move(out));
    return SQLSTREAMS_EMIT_OK;
  } catch (...) {
    reason = "out of memory";
    return SQLSTREAMS_EMIT_LIMIT;
  }
}

std::vector<Output> EmitRegistry::close(uint64_t token) noexcept {
  std::shared_ptr<EmitBuffer> buffer;
  {
    Shard& s = shard_of(token);
    std::lock_guard lock(s.mu);
    auto it = s.buffers.find(token);
    if (it == s.buffers.end()) return {};
    buffer = std::move(it->second);
    s.buffers.erase(it);
  }
  std::lock_guard lock(buffer->mu);
  buffer->closed = true;
  return std::move(buffer->outputs);
}

size_t EmitRegistry::open_calls() const {
  size_t n = 0;
  for (Shard* s : emit_shards()) {
    std::lock_guard lock(s->mu);
    n += s->buffers.size();
  }
  return n;
}

uint64_t draw_call_token() { return AsyncRegistry::instance().draw_token(); }

int32_t host_emit(uint64_t call_token, const sqlstreams_type_output* output, char* reason,
                  size_t reason_size) noexcept {
  std::string why;
  int32_t code;
  if (output == nullptr) {
    code = SQLSTREAMS_EMIT_REJECTED;
    why = "output is NULL";
  } else {
    // Copy at most what the plugin declared (ABI rule): a shorter struct lacks later fields.
    sqlstreams_type_output o{};
    std::memcpy(&o, output, std::min<size_t>(output->struct_size, sizeof o));
    code = EmitRegistry::instance().emit(call_token, o, why);
  }
  if (code != SQLSTREAMS_EMIT_OK && reason != nullptr && reason_size > 0) {
    const std::string text = sanitize_utf8(why, reason_size - 1);
    const size_t n = std::min(text.size(), reason_size - 1);
    std::memcpy(reason, text.data(), n);
    reason[n] = '\0';
  }
  return code;
}

}  // namespace sqlstreams::plugin_host
