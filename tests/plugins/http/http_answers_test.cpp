// plugins/http's pure parts: Standard Webhooks signatures (the specification's own example),
// what each answer means (a table), Retry-After, the printable body prefix, and the settings'
// located errors.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdio>
#include <fstream>
#include <sqlstreams/config_reader.hpp>

#include "outcome.hpp"
#include "settings.hpp"
#include "webhook_signature.hpp"

namespace sqlstreams_http {
namespace {

// The example of the Standard Webhooks specification (and of its reference libraries' tests).
TEST(WebhookSignature, MatchesTheSpecificationsExample) {
  const std::string key = decode_signing_secret("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw");
  EXPECT_EQ(
      webhook_signature(key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, R"({"test": 2432232314})"),
      "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=");
}

TEST(WebhookSignature, BadSecretsAreRefusedWithoutQuotingThem) {
  for (const char* secret : {"", "whsec_", "whsec_abc", "whsec_!!!!", "whsec_YWJj"}) {
    try {
      decode_signing_secret(secret);
      ADD_FAILURE() << "accepted " << secret;
    } catch (const std::invalid_argument& e) {
      if (std::string(secret).size() > 6) {
        EXPECT_EQ(std::string(e.what()).find(std::string(secret).substr(6)), std::string::npos);
      }
    }
  }
}

TEST(StatusPattern, ParsesOneStatusOrAClass) {
  EXPECT_TRUE(parse_status_pattern("404").matches(404));
  EXPECT_FALSE(parse_status_pattern("404").matches(405));
  EXPECT_TRUE(parse_status_pattern("5xx").matches(503));
  EXPECT_FALSE(parse_status_pattern("5xx").matches(600));
  for (const char* bad : {"", "4", "40", "4045", "6xx", "0xx", "4x4", "abc", "-40"}) {
    EXPECT_THROW(parse_status_pattern(bad), std::invalid_argument) << bad;
  }
}

TEST(RetryAfter, SecondsOrAnHttpDate) {
  const int64_t now = 1'700'000'000;  // 2023-11-14T22:13:20Z
  EXPECT_EQ(parse_retry_after("120", now), 120'000);
  EXPECT_EQ(parse_retry_after(" 0 ", now), 0);
  EXPECT_EQ(parse_retry_after("Tue, 14 Nov 2023 22:13:50 GMT", now), 30'000);
  EXPECT_EQ(parse_retry_after("Tue, 14 Nov 2023 22:00:00 GMT", now), 0);  // past
  EXPECT_EQ(parse_retry_after("", now), std::nullopt);
  EXPECT_EQ(parse_retry_after("soon", now), std::nullopt);
  EXPECT_EQ(parse_retry_after("-5", now), std::nullopt);
  EXPECT_EQ(parse_retry_after("1.5", now), std::nullopt);
}

TEST(PrintablePrefix, EscapesControlBytesAndInvalidUtf8AndCutsOnACharacter) {
  EXPECT_EQ(printable_prefix("ok", 10), "ok");
  EXPECT_EQ(printable_prefix(std::string("a\nb\0c\\", 6), 100), "a\\nb\\x00c\\\\");
  EXPECT_EQ(printable_prefix("\xff\xfe", 100), "\\xff\\xfe");
  EXPECT_EQ(printable_prefix("é€😀", 100), "é€😀");
  EXPECT_EQ(printable_prefix("ééé", 5), "éé…");  // never half a character
  EXPECT_EQ(printable_prefix("abc", 0), "…");
  EXPECT_EQ(printable_prefix("", 0), "");
}

struct AnswerCase {
  const char* name;
  Answer answer;
  Verdict verdict;
  int64_t delay_ms;
  const char* error_has;
};

TEST(Decide, EachAnswerHasItsOutcome) {
  const AnswerPolicy policy;
  const int64_t now = 1'700'000'000;
  const AnswerCase cases[] = {
      {"200", {"", 200, {}, ""}, Verdict::kOk, 0, ""},
      {"204", {"", 204, {}, ""}, Verdict::kOk, 0, ""},
      {"no answer",
       {"Couldn't connect to server", 0, {}, ""},
       Verdict::kRetry,
       0,
       "no HTTP answer: Couldn't connect"},
      {"408", {"", 408, {}, ""}, Verdict::kRetry, 0, "HTTP 408"},
      {"425", {"", 425, {}, ""}, Verdict::kRetry, 0, "HTTP 425"},
      {"429", {"", 429, {}, "busy"}, Verdict::kRetry, 0, "HTTP 429: busy"},
      {"429 + Retry-After", {"", 429, "7", ""}, Verdict::kDelay, 7000, ""},
      {"503 + Retry-After date",
       {"", 503, "Tue, 14 Nov 2023 22:13:30 GMT", ""},
       Verdict::kDelay,
       10000,
       ""},
      {"503 + unreadable Retry-After", {"", 503, "later", ""}, Verdict::kRetry, 0, "HTTP 503"},
      {"429 + huge Retry-After", {"", 429, "99999999", ""}, Verdict::kDelay, 3600000, ""},
      {"500", {"", 500, {}, "boom"}, Verdict::kRetry, 0, "HTTP 500: boom"},
      {"400", {"", 400, {}, "bad field\n"}, Verdict::kTerminal, 0, "HTTP 400: bad field\\n"},
      {"404", {"", 404, {}, ""}, Verdict::kTerminal, 0, "HTTP 404"},
      {"301", {"", 301, {}, ""}, Verdict::kTerminal, 0, "HTTP 301"},
      {"400 + Retry-After", {"", 400, "5", ""}, Verdict::kTerminal, 0, "HTTP 400"},
  };
  for (const auto& c : cases) {
    const Decision d = decide(c.answer, policy, now);
    EXPECT_EQ(d.verdict, c.verdict) << c.name;
    EXPECT_EQ(d.delay_ms, c.delay_ms) << c.name;
    EXPECT_NE(d.error.find(c.error_has), std::string::npos) << c.name << ": " << d.error;
  }
}

TEST(Decide, TheListsAreConfigurableAndTheBodyPrefixBounded) {
  AnswerPolicy policy;
  policy.ok = {parse_status_pattern("2xx"), parse_status_pattern("409")};
  policy.retry = {parse_status_pattern("503")};
  policy.error_body_bytes = 8;
  EXPECT_EQ(decide({"", 409, {}, ""}, policy, 0).verdict, Verdict::kOk);
  EXPECT_EQ(decide({"", 500, {}, ""}, policy, 0).verdict, Verdict::kTerminal);
  const Decision d = decide({"", 503, {}, std::string(1000, 'x')}, policy, 0);
  EXPECT_EQ(d.verdict, Verdict::kRetry);
  EXPECT_EQ(d.error, "HTTP 503: xxxxxxxx…");
}

TEST(DecideBatch, TheStatusDecidesForAllUnlessTheReceiverNamesOutcomes) {
  const AnswerPolicy policy;
  const std::vector<int64_t> ids = {17, 18, 19, 20, 21};
  // A refusal or no answer: the same for every message.
  for (const auto& d : decide_batch({"", 503, {}, ""}, policy, 0, ids)) {
    EXPECT_EQ(d.verdict, Verdict::kRetry);
  }
  for (const auto& d :
       decide_batch({"", 400, {}, R"({"results":[{"id":17,"outcome":"ok"}]})"}, policy, 0, ids)) {
    EXPECT_EQ(d.verdict, Verdict::kTerminal) << "results count only in a 2xx answer";
  }
  // 2xx with results: each named message its own; unnamed ones OK.
  const auto d =
      decide_batch({"",
                    200,
                    {},
                    R"({"results":[{"id":17,"outcome":"retry","error":"stock\n"},)"
                    R"({"id":18,"outcome":"delay","delay_ms":99999999999},)"
                    R"({"id":19,"outcome":"terminal"},{"id":20,"outcome":"maybe"},)"
                    R"({"id":99,"outcome":"terminal"},{"id":"21","outcome":"terminal"},7]})"},
                   policy, 0, ids);
  EXPECT_EQ(d[0].verdict, Verdict::kRetry);
  EXPECT_EQ(d[0].error, "receiver: stock\\n");
  EXPECT_EQ(d[1].verdict, Verdict::kDelay);
  EXPECT_EQ(d[1].delay_ms, policy.max_retry_after_ms);
  EXPECT_EQ(d[2].verdict, Verdict::kTerminal);
  EXPECT_EQ(d[3].verdict, Verdict::kRetry) << "an outcome the handler does not know";
  EXPECT_NE(d[3].error.find("maybe"), std::string::npos);
  EXPECT_EQ(d[4].verdict, Verdict::kOk) << "a string id names nothing";
  // A 2xx body that is not JSON (or not the contract): all OK.
  for (const auto& body : {"ok", "[1,2]", R"({"results":5})", "{"}) {
    for (const auto& x : decide_batch({"", 200, {}, body}, policy, 0, ids)) {
      EXPECT_EQ(x.verdict, Verdict::kOk) << body;
    }
  }
}

// A secret file of the test's own (mode 0600 unless said otherwise).
std::string secret_file(const std::string& text, mode_t mode = 0600) {
  char path[] = "/tmp/sqlstreams-http-secret-XXXXXX";
  const int fd = mkstemp(path);
  (void)!write(fd, text.data(), text.size());
  close(fd);
  chmod(path, mode);
  return path;
}

std::string error_key(const nlohmann::json& config, std::string* message = nullptr) {
  try {
    Settings::read(config);
  } catch (const sqlstreams::ConfigError& e) {
    if (message != nullptr) *message = e.what();
    return e.key();
  }
  return "(accepted)";
}

TEST(HttpSettings, EveryBadValueNamesItsKey) {
  using nlohmann::json;
  const std::string world_readable = secret_file("token", 0644);
  const std::string empty = secret_file("");
  const std::string bad_secret = secret_file("whsec_not base64");
  EXPECT_EQ(error_key(json::object()), "url");
  EXPECT_EQ(error_key({{"url", "ftp://x"}}), "url");
  EXPECT_EQ(error_key({{"url", "http://user:pw@x/"}}), "url");
  EXPECT_EQ(error_key({{"url", "http://x/a b"}}), "url");
  EXPECT_EQ(error_key({{"url", "http://"}}), "url");
  EXPECT_EQ(error_key({{"url", "http://x:0/"}}), "url");
  EXPECT_EQ(error_key({{"url", "http://x:99999/"}}), "url");
  EXPECT_EQ(error_key({{"url", "http://[::1/"}}), "url");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"method", "GET"}}), "method");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"timeout_ms", 0}}), "timeout_ms");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"timeout_ms", "1s"}}), "timeout_ms");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"headers", {{"Authorization", "x"}}}}),
            "headers.Authorization");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"headers", {{"webhook-id", "x"}}}}),
            "headers.webhook-id");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"headers", {{"X-A", "a\r\nX-B: b"}}}}), "headers.X-A");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"headers", {{"X A", "a"}}}}), "headers.X A");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"retry_statuses", {"5xx", "7xx"}}}),
            "retry_statuses[1]");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"tls_client_cert_file", "/etc/hostname"}}),
            "tls_client_key_file");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"bearer_token_file", "relative/path"}}),
            "bearer_token_file");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"bearer_token_file", "/nonexistent/token"}}),
            "bearer_token_file");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"bearer_token_file", world_readable}}),
            "bearer_token_file");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"bearer_token_file", empty}}), "bearer_token_file");
  std::string message;
  EXPECT_EQ(error_key({{"url", "http://x"}, {"signing_secret_file", bad_secret}}, &message),
            "signing_secret_file");
  EXPECT_NE(message.find("base64"), std::string::npos) << message;
  EXPECT_EQ(message.find("whsec_not"), std::string::npos) << "the secret is never quoted";
  EXPECT_EQ(error_key({{"url", "http://x"}, {"batch_max", 0}}), "batch_max");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"batch_max", 1001}}), "batch_max");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"batch_linger_ms", -1}}), "batch_linger_ms");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"batch_max_bytes", 10}}), "batch_max_bytes");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"transfer_threads", 0}}), "transfer_threads");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"transfer_threads", 17}}), "transfer_threads");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"pipeline_depth", 0}}), "pipeline_depth");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"pipeline_depth", 65}}), "pipeline_depth");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"pipeline_depth", "4"}}), "pipeline_depth");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"uri", "http://y"}}, &message), "uri");
  EXPECT_NE(message.find("known:"), std::string::npos);
  for (const auto& f : {world_readable, empty, bad_secret}) std::remove(f.c_str());
}

TEST(HttpSettings, TheProxyIsAnHttpHostAndPortWithCredentialsFromAFile) {
  using nlohmann::json;
  const std::string credentials = secret_file("relay:s3cr3t-pw\n");
  const std::string no_colon = secret_file("relay\n");
  const std::string world_readable = secret_file("relay:pw", 0644);
  std::string message;
  EXPECT_EQ(error_key({{"url", "http://x"}, {"proxy", "https://proxy:3128"}}, &message), "proxy");
  EXPECT_NE(message.find("end to end"), std::string::npos) << message;
  EXPECT_EQ(error_key({{"url", "http://x"}, {"proxy", "socks5://proxy:1080"}}), "proxy");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"proxy", "proxy:3128"}}), "proxy");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"proxy", "http://u:pw@proxy:3128"}}, &message),
            "proxy");
  EXPECT_NE(message.find("proxy_credentials_file"), std::string::npos) << message;
  EXPECT_EQ(message.find("pw"), std::string::npos) << "the password is never quoted";
  EXPECT_EQ(error_key({{"url", "http://x"}, {"proxy", "http://proxy:3128/path"}}), "proxy");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"proxy", "http://proxy:0"}}), "proxy");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"proxy", "http://"}}), "proxy");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"proxy", 3128}}), "proxy");
  EXPECT_EQ(error_key({{"url", "http://x"}, {"proxy_credentials_file", credentials}}),
            "proxy_credentials_file")
      << "credentials without a proxy";
  EXPECT_EQ(error_key({{"url", "http://x"},
                       {"proxy", "http://proxy:3128"},
                       {"proxy_credentials_file", no_colon}},
                      &message),
            "proxy_credentials_file");
  EXPECT_EQ(message.find("relay"), std::string::npos) << "the file's content is never quoted";
  EXPECT_EQ(error_key({{"url", "http://x"},
                       {"proxy", "http://proxy:3128"},
                       {"proxy_credentials_file", world_readable}}),
            "proxy_credentials_file");
  for (const char* reserved : {"Proxy-Authorization", "Connection", "Transfer-Encoding"}) {
    EXPECT_EQ(error_key({{"url", "http://x"}, {"headers", {{reserved, "x"}}}}),
              std::string("headers.") + reserved);
  }
  const Settings s = Settings::read({{"url", "https://example.test/hook"},
                                     {"proxy", "http://proxy.internal:3128/"},
                                     {"proxy_credentials_file", credentials}});
  EXPECT_EQ(s.proxy, "http://proxy.internal:3128/");
  EXPECT_EQ(s.proxy_authorization, "Basic cmVsYXk6czNjcjN0LXB3");  // base64("relay:s3cr3t-pw")
  EXPECT_EQ(Settings::read({{"url", "http://x"}, {"proxy", "http://[::1]:3128"}}).proxy,
            "http://[::1]:3128");
  for (const auto& f : {credentials, no_colon, world_readable}) std::remove(f.c_str());
}

TEST(HttpSettings, AGoodConfigReadsItsSecretsFromFiles) {
  const std::string token = secret_file("tok-123\n");
  const std::string secret = secret_file("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw\n");
  const Settings s = Settings::read({{"url", "https://example.test/hook"},
                                     {"method", "PUT"},
                                     {"headers", {{"X-Team", "payments"}}},
                                     {"bearer_token_file", token},
                                     {"signing_secret_file", secret},
                                     {"ok_statuses", {"2xx", "409"}},
                                     {"error_body_bytes", 64},
                                     {"transfer_threads", 3}});
  EXPECT_EQ(s.method, "PUT");
  EXPECT_EQ(s.transfer_threads, 3);
  EXPECT_EQ(Settings::read({{"url", "http://x"}}).transfer_threads, 2) << "the default";
  EXPECT_EQ(Settings::read({{"url", "http://x"}}).pipeline_depth, 1) << "no pipelining by default";
  EXPECT_EQ(Settings::read({{"url", "http://x"}, {"pipeline_depth", 64}}).pipeline_depth, 64);
  EXPECT_EQ(s.bearer_token, "tok-123");
  EXPECT_EQ(s.signing_key.size(), 24u);
  EXPECT_TRUE(s.tls_verify);
  ASSERT_EQ(s.headers.size(), 1u);
  EXPECT_EQ(s.answers.ok.size(), 2u);
  EXPECT_EQ(s.answers.error_body_bytes, 64u);
  std::remove(token.c_str());
  std::remove(secret.c_str());
}

}  // namespace
}  // namespace sqlstreams_http
