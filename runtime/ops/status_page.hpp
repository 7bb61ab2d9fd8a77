// ops/status_page — the HTML of the host's status page (GET /) and of a group's dead-letter
// view (GET /groups/<stream>/<group>/dead): plain server-rendered HTML with inline CSS, no
// scripts and no build step. The page shows every stream (head, partitions, oldest message,
// retention, janitor, which group holds retention back), every group (cursor, lag, commit rate,
// exceptions by status, dead letters, leases, retention losses, advancer, and whether it runs,
// is paused or is seen by no running host), the live hosts and maintenance workers — the
// figures of `sqlstreams status` from the StatusPoller — and what this host runs, with its own
// counts. The dead-letter view lists each dead letter with its payload and attempt history.
// Every value is HTML-escaped; rows carry data-* attributes and cells class names so tools
// (and the tests) can read them. The page never changes anything: retry and discard stay in
// the CLI (`sqlstreams dead ...`), which audits the operator.
// Threading: pure functions.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.hpp"
#include "ops/metrics.hpp"
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
};

std::string render_status_page(const StatusPageInput& input);

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
