// `sqlstreams group pause|resume|drop GROUP --stream S` (docs/operating/service.md#group-lifecycle;
// store/group_lifecycle):
//   pause   running hosts stop claiming for the group within about a poll interval; in-flight
//           work finishes and commits, queued work is handed back. Idempotent.
//   resume  claiming restarts. Idempotent.
//   drop    removes the group's cursor, leases, retry rows and dead letters (so retention no
//           longer waits for it) after a confirmation: the group's name typed on a terminal, or
//           --yes; without a terminal and without --yes it refuses (exit 64). Audited in
//           group_actions and by a `group-dropped-by-operator` log line.
// An unknown stream or group is exit 65 naming it. Every action writes a group_actions row.
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <ctime>
#include <iostream>

#include "cli/commands.hpp"
#include "common/errors.hpp"
#include "store/reporting/group_lifecycle.hpp"

namespace sqlstreams::cli {
namespace {

struct GroupFlags {
  DatabaseFlags db;
  std::string stream, group;
  bool yes = false;
};

struct Target {
  std::unique_ptr<store::Session> session;
  store::GroupRef group;
};

Target open_target(const GroupFlags& f, const char* what) {
  auto config = maybe_load(f.db.config_file);
  auto options = f.db.resolve(config);
  options.application_name = std::string("sqlstreams group ") + what;
  Target t{std::make_unique<store::Session>(options), {}};
  auto g = store::find_group(*t.session, f.stream, f.group);
  if (!g) {
    const bool stream_known = store::find_stream(*t.session, f.stream).has_value();
    throw ControlPlaneError(ExitCode::kData,
                            stream_known ? fmt::format("no group {} on stream {}",
                                                       printable(f.group), printable(f.stream))
                                         : fmt::format("no stream {}", printable(f.stream)),
                            "list the streams and groups with: sqlstreams status");
  }
  t.group = *g;
  return t;
}

std::string iso(SysTime t) {
  const std::time_t s = static_cast<std::time_t>(t.time_since_epoch().count() / 1000);
  std::tm tm{};
  gmtime_r(&s, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

int pause(const GroupFlags& f) {
  auto t = open_target(f, "pause");
  auto r = store::pause_group(*t.session, t.group, operator_actor());
  if (!r.changed) {
    std::printf("%s/%s was already paused (since %s by %s)\n", f.stream.c_str(), f.group.c_str(),
                iso(r.paused_at).c_str(), r.paused_by.c_str());
    return 0;
  }
  std::printf(
      "paused %s/%s: running hosts stop claiming it within about a poll interval; in-flight "
      "work finishes and commits. Resume with: sqlstreams group resume %s --stream %s\n",
      f.stream.c_str(), f.group.c_str(), f.group.c_str(), f.stream.c_str());
  return 0;
}

int resume(const GroupFlags& f) {
  auto t = open_target(f, "resume");
  auto r = store::resume_group(*t.session, t.group, operator_actor());
  std::printf(
      r.changed ? "resumed %s/%s: running hosts claim it again\n" : "%s/%s was not paused\n",
      f.stream.c_str(), f.group.c_str());
  return 0;
}

// The group's name typed on a terminal, or --yes. Never asks without a terminal.
void confirm_drop(const GroupFlags& f, const store::GroupFootprint& fp) {
  if (f.yes) return;
  if (!isatty(STDIN_FILENO)) {
    throw ControlPlaneError(
        ExitCode::kUsage,
        fmt::format("refusing to drop group {} of stream {} without a confirmation: stdin is "
                    "not a terminal; nothing dropped",
                    printable(f.group), printable(f.stream)),
        "run it on a terminal to confirm by typing the group's name, or pass --yes in scripts");
  }
  std::fprintf(stderr,
               "Dropping %s/%s removes its cursor (committed %lld of claimed %lld), %lld range "
               "lease(s), %lld retry row(s) and %lld dead letter(s). Running hosts stop the "
               "group. This cannot be undone.\nType the group's name to drop it: ",
               f.stream.c_str(), f.group.c_str(), static_cast<long long>(fp.committed),
               static_cast<long long>(fp.claimed), static_cast<long long>(fp.leases),
               static_cast<long long>(fp.ready), static_cast<long long>(fp.dead));
  std::string answer;
  std::getline(std::cin, answer);
  if (answer != f.group) {
    throw ControlPlaneError(ExitCode::kUsage,
                            "nothing dropped: the name typed does not match " + printable(f.group),
                            "type the group's exact name, or pass --yes");
  }
}

int drop(const GroupFlags& f) {
  auto t = open_target(f, "drop");
  confirm_drop(f, store::group_footprint(*t.session, t.group));
  const std::string actor = operator_actor();
  auto r = store::drop_group(*t.session, t.group, actor);
  spdlog::warn(
      "group-dropped-by-operator stream={} group={} id={} actor={} db_user={} application={} "
      "client={} committed={} leases={} retries={} dead_letters={} audit_id={}",
      f.stream, f.group, t.group.id, actor, r.db_user, r.application_name, r.client_addr,
      r.removed.committed, r.removed.leases, r.removed.ready, r.removed.dead, r.audit_id);
  std::printf(
      "dropped %s/%s: removed its cursor (committed %lld), %lld lease(s), %lld retry row(s) and "
      "%lld dead letter(s); retention no longer waits for it. Recorded in group_actions (id "
      "%lld). A host whose config still names it declares it again, as a new group, on restart "
      "or reload.\n",
      f.stream.c_str(), f.group.c_str(), static_cast<long long>(r.removed.committed),
      static_cast<long long>(r.removed.leases), static_cast<long long>(r.removed.ready),
      static_cast<long long>(r.removed.dead), static_cast<long long>(r.audit_id));
  return 0;
}

CLI::App* leaf(CLI::App* parent, const char* name, const char* help,
               const std::shared_ptr<GroupFlags>& f) {
  auto* cmd = parent->add_subcommand(name, help);
  f->db.add_to(cmd, false);
  cmd->add_option("group", f->group, "group name")->required();
  cmd->add_option("-s,--stream", f->stream, "the group's stream")->required();
  return cmd;
}

}  // namespace

void add_group_lifecycle(CLI::App* group, Action& action) {
  auto pf = std::make_shared<GroupFlags>();
  leaf(group, "pause", "Stop claiming for a group on every running host (in-flight work commits)",
       pf)
      ->callback([&action, pf] { action = [pf] { return pause(*pf); }; });
  auto rf = std::make_shared<GroupFlags>();
  leaf(group, "resume", "Let running hosts claim for a paused group again", rf)
      ->callback([&action, rf] { action = [rf] { return resume(*rf); }; });
  auto df = std::make_shared<GroupFlags>();
  auto* d =
      leaf(group, "drop",
           "Remove a group: cursor, leases, retries and dead letters (asks first; audited)", df);
  d->add_flag("-y,--yes", df->yes, "do not ask (for scripts)");
  d->callback([&action, df] { action = [df] { return drop(*df); }; });
}

}  // namespace sqlstreams::cli
