// ops/status_page — the HTML of the host's status page (GET /), of a group's page
// (GET /groups/<stream>/<group>) and of its dead-letter view (GET /groups/<stream>/<group>/dead):
// plain server-rendered HTML with inline CSS and inline SVG charts (ops/status_chart), no
// scripts, no external assets and no build step. The status page leads with one card per group:
// its states (running, paused, hung, held by a producer's fence, not running: words and a CSS
// class) and small charts of its lag, handled/s, retries/s and dead letters/s over the history
// the poller keeps (ops/status_history); each links to the group's page, which has the charts
// large, every figure of the group and a link to its dead letters. Below: every stream (head,
// partitions, oldest message, retention, janitor, which group holds retention back), every group
// (cursor, lag, commit rate, exceptions by status, dead letters, leases, retention losses,
// advancer, and whether it runs, is paused or is seen by no running host), the live hosts and
// maintenance workers — the figures of `sqlstreams status` from the StatusPoller — and what this
// host runs, with its own counts. The dead-letter view lists each dead letter with its payload and
// attempt history. Figures are in human units (ops/human_units: "12.2 s", "1.2k", "3.4 MiB";
// message ids exact, grouped by thousands) with the exact value in data-value / data-ms /
// data-seconds / data-bytes. Every value is HTML-escaped; rows carry data-* attributes and cells
// class names so tools (and the tests) can read them. The page never changes anything: retry and
// discard stay in the CLI (`sqlstreams dead ...`), which audits the operator. Threading: pure
// functions.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.hpp"
#include "ops/metrics.hpp"
#include "ops/status_history.hpp"
#include "ops/status_poller.hpp"
#include "store/reporting/operator_actions.hpp"

namespace sqlstreams::ops {

struct HostView {
  std::string name;
  std::string holder;  // "<name>:<pid>"
  std::string version;
  std::string state;  // "starting", "running", "reloading", "draining"
  std::string config_path;
  SysTime started_at{};
  uint64_t reloads_applied = 0;
  uint64_t reloads_rejected = 0;
  std::vector<std::string> last_reload_problems;  // of the last rejected reload
  std::vector<GroupSample> groups;                // the pipelines this host runs
};

struct StatusPageInput {
  HostView host;
  std::shared_ptr<const StatusSnapshot> status;  // null until the first good read
  std::string status_error;                      // the last read failed with this
  SysTime now{};
  GroupHistories history;  // the poller's history, by (stream, group)
  HistoryStats history_stats;
};

std::string render_status_page(const StatusPageInput& input);

// One group: from the fleet's status (`db`, null when the database does not list it) and this
// host (`local`, null when it does not run it); the route answers 404 when both are missing.
struct GroupPageInput {
  std::string stream;
  std::string group;
  std::optional<store::GroupStatus> db;
  std::optional<double> commit_rate;  // committed ids per second, from the poller
  std::optional<GroupSample> local;
  std::string status_error;
  SysTime now{};
  std::vector<HistoryPoint> history;  // oldest first
  HistoryLimits limits;
};

std::string render_group_page(const GroupPageInput& input);

struct DeadLetterPage {
  std::string stream;
  std::string group;
  std::vector<store::DeadLetter> dead;                            // by message id, oldest first
  std::map<int64_t, std::vector<store::DeliveryRecord>> history;  // by message id
  size_t limit = 0;                                               // the list was cut at this many
  size_t max_bytes = 0;  // stop adding rows once the page is this large (0: no cap)
};

std::string render_dead_letters(const DeadLetterPage& page);
std::string render_not_found(std::string_view what);

std::string html_escape(std::string_view text);

}  // namespace sqlstreams::ops
