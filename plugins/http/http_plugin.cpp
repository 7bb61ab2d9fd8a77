// http.so — handler `http`: push delivery. Each message is sent to the group's HTTP endpoint
// (its payload as the body, its metadata as headers, signed the Standard Webhooks way when a
// signing secret is configured) and the answer decides the outcome (outcome.hpp): 2xx OK;
// 408, 425, 429, 5xx, no answer RETRY (a Retry-After: DELAY); other statuses TERMINAL with the
// status and a printable prefix of the body. With `batch_max` > 1 the messages go N to a request
// as a JSON array (batcher.hpp). See README.md here.
// Threading: concurrent; handle_async() from any number of host threads hands the request to
// the Dispatcher, whose transfer threads complete every message.
#include <chrono>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sqlstreams/plugin.hpp>
#include <string>

#include "batcher.hpp"
#include "dispatcher.hpp"
#include "endpoint.hpp"
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

// A JSON string of producer-chosen text (a message key): invalid UTF-8 replaced, never thrown.
std::string json_string(std::string_view text) {
  return nlohmann::json(std::string(text))
      .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

class HttpDelivery : public sqlstreams::AsyncTypedHandler<std::string_view> {
 public:
  static constexpr const char* kName = "http";
  static constexpr int kSchemaVersion = 1;
  static constexpr bool kConcurrent = true;

  static void validate(const nlohmann::json& config) { (void)Settings::read(config); }

  explicit HttpDelivery(const nlohmann::json& config)
      : settings_(Settings::read(config)), dispatcher_(settings_) {
    if (settings_.batch_max > 1) {
      batcher_ = std::make_unique<Batcher>(
          settings_, dispatcher_,
          [this](size_t count, int64_t first, int64_t last, const std::string& body) {
            // Deduplicate a batch's messages by their "id" (the composition of a batch
            // differs between attempts).
            std::string h = headers(
                fmt_id(first) + "-" + std::to_string(last) + ":" + std::to_string(count), body);
            add_header(h, "sqlstreams-batch-size", std::to_string(count));
            return h;
          });
    }
  }

  void handle_async(std::string_view payload, const sqlstreams::MessageContext& m,
                    sqlstreams::Completion done) override {
    auto completion = std::make_shared<sqlstreams::Completion>(std::move(done));
    remember_names(m);
    if (batcher_) {
      BatchItem item;
      item.id = m.id;
      item.element = element(payload, m);
      item.done = [completion](const Decision& d) { completion->complete(to_result(d)); };
      batcher_->add(std::move(item));
      return;
    }
    Request request;
    request.body.assign(payload);
    // The same id on every attempt of a message: a receiver deduplicates by it.
    std::string& h = request.header_lines;
    h = headers(fmt_id(m.id), request.body);
    add_header(h, "sqlstreams-message-id", std::to_string(m.id));
    if (m.message_key) add_header(h, "sqlstreams-key", header_safe(*m.message_key));
    add_header(h, "sqlstreams-schema-version", std::to_string(m.schema_version));
    add_header(h, "sqlstreams-attempt", std::to_string(m.attempt));
    add_header(h, "sqlstreams-created-at", std::to_string(m.created_at_unix_ms));
    const AnswerPolicy& policy = settings_.answers;
    request.done = [completion, &policy](Answer answer) {
      completion->complete(to_result(decide(answer, policy, unix_now_s())));
    };
    dispatcher_.submit(std::move(request));
  }

 private:
  // One instance serves one group of one stream: the names are the same for every message.
  void remember_names(const sqlstreams::MessageContext& m) {
    std::call_once(names_once_, [&] {
      stream_ = header_safe(m.stream);
      group_ = header_safe(m.group);
    });
  }

  std::string fmt_id(int64_t id) const {
    return "sqlstreams:" + stream_ + ":" + std::to_string(id);
  }

  // The header lines every request carries; `id` is its webhook-id.
  std::string headers(const std::string& id, const std::string& body) const {
    const int64_t now = unix_now_s();
    std::string h;
    // Room for the lines below, the request line, Host and Content-Length that request_head()
    // adds in this buffer, and the body, which Dispatcher::submit appends to it.
    h.reserve(640 + body.size());
    add_header(h, "Content-Type", "application/json");
    add_header(h, "webhook-id", id);
    add_header(h, "webhook-timestamp", std::to_string(now));
    if (!settings_.signing_key.empty()) {
      add_header(h, "webhook-signature", webhook_signature(settings_.signing_key, id, now, body));
    }
    if (!settings_.bearer_token.empty()) {
      add_header(h, "Authorization", "Bearer " + settings_.bearer_token);
    }
    add_header(h, "sqlstreams-stream", stream_);
    add_header(h, "sqlstreams-group", group_);
    for (const auto& [name, value] : settings_.headers) add_header(h, name, value);
    return h;
  }

  // The message as an element of a batch's array (its payload verbatim).
  static std::string element(std::string_view payload, const sqlstreams::MessageContext& m) {
    std::string e = "{\"id\":" + std::to_string(m.id);
    e += ",\"key\":" + (m.message_key ? json_string(*m.message_key) : std::string("null"));
    e += ",\"schema_version\":" + std::to_string(m.schema_version);
    e += ",\"attempt\":" + std::to_string(m.attempt);
    e += ",\"created_at\":" + std::to_string(m.created_at_unix_ms);
    e += ",\"payload\":";
    e.append(payload);
    e += '}';
    return e;
  }

  const Settings settings_;
  std::once_flag names_once_;
  std::string stream_;  // header-safe; set once by the first message (names_once_)
  std::string group_;
  Dispatcher dispatcher_;             // after settings_; destroyed after batcher_
  std::unique_ptr<Batcher> batcher_;  // batch mode only; destroyed first: hands nothing more
};

}  // namespace
}  // namespace sqlstreams_http

SQLSTREAMS_PLUGIN("http", "1.0.0", sqlstreams_http::HttpDelivery)
