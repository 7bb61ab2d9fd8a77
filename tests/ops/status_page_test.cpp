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
  g.seen_recently = true;
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
  local.in_flight = 37;
  local.peak_in_flight = 64;
  local.fence_wait_seconds = 12.34;
  local.completions_dropped = 2;
  local.plugin = {"/srv/plugins/payments.so", "payments<script>", "1.2.0",
                  "3f2a9c1e0b7d4a55" + std::string(48, '0')};
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
  EXPECT_NE(html.find("<th>messages in flight</th><th>peak in flight</th>"
                      "<th>completions dropped</th>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"n messages-in-flight\">37</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n peak-in-flight\">64</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n completions-dropped bad\">2</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n fence-wait bad\">12.3 s</td>"), std::string::npos) << html;
  EXPECT_NE(html.find("janitor payments.requested"), std::string::npos);
  // Issue 27 §1: which plugin version and image this host runs the group with.
  EXPECT_NE(html.find("<th>plugin</th>"), std::string::npos) << html;
  EXPECT_NE(html.find("data-plugin=\"payments&lt;script&gt;\" data-version=\"1.2.0\" "
                      "data-sha256=\"3f2a9c1e0b7d4a55" +
                      std::string(48, '0') + "\""),
            std::string::npos)
      << html;
  EXPECT_NE(html.find(">payments&lt;script&gt; 1.2.0 &middot; <code>3f2a9c1e0b7d4a55</code></td>"),
            std::string::npos)
      << html;
  EXPECT_EQ(html.find("<script>"), std::string::npos) << "escaped";
  EXPECT_NE(html.find("h1&lt;script&gt;"), std::string::npos);
}

// Issue 13: an operator sees on the page which group is paused (by whom, since when), which no
// running host has seen, and which holds retention back — not only in `sqlstreams status`.
TEST(StatusPage, ShowsPausedUnseenGroupsAndWhoHoldsRetention) {
  StatusPageInput in = input();
  auto snapshot = std::make_shared<StatusSnapshot>(*in.status);
  snapshot->fleet.now = SysTime(Millis(10'000'000));
  auto& s = snapshot->fleet.streams[0];
  store::GroupStatus paused;
  paused.id = 4;
  paused.name = "refunds";
  paused.paused_at = snapshot->fleet.now - Millis(120'000);
  paused.paused_by = "ops<b>@host";
  paused.seen_recently = true;
  store::GroupStatus unseen;
  unseen.id = 5;
  unseen.name = "typo-group";
  unseen.last_seen_at = snapshot->fleet.now - Millis(3 * 86'400'000);
  store::GroupStatus never;
  never.id = 6;
  never.name = "never-run";
  s.groups.insert(s.groups.end(), {paused, unseen, never});
  s.retention_held_by =
      store::RetentionHold{"typo-group", 40, 100, unseen.last_seen_at, false, false};
  in.status = snapshot;
  std::string html = render_status_page(in);
  EXPECT_NE(html.find("<td class=\"state ok\" data-state=\"running\">running</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-state=\"paused\">paused 2m ago by ops&lt;b&gt;@host</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-state=\"unseen\">not seen by a running host (last seen 3d ago)"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-state=\"unseen\">not seen by a running host (last seen never)"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"held-by bad\" data-group=\"typo-group\">typo-group (committed "
                      "40, needs 100; not seen by a running host, last seen 3d ago)</td>"),
            std::string::npos)
      << html;
  EXPECT_EQ(html.find("<b>@host"), std::string::npos) << "escaped";
}

TEST(StatusPage, NoRetentionHoldIsADash) {
  std::string html = render_status_page(input());
  EXPECT_NE(html.find("<td class=\"held-by\">-</td>"), std::string::npos) << html;
}

TEST(StatusPage, AGroupNoProducerHoldsShowsNoFenceWait) {
  auto in = input();
  in.host.groups[0].fence_wait_seconds = 0;
  std::string html = render_status_page(in);
  EXPECT_NE(html.find("<td class=\"n fence-wait\">-</td>"), std::string::npos) << html;
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

// Issue 27 §2: a preview names its full size and where the rest is; a page at its byte cap says
// how many it left out and from which id to list them.
TEST(DeadLetterPage, APreviewNamesItsSizeAndACappedPageSaysWhatItLeftOut) {
  DeadLetterPage p;
  p.stream = "payments.requested";
  p.group = "charge-cards";
  p.max_bytes = 4000;
  for (int64_t id = 1; id <= 5; ++id) {
    store::DeadLetter d;
    d.message_id = id;
    d.payload = std::string(1000, 'x');
    d.payload_bytes = 5000;
    p.dead.push_back(d);
  }
  std::string html = render_dead_letters(p);
  EXPECT_NE(html.find("the first 1000 of 5000 bytes; the rest with <code>sqlstreams dead show "
                      "payments.requested charge-cards 1</code>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr data-message=\"2\">"), std::string::npos);
  EXPECT_EQ(html.find("<tr data-message=\"4\">"), std::string::npos) << "past the cap";
  EXPECT_NE(html.find("2 more not shown: the page reached its size limit of 4000 bytes. List "
                      "them with <code>sqlstreams dead list payments.requested charge-cards "
                      "--from-id 4</code>"),
            std::string::npos)
      << html;
  p.max_bytes = 0;
  p.dead[0].payload_bytes = 1000;  // whole
  html = render_dead_letters(p);
  EXPECT_EQ(html.find("more not shown"), std::string::npos);
  EXPECT_EQ(
      html.find("the rest with <code>sqlstreams dead show payments.requested charge-cards 1<"),
      std::string::npos);
}

TEST(HtmlEscape, EscapesMarkup) {
  EXPECT_EQ(html_escape("<a href=\"x\">'&'</a>"),
            "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
}

}  // namespace
}  // namespace sqlstreams::ops
