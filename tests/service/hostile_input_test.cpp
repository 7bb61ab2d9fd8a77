// Issue 11 against a real running host: a password in the database URL (upper-case scheme,
// percent-encoded '/') appears in no log line, no /metrics sample or label, no /readyz answer
// and no status page; and a SIGHUP reload of a file with a 50,000-part dotted key (or 30,000
// parts inside [groups.config]) is rejected with a located error while the host keeps running.
#include <gtest/gtest.h>

#include <csignal>

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
       {"/metrics", "/", "/readyz", "/healthz", "/groups/payments.requested/charge-cards/dead"}) {
    const HttpResult page = http_get(port, path);
    EXPECT_EQ(page.status, 200) << path << ": " << page.error;
    expect_no_secret(page.body, path);
  }
  EXPECT_EQ(host.stop(30s), 0) << tail(host.log());
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
  EXPECT_EQ(host.stop(30s), 0) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::service_test
