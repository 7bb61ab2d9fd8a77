// Handler `http` (plugins/http) end to end: `sqlstreams run` delivers to a real receiver (a
// Python standard-library server, receiver.py) that verifies the Standard Webhooks signature,
// and each answer becomes its outcome; a receiver that is down, then back, loses nothing, and so
// does a host SIGKILLed with deliveries in flight; TLS with a certificate made by the test is
// verified (and refused without its CA); a forward proxy (proxy.py) carries TLS through a CONNECT
// tunnel and plain requests in absolute form; no secret appears in the log or the dead letters.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>

#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

constexpr const char* kSecret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
constexpr const char* kToken = "tok-3f9a1c7e5b";
constexpr const char* kReceiver = SQLSTREAMS_HTTP_TEST_DIR "/receiver.py";

std::string private_file(const std::string& path, const std::string& text) {
  std::ofstream(path) << text << "\n";
  ::chmod(path.c_str(), 0600);
  return path;
}

// A receiver.py process on `port`, recording to dir/<name>.jsonl.
class Receiver {
 public:
  Receiver(const ScratchDir& dir, int port, const std::string& name,
           std::vector<std::string> extra = {})
      : record_(dir.file(name + ".jsonl")) {
    std::vector<std::string> argv = {"/usr/bin/python3",   kReceiver,  "--port",
                                     std::to_string(port), "--record", record_,
                                     "--secret",           kSecret};
    argv.insert(argv.end(), extra.begin(), extra.end());
    process_ = std::make_unique<testing::ChildProcess>(argv, std::map<std::string, std::string>{},
                                                       dir.file(name + ".log"));
    EXPECT_TRUE(
        wait_until([&] { return process_->log().find("listening") != std::string::npos; }, 20s))
        << process_->log();
  }
  // Every request so far, one JSON object each.
  std::vector<nlohmann::json> requests() const {
    std::vector<nlohmann::json> out;
    std::ifstream in(record_);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) out.push_back(nlohmann::json::parse(line));
    }
    return out;
  }
  std::vector<nlohmann::json> requests_for(const std::string& answer) const {
    std::vector<nlohmann::json> out;
    for (auto& r : requests()) {
      if (r["answer"] == answer) out.push_back(r);
    }
    return out;
  }

 private:
  std::string record_;
  std::unique_ptr<testing::ChildProcess> process_;
};

std::string http_config(const std::string& url, const std::string& dir,
                        const std::string& extra_config = "") {
  return "[host]\nname = \"http-host\"\nshutdown_timeout = \"5s\"\nlog_format = \"json\"\n"
         "http_listen = \"\"\n\n[[streams]]\nname = \"hooks\"\n\n"
         "[[groups]]\nname = \"deliver\"\nstream = \"hooks\"\nplugin = \"http.so\"\n"
         "handler = \"http\"\nconcurrency = 1\nmax_in_flight = 64\nlease_ttl = \"10s\"\n"
         "handler_timeout = \"5s\"\npoll_interval = \"20ms\"\nmax_poll_interval = \"200ms\"\n"
         "[groups.retry]\nmax_retries = 30\ninitial_backoff = \"100ms\"\nbase_delay = "
         "\"100ms\"\nmax_delay = \"500ms\"\n"
         "[groups.config]\nurl = \"" +
         url + "\"\ntimeout_ms = 2000\nconnect_timeout_ms = 1000\nbearer_token_file = \"" + dir +
         "/token\"\nsigning_secret_file = \"" + dir + "/secret\"\n" + extra_config;
}

// Every message of `stream` resolved: the group's committed cursor at the head, no lease.
void wait_delivered(const std::string& url, const std::string& stream, Millis timeout) {
  const testing::StreamFamily t = testing::stream_family(url, stream);
  const std::string sql = "SELECT (SELECT coalesce(max(id), 0) FROM " + t.messages +
                          ") > 0 AND NOT EXISTS (SELECT 1 FROM " + t.cursors +
                          " WHERE committed < (SELECT max(id) FROM " + t.messages +
                          ")) AND NOT EXISTS (SELECT 1 FROM " + t.leases + ")";
  ASSERT_TRUE(wait_until([&] { return scalar<bool>(url, sql); }, timeout, 100ms))
      << "not delivered: "
      << query(url, "SELECT claimed, committed FROM " + t.cursors).at(0).at(1).c_str();
}

void replace_all(std::string& text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

// http_config with leases that expire in seconds: a killed or stopped host's work is soon
// taken over.
std::string short_lease_config(int port, const std::string& dir) {
  std::string config = http_config("http://127.0.0.1:" + std::to_string(port) + "/hook", dir);
  replace_all(config, "lease_ttl = \"10s\"", "lease_ttl = \"4s\"");
  replace_all(config, "handler_timeout = \"5s\"", "handler_timeout = \"3s\"");
  return config;
}

// `n` messages, one JSON document a line, each answered after 300 ms.
std::string slow_messages(int n) {
  std::string lines;
  for (int i = 0; i < n; ++i) lines += R"({"answer":"slow:300","n":)" + std::to_string(i) + "}\n";
  return lines;
}

class HttpDelivery : public ::testing::Test {
 protected:
  void SetUp() override {
    private_file(dir_.file("token"), kToken);
    private_file(dir_.file("secret"), kSecret);
  }
  std::unique_ptr<testing::RunningHost> start_host(const std::string& config) {
    auto host = std::make_unique<testing::RunningHost>(dir_.file("host.toml"), config, db_.url(),
                                                       std::map<std::string, std::string>{},
                                                       dir_.file("host.log"));
    EXPECT_TRUE(host->wait_for_log("host-ready", 60s)) << tail(host->log());
    return host;
  }
  // A self-signed certificate and its key, dir_/<name>.pem and dir_/<name>.key, made out to
  // `san` (openssl from Debian).
  std::pair<std::string, std::string> make_certificate(const std::string& name,
                                                       const std::string& common_name = "127.0.0.1",
                                                       const std::string& san = "IP:127.0.0.1") {
    const std::string cert = dir_.file(name + ".pem"), key = dir_.file(name + ".key");
    auto [code, out] = testing::run_command(
        {"/usr/bin/openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj",
         "/CN=" + common_name, "-addext", "subjectAltName=" + san, "-keyout", key, "-out", cert});
    EXPECT_EQ(code, 0) << out;
    return {cert, key};
  }
  void produce(const std::string& payload, const std::string& key = "") {
    std::vector<std::string> args = {"produce", "hooks", payload};
    if (!key.empty()) args.insert(args.end(), {"--key", key});
    auto [code, out] = cli(args, db_.url());
    ASSERT_EQ(code, 0) << out;
  }

  testing::TestDatabase db_;
  ScratchDir dir_;
};

TEST_F(HttpDelivery, EachAnswerBecomesItsOutcomeAndEveryRequestIsSigned) {
  const int port = free_tcp_port();
  Receiver receiver(dir_, port, "receiver");
  auto host =
      start_host(http_config("http://127.0.0.1:" + std::to_string(port) + "/hook", dir_.path()));
  produce(R"({"answer":"ok","n":1})", "acct\r\nX-Injected: 1");
  produce(R"({"answer":"status:400"})");
  produce(R"({"answer":"once:503"})");
  produce(R"({"answer":"retry-after:1"})");
  produce(R"({"answer":"drop-once"})");
  produce(R"({"answer":"status:404"})");
  wait_delivered(db_.url(), "hooks", 60s);

  // OK at once: one request, with the metadata headers and a verified signature.
  auto ok = receiver.requests_for("ok");
  ASSERT_EQ(ok.size(), 1u);
  const auto& h = ok[0]["headers"];
  EXPECT_EQ(ok[0]["verified"], true);
  EXPECT_EQ(h["authorization"], std::string("Bearer ") + kToken);
  EXPECT_EQ(h["webhook-id"], "sqlstreams:hooks:1");
  EXPECT_EQ(h["sqlstreams-message-id"], "1");
  EXPECT_EQ(h["sqlstreams-stream"], "hooks");
  EXPECT_EQ(h["sqlstreams-group"], "deliver");
  EXPECT_EQ(h["sqlstreams-key"], "acct%0D%0AX-Injected: 1") << "a key cannot add a header";
  EXPECT_FALSE(h.contains("x-injected"));
  EXPECT_EQ(h["sqlstreams-attempt"], "1");
  EXPECT_EQ(h["sqlstreams-schema-version"], "1");
  EXPECT_EQ(h["content-type"], "application/json");
  EXPECT_EQ(nlohmann::json::parse(ok[0]["body"].get<std::string>()),
            nlohmann::json::parse(R"({"answer": "ok", "n": 1})"));

  // RETRY: 503 once, then delivered again with the same webhook-id and the next attempt.
  auto flaky = receiver.requests_for("once:503");
  ASSERT_EQ(flaky.size(), 2u);
  EXPECT_EQ(flaky[0]["headers"]["webhook-id"], flaky[1]["headers"]["webhook-id"]);
  EXPECT_EQ(flaky[1]["headers"]["sqlstreams-attempt"], "2");
  // A dropped connection: sent again, as a RETRY, or at once on a new connection when the
  // dropped one was a kept-alive one (the peer may have closed it while it was idle).
  EXPECT_EQ(receiver.requests_for("drop-once").size(), 2u);
  // 429 + Retry-After: 1 → DELAY: the second request about a second after the first.
  auto delayed = receiver.requests_for("retry-after:1");
  ASSERT_EQ(delayed.size(), 2u);
  const int64_t t0 = std::stoll(delayed[0]["headers"]["webhook-timestamp"].get<std::string>());
  const int64_t t1 = std::stoll(delayed[1]["headers"]["webhook-timestamp"].get<std::string>());
  EXPECT_GE(t1 - t0, 1);
  for (const auto& r : receiver.requests()) EXPECT_EQ(r["verified"], true) << r.dump();

  // TERMINAL: 400 and 404 are dead at once (one request each), with the status and the body.
  EXPECT_EQ(receiver.requests_for("status:400").size(), 1u);
  EXPECT_EQ(receiver.requests_for("status:404").size(), 1u);
  auto [code, dead] = cli({"dead", "list", "hooks", "deliver"}, db_.url());
  ASSERT_EQ(code, 0) << dead;
  // The body's prefix, its control bytes escaped (the CLI escapes the backslashes once more).
  EXPECT_NE(dead.find(R"(HTTP 400: refused: sqlstreams:hooks:2\\n\\x01)"), std::string::npos)
      << dead;
  EXPECT_EQ(dead.find('\x01'), std::string::npos) << "no raw control byte reaches the terminal";
  EXPECT_NE(dead.find("HTTP 404"), std::string::npos) << dead;
  EXPECT_EQ(count_of(dead, "HTTP "), 2) << dead;

  // No secret anywhere the operator looks.
  auto [show_code, show] = cli({"dead", "show", "hooks", "deliver", "2"}, db_.url());
  for (const std::string& text : {host->log(), dead, show}) {
    EXPECT_EQ(text.find(kToken), std::string::npos);
    EXPECT_EQ(text.find("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), std::string::npos);
  }
  EXPECT_EQ(host->stop(testing::kExitBound), 0) << tail(host->log());
}

// Down for 30 s (the retries back off to 2 s: ~15 attempts each, within max_retries 30).
TEST_F(HttpDelivery, AReceiverDownFor30SecondsLosesNothing) {
  const int port = free_tcp_port();
  std::string config =
      http_config("http://127.0.0.1:" + std::to_string(port) + "/hook", dir_.path());
  replace_all(config, "max_delay = \"500ms\"", "max_delay = \"2s\"");
  const auto down_since = std::chrono::steady_clock::now();
  auto host = start_host(config);
  const testing::StreamFamily t = testing::stream_family(db_, "hooks");
  constexpr int kMessages = 50;
  std::string lines;
  for (int i = 0; i < kMessages; ++i) lines += R"({"answer":"ok","n":)" + std::to_string(i) + "}\n";
  auto [code, out] = cli({"produce", "hooks"}, db_.url(), lines);
  ASSERT_EQ(code, 0) << out;
  // Nobody listens: every delivery fails with a connection error and is retried.
  ASSERT_TRUE(wait_until(
      [&] {
        return scalar<int64_t>(db_.url(),
                               "SELECT count(*) FROM " + t.exceptions +
                                   " WHERE last_error LIKE 'no HTTP answer%' AND attempts >= 2") >=
               kMessages;
      },
      60s));
  std::this_thread::sleep_until(down_since + 30s);
  Receiver receiver(dir_, port, "receiver");
  wait_delivered(db_.url(), "hooks", 60s);
  std::set<std::string> delivered;
  for (const auto& r : receiver.requests()) delivered.insert(r["headers"]["webhook-id"]);
  EXPECT_EQ(delivered.size(), static_cast<size_t>(kMessages));
  auto [dead_code, dead] = cli({"dead", "list", "hooks", "deliver"}, db_.url());
  EXPECT_EQ(count_of(dead, "no HTTP answer"), 0) << dead;
  EXPECT_EQ(host->stop(testing::kExitBound), 0) << tail(host->log());
}

// A host SIGKILLed with deliveries in flight loses none: its leases expire, the next host sends
// again what the first did not see answered (the receiver answers nobody for the requests whose
// host died while it waited), and the receiver, deduplicating by webhook-id as Standard Webhooks
// receivers do, has every message answered; none is dead-lettered.
TEST_F(HttpDelivery, AHostKilledWithDeliveriesInFlightLosesNone) {
  const int port = free_tcp_port();
  Receiver receiver(dir_, port, "receiver");
  const std::string config = short_lease_config(port, dir_.path());
  constexpr int kMessages = 300;
  const std::string lines = slow_messages(kMessages);
  {
    auto host = start_host(config);
    auto [code, out] = cli({"produce", "hooks"}, db_.url(), lines);
    ASSERT_EQ(code, 0) << out;
    // Answers take 300 ms and 64 are in flight: at 60 answered, about 64 more are on the wire.
    ASSERT_TRUE(wait_until([&] { return receiver.requests().size() >= 60; }, 60s))
        << tail(host->log());
    host->process().signal(SIGKILL);
    (void)host->process().wait(testing::kExitBound);
  }
  const size_t seen_before_restart = receiver.requests().size();
  ASSERT_LT(seen_before_restart, static_cast<size_t>(kMessages)) << "killed too late to test";
  auto host = start_host(config);
  wait_delivered(db_.url(), "hooks", 120s);
  // Delivered: answered. A request whose host died while the receiver waited is abandoned (no
  // answer was sent); its message must come again.
  std::map<std::string, int> deliveries;  // webhook-id -> answered requests
  int abandoned = 0;
  for (const auto& r : receiver.requests()) {
    if (r.value("abandoned", false)) {
      ++abandoned;
    } else {
      deliveries[r["headers"]["webhook-id"]]++;
    }
  }
  EXPECT_EQ(deliveries.size(), static_cast<size_t>(kMessages)) << "a message never delivered";
  int repeated = 0;
  for (const auto& [id, n] : deliveries) repeated += n - 1;
  std::cout << "requests: " << receiver.requests().size() << ", " << seen_before_restart
            << " before the restart, " << abandoned
            << " abandoned by the killed host; messages answered twice or more: " << repeated
            << "\n";
  EXPECT_GT(abandoned, 0) << "the kill came with no delivery in flight";
  EXPECT_EQ(scalar<int64_t>(db_.url(), "SELECT count(*) FROM " +
                                           testing::stream_family(db_, "hooks").exceptions +
                                           " WHERE status = 'dead'"),
            0);
  EXPECT_EQ(host->stop(testing::kExitBound), 0) << tail(host->log());
}

// A host SIGSTOPped with deliveries in flight, past its lease: a second host takes its ranges over
// and delivers everything; when the first resumes, the answers waiting in its sockets complete
// calls whose lease it lost, and their outcomes are discarded (lease-lost), not committed.
TEST_F(HttpDelivery, AHostStoppedPastItsLeaseLosesNothingAndCommitsNothingLate) {
  const int port = free_tcp_port();
  Receiver receiver(dir_, port, "receiver");
  const std::string config = short_lease_config(port, dir_.path());
  std::string second_config = config;
  replace_all(second_config, "name = \"http-host\"", "name = \"http-host-2\"");
  constexpr int kMessages = 200;
  const std::string lines = slow_messages(kMessages);
  auto stopped = start_host(config);
  auto [code, out] = cli({"produce", "hooks"}, db_.url(), lines);
  ASSERT_EQ(code, 0) << out;
  ASSERT_TRUE(wait_until([&] { return receiver.requests().size() >= 40; }, 60s))
      << tail(stopped->log());
  stopped->process().signal(SIGSTOP);
  std::unique_ptr<testing::RunningHost> second;
  {
    second = std::make_unique<testing::RunningHost>(dir_.file("host-2.toml"), second_config,
                                                    db_.url(), std::map<std::string, std::string>{},
                                                    dir_.file("host-2.log"));
    EXPECT_TRUE(second->wait_for_log("host-ready", 60s)) << tail(second->log());
  }
  wait_delivered(db_.url(), "hooks", 120s);
  stopped->process().signal(SIGCONT);
  EXPECT_TRUE(stopped->wait_for_log("lease-lost", 30s)) << tail(stopped->log());
  EXPECT_EQ(stopped->stop(testing::kExitBound), 0) << tail(stopped->log());
  EXPECT_EQ(second->stop(testing::kExitBound), 0) << tail(second->log());
  wait_delivered(db_.url(), "hooks", 30s);  // still: nothing the first host did undid it
  std::set<std::string> answered;
  for (const auto& r : receiver.requests()) {
    if (!r.value("abandoned", false)) answered.insert(r["headers"]["webhook-id"]);
  }
  EXPECT_EQ(answered.size(), static_cast<size_t>(kMessages)) << "a message never delivered";
  EXPECT_EQ(scalar<int64_t>(db_.url(), "SELECT count(*) FROM " +
                                           testing::stream_family(db_, "hooks").exceptions +
                                           " WHERE status = 'dead'"),
            0);
}

TEST_F(HttpDelivery, TlsIsVerifiedWithTheConfiguredCaAndRefusedWithoutIt) {
  const auto [cert, key] = make_certificate("cert");
  ASSERT_FALSE(HasFailure());
  const int port = free_tcp_port();
  Receiver receiver(dir_, port, "receiver", {"--tls-cert", cert, "--tls-key", key});
  const std::string url = "https://127.0.0.1:" + std::to_string(port) + "/hook";
  // Without the CA: the certificate is refused (verification is on by default): RETRY.
  {
    auto host = start_host(http_config(url, dir_.path()));
    const testing::StreamFamily t = testing::stream_family(db_, "hooks");
    produce(R"({"answer":"ok","tls":1})");
    ASSERT_TRUE(wait_until(
        [&] {
          return scalar<int64_t>(db_.url(), "SELECT count(*) FROM " + t.exceptions +
                                                " WHERE last_error LIKE 'no HTTP answer%'") == 1;
        },
        30s))
        << tail(host->log());
    EXPECT_TRUE(receiver.requests().empty());
    EXPECT_EQ(host->stop(testing::kExitBound), 0);
  }
  // With it: delivered over TLS.
  auto host = start_host(http_config(url, dir_.path(), "tls_ca_file = \"" + cert + "\"\n"));
  wait_delivered(db_.url(), "hooks", 60s);
  ASSERT_EQ(receiver.requests().size(), 1u);
  EXPECT_EQ(receiver.requests()[0]["verified"], true);
  EXPECT_EQ(host->stop(testing::kExitBound), 0);
}

// pipeline_depth 4 over TLS to Python's http.server (which answers a connection's requests in
// order): every answer still becomes its own message's outcome — 200 succeeded once, 400 dead,
// 503 retried, a connection dropped without an answer sent again — and every request is signed.
TEST_F(HttpDelivery, PipelinedOverTlsEachAnswerStillBecomesItsOwnMessagesOutcome) {
  const auto [cert, key] = make_certificate("cert");
  ASSERT_FALSE(HasFailure());
  const int port = free_tcp_port();
  Receiver receiver(dir_, port, "receiver", {"--tls-cert", cert, "--tls-key", key});
  std::string lines;
  constexpr int kMessages = 240;
  for (int i = 0; i < kMessages; ++i) {
    const char* answer = i % 40 == 7    ? "status:400"
                         : i % 40 == 19 ? "once:503"
                         : i % 40 == 31 ? "drop-once"
                                        : "ok";
    lines += R"({"answer":")" + std::string(answer) + R"(","n":)" + std::to_string(i) + "}\n";
  }
  auto host =
      start_host(http_config("https://127.0.0.1:" + std::to_string(port) + "/hook", dir_.path(),
                             "tls_ca_file = \"" + cert + "\"\npipeline_depth = 4\n"));
  auto [produced, produce_out] = cli({"produce", "hooks"}, db_.url(), lines);
  ASSERT_EQ(produced, 0) << produce_out;
  wait_delivered(db_.url(), "hooks", 90s);
  std::map<int, std::vector<std::string>> by_n;  // n -> the answers its requests were given
  for (const auto& r : receiver.requests()) {
    EXPECT_EQ(r["verified"], true) << r.dump();
    const auto body = nlohmann::json::parse(r["body"].get<std::string>());
    by_n[body["n"].get<int>()].push_back(r["answer"].get<std::string>());
  }
  ASSERT_EQ(by_n.size(), static_cast<size_t>(kMessages));
  for (const auto& [n, answers] : by_n) {
    if (n % 40 == 19 || n % 40 == 31) {
      EXPECT_EQ(answers.size(), 2u) << n << ": failed once, then delivered";
    } else if (n % 40 != 7) {
      EXPECT_GE(answers.size(), 1u) << n;
    }
  }
  // Dead: exactly the 400s, each with the body the receiver gave to its own request (it names
  // the request's webhook-id): an answer taken for another request's shows here.
  auto [dead_code, dead] = cli({"dead", "list", "hooks", "deliver", "--json"}, db_.url());
  ASSERT_EQ(dead_code, 0) << dead;
  const auto letters = nlohmann::json::parse(dead);
  ASSERT_EQ(letters.size(), static_cast<size_t>(kMessages / 40)) << dead;
  for (const auto& d : letters) {
    EXPECT_EQ(d["payload"]["n"].get<int>() % 40, 7) << d.dump();
    const std::string own =
        "refused: sqlstreams:hooks:" + std::to_string(d["message_id"].get<int64_t>());
    EXPECT_NE(d["last_error"].get<std::string>().find(own), std::string::npos) << d.dump();
  }
  EXPECT_EQ(host->stop(testing::kExitBound), 0) << tail(host->log());
}

// The server's name is checked, not only its CA: a certificate of the trusted CA made out to
// another address is refused. And with mutual TLS the client certificate is sent: a receiver
// that requires one refuses a host configured without it and accepts the one configured with it.
TEST_F(HttpDelivery, TlsChecksTheServersNameAndSendsTheClientCertificate) {
  const auto make_cert = [&](const std::string& name, const std::string& san) {
    make_certificate(name, name, san);
  };
  make_cert("elsewhere", "IP:127.0.0.2");
  make_cert("server", "IP:127.0.0.1");
  make_cert("client", "DNS:client.test");
  // Messages whose last attempt got no HTTP answer (the TLS handshake refused, or with TLS 1.3
  // the receiver's alert read in place of an answer).
  const auto unanswered = [&] {
    const testing::StreamFamily t = testing::stream_family(db_, "hooks");
    return scalar<int64_t>(db_.url(), "SELECT count(*) FROM " + t.exceptions +
                                          " WHERE last_error LIKE 'no HTTP answer: %'");
  };
  {  // the certificate names 127.0.0.2, the URL 127.0.0.1: refused although its CA is trusted
    const int port = free_tcp_port();
    Receiver receiver(
        dir_, port, "elsewhere-receiver",
        {"--tls-cert", dir_.file("elsewhere.pem"), "--tls-key", dir_.file("elsewhere.key")});
    auto host =
        start_host(http_config("https://127.0.0.1:" + std::to_string(port) + "/hook", dir_.path(),
                               "tls_ca_file = \"" + dir_.file("elsewhere.pem") + "\"\n"));
    produce(R"({"answer":"ok","tls":"wrong name"})");
    ASSERT_TRUE(wait_until([&] { return unanswered() == 1; }, 30s)) << tail(host->log());
    EXPECT_TRUE(receiver.requests().empty());
    EXPECT_EQ(host->stop(testing::kExitBound), 0);
  }  // the message stays to be retried: the hosts below deliver it to their receiver
  const int port = free_tcp_port();
  Receiver receiver(dir_, port, "mtls-receiver",
                    {"--tls-cert", dir_.file("server.pem"), "--tls-key", dir_.file("server.key"),
                     "--tls-client-ca", dir_.file("client.pem")});
  const std::string url = "https://127.0.0.1:" + std::to_string(port) + "/hook";
  const std::string ca = "tls_ca_file = \"" + dir_.file("server.pem") + "\"\n";
  {  // no client certificate: the receiver refuses the handshake
    auto host = start_host(http_config(url, dir_.path(), ca));
    produce(R"({"answer":"ok","tls":"mutual"})");
    ASSERT_TRUE(wait_until([&] { return unanswered() == 2; }, 30s)) << tail(host->log());
    EXPECT_TRUE(receiver.requests().empty());
    EXPECT_EQ(host->stop(testing::kExitBound), 0);
  }
  auto host = start_host(http_config(url, dir_.path(),
                                     ca + "tls_client_cert_file = \"" + dir_.file("client.pem") +
                                         "\"\ntls_client_key_file = \"" + dir_.file("client.key") +
                                         "\"\n"));
  wait_delivered(db_.url(), "hooks", 60s);
  std::set<std::string> delivered;  // each payload's "tls"
  for (const auto& r : receiver.requests()) {
    delivered.insert(nlohmann::json::parse(r["body"].get<std::string>())["tls"].get<std::string>());
  }
  EXPECT_EQ(delivered, (std::set<std::string>{"wrong name", "mutual"}));
  EXPECT_EQ(host->stop(testing::kExitBound), 0);
}

// Batch mode: messages go N to a request as a JSON array, the receiver names an outcome per
// message, and each message gets its own.
TEST_F(HttpDelivery, BatchModeDeliversArraysAndEachMessageGetsTheOutcomeTheReceiverNamed) {
  const int port = free_tcp_port();
  Receiver receiver(dir_, port, "receiver");
  auto host = start_host(http_config("http://127.0.0.1:" + std::to_string(port) + "/hook",
                                     dir_.path(), "batch_max = 10\nbatch_linger_ms = 50\n"));
  std::string lines;
  for (int i = 1; i <= 30; ++i) {
    const char* answer = i % 10 == 3 ? "status:400" : i % 10 == 5 ? "once:503" : "ok";
    lines += R"({"answer":")" + std::string(answer) + R"(","n":)" + std::to_string(i) + "}\n";
  }
  auto [code, out] = cli({"produce", "hooks", "--key", "k\"1\\"}, db_.url(), lines);
  ASSERT_EQ(code, 0) << out;
  wait_delivered(db_.url(), "hooks", 60s);
  std::map<int64_t, int> deliveries;
  size_t requests = 0;
  for (const auto& r : receiver.requests()) {
    ++requests;
    EXPECT_EQ(r["verified"], true);
    ASSERT_EQ(r["answer"], "batch") << r.dump();
    EXPECT_LE(r["batch"].get<int>(), 10);
    EXPECT_EQ(r["headers"]["sqlstreams-batch-size"], std::to_string(r["batch"].get<int>()));
    for (const auto& e : nlohmann::json::parse(r["body"].get<std::string>())) {
      ++deliveries[e["id"].get<int64_t>()];
      EXPECT_EQ(e["key"], "k\"1\\") << "a key is a JSON string, escaped";
      EXPECT_TRUE(e["payload"].is_object());
    }
  }
  EXPECT_LT(requests, 30u) << "messages went together";
  for (int64_t id = 1; id <= 30; ++id) {
    EXPECT_EQ(deliveries[id], id % 10 == 5 ? 2 : 1) << "message " << id;
  }
  auto [dead_code, dead] = cli({"dead", "list", "hooks", "deliver"}, db_.url());
  EXPECT_EQ(count_of(dead, "receiver: refused"), 3) << dead;
  EXPECT_EQ(host->stop(testing::kExitBound), 0) << tail(host->log());
}

// The fenced block of `lang` in plugins/http/README.md (its indentation removed).
std::string readme_block(const std::string& lang) {
  const std::string text = testing::read_file(SQLSTREAMS_SOURCE_DIR "/plugins/http/README.md");
  const std::string fence = "```" + lang + "\n";
  const size_t start = text.find(fence);
  EXPECT_NE(start, std::string::npos) << lang;
  const size_t line_start = text.rfind('\n', start) + 1;
  const size_t indent = start - line_start;
  const size_t end = text.find("```", start + fence.size());
  std::string out;
  std::istringstream in(text.substr(start + fence.size(), end - start - fence.size()));
  for (std::string line; std::getline(in, line);) {
    out += (line.size() >= indent ? line.substr(indent) : std::string()) + "\n";
  }
  return out;
}

// The README's quick start as written: its receiver (Python) and its group config, one message.
TEST_F(HttpDelivery, TheReadmeQuickStartDeliversToItsReceiver) {
  const int port = free_tcp_port();
  const std::string receiver_py = dir_.file("quickstart_receiver.py");
  std::ofstream(receiver_py) << readme_block("python");
  testing::ChildProcess receiver(
      {"/usr/bin/python3", receiver_py},
      {{"WEBHOOK_SECRET_FILE", dir_.file("secret")}, {"PORT", std::to_string(port)}},
      dir_.file("quickstart_receiver.log"));
  std::string toml = readme_block("toml");
  replace_all(toml, "127.0.0.1:8080", "127.0.0.1:" + std::to_string(port));
  replace_all(toml, "/etc/sqlstreams/ship-orders.whsec", dir_.file("secret"));
  auto host = start_host(
      "[host]\nname = \"quickstart\"\nlog_format = \"json\"\nhttp_listen = \"\"\n\n" + toml);
  ASSERT_TRUE(wait_until([&] { return receiver.running(); }, 5s));
  auto [code, out] = cli({"produce", "orders.placed", R"({"order":"A-1"})"}, db_.url());
  ASSERT_EQ(code, 0) << out;
  EXPECT_TRUE(wait_until(
      [&] {
        return receiver.log().find("handled sqlstreams:orders.placed:1") != std::string::npos;
      },
      30s))
      << receiver.log() << tail(host->log());
  wait_delivered(db_.url(), "orders.placed", 30s);
  EXPECT_EQ(scalar<int64_t>(db_.url(), "SELECT count(*) FROM " +
                                           testing::stream_family(db_, "orders.placed").exceptions),
            0);
  EXPECT_EQ(host->stop(testing::kExitBound), 0);
}

// config/http.toml, the example the README points to, passes `config check` once its secret and
// CA files exist (here in the test's folder instead of /etc/sqlstreams).
TEST_F(HttpDelivery, TheConfigExamplePassesConfigCheck) {
  std::ifstream in(std::string(SQLSTREAMS_SOURCE_DIR) + "/config/http.toml");
  ASSERT_TRUE(in) << "config/http.toml";
  std::string toml((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  for (const char* name : {"shipping-ca.pem", "ship-orders.token", "ship-orders.whsec"}) {
    ASSERT_NE(toml.find(std::string("/etc/sqlstreams/") + name), std::string::npos) << name;
    const std::string file =
        private_file(dir_.file(name), name == std::string("ship-orders.whsec") ? kSecret : kToken);
    replace_all(toml, std::string("/etc/sqlstreams/") + name, file);
  }
  std::ofstream(dir_.file("http.toml")) << toml;
  auto [code, out] =
      cli({"config", "check", dir_.file("http.toml"), "--plugin-dir", SQLSTREAMS_PLUGIN_DIR});
  EXPECT_EQ(code, 0) << out;
}

TEST_F(HttpDelivery, ConfigCheckNamesTheBadKeyWithItsLine) {
  const std::string config = dir_.file("bad.toml");
  std::ofstream(config) << http_config("http://user:pw@127.0.0.1:1/hook", dir_.path());
  auto [code, out] = cli({"config", "check", config, "--plugin-dir", SQLSTREAMS_PLUGIN_DIR});
  EXPECT_NE(code, 0);
  EXPECT_NE(out.find("bad.toml:"), std::string::npos) << out;
  EXPECT_NE(out.find("must not carry a user or password"), std::string::npos) << out;
  EXPECT_EQ(out.find("pw@"), std::string::npos) << "the password is not echoed: " << out;
}

// GET http://127.0.0.1:port/path through Python's standard library: the page's body, or
// "HTTP <status>: <body>" for an error answer.
std::string fetch_page(int port, const std::string& path) {
  auto [code, out] = testing::run_command(
      {"/usr/bin/python3", "-c",
       "import sys, urllib.request, urllib.error\n"
       "try:\n"
       "    print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())\n"
       "except urllib.error.HTTPError as e:\n"
       "    print('HTTP', e.code, e.read().decode())\n",
       "http://127.0.0.1:" + std::to_string(port) + path});
  EXPECT_EQ(code, 0) << path << ": " << out;
  return out;
}

// The secret matrix (docs/operating/security.md#secrets-and-configuration, extended to the http
// plugin: plugins/http/README.md): the bearer token and the signing secret appear in no log line,
// metric, status output or page, dead letter, retry error or config error — while deliveries
// succeed, fail, are retried against a receiver that is down, and are dead-lettered.
// Through a forward proxy (proxy.py, which requires credentials): an https:// URL goes through
// a CONNECT tunnel with TLS end to end (the receiver verifies the signature), a plain one in
// absolute form; wrong credentials leave the message to be retried with the proxy's 407 as its
// error, and the credentials appear in no log, error or status.
TEST_F(HttpDelivery, AProxyCarriesTlsAndPlainDeliveriesAndItsCredentialsStaySecret) {
  constexpr const char* kPassword = "pr0xy-pa55-7d1e";
  const auto [cert, key] = make_certificate("cert");
  ASSERT_FALSE(HasFailure());
  const int proxy_port = free_tcp_port();
  const std::string proxy_record = dir_.file("proxy.jsonl");
  testing::ChildProcess proxy({"/usr/bin/python3", SQLSTREAMS_HTTP_TEST_DIR "/proxy.py", "--port",
                               std::to_string(proxy_port), "--record", proxy_record,
                               "--credentials", std::string("relay:") + kPassword},
                              std::map<std::string, std::string>{}, dir_.file("proxy.log"));
  ASSERT_TRUE(wait_until([&] { return proxy.log().find("listening") != std::string::npos; }, 20s))
      << proxy.log();
  const auto proxied = [&] {
    std::vector<nlohmann::json> out;
    std::ifstream in(proxy_record);
    for (std::string line; std::getline(in, line);) out.push_back(nlohmann::json::parse(line));
    return out;
  };
  private_file(dir_.file("proxy-credentials"), std::string("relay:") + kPassword);
  private_file(dir_.file("wrong-credentials"), "relay:not-the-password");
  const auto through_proxy = [&](const std::string& credentials_file) {
    return "proxy = \"http://127.0.0.1:" + std::to_string(proxy_port) +
           "\"\nproxy_credentials_file = \"" + dir_.file(credentials_file) + "\"\n";
  };
  std::vector<std::pair<std::string, std::string>> seen;  // (where, text)

  const int tls_port = free_tcp_port();
  Receiver tls_receiver(dir_, tls_port, "tls-receiver", {"--tls-cert", cert, "--tls-key", key});
  const std::string tls_url = "https://127.0.0.1:" + std::to_string(tls_port) + "/hook";
  const std::string ca = "tls_ca_file = \"" + cert + "\"\n";
  std::string exceptions;  // the stream's exception table, once the first host made it
  {  // wrong credentials: the proxy refuses the tunnel; the message waits to be retried
    auto host =
        start_host(http_config(tls_url, dir_.path(), ca + through_proxy("wrong-credentials")));
    exceptions = testing::stream_family(db_, "hooks").exceptions;
    produce(R"({"answer":"ok","via":"tunnel"})");
    const std::string refused = "no HTTP answer: proxy 127.0.0.1:" + std::to_string(proxy_port) +
                                " refused CONNECT to 127.0.0.1:" + std::to_string(tls_port) +
                                ": 407 Proxy Authentication Required%";
    ASSERT_TRUE(wait_until(
        [&] {
          return scalar<int64_t>(db_.url(), "SELECT count(*) FROM " + exceptions +
                                                " WHERE last_error LIKE '" + refused + "'") == 1;
        },
        30s))
        << tail(host->log());
    EXPECT_TRUE(tls_receiver.requests().empty());
    EXPECT_EQ(host->stop(testing::kExitBound), 0);
    seen.emplace_back("the host log (wrong credentials)", host->log());
  }
  seen.emplace_back(
      "exception rows",
      query(db_.url(), "SELECT string_agg(coalesce(last_error, ''), ' | ') FROM " + exceptions)
          .at(0)
          .at(0)
          .c_str());
  {  // the right ones: through the tunnel, TLS verified against the receiver's own name
    auto host =
        start_host(http_config(tls_url, dir_.path(), ca + through_proxy("proxy-credentials")));
    produce(R"({"answer":"ok","via":"tunnel again"})");
    wait_delivered(db_.url(), "hooks", 60s);
    ASSERT_EQ(tls_receiver.requests().size(), 2u);
    std::string received;
    for (const auto& r : tls_receiver.requests()) {
      EXPECT_EQ(r["verified"], true) << r.dump();
      received += r.dump() + "\n";
    }
    // The proxy's credentials went on the CONNECT only, never through the tunnel.
    seen.emplace_back("what the receiver got through the tunnel", received);
    EXPECT_EQ(host->stop(testing::kExitBound), 0);
    seen.emplace_back("the host log (TLS through the proxy)", host->log());
  }
  const int plain_port = free_tcp_port();
  Receiver plain_receiver(dir_, plain_port, "plain-receiver");
  const std::string plain_url = "http://127.0.0.1:" + std::to_string(plain_port) + "/hook?q=1";
  {  // a plain URL: absolute form through the proxy
    auto host = start_host(http_config(plain_url, dir_.path(), through_proxy("proxy-credentials")));
    produce(R"({"answer":"ok","via":"absolute form"})");
    wait_delivered(db_.url(), "hooks", 60s);
    ASSERT_EQ(plain_receiver.requests().size(), 1u);
    EXPECT_EQ(plain_receiver.requests()[0]["verified"], true);
    for (const std::vector<std::string>& cmd :
         {std::vector<std::string>{"status"}, std::vector<std::string>{"status", "--json"}}) {
      auto [code, out] = cli(cmd, db_.url());
      EXPECT_EQ(code, 0) << out;
      seen.emplace_back(cmd.size() == 1 ? "status" : "status --json", out);
    }
    EXPECT_EQ(host->stop(testing::kExitBound), 0);
    seen.emplace_back("the host log (plain through the proxy)", host->log());
  }
  std::map<std::string, int> by_kind;  // "METHOD target authorized"
  for (const auto& r : proxied()) {
    by_kind[r["method"].get<std::string>() + " " + r["target"].get<std::string>() +
            (r["authorized"].get<bool>() ? " authorized" : " refused")]++;
  }
  std::string kinds;
  for (const auto& [kind, n] : by_kind) kinds += kind + ": " + std::to_string(n) + "\n";
  const std::string tunnel = "CONNECT 127.0.0.1:" + std::to_string(tls_port);
  EXPECT_GE(by_kind[tunnel + " refused"], 1) << kinds;
  EXPECT_GE(by_kind[tunnel + " authorized"], 1) << kinds;
  EXPECT_EQ(by_kind["POST " + plain_url + " authorized"], 1) << kinds;

  ASSERT_EQ(seen.size(), 7u);
  const std::string encoded = "cmVsYXk6cHIweHktcGE1NS03ZDFl";  // base64("relay:" kPassword)
  for (const auto& [where, text] : seen) {
    EXPECT_EQ(text.find(kPassword), std::string::npos) << where << " shows the password:\n" << text;
    EXPECT_EQ(text.find("not-the-password"), std::string::npos) << where << ":\n" << text;
    EXPECT_EQ(text.find(encoded), std::string::npos) << where << " shows the credentials:\n"
                                                     << text;
  }
}

TEST_F(HttpDelivery, ItsSecretsAppearInNoLogMetricStatusPageOrError) {
  const int port = free_tcp_port(), http_port = free_tcp_port();
  std::optional<Receiver> receiver;
  receiver.emplace(dir_, port, "receiver");
  std::string config =
      http_config("http://127.0.0.1:" + std::to_string(port) + "/hook", dir_.path());
  replace_all(config, "http_listen = \"\"",
              "http_listen = \"127.0.0.1:" + std::to_string(http_port) + "\"");
  auto host = start_host(config);
  const testing::StreamFamily t = testing::stream_family(db_, "hooks");
  produce(R"({"answer":"ok"})");
  produce(R"({"answer":"status:400"})");
  produce(R"({"answer":"once:503"})");
  produce(R"({"answer":"drop-once"})");
  wait_delivered(db_.url(), "hooks", 60s);

  std::vector<std::pair<std::string, std::string>> seen;  // (where, text)
  // The receiver down: a delivery retried with a connection error in its exception row.
  receiver.reset();
  produce(R"({"answer":"ok","while":"down"})");
  ASSERT_TRUE(wait_until(
      [&] {
        return scalar<int64_t>(db_.url(), "SELECT count(*) FROM " + t.exceptions +
                                              " WHERE last_error LIKE 'no HTTP answer%'") > 0;
      },
      30s));
  seen.emplace_back(
      "exception rows",
      query(db_.url(), "SELECT string_agg(coalesce(last_error, ''), ' | ') FROM " + t.exceptions)
          .at(0)
          .at(0)
          .c_str());
  for (const char* path : {"/", "/metrics", "/readyz", "/healthz", "/groups/hooks/deliver",
                           "/groups/hooks/deliver/dead"}) {
    seen.emplace_back(path, fetch_page(http_port, path));
  }
  receiver.emplace(dir_, port, "receiver-back");
  wait_delivered(db_.url(), "hooks", 60s);
  for (const std::vector<std::string>& cmd :
       {std::vector<std::string>{"status"}, std::vector<std::string>{"status", "--json"},
        std::vector<std::string>{"dead", "list", "hooks", "deliver"},
        std::vector<std::string>{"dead", "show", "hooks", "deliver", "2"}}) {
    auto [code, out] = cli(cmd, db_.url());
    EXPECT_EQ(code, 0) << out;
    std::string where;
    for (const auto& word : cmd) where += (where.empty() ? "" : " ") + word;
    seen.emplace_back(where, out);
  }
  EXPECT_NE(seen.back().second.find("HTTP 400"), std::string::npos) << seen.back().second;
  EXPECT_EQ(host->stop(testing::kExitBound), 0) << tail(host->log());
  seen.emplace_back("the host log", host->log());

  // Config errors about the secret files: too open, a directory; the error names the file only.
  const std::string open_token = dir_.file("open-token");
  std::ofstream(open_token) << kToken << "\n";
  ::chmod(open_token.c_str(), 0644);
  for (const std::string& bad : {open_token, dir_.path()}) {
    std::string bad_config = config;
    replace_all(bad_config, dir_.path() + "/token\"", bad + "\"");
    std::ofstream(dir_.file("bad.toml")) << bad_config;
    auto [code, out] =
        cli({"config", "check", dir_.file("bad.toml"), "--plugin-dir", SQLSTREAMS_PLUGIN_DIR});
    EXPECT_NE(code, 0) << out;
    EXPECT_NE(out.find("bearer_token_file"), std::string::npos) << out;
    seen.emplace_back("config check of " + bad, out);
  }

  ASSERT_GE(seen.size(), 13u);
  for (const auto& [where, text] : seen) {
    EXPECT_EQ(text.find(kToken), std::string::npos) << where << " shows the token:\n" << text;
    EXPECT_EQ(text.find("MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"), std::string::npos)
        << where << " shows the signing secret:\n"
        << text;
  }
}

}  // namespace
}  // namespace sqlstreams::e2e
