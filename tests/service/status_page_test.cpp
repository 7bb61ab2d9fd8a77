// The status page of a real host, rendered by a real headless Chromium (Debian's `chromium`;
// scripts/install-deps.sh installs it): the DOM shows the stream, each group with its
// committed cursor, lag and dead letters, this host's counts, the live host and its
// maintenance workers; the dead-letter view shows each dead message's payload and history.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "service_support.hpp"
#include "test_database.hpp"

namespace sqlstreams::service_test {
namespace {

constexpr const char* kChromium = "/usr/bin/chromium";

// The DOM after Chromium loaded and rendered `url` (stdout of --dump-dom).
std::string dump_dom(const ScratchDir& dir, const std::string& url) {
  const std::string out = dir.file("dom.html");
  const std::string err = dir.file("chromium.log");
  std::string cmd = std::string("timeout 90 ") + kChromium +
                    " --headless --no-sandbox --disable-gpu --no-first-run"
                    " --disable-background-networking --disable-component-update --disable-sync"
                    " --user-data-dir=" +
                    dir.file("chromium-profile") + " --dump-dom '" + url + "' > " + out + " 2> " +
                    err;
  auto [code, output] = testing::run_command({"/bin/sh", "-c", cmd});
  std::ifstream in(out);
  std::stringstream dom;
  dom << in.rdbuf();
  if (code != 0 || dom.str().empty()) {
    std::ifstream e(err);
    std::stringstream log;
    log << e.rdbuf();
    ADD_FAILURE() << "chromium exited " << code << " for " << url << ":\n" << tail(log.str());
  }
  return dom.str();
}

// The <tr ...> element that starts with `open`, up to its </tr>.
std::string row(const std::string& dom, const std::string& open) {
  size_t at = dom.find(open);
  if (at == std::string::npos) return "";
  return dom.substr(at, dom.find("</tr>", at) - at);
}

TEST(StatusPageInChromium, ShowsGroupsNumbersHostsAndDeadLetters) {
  ASSERT_TRUE(std::filesystem::exists(kChromium))
      << kChromium << " is missing: run scripts/install-deps.sh (package chromium)";
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  spec.groups = {GroupSpec{.config = "unreachable_orders = [\"order-3\", \"order-7\"]\n"},
                 GroupSpec{.name = "audit-payments", .handler = "audit-payments"}};
  HostProcess host(dir, spec, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  produce_payments(db.url(), 20);
  // Wait until the host's status copy shows the settled numbers.
  const std::string charge = R"({stream="payments.requested",group="charge-cards")";
  ASSERT_TRUE(wait_until(
      [&] {
        auto m = http_get(port, "/metrics").body;
        return m.find("sqlstreams_group_exceptions" + charge + ",status=\"dead\"} 2") !=
                   std::string::npos &&
               m.find("sqlstreams_group_lag" + charge + "} 0") != std::string::npos &&
               m.find("sqlstreams_group_unseen" + charge + "} 0") != std::string::npos &&
               m.find(
                   R"(sqlstreams_group_lag{stream="payments.requested",group="audit-payments"} 0)") !=
                   std::string::npos;
      },
      30s))
      << tail(host.log());

  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  std::string dom = dump_dom(dir, base + "/");
  ASSERT_NE(dom.find("<h1>SQLStreams: svc-host</h1>"), std::string::npos) << dom;
  std::string stream = row(dom, "<tr data-stream=\"payments.requested\"><td class=\"stream\">");
  EXPECT_NE(stream.find("<td class=\"n head\">20</td>"), std::string::npos) << stream;
  std::string charge_row =
      row(dom,
          "<tr data-stream=\"payments.requested\" data-group=\"charge-cards\"><td "
          "class=\"stream\">");
  EXPECT_NE(charge_row.find("<td class=\"n committed\">20</td>"), std::string::npos) << charge_row;
  EXPECT_NE(charge_row.find("<td class=\"n lag\">0</td>"), std::string::npos) << charge_row;
  EXPECT_NE(charge_row.find("href=\"/groups/payments.requested/charge-cards/dead\">2</a>"),
            std::string::npos)
      << charge_row;
  EXPECT_NE(charge_row.find("data-state=\"running\">running</td>"), std::string::npos)
      << charge_row;
  std::string audit_row =
      row(dom,
          "<tr data-stream=\"payments.requested\" data-group=\"audit-payments\"><td "
          "class=\"stream\">");
  EXPECT_NE(audit_row.find("<td class=\"n committed\">20</td>"), std::string::npos) << audit_row;
  EXPECT_NE(audit_row.find("/dead\">0</a>"), std::string::npos) << audit_row;
  std::string local =
      row(dom, "<tr data-stream=\"payments.requested\" data-group=\"charge-cards\"><td>");
  EXPECT_NE(local.find("<td class=\"n succeeded\">18</td>"), std::string::npos) << local;
  EXPECT_NE(local.find("<td class=\"n dead\">2</td>"), std::string::npos) << local;
  std::string host_row = row(dom, "<tr data-host=\"svc-host\">");
  EXPECT_NE(host_row.find("yes"), std::string::npos) << host_row;
  EXPECT_NE(host_row.find("janitor payments.requested"), std::string::npos) << host_row;
  EXPECT_NE(dom.find("advancer payments.requested/charge-cards"), std::string::npos);

  std::string dead = dump_dom(dir, base + "/groups/payments.requested/charge-cards/dead");
  ASSERT_NE(dead.find("<h1>Dead letters of payments.requested / charge-cards</h1>"),
            std::string::npos)
      << dead;
  for (const char* id : {"3", "7"}) {
    std::string r = row(dead, std::string("<tr data-message=\"") + id + "\">");
    EXPECT_NE(r.find(std::string("\"order_id\": \"order-") + id + "\""), std::string::npos) << r;
    EXPECT_NE(r.find("<td class=\"n attempts\">2</td>"), std::string::npos) << r;
    EXPECT_NE(r.find("payment provider unreachable"), std::string::npos) << r;
  }
  EXPECT_NE(dead.find("<td>retry</td>"), std::string::npos) << "history: the first attempt";
  EXPECT_NE(dead.find("<td>dead</td>"), std::string::npos) << "history: the last attempt";
  EXPECT_EQ(host.stop(30s), 0) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::service_test
