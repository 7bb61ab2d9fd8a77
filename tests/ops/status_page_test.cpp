// ops/status_page: the page shows streams, groups (lag, rate, exceptions, dead letters with a
// link to their view), this host and the fleet; every value is escaped; the dead-letter view
// shows payloads and attempt histories.
#include "ops/status_page.hpp"

#include <gtest/gtest.h>

namespace sqlstreams::ops {
namespace {

StatusPageInput input() {
  auto snapshot = std::make_shared<StatusSnapshot>();
  snapshot->taken = std::chrono::steady_clock::now();
  store::StreamStatus s;
  s.name = "payments.requested";
  s.head = 120;
  s.partitions = 2;
  s.janitor = "h1:7";
  store::GroupStatus g;
  g.id = 3;
  g.name = "charge-cards";
  g.committed = 103;
  g.lag = 17;
  g.ready = 2;
  g.dead = 5;
  s.groups.push_back(g);
  snapshot->fleet.streams.push_back(s);
  snapshot->commit_rate[3] = 12.5;
  store::HostStatus h;
  h.name = "h1";
  h.pid = 7;
  h.live = true;
  h.workers = {"janitor payments.requested"};
  snapshot->fleet.hosts.push_back(h);
  StatusPageInput in;
  in.status = snapshot;
  in.host.name = "h1<script>";
  in.host.holder = "h1:7";
  in.host.state = "running";
  GroupSample local;
  local.stream = "payments.requested";
  local.group = "charge-cards";
  local[GroupCounter::kSucceeded] = 99;
  local.concurrency = 4;
  local.live_workers = 4;
  in.host.groups.push_back(local);
  return in;
}

TEST(StatusPage, ShowsStreamsGroupsHostAndFleet) {
  std::string html = render_status_page(input());
  EXPECT_NE(html.find("<tr data-stream=\"payments.requested\" data-group=\"charge-cards\">"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"n lag\">17</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n rate\">12.5</td>"), std::string::npos);
  EXPECT_NE(html.find("href=\"/groups/payments.requested/charge-cards/dead\">5</a>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"n succeeded\">99</td>"), std::string::npos);
  EXPECT_NE(html.find("janitor payments.requested"), std::string::npos);
  EXPECT_EQ(html.find("<script>"), std::string::npos) << "escaped";
  EXPECT_NE(html.find("h1&lt;script&gt;"), std::string::npos);
}

TEST(StatusPage, SaysWhenTheDatabaseDidNotAnswer) {
  StatusPageInput in = input();
  in.status = nullptr;
  in.status_error = "cannot connect to postgresql://u:***@db/app";
  std::string html = render_status_page(in);
  EXPECT_NE(html.find("id=\"status-error\""), std::string::npos);
  EXPECT_NE(html.find("No database figures yet"), std::string::npos);
}

TEST(DeadLetterPage, PayloadAndHistory) {
  DeadLetterPage p;
  p.stream = "payments.requested";
  p.group = "charge-cards";
  store::DeadLetter d;
  d.message_id = 3;
  d.attempts = 4;
  d.last_error = "payment provider unreachable";
  d.payload = R"({"order_id":"order-103"})";
  p.dead.push_back(d);
  p.history[3] = {{1, "retry", "payment provider unreachable", "h1", 0},
                  {4, "dead", "payment provider unreachable", "h1", 0}};
  std::string html = render_dead_letters(p);
  EXPECT_NE(html.find("<tr data-message=\"3\">"), std::string::npos) << html;
  EXPECT_NE(html.find("{&quot;order_id&quot;:&quot;order-103&quot;}"), std::string::npos);
  EXPECT_NE(html.find("<td>retry</td>"), std::string::npos);
  EXPECT_NE(html.find("<td>dead</td>"), std::string::npos);
}

TEST(HtmlEscape, EscapesMarkup) {
  EXPECT_EQ(html_escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
}

}  // namespace
}  // namespace sqlstreams::ops
