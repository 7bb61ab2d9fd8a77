// The status page of a real host, rendered by a real headless Chromium (Debian's `chromium`;
// scripts/install-deps.sh installs it): the DOM shows the stream, each group with its
// committed cursor, lag and dead letters, this host's counts, the live host and its
// maintenance workers; the dead-letter view shows each dead message's payload and history.
// After messages flowed in waves (one while an operator paused a group: its card says so, its
// lag rises), each group's card and its own page carry SVG charts of lag,
// handled/s, retries/s and dead letters/s drawn from the poller's history, and their figures
// read back from the DOM equal `sqlstreams status --json`. A screenshot of the page is taken
// (copied to $SQLSTREAMS_STATUS_PAGE_SCREENSHOT when set: docs/status-page.png comes from it).
// A reload adding and retuning groups makes no spike in their rate charts.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

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

// Chromium's PNG of `url` at a 1280-pixel-wide window.
void screenshot(const ScratchDir& dir, const std::string& url, const std::string& png, int height) {
  const std::string err = dir.file("chromium-shot.log");
  std::string cmd = std::string("timeout 90 ") + kChromium +
                    " --headless --no-sandbox --disable-gpu --no-first-run --hide-scrollbars"
                    " --disable-background-networking --disable-component-update --disable-sync"
                    " --user-data-dir=" +
                    dir.file("chromium-profile") + " --window-size=1280," + std::to_string(height) +
                    " --screenshot=" + png + " '" + url + "' 2> " + err;
  auto [code, output] = testing::run_command({"/bin/sh", "-c", cmd});
  EXPECT_EQ(code, 0) << output << testing::read_file(err);
}

// The value of attribute `name` in the first tag at or after `from` that has one (within that
// tag); "<missing>" when there is none.
std::string attr_after(const std::string& html, size_t from, const std::string& name) {
  if (from == std::string::npos) return "<missing>";
  const size_t end = html.find('>', from);
  const size_t at = html.find(" " + name + "=\"", from);
  if (at == std::string::npos || at > end) return "<missing>";
  const size_t v = at + name.size() + 3;
  return html.substr(v, html.find('"', v) - v);
}

// data-value of the first cell opening with `open` (e.g. `<td class="n committed"`) in `html`.
std::string cell_value(const std::string& html, const std::string& open) {
  return attr_after(html, html.find(open), "data-value");
}

// The <svg> of chart `name` inside `html` (from the first one after `from`).
std::string chart(const std::string& html, const std::string& name, size_t from = 0) {
  const size_t at = html.find("data-chart=\"" + name + "\"", from);
  if (at == std::string::npos) return "";
  const size_t start = html.rfind("<svg", at);
  return html.substr(start, html.find("</svg>", at) - start);
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
  EXPECT_NE(stream.find("<td class=\"n head\" data-value=\"20\">20</td>"), std::string::npos)
      << stream;
  std::string charge_row =
      row(dom,
          "<tr data-stream=\"payments.requested\" data-group=\"charge-cards\"><td "
          "class=\"stream\">");
  EXPECT_NE(charge_row.find("<td class=\"n committed\" data-value=\"20\">20</td>"),
            std::string::npos)
      << charge_row;
  EXPECT_NE(charge_row.find("<td class=\"n lag\" data-value=\"0\">0</td>"), std::string::npos)
      << charge_row;
  EXPECT_NE(charge_row.find("href=\"/groups/payments.requested/charge-cards/dead\">2</a>"),
            std::string::npos)
      << charge_row;
  EXPECT_NE(charge_row.find("data-state=\"running\">running here</span></td>"), std::string::npos)
      << charge_row;
  std::string audit_row =
      row(dom,
          "<tr data-stream=\"payments.requested\" data-group=\"audit-payments\"><td "
          "class=\"stream\">");
  EXPECT_NE(audit_row.find("<td class=\"n committed\" data-value=\"20\">20</td>"),
            std::string::npos)
      << audit_row;
  EXPECT_NE(audit_row.find("/dead\">0</a>"), std::string::npos) << audit_row;
  std::string local =
      row(dom, "<tr data-stream=\"payments.requested\" data-group=\"charge-cards\"><td>");
  EXPECT_NE(local.find("<td class=\"n succeeded\" data-value=\"18\">18</td>"), std::string::npos)
      << local;
  EXPECT_NE(local.find("<td class=\"n dead\" data-value=\"2\">2</td>"), std::string::npos) << local;
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
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

TEST(StatusPageInChromium, ChartsAndAGroupPageAgreeWithStatusJson) {
  ASSERT_TRUE(std::filesystem::exists(kChromium))
      << kChromium << " is missing: run scripts/install-deps.sh (package chromium)";
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  spec.groups = {GroupSpec{.config = "unreachable_orders = [\"order-3\", \"order-27\", "
                                     "\"order-58\"]\n"},
                 GroupSpec{.name = "audit-payments", .handler = "audit-payments"}};
  HostProcess host(dir, spec, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  auto group_cmd = [&](const std::string& verb) {
    return testing::run_command({SQLSTREAMS_BINARY, "group", verb, "charge-cards", "--stream",
                                 kStream, "--database-url", db.url()});
  };
  // Three waves more than the history's spacing (5 s) apart, so the charts get several points;
  // the second one while an operator has paused charge-cards, so its lag rises and falls.
  produce_payments(db.url(), 20);
  std::this_thread::sleep_for(6s);
  auto [paused, paused_out] = group_cmd("pause");
  ASSERT_EQ(paused, 0) << paused_out;
  ASSERT_TRUE(host.wait_for_log("group-paused-by-operator", 60s)) << tail(host.log());
  produce_payments(db.url(), 30, 21);
  std::this_thread::sleep_for(6s);
  {
    // Paused, highlighted in words on its card; its lag is on the chart.
    const std::string html = http_get(port, "/").body;
    const size_t card = html.find(
        "<div class=\"card bad\" data-stream=\"payments.requested\" "
        "data-group=\"charge-cards\">");
    ASSERT_NE(card, std::string::npos) << html;
    EXPECT_NE(html.find("data-state=\"paused\">paused ", card), std::string::npos) << html;
    EXPECT_EQ(attr_after(chart(html, "lag", card), 0, "data-last"), "30") << html;
  }
  auto [resumed, resumed_out] = group_cmd("resume");
  ASSERT_EQ(resumed, 0) << resumed_out;
  produce_payments(db.url(), 15, 51);
  const std::string charge = R"({stream="payments.requested",group="charge-cards")";
  std::string metrics;
  ASSERT_TRUE(wait_until(
      [&] {
        metrics = http_get(port, "/metrics").body;
        return metrics.find("sqlstreams_group_exceptions" + charge + ",status=\"dead\"} 3") !=
                   std::string::npos &&
               metrics.find("sqlstreams_group_lag" + charge + "} 0") != std::string::npos &&
               metrics.find(
                   R"(sqlstreams_group_lag{stream="payments.requested",group="audit-payments"} 0)") !=
                   std::string::npos;
      },
      60s))
      << metrics << tail(host.log());
  // One more history point after the last wave settled.
  std::this_thread::sleep_for(6s);

  auto [code, out] =
      testing::run_command({SQLSTREAMS_BINARY, "status", "--json", "--database-url", db.url()});
  ASSERT_EQ(code, 0) << out;
  const auto status = nlohmann::json::parse(out.substr(out.find('{')));
  const nlohmann::json* stream = nullptr;
  for (const auto& s : status["streams"]) {
    if (s["name"] == kStream) stream = &s;
  }
  ASSERT_NE(stream, nullptr) << out;
  ASSERT_EQ((*stream)["groups"].size(), 2u) << out;

  const std::string base = "http://127.0.0.1:" + std::to_string(port);
  const std::string dom = dump_dom(dir, base + "/");
  for (const auto& g : (*stream)["groups"]) {
    const std::string name = g["name"];
    SCOPED_TRACE(name);
    const std::string r = row(dom, "<tr data-stream=\"payments.requested\" data-group=\"" + name +
                                       "\"><td class=\"stream\">");
    ASSERT_FALSE(r.empty()) << dom;
    EXPECT_EQ(cell_value(r, "<td class=\"n committed"),
              std::to_string(g["committed"].get<int64_t>()));
    EXPECT_EQ(cell_value(r, "<td class=\"n lag"), std::to_string(g["lag"].get<int64_t>()));
    EXPECT_EQ(cell_value(r, "<td class=\"n dead"), std::to_string(g["dead"].get<int64_t>()));
    EXPECT_EQ(cell_value(r, "<td class=\"n ready"),
              std::to_string(g["exceptions"]["ready"].get<int64_t>()));
    EXPECT_NE(r.find("<a href=\"/groups/payments.requested/" + name + "\">" + name + "</a>"),
              std::string::npos)
        << r;
    // The group's card: four charts; the handled one has a line.
    const size_t card = dom.find(
        "<div class=\"card\" data-stream=\"payments.requested\" "
        "data-group=\"" +
        name + "\">");
    ASSERT_NE(card, std::string::npos) << dom;
    for (const char* c : {"lag", "handled", "retries", "dead"}) {
      EXPECT_FALSE(chart(dom, c, card).empty()) << c;
    }
    const std::string handled = chart(dom, "handled", card);
    EXPECT_NE(handled.find("<path class=\"line\" d=\"M"), std::string::npos) << handled;
    EXPECT_GT(std::stod(attr_after(handled, 0, "data-max")), 0) << handled;
  }
  EXPECT_EQ(cell_value(dom, "<td class=\"n head"),
            std::to_string((*stream)["head"].get<int64_t>()));

  // The group's page, through the card's link.
  const size_t link =
      dom.find("<a class=\"group-link\" href=\"/groups/payments.requested/charge-cards\">");
  ASSERT_NE(link, std::string::npos) << dom;
  const std::string page = dump_dom(dir, base + "/groups/payments.requested/charge-cards");
  ASSERT_NE(page.find("<h1 id=\"group\" data-stream=\"payments.requested\" "
                      "data-group=\"charge-cards\">payments.requested / charge-cards</h1>"),
            std::string::npos)
      << page;
  const nlohmann::json* cards = nullptr;
  for (const auto& g : (*stream)["groups"]) {
    if (g["name"] == "charge-cards") cards = &g;
  }
  ASSERT_NE(cards, nullptr);
  auto figure = [&](const std::string& table, const std::string& name) {
    const size_t t = page.find("<table id=\"" + table + "\">");
    return attr_after(page, page.find("<td", page.find("<tr data-figure=\"" + name + "\">", t)),
                      "data-value");
  };
  EXPECT_EQ(figure("db-figures", "committed"),
            std::to_string((*cards)["committed"].get<int64_t>()));
  EXPECT_EQ(figure("db-figures", "lag"), std::to_string((*cards)["lag"].get<int64_t>()));
  EXPECT_EQ(figure("db-figures", "dead"), "3");
  EXPECT_EQ(figure("db-figures", "dead"), std::to_string((*cards)["dead"].get<int64_t>()));
  EXPECT_EQ(figure("local-figures", "succeeded"), "62");
  EXPECT_EQ(figure("local-figures", "dead"), "3");
  EXPECT_GE(std::stoi(figure("local-figures", "retried")), 3);
  EXPECT_NE(page.find("<a id=\"dead-link\" href=\"/groups/payments.requested/charge-cards/dead\">"
                      "dead letters (3)</a>"),
            std::string::npos)
      << page;
  EXPECT_EQ(http_get(port, "/groups/payments.requested/charge-cards/dead").status, 200);
  for (const char* c : {"lag", "handled", "retries", "dead"}) {
    const std::string svg = chart(page, c);
    ASSERT_FALSE(svg.empty()) << c << page;
    EXPECT_NE(svg.find("<path class=\"line\" d=\"M"), std::string::npos) << c << ": " << svg;
    EXPECT_GE(std::stoi(attr_after(svg, 0, "data-points")), 3) << c << ": " << svg;
    EXPECT_NE(svg.find(" ago</text>"), std::string::npos) << svg;
  }
  EXPECT_EQ(attr_after(chart(page, "lag"), 0, "data-last"), "0") << "the lag now: 0";
  EXPECT_GE(std::stod(attr_after(chart(page, "lag"), 0, "data-max")), 30) << "while paused";
  for (const char* c : {"handled", "retries", "dead"}) {
    EXPECT_GT(std::stod(attr_after(chart(page, c), 0, "data-max")), 0) << c;
  }
  EXPECT_EQ(http_get(port, "/groups/payments.requested/no-such-group").status, 404);
  EXPECT_EQ(http_get(port, "/groups/payments.requested/Bad%3Cname").status, 400);

  const std::string png = dir.file("status-page.png");
  screenshot(dir, base + "/", png, 1150);
  const std::string bytes = testing::read_file(png);
  ASSERT_GT(bytes.size(), 1000u);
  EXPECT_EQ(bytes.substr(1, 3), "PNG");
  if (const char* keep = std::getenv("SQLSTREAMS_STATUS_PAGE_SCREENSHOT"); keep && *keep) {
    std::filesystem::copy_file(png, keep, std::filesystem::copy_options::overwrite_existing);
    screenshot(dir, base + "/groups/payments.requested/charge-cards",
               std::string(keep).substr(0, std::string(keep).rfind('.')) + "-group.png", 1000);
  }
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

// A reload that adds a group and retunes another (its pipeline replaced, its counters carried
// over): the added group's page has charts from the reload on, and no rate jumps — a first
// point counts nothing, a carried counter never goes down.
TEST(StatusPageHistory, AReloadAddingAndRetuningGroupsMakesNoSpike) {
  testing::TestDatabase db;
  ScratchDir dir;
  const int port = free_tcp_port();
  HostSpec spec;
  spec.http_listen = "127.0.0.1:" + std::to_string(port);
  HostProcess host(dir, spec, db.url());
  ASSERT_TRUE(host.wait_for_log("host-ready", 60s)) << tail(host.log());
  produce_payments(db.url(), 20);
  ASSERT_TRUE(wait_until([&] { return committed(db.url(), "charge-cards") == 20; }, 30s));
  std::this_thread::sleep_for(6s);  // a history point after the first 20

  HostSpec next = spec;
  next.groups[0].concurrency = 3;  // retuned
  next.groups.push_back(GroupSpec{.name = "audit-payments", .handler = "audit-payments"});
  host.rewrite_config(next);
  host.process().signal(SIGHUP);
  ASSERT_TRUE(host.wait_for_log("\"event\":\"reload-applied\"", 30s)) << tail(host.log());
  // The added group's first history point counts nothing (its baseline). Produce the next 20
  // only once that point exists, so the second point has something to count whatever the
  // machine's speed (under load the group once handled all 40 before its first point: max 0).
  ASSERT_TRUE(wait_until(
      [&] {
        const HttpResult p = http_get(port, "/groups/payments.requested/audit-payments");
        if (p.status != 200) return false;
        const std::string n = attr_after(p.body, p.body.find("id=\"history\""), "data-points");
        return n != "<missing>" && std::stoi(n) >= 1;
      },
      30s))
      << tail(host.log());
  produce_payments(db.url(), 20, 21);
  ASSERT_TRUE(wait_until(
      [&] {
        return committed(db.url(), "charge-cards") == 40 &&
               committed(db.url(), "audit-payments") == 40;
      },
      30s))
      << tail(host.log());
  std::this_thread::sleep_for(11s);  // two more history points

  // At most 40 messages per group, points at least 5 s apart: no honest rate exceeds 8/s.
  for (const char* group : {"charge-cards", "audit-payments"}) {
    SCOPED_TRACE(group);
    const HttpResult page = http_get(port, std::string("/groups/payments.requested/") + group);
    ASSERT_EQ(page.status, 200) << page.body;
    const std::string handled = chart(page.body, "handled");
    ASSERT_NE(handled.find("<path class=\"line\" d=\"M"), std::string::npos) << handled;
    EXPECT_GT(std::stod(attr_after(handled, 0, "data-max")), 0) << handled;
    EXPECT_LE(std::stod(attr_after(handled, 0, "data-max")), 8.0) << handled;
    EXPECT_GE(std::stoi(attr_after(handled, 0, "data-points")), 2) << handled;
  }
  EXPECT_EQ(host.stop(testing::kExitBound), 0) << tail(host.log());
}

}  // namespace
}  // namespace sqlstreams::service_test
