// http.so — handler `http`: push delivery. Each message is sent to the group's HTTP endpoint
// (its payload as the body, its metadata as headers, signed the Standard Webhooks way when a
// signing secret is configured) and the answer decides the outcome (outcome.hpp): 2xx OK;
// 408, 425, 429, 5xx, no answer RETRY (a Retry-After: DELAY); other statuses TERMINAL with the
// status and a printable prefix of the body. See README.md here.
// Threading: concurrent; handle_async() from any number of host threads files the request with
// one CurlDispatcher thread, which completes every message.
#include <chrono>
#include <memory>
#include <sqlstreams/plugin.hpp>
#include <string>

#include "curl_dispatcher.hpp"
#include "settings.hpp"
#include "webhook_signature.hpp"

namespace sqlstreams_http {
namespace {

// Header values from producer-chosen text (a message key): percent-encode every byte that is
// not printable ASCII, and '%' itself, so no key can add a header or break a line.
std::string header_safe(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (c < 0x20 || c >= 0x7f || c == '%') {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 0xf];
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

sqlstreams::Result to_result(const Decision& d) {
  switch (d.verdict) {
    case Verdict::kOk:
      return sqlstreams::ok();
    case Verdict::kDelay:
      return sqlstreams::delay(d.delay_ms);
    case Verdict::kTerminal:
      return {sqlstreams::Code::kTerminal, {}, d.error};
    case Verdict::kRetry:
      break;
  }
  return sqlstreams::retry(d.error);
}

int64_t unix_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class HttpDelivery : public sqlstreams::AsyncTypedHandler<std::string_view> {
 public:
  static constexpr const char* kName = "http";
  static constexpr int kSchemaVersion = 1;
  static constexpr bool kConcurrent = true;

  static void validate(const nlohmann::json& config) { (void)Settings::read(config); }

  explicit HttpDelivery(const nlohmann::json& config)
      : settings_(Settings::read(config)), dispatcher_(settings_) {}

  void handle_async(std::string_view payload, const sqlstreams::MessageContext& m,
                    sqlstreams::Completion done) override {
    Request request;
    request.body.assign(payload);
    // The same id on every attempt of a message: a receiver deduplicates by it.
    const std::string id = "sqlstreams:" + std::string(m.stream) + ":" + std::to_string(m.id);
    const int64_t now = unix_now_s();
    auto& h = request.headers;
    h.push_back("Content-Type: application/json");
    h.push_back("Expect:");  // no 100-continue round trip
    h.push_back("webhook-id: " + header_safe(id));
    h.push_back("webhook-timestamp: " + std::to_string(now));
    if (!settings_.signing_key.empty()) {
      h.push_back("webhook-signature: " +
                  webhook_signature(settings_.signing_key, header_safe(id), now, payload));
    }
    if (!settings_.bearer_token.empty()) {
      h.push_back("Authorization: Bearer " + settings_.bearer_token);
    }
    h.push_back("sqlstreams-message-id: " + std::to_string(m.id));
    h.push_back("sqlstreams-stream: " + header_safe(m.stream));
    h.push_back("sqlstreams-group: " + header_safe(m.group));
    if (m.message_key) h.push_back("sqlstreams-key: " + header_safe(*m.message_key));
    h.push_back("sqlstreams-schema-version: " + std::to_string(m.schema_version));
    h.push_back("sqlstreams-attempt: " + std::to_string(m.attempt));
    h.push_back("sqlstreams-created-at: " + std::to_string(m.created_at_unix_ms));
    for (const auto& [name, value] : settings_.headers) h.push_back(name + ": " + value);
    auto completion = std::make_shared<sqlstreams::Completion>(std::move(done));
    const AnswerPolicy& policy = settings_.answers;
    request.done = [completion, &policy](Answer answer) {
      completion->complete(to_result(decide(answer, policy, unix_now_s())));
    };
    dispatcher_.submit(std::move(request));
  }

 private:
  const Settings settings_;
  CurlDispatcher dispatcher_;  // after settings_; destroyed first: its thread stops first
};

}  // namespace
}  // namespace sqlstreams_http

SQLSTREAMS_PLUGIN("http", "1.0.0", sqlstreams_http::HttpDelivery)
