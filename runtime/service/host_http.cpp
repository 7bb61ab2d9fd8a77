// Host::start_http — the routes of the host's HTTP server (docs/design.md#the-host):
//   GET /healthz                         200 while the process runs (liveness)
//   GET /readyz                          200 when pipelines run, the database answered
//                                        recently and no group's committer has been failing
//                                        for longer than its lease_ttl; else 503 + the reason
//   GET /metrics                         Prometheus text (ops/metrics)
//   GET /                                the status page (ops/status_page)
//   GET /groups/<stream>/<group>         a group's page: its charts and figures (ops/status_page)
//   GET /groups/<stream>/<group>/dead    a group's dead letters with payload and history
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>

#include "config/listen.hpp"
#include "service/host.hpp"
#include "store/reporting/operator_actions.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::service {
namespace {

constexpr size_t kDeadLetterLimit = 100;
// Byte budgets of the dead-letter page (docs/operating/service.md#http: 100 dead letters of 1 MB
// made a 407 MB page): a prefix of each payload and error, the newest history rows, a cap on the
// page (ops::DeadLetterPage::max_bytes), and at most kDeadLetterPagesAtOnce built at a time; the
// rest is `sqlstreams dead show`.
constexpr store::Preview kDeadLetterPreview{
    .payload_chars = 2048, .error_chars = 400, .history_rows = 10};
constexpr size_t kDeadLetterPageBytes = 1 << 20;
constexpr int kDeadLetterPagesAtOnce = 2;
constexpr const char* kHtml = "text/html; charset=utf-8";
// The status page's cards draw 180-pixel charts: it copies at most this many points of each
// group's history (a group's page copies its whole ring, at most 720).
constexpr size_t kCardChartPoints = 180;

// At most kDeadLetterPagesAtOnce dead-letter pages are built at once (civetweb serves up to 64
// requests in parallel); the others get 503 at once, holding nothing.
std::atomic<int> dead_pages_building{0};

std::vector<std::string> split_path(const std::string& path) {
  std::vector<std::string> parts;
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string::npos) end = path.size();
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

ops::HttpResponse dead_letters(const store::SessionOptions& options, const std::string& stream,
                               const std::string& group) {
  if (!config::is_valid_name(stream) || !config::is_valid_name(group)) {
    return {400, kHtml, ops::render_not_found("not a stream/group name")};
  }
  if (dead_pages_building.fetch_add(1) >= kDeadLetterPagesAtOnce) {
    dead_pages_building.fetch_sub(1);
    return {503, "text/plain; charset=utf-8",
            fmt::format("busy: {} dead-letter pages are being built; try again in a moment\n",
                        kDeadLetterPagesAtOnce)};
  }
  struct Release {
    ~Release() { dead_pages_building.fetch_sub(1); }
  } release;
  store::SessionOptions o = options;
  o.application_name = "sqlstreams http";
  store::Session session(o);
  auto ref = store::find_group(session, stream, group);
  if (!ref) return {404, kHtml, ops::render_not_found("no group " + stream + "/" + group)};
  ops::DeadLetterPage page;
  page.stream = stream;
  page.group = group;
  page.limit = kDeadLetterLimit;
  page.max_bytes = kDeadLetterPageBytes;
  store::DeadFilter filter;
  filter.limit = static_cast<int32_t>(kDeadLetterLimit);
  page.dead = store::list_dead(session, *ref, filter, kDeadLetterPreview);
  for (const auto& d : page.dead) {
    page.history[d.message_id] =
        store::delivery_history(session, *ref, d.message_id, kDeadLetterPreview);
  }
  return {200, kHtml, ops::render_dead_letters(page)};
}

// From the poller's copy and this host's pipelines: no database query.
ops::HttpResponse group_page(const Host& host, const std::string& stream,
                             const std::string& group) {
  if (!config::is_valid_name(stream) || !config::is_valid_name(group)) {
    return {400, kHtml, ops::render_not_found("not a stream/group name")};
  }
  ops::GroupPageInput in;
  in.stream = stream;
  in.group = group;
  in.now = SystemClock::instance().now();
  if (const ops::StatusPoller* poller = host.poller()) {
    if (auto status = poller->latest()) {
      for (const auto& s : status->fleet.streams) {
        if (s.name != stream) continue;
        for (const auto& g : s.groups) {
          if (g.name != group) continue;
          in.db = g;
          if (auto r = status->commit_rate.find(g.id); r != status->commit_rate.end()) {
            in.commit_rate = r->second;
          }
        }
      }
    }
    if (!poller->database_ok(2 * poller->interval() + Millis(2000))) {
      in.status_error = poller->last_error();
    }
    in.history = poller->history(stream, group);
    in.limits = poller->history_stats().limits;
  }
  for (auto& g : host.samples()) {
    if (g.stream == stream && g.group == group) in.local = std::move(g);
  }
  if (!in.db && !in.local) {
    return {404, kHtml, ops::render_not_found("no group " + stream + "/" + group)};
  }
  return {200, kHtml, ops::render_group_page(in)};
}

ops::HttpResponse route(const Host& host, const ops::HttpRequest& request) {
  const std::string& path = request.path;
  if (path == "/healthz") return {200, "text/plain; charset=utf-8", "ok\n"};
  if (path == "/readyz") {
    std::string why;
    if (host.ready(&why)) return {200, "text/plain; charset=utf-8", "ready\n"};
    return {503, "text/plain; charset=utf-8", "not ready: " + why + "\n"};
  }
  if (path == "/metrics") {
    auto status = host.poller() ? host.poller()->latest() : nullptr;
    return {
        200, "text/plain; version=0.0.4; charset=utf-8",
        ops::render_metrics(host.host_sample(), host.samples(), status ? &status->fleet : nullptr)};
  }
  if (path == "/" || path == "/index.html") {
    ops::StatusPageInput in;
    in.host = host.view();
    if (host.poller()) {
      in.status = host.poller()->latest();
      if (!host.poller()->database_ok(2 * host.poller()->interval() + Millis(2000))) {
        in.status_error = host.poller()->last_error();
      }
      in.history = host.poller()->history(kCardChartPoints);
      in.history_stats = host.poller()->history_stats();
    }
    in.now = SystemClock::instance().now();
    return {200, kHtml, ops::render_status_page(in)};
  }
  auto parts = split_path(path);
  if (parts.size() == 3 && parts[0] == "groups") return group_page(host, parts[1], parts[2]);
  if (parts.size() == 4 && parts[0] == "groups" && parts[3] == "dead") {
    return dead_letters(host.options().session, parts[1], parts[2]);
  }
  return {404, kHtml, ops::render_not_found(path)};
}

}  // namespace

void Host::start_http(const std::string& listen) {
  http_ = std::make_unique<ops::HttpServer>(
      listen, [this](const ops::HttpRequest& r) { return route(*this, r); });
  spdlog::info("http-listening listen={} port={}", listen, http_->port());
  std::string error;
  auto address = config::parse_listen(listen, &error);
  if (!address || !address->loopback) {
    // Only with host.http_allow_remote = true (config/listen.hpp).
    spdlog::warn(
        "http-remote listen={}: not a loopback address; the dead-letter view "
        "(/groups/STREAM/GROUP/dead) shows message payloads to anyone who can reach it",
        listen);
  }
}

}  // namespace sqlstreams::service
