// Hostile input (docs/operating/security.md#secrets-and-configuration) against a real running host:
// a password in the database URL (upper-case scheme, percent-encoded '/') appears in no log line,
// no /metrics sample or label, no /readyz answer and no status page; and a SIGHUP reload of a file
// with a 50,000-part dotted key (or 30,000 parts inside [groups.config]) is rejected with a located
// error while the host keeps running.
// /healthz stays within its promise (docs/operating/security.md#logs-and-http) under a slowloris
// load of trickling connections.
#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <thread>

#include "service_support.hpp"
#include "test_database.hpp"

namespace sqlstreams::service_test {
namespace {

const std::vector<std::string> kSecretFragments = {"Pw9x", "QzK7", "%2FQzK7"};

void expect_no_secret(const std::string& text, const std::string& where) {
  for (const auto& f : kSecretFragments) {
    EXPECT_EQ(text.find(f), std::string::npos) << where << " shows '" << f << "':\n" << tail(text);
  }
}

// postgresql://postgres@host/db → POSTGRESQL://postgres:Pw9x%2FQzK7@host/db (trust auth ignores
// the password; libpq still carries it).
std::string with_password(const std::string& url) {
  const size_t at = url.find('@');
  const size_t scheme = url.find("://");
  return "POSTGRESQL" + url.substr(scheme, at - scheme) + ":Pw9x%2FQzK7" + url.substr(at);
}

std::string dotted(int parts) {
  std::string key = "z";
  for (int i = 1; i < parts; ++i) key += ".z";
  return key;
}

// A slowloris load: `count` connections that each send one byte of a request every 500 ms and
// never finish it; a connection the server drops (or answers) is opened again at once, so the
// load stays at `count`. Runs on a thread of its own until destroyed.
class Trickle {
 public:
  Trickle(int port, int count) : port_(port), fds_(static_cast<size_t>(count), -1) {
    for (int& fd : fds_) fd = open_one();
    thread_ = std::thread([this] { run(); });
  }
  ~Trickle() {
    stop_ = true;
    thread_.join();
    for (int fd : fds_) close(fd);
  }
  int reopened() const { return reopened_; }

 private:
  int open_one() const {
    const int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port_));
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);  // EINPROGRESS: completes later
    return fd;
  }
  void run() {
    static constexpr char kRequest[] = "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    std::vector<size_t> sent(fds_.size(), 0);
    while (!stop_) {
      for (size_t i = 0; i < fds_.size(); ++i) {
        pollfd p{fds_[i], POLLIN, 0};
        bool gone = poll(&p, 1, 0) == 1;  // an answer, EOF or an error: the server let go
        if (!gone) {
          const size_t at = sent[i];
          const char byte = at + 1 < sizeof kRequest ? kRequest[at] : 'a';
          if (send(fds_[i], &byte, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1) {
            sent[i]++;
          } else {
            gone = errno == EPIPE || errno == ECONNRESET;
          }
        }
        if (gone) {
          close(fds_[i]);
          fds_[i] = open_one();
          sent[i] = 0;
          reopened_++;
        }
      }
      for (int t = 0; t < 5 && !stop_; ++t) std::this_thread::sleep_for(100ms);
    }
  }

  int port_;
  std::vector<int> fds_;
  std::atomic<bool> stop_{false};
  std::atomic<int> reopened_{0};
  std::thread thread_;
};

// Regression: 80 trickling connections, more than the server's threads, each dropped after the 2 s
// request timeout and opened again at once. /healthz from a fresh connection used to wait behind 64
// queued ones, 5-11 s; docs/operating/security.md#logs-and-http promises about one request timeout
// (2 s, plus the trickle's last byte) at most. The bound below is generous.
TEST(HostileInput, HealthzAnswersWithinItsPromiseUnderASlowlorisLoad) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  HostProcess host(dir, spec, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/healthz").status == 200; }, 15s));

  Trickle load(port, 80);
  std::this_thread::sleep_for(5s);  // the server's threads, queue and backlog are full
  for (int probe = 0; probe < 3; ++probe) {
    const auto start = std::chrono::steady_clock::now();
    const HttpResult r = http_get(port, "/healthz");
    const auto took = std::chrono::steady_clock::now() - start;
    EXPECT_EQ(r.status, 200) << r.error;
    EXPECT_LT(took, 4s) << "probe " << probe << ": /healthz answered after "
                        << std::chrono::duration_cast<Millis>(took).count() << " ms";
    std::this_thread::sleep_for(700ms);
  }
  EXPECT_GT(load.reopened(), 0) << "the server never dropped a trickling connection";
  EXPECT_TRUE(host.process().running());
}

TEST(HostileInput, RunningHostNeverShowsTheDatabasePassword) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  HostProcess host(dir, spec, with_password(db.url()));
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  EXPECT_NE(host.log().find("port=" + db.url().substr(db.url().rfind(':') + 1, 5)),
            std::string::npos);
  EXPECT_NE(host.log().find("user=postgres password=***"), std::string::npos) << tail(host.log());

  produce_payments(db.url(), 5);
  ASSERT_TRUE(wait_until([&] { return committed(db.url(), "charge-cards") == 5; }, 30s));
  ASSERT_TRUE(wait_until([&] { return http_get(port, "/readyz").status == 200; }, 15s));
  for (const char* path :
       {"/metrics", "/", "/readyz", "/healthz", "/groups/payments.requested/charge-cards",
        "/groups/payments.requested/charge-cards/dead"}) {
    const HttpResult page = http_get(port, path);
    EXPECT_EQ(page.status, 200) << path << ": " << page.error;
    expect_no_secret(page.body, path);
  }
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
  expect_no_secret(host.log(), "the host log");
}

TEST(HostileInput, DeepDottedKeysOnSighupAreRejectedAndTheHostKeepsRunning) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  HostProcess host(dir, spec, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());

  // The probe's input: a 50,000-part key appended to the running host's file.
  host.rewrite_config_text(host_toml(spec) + "\n" + dotted(50'000) + " = 1\n");
  host.process().signal(SIGHUP);
  ASSERT_TRUE(host.wait_for_log("the running configuration stays", 30s)) << tail(host.log());
  EXPECT_NE(host.log().find("dotted key nests deeper than 64 levels"), std::string::npos)
      << tail(host.log());
  EXPECT_TRUE(host.process().running());

  // 30,000 parts inside [groups.config] of a new group.
  host.rewrite_config_text(host_toml(spec) +
                           "\n[[groups]]\nname = \"deep\"\nstream = \"payments.requested\"\n"
                           "plugin = \"payments.so\"\nhandler = \"charge-cards\"\n"
                           "[groups.config]\n" +
                           dotted(30'000) + " = 1\n");
  host.process().signal(SIGHUP);
  ASSERT_TRUE(host.wait_for_log("the running configuration stays", 30s, 2)) << tail(host.log());
  EXPECT_EQ(host.count_in_log("dotted key nests deeper than 64 levels"), 2) << tail(host.log());

  // Still serving and consuming.
  EXPECT_EQ(http_get(port, "/healthz").status, 200);
  produce_payments(db.url(), 3);
  ASSERT_TRUE(wait_until([&] { return committed(db.url(), "charge-cards") == 3; }, 30s))
      << tail(host.log());
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::service_test
