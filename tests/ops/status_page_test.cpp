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
  EXPECT_NE(html.find("<td class=\"n lag\" data-value=\"17\">17</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n rate\" data-value=\"12.5\">12.5/s</td>"), std::string::npos);
  EXPECT_NE(html.find("href=\"/groups/payments.requested/charge-cards/dead\">5</a>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"n succeeded\" data-value=\"99\">99</td>"), std::string::npos);
  EXPECT_NE(html.find("<th>messages in flight</th><th>peak in flight</th>"
                      "<th>completions dropped</th>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"n messages-in-flight\" data-value=\"37\">37</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"n peak-in-flight\" data-value=\"64\">64</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"n completions-dropped bad\" data-value=\"2\">2</td>"),
            std::string::npos);
  EXPECT_NE(
      html.find("<td class=\"n fence-wait bad held\" data-seconds=\"12.34\">held 12.3 s</td>"),
      std::string::npos)
      << html;
  EXPECT_NE(html.find("janitor payments.requested"), std::string::npos);
  // Which plugin version and image this host runs the group with
  // (docs/operating/service.md#which-version-runs).
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

// docs/operating/service.md#http: an operator sees on the page which group is paused (by whom,
// since when), which no running host has seen, and which holds retention back — not only in
// `sqlstreams status`.
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
  // charge-cards runs here and is held by a producer's fence (input(): 12.34 s).
  EXPECT_NE(html.find("<td class=\"state bad\" data-state=\"fence\"><span class=\"badge "
                      "state-fence bad\" data-state=\"fence\">claims held by a producer&#39;s "
                      "fence for 12.3 s</span></td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"state bad\" data-state=\"paused\"><span class=\"badge "
                      "state-paused bad\" data-state=\"paused\">paused 2 min ago by "
                      "ops&lt;b&gt;@host</span>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-state=\"unseen\">not running: no running host has seen it (last "
                      "seen 3 d ago)</span>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-state=\"unseen\">not running: no running host has seen it (last "
                      "seen never)</span>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"held-by bad\" data-group=\"typo-group\">typo-group (committed "
                      "40, needs 100; not seen by a running host, last seen 3 d ago)</td>"),
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
  EXPECT_NE(html.find("<td class=\"n fence-wait\" data-seconds=\"0\">-</td>"), std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"state ok\" data-state=\"running\"><span class=\"badge "
                      "state-running\" data-state=\"running\">running here</span></td>"),
            std::string::npos)
      << html;
}

TEST(StatusPage, SaysWhenTheDatabaseDidNotAnswer) {
  StatusPageInput in = input();
  in.status = nullptr;
  in.status_error = "cannot connect to postgresql://u:***@db/app";
  std::string html = render_status_page(in);
  EXPECT_NE(html.find("id=\"status-error\""), std::string::npos);
  EXPECT_NE(html.find("No database figures yet"), std::string::npos);
}

// A minute of history: 13 points 5 s apart, charge-cards handling 10/s with a retry and a dead
// letter every 5 s, lag falling from 60 to 0.
std::vector<HistoryPoint> minute_of_history(SysTime end) {
  std::vector<HistoryPoint> out;
  for (int i = 0; i <= 12; ++i) {
    HistoryPoint p;
    p.at = end - Millis((12 - i) * 5000);
    p.lag = 60 - 5 * i;
    p.local = true;
    p.succeeded = 50u * static_cast<uint64_t>(i);
    p.retried = static_cast<uint64_t>(i);
    p.dead = static_cast<uint64_t>(i);
    out.push_back(p);
  }
  return out;
}

// The <tag ...> element of `html` that contains `needle`, from its start to `close`.
std::string element(const std::string& html, const std::string& needle, const std::string& open,
                    const std::string& close) {
  size_t at = html.find(needle);
  if (at == std::string::npos) return "";
  size_t start = html.rfind(open, at);
  return html.substr(start, html.find(close, at) - start + close.size());
}

TEST(StatusPage, LeadsWithACardPerGroupWithItsChartsAndStates) {
  StatusPageInput in = input();
  in.now = SysTime(Millis(1'700'000'060'000));
  in.history[{"payments.requested", "charge-cards"}] = minute_of_history(in.now);
  in.history_stats = {HistoryLimits{}, 1, 35'000, 0};
  std::string html = render_status_page(in);
  ASSERT_LT(html.find("id=\"cards\""), html.find("id=\"streams\"")) << "charts first";
  std::string card = element(html, "<div class=\"card", "<div class=\"card", "</div></div>");
  ASSERT_FALSE(card.empty()) << html;
  EXPECT_NE(card.find("data-stream=\"payments.requested\" data-group=\"charge-cards\""),
            std::string::npos)
      << card;
  EXPECT_NE(card.find("<a class=\"group-link\" href=\"/groups/payments.requested/charge-cards\">"),
            std::string::npos)
      << card;
  for (const char* chart : {"lag", "handled", "retries", "dead"}) {
    std::string svg = element(card, std::string("data-chart=\"") + chart + "\"", "<svg", "</svg>");
    EXPECT_NE(svg.find("<path class=\"line\" d=\"M"), std::string::npos) << chart << ": " << svg;
  }
  EXPECT_NE(card.find("lag <b data-value=\"17\">17</b>"), std::string::npos)
      << "the lag now is the database's: " << card;
  EXPECT_NE(card.find("handled/s <b data-value=\"10\">10/s</b>"), std::string::npos) << card;
  EXPECT_NE(card.find("retries/s <b data-value=\"0.2\">0.2/s</b>"), std::string::npos) << card;
  EXPECT_NE(card.find("class=\"card bad\""), std::string::npos) << "held by the fence: " << card;
  EXPECT_NE(card.find("claims held by a producer&#39;s fence for 12.3 s"), std::string::npos);
  EXPECT_NE(html.find("<a href=\"/groups/payments.requested/charge-cards\">charge-cards</a>"),
            std::string::npos)
      << "the groups table links the group's page";
  EXPECT_NE(html.find("id=\"history\" data-groups=\"1\" data-bytes=\"35000\""), std::string::npos)
      << html;
  EXPECT_NE(html.find("this host's memory of the last 1 h"), std::string::npos) << html;
}

TEST(StatusPage, AGroupWithoutHistorySaysNoDataYet) {
  std::string html = render_status_page(input());
  std::string card = element(html, "<div class=\"card", "<div class=\"card", "</div></div>");
  EXPECT_NE(card.find("data-points=\"0\""), std::string::npos) << card;
  EXPECT_EQ(card.find("<path"), std::string::npos) << card;
}

TEST(StatusPage, HumanUnitsWithTheExactValuesInDataAttributes) {
  StatusPageInput in = input();
  auto snapshot = std::make_shared<StatusSnapshot>(*in.status);
  auto& s = snapshot->fleet.streams[0];
  s.head = 12'345'678;
  s.oldest_id = 42;
  s.oldest_age = Millis(12'205);
  s.retention = Millis(3 * 86'400'000);
  s.groups[0].lag = 3'400'000;
  s.groups[0].committed = 8'945'678;
  in.status = snapshot;
  in.host.groups[0].queued_bytes = 3 * 1024 * 1024 + 400 * 1024;
  in.host.groups[0][GroupCounter::kSucceeded] = 1234;
  std::string html = render_status_page(in);
  EXPECT_NE(html.find("<td class=\"n head\" data-value=\"12345678\">12,345,678</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<td class=\"age\" data-ms=\"12205\">12.2 s</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"retention\" data-ms=\"259200000\">3 d</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n lag\" data-value=\"3400000\">3.4M</td>"), std::string::npos);
  EXPECT_NE(html.find("<td class=\"n committed\" data-value=\"8945678\">8,945,678</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"n succeeded\" data-value=\"1234\">1.2k</td>"),
            std::string::npos);
  EXPECT_NE(html.find("<td class=\"n queued\" data-bytes=\"3555328\">3.4 MiB</td>"),
            std::string::npos);
  EXPECT_EQ(html.find("12205ms"), std::string::npos);
}

TEST(StatusPage, HungAndPausedHandlersAreHighlightedInWords) {
  StatusPageInput in = input();
  in.host.groups[0].fence_wait_seconds = 0;
  in.host.groups[0].hung_handlers = 2;
  std::string html = render_status_page(in);
  EXPECT_NE(html.find("<td class=\"n hung bad held\" data-value=\"2\">2</td>"), std::string::npos)
      << html;
  EXPECT_NE(html.find("data-state=\"hung\">2 hung handler(s)</span>"), std::string::npos) << html;
  in.host.groups[0].paused = true;
  html = render_status_page(in);
  EXPECT_NE(html.find("<td class=\"n hung bad held\" data-value=\"2\">2, paused</td>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("data-state=\"hung-paused\">paused here: 2 hung handler(s)</span>"),
            std::string::npos)
      << html;
}

GroupPageInput group_input() {
  StatusPageInput page = input();
  GroupPageInput in;
  in.stream = "payments.requested";
  in.group = "charge-cards";
  in.db = page.status->fleet.streams[0].groups[0];
  in.commit_rate = 12.5;
  in.local = page.host.groups[0];
  in.now = SysTime(Millis(1'700'000'060'000));
  in.history = minute_of_history(in.now);
  return in;
}

TEST(GroupPage, ChartsFiguresAndTheDeadLettersLink) {
  std::string html = render_group_page(group_input());
  EXPECT_NE(html.find("<h1 id=\"group\" data-stream=\"payments.requested\" "
                      "data-group=\"charge-cards\">payments.requested / charge-cards</h1>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<a id=\"dead-link\" href=\"/groups/payments.requested/charge-cards/dead\">"
                      "dead letters (5)</a>"),
            std::string::npos)
      << html;
  for (const char* chart : {"lag", "handled", "retries", "dead"}) {
    std::string svg = element(html, std::string("data-chart=\"") + chart + "\"", "<svg", "</svg>");
    EXPECT_NE(svg.find("width=\"600\""), std::string::npos) << chart;
    EXPECT_NE(svg.find("<path class=\"line\" d=\"M"), std::string::npos) << chart << ": " << svg;
    EXPECT_NE(svg.find(">1 min ago</text>"), std::string::npos) << chart << ": " << svg;
  }
  EXPECT_NE(html.find("<h2>The last 1 min</h2>"), std::string::npos);
  EXPECT_NE(html.find("<tr data-figure=\"lag\"><th>lag</th><td class=\"n lag\" "
                      "data-value=\"17\">17</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr data-figure=\"rate\"><th>commits/s</th><td class=\"n\" "
                      "data-value=\"12.5\">12.5/s</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr data-figure=\"succeeded\"><th>succeeded</th><td class=\"n "
                      "succeeded\" data-value=\"99\">99</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr data-figure=\"fence-wait\"><th>fence wait</th><td class=\"n bad "
                      "held\" data-seconds=\"12.34\">12.3 s</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("id=\"history\" data-points=\"13\""), std::string::npos) << html;
  EXPECT_EQ(html.find("<script"), std::string::npos);
}

TEST(GroupPage, AGroupThisHostDoesNotRunHasLagButNoRates) {
  GroupPageInput in = group_input();
  in.local.reset();
  for (auto& p : in.history) p.local = false;
  std::string html = render_group_page(in);
  EXPECT_NE(html.find("id=\"not-here\""), std::string::npos);
  EXPECT_EQ(html.find("id=\"local-figures\""), std::string::npos);
  EXPECT_NE(element(html, "data-chart=\"lag\"", "<svg", "</svg>").find("<path"), std::string::npos);
  EXPECT_EQ(element(html, "data-chart=\"handled\"", "<svg", "</svg>").find("<path"),
            std::string::npos);
  EXPECT_NE(html.find("data-state=\"running\">running</span>"), std::string::npos) << html;
}

TEST(GroupPage, EmptyHistory) {
  GroupPageInput in = group_input();
  in.history.clear();
  std::string html = render_group_page(in);
  EXPECT_EQ(html.find("<path"), std::string::npos);
  EXPECT_NE(html.find("no data yet"), std::string::npos);
  EXPECT_NE(html.find("<h2>The last 1 h</h2>"), std::string::npos) << html;
}

// Names are [a-z0-9._-] in a config, but the page never relies on it: markup, ampersands,
// quotes and unicode in stream, group, pauser and plugin names render as text, in the cards,
// the tables, the charts and the group's page.
TEST(StatusPage, HostileNamesRenderAsText) {
  const std::string stream = "s<script>alert(1)</script>&\"'é🙂";
  const std::string group = "g\"><img src=x onerror=alert(2)>&amp;ü";
  StatusPageInput in = input();
  auto snapshot = std::make_shared<StatusSnapshot>(*in.status);
  snapshot->fleet.streams[0].name = stream;
  snapshot->fleet.streams[0].groups[0].name = group;
  snapshot->fleet.streams[0].groups[0].paused_at = snapshot->fleet.now;
  snapshot->fleet.streams[0].groups[0].paused_by = "<i>op</i>";
  in.status = snapshot;
  in.host.groups[0].stream = stream;
  in.host.groups[0].group = group;
  in.now = SysTime(Millis(1'700'000'060'000));
  in.history[{stream, group}] = minute_of_history(in.now);
  for (const std::string& html : {render_status_page(in), [&] {
                                    GroupPageInput g = group_input();
                                    g.stream = stream;
                                    g.group = group;
                                    g.db->name = group;
                                    g.db->paused_at = g.now;
                                    g.db->paused_by = "<i>op</i>";
                                    return render_group_page(g);
                                  }()}) {
    EXPECT_EQ(html.find("<script>"), std::string::npos) << html;
    EXPECT_EQ(html.find("<img"), std::string::npos) << html;
    EXPECT_EQ(html.find("<i>"), std::string::npos) << html;
    EXPECT_NE(html.find("s&lt;script&gt;alert(1)&lt;/script&gt;&amp;&quot;&#39;é🙂"),
              std::string::npos)
        << html;
    EXPECT_NE(html.find("g&quot;&gt;&lt;img src=x onerror=alert(2)&gt;&amp;amp;ü"),
              std::string::npos)
        << html;
    EXPECT_NE(html.find("&lt;i&gt;op&lt;/i&gt;"), std::string::npos) << html;
    EXPECT_NE(html.find("<path class=\"line\""), std::string::npos) << html;
  }
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

// docs/operating/service.md#http: a preview names its full size and where the rest is; a page at
// its byte cap says how many it left out and from which id to list them.
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
