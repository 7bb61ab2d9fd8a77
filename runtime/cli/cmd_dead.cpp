// `sqlstreams dead list|show|retry|discard STREAM GROUP` and `sqlstreams group rewind`: the
// operator's tools for what did not succeed
// (docs/design.md#retries-exception-rows-and-dead-letters). Every action is audited. (`group
// pause|resume|drop` live in cmd_group.cpp.)
#include <fmt/format.h>
#include <pwd.h>
#include <unistd.h>

#include <ctime>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.hpp"
#include "common/errors.hpp"
#include "common/host_name.hpp"
#include "common/utf8.hpp"
#include "store/reporting/operator_actions.hpp"

namespace sqlstreams::cli {
namespace {

// Absent means "no filter"; no value of a given option ever does (a negative id used to).
struct DeadFlags {
  DatabaseFlags db;
  std::string stream, group;
  std::optional<std::string> error;
  std::optional<int64_t> from_id, to_id, id;
  std::optional<std::string> older_than;
  int limit = 1000;
  bool json = false, yes = false;
  bool kept = false;  // the rows kept for a schema version the group does not accept
  bool all = false;   // discard --kept: every kept row (a kept message is never discarded unnamed)
  std::optional<std::string> to_time;
};

int64_t id_arg(const char* flag, const std::optional<int64_t>& v) {
  if (*v < 0) {
    throw ControlPlaneError(ExitCode::kUsage,
                            fmt::format("{}: message ids are >= 0 (got {})", flag, *v),
                            "leave the option out to mean every message");
  }
  return *v;
}

std::string iso(int64_t unix_ms) {
  std::time_t t = static_cast<std::time_t>(unix_ms / 1000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

store::DeadFilter filter_of(const DeadFlags& f) {
  store::DeadFilter filter;
  if (f.error) {
    if (f.error->empty()) {
      throw ControlPlaneError(ExitCode::kUsage, "--error: empty text would match every dead letter",
                              "leave --error out to mean every dead letter");
    }
    filter.error_contains = *f.error;  // a literal, case-insensitive substring
  }
  if (f.id && (f.from_id || f.to_id)) {
    throw ControlPlaneError(ExitCode::kUsage, "give --id or --from-id/--to-id, not both");
  }
  if (f.id) filter.from_id = filter.to_id = id_arg("--id", f.id);
  if (f.from_id) filter.from_id = id_arg("--from-id", f.from_id);
  if (f.to_id) filter.to_id = id_arg("--to-id", f.to_id);
  if (f.older_than) {
    std::string why;
    auto d = parse_duration(*f.older_than, &why);
    if (!d) {
      throw ControlPlaneError(ExitCode::kUsage,
                              "--older-than: " + why + " (got \"" + *f.older_than + "\")");
    }
    filter.older_than = *d;
  }
  filter.limit = f.limit;
  filter.kept = f.kept;
  return filter;
}

struct Target {
  std::unique_ptr<store::Session> session;
  store::GroupRef group;
};

Target open_group(const DeadFlags& f) {
  auto config = maybe_load(f.db.config_file);
  Target t{std::make_unique<store::Session>(f.db.resolve(config)), {}};
  auto g = store::find_group(*t.session, f.stream, f.group);
  if (!g) {
    throw ControlPlaneError(ExitCode::kData,
                            fmt::format("no group '{}' on stream '{}'", f.group, f.stream),
                            "list them with: sqlstreams status");
  }
  t.group = *g;
  return t;
}

// A kept row has no death: its time is "kept_at" and its reason stays under "last_error".
nlohmann::json to_json(const store::DeadLetter& d, bool kept) {
  nlohmann::json j{{"message_id", d.message_id},
                   {"attempts", d.attempts},
                   {"last_error", d.last_error},
                   {kept ? "kept_at" : "died_at", iso(d.died_at_unix_ms)},
                   {"message_retained", d.message_retained}};
  j["payload"] = d.payload ? nlohmann::json::parse(*d.payload, nullptr, false) : nullptr;
  return j;
}

int list(const DeadFlags& f) {
  auto filter = filter_of(f);
  auto t = open_group(f);
  auto dead = store::list_dead(*t.session, t.group, filter);
  if (f.json) {
    nlohmann::json arr = nlohmann::json::array();
    for (const auto& d : dead) arr.push_back(to_json(d, f.kept));
    std::printf("%s\n", arr.dump(2).c_str());
    return 0;
  }
  std::printf("%-12s %-8s %-20s %s\n", "MESSAGE_ID", "ATTEMPTS", f.kept ? "KEPT_AT" : "DIED_AT",
              f.kept ? "REASON" : "LAST_ERROR");
  for (const auto& d : dead) {
    std::printf("%-12lld %-8d %-20s %s\n", static_cast<long long>(d.message_id), d.attempts,
                iso(d.died_at_unix_ms).c_str(), escape_for_text(d.last_error).c_str());
  }
  std::printf("%zu %s in %s/%s\n", dead.size(),
              f.kept ? "kept message(s) (a schema version the group does not accept yet)"
                     : "dead letter(s)",
              f.stream.c_str(), f.group.c_str());
  return 0;
}

int show(const DeadFlags& f) {
  const int64_t id = id_arg("id", f.id);
  auto t = open_group(f);
  auto d = store::find_dead(*t.session, t.group, id, f.kept);
  if (!d) {
    throw ControlPlaneError(ExitCode::kData,
                            fmt::format("message {} is not {} in {}/{}", id,
                                        f.kept ? "kept" : "dead", f.stream, f.group),
                            f.kept ? "list them with: sqlstreams dead list --kept"
                                   : "list them with: sqlstreams dead list");
  }
  auto history = store::delivery_history(*t.session, t.group, id);
  if (f.json) {
    auto j = to_json(*d, f.kept);
    j["history"] = nlohmann::json::array();
    for (const auto& h : history) {
      j["history"].push_back({{"attempt", h.attempt},
                              {"outcome", h.outcome},
                              {"error", h.error},
                              {"host", h.host},
                              {"at", iso(h.at_unix_ms)}});
    }
    std::printf("%s\n", j.dump(2).c_str());
    return 0;
  }
  std::printf("message %lld in %s/%s: %s after %d attempt(s) at %s\n",
              static_cast<long long>(d->message_id), f.stream.c_str(), f.group.c_str(),
              f.kept ? "kept" : "dead", d->attempts, iso(d->died_at_unix_ms).c_str());
  std::printf("%s: %s\n", f.kept ? "reason" : "last error", escape_for_text(d->last_error).c_str());
  std::printf("payload%s: %s\n", d->message_retained ? "" : " (kept copy; the log dropped it)",
              d->payload ? escape_for_text(*d->payload).c_str() : "(none)");
  std::printf("history:\n");
  for (const auto& h : history) {
    std::printf("  %s  attempt %-3d %-16s %s%s\n", iso(h.at_unix_ms).c_str(), h.attempt,
                escape_for_text(h.outcome).c_str(), escape_for_text(h.error).c_str(),
                h.host.empty() ? "" : ("  [" + escape_for_text(h.host) + "]").c_str());
  }
  return 0;
}

bool confirm(const std::string& question) {
  if (!isatty(STDIN_FILENO)) return false;
  std::fprintf(stderr, "%s [y/N] ", question.c_str());
  std::string answer;
  std::getline(std::cin, answer);
  return answer == "y" || answer == "Y" || answer == "yes";
}

int retry(const DeadFlags& f) {
  auto filter = filter_of(f);
  auto t = open_group(f);
  auto ids = store::retry_dead(*t.session, t.group, filter, operator_actor());
  std::printf("sent %zu dead letter(s) of %s/%s back to ready with a fresh retry budget\n",
              ids.size(), f.stream.c_str(), f.group.c_str());
  return 0;
}

// Why `dead discard --kept --id N` discarded nothing: the row is not (or no longer) kept.
[[noreturn]] void explain_not_kept(const DeadFlags& f, const Target& t, int64_t id) {
  const auto status = store::exception_status(*t.session, t.group, id);
  const std::string what = fmt::format("message {} of {}/{}", id, f.stream, f.group);
  if (!status) {
    throw ControlPlaneError(
        ExitCode::kData, what + " is not kept: the group has no exception row for it",
        fmt::format("list the kept ones with: sqlstreams dead list {} {} --kept", f.stream,
                    f.group));
  }
  if (*status == "dead") {
    throw ControlPlaneError(ExitCode::kData, what + " is a dead letter, not a kept message",
                            "discard it without --kept");
  }
  throw ControlPlaneError(ExitCode::kData,
                          fmt::format("{} is no longer kept (status {}): the group accepts its "
                                      "version now and a host runs it",
                                      what, *status),
                          "nothing was discarded");
}

int discard(const DeadFlags& f) {
  auto filter = filter_of(f);
  const bool filtered = f.error || f.from_id || f.to_id || f.id || f.older_than;
  if (f.all && filtered) {
    throw ControlPlaneError(ExitCode::kUsage, "give filters or --all, not both");
  }
  if (f.kept && !f.all && !filtered) {
    // A kept message is a valid message waiting for its version: never discarded unnamed.
    throw ControlPlaneError(ExitCode::kUsage,
                            "dead discard --kept: name the kept messages to discard",
                            "--id N, --from-id/--to-id, --error TEXT, --older-than D, or --all");
  }
  const char* kind = f.kept ? "kept message(s)" : "dead letter(s)";
  auto t = open_group(f);
  if (!f.yes) {
    auto n = store::list_dead(*t.session, t.group, filter).size();
    if (n == 0) {
      if (f.kept && f.id) explain_not_kept(f, t, *f.id);
      std::printf("no %s match\n", f.kept ? "kept messages" : "dead letters");
      return 0;
    }
    if (!confirm(fmt::format("discard {} {} of {}/{}?{} This cannot be undone.", n, kind, f.stream,
                             f.group, f.kept ? " They will never be delivered." : ""))) {
      throw ControlPlaneError(ExitCode::kUsage, "nothing discarded",
                              "confirm on a terminal, or pass --yes");
    }
  }
  auto ids = store::discard_dead(*t.session, t.group, filter, operator_actor());
  if (ids.empty() && f.kept && f.id) explain_not_kept(f, t, *f.id);
  std::printf("discarded %zu %s of %s/%s\n", ids.size(), kind, f.stream.c_str(), f.group.c_str());
  return 0;
}

// "2026-11-29T12:00:00Z" (UTC) or a duration meaning "that long ago" ("15m").
SysTime parse_time(const std::string& text) {
  std::string why;
  if (auto d = parse_duration(text, &why)) return SystemClock::instance().now() - *d;
  std::tm tm{};
  const char* end = strptime(text.c_str(), "%Y-%m-%dT%H:%M:%S", &tm);
  if (!end || !(*end == 0 || (end[0] == 'Z' && end[1] == 0))) {
    throw ControlPlaneError(ExitCode::kUsage,
                            "--to-time: expected UTC \"YYYY-MM-DDTHH:MM:SSZ\" or a duration ago "
                            "like \"15m\" (got " +
                                text + ")");
  }
  return SysTime(std::chrono::seconds(timegm(&tm)));
}

int rewind(const DeadFlags& f) {
  if (f.id.has_value() == f.to_time.has_value()) {
    throw ControlPlaneError(ExitCode::kUsage, "give exactly one of --to-id N or --to-time T");
  }
  std::optional<int64_t> to_id;
  std::optional<SysTime> to_time;
  if (f.id) to_id = id_arg("--to-id", f.id);
  if (f.to_time) to_time = parse_time(*f.to_time);
  auto t = open_group(f);
  auto r = store::rewind_group(*t.session, t.group, to_id, to_time, operator_actor());
  std::printf(
      "rewound %s/%s from claimed %lld (committed %lld) to %lld: messages after %lld "
      "will be delivered again\n",
      f.stream.c_str(), f.group.c_str(), static_cast<long long>(r.claimed_before),
      static_cast<long long>(r.committed_before), static_cast<long long>(r.position),
      static_cast<long long>(r.position));
  return 0;
}

CLI::App* leaf(CLI::App* parent, const char* name, const char* help, std::shared_ptr<DeadFlags> f) {
  auto* cmd = parent->add_subcommand(name, help);
  f->db.add_to(cmd, false);
  cmd->add_option("stream", f->stream, "stream name")->required();
  cmd->add_option("group", f->group, "group name")->required();
  return cmd;
}

void add_filters(CLI::App* cmd, DeadFlags& f) {
  cmd->add_option("--error", f.error,
                  "only dead letters whose last error contains this text (literal, any case)");
  cmd->add_option("--from-id", f.from_id, "only message ids >= N");
  cmd->add_option("--to-id", f.to_id, "only message ids <= N");
  cmd->add_option("--id", f.id, "only this message id");
  cmd->add_option("--older-than", f.older_than, "only those that died at least this long ago");
  cmd->add_option("--limit", f.limit, "at most N (default 1000)")->check(CLI::Range(1, 1000000));
}

}  // namespace

std::string operator_actor() {
  const char* user = std::getenv("USER");
  if (!user) {
    if (auto* pw = getpwuid(getuid())) user = pw->pw_name;
  }
  return fmt::format("cli:{}@{}", user ? user : "unknown", machine_host_name());
}

void register_dead(CLI::App& app, Action& action) {
  auto* dead = app.add_subcommand("dead", "Dead letters: list, show, retry, discard");
  dead->require_subcommand(1);
  auto lf = std::make_shared<DeadFlags>();
  auto* l = leaf(dead, "list", "List dead letters of a group", lf);
  add_filters(l, *lf);
  l->add_flag("--json", lf->json, "JSON output");
  l->add_flag("--kept", lf->kept,
              "the messages kept for a schema version the group does not accept yet, instead");
  l->callback([&action, lf] { action = [lf] { return list(*lf); }; });

  auto sf = std::make_shared<DeadFlags>();
  auto* s = leaf(dead, "show", "Payload, attempts and error history of one dead letter", sf);
  s->add_option("id", sf->id, "message id")->required();
  s->add_flag("--json", sf->json, "JSON output");
  s->add_flag("--kept", sf->kept, "a message kept for a schema version not accepted yet");
  s->callback([&action, sf] { action = [sf] { return show(*sf); }; });

  auto rf = std::make_shared<DeadFlags>();
  auto* r = leaf(dead, "retry", "Send dead letters back to ready with a fresh budget", rf);
  add_filters(r, *rf);
  r->callback([&action, rf] { action = [rf] { return retry(*rf); }; });

  auto df = std::make_shared<DeadFlags>();
  auto* d = leaf(dead, "discard", "Delete dead letters (asks first, unless --yes)", df);
  add_filters(d, *df);
  d->add_flag("-y,--yes", df->yes, "do not ask");
  d->add_flag("--kept", df->kept,
              "discard messages kept for a schema version the group does not accept, instead "
              "(they are never delivered); needs a filter or --all");
  d->add_flag("--all", df->all, "with --kept: every kept message of the group");
  d->callback([&action, df] { action = [df] { return discard(*df); }; });
}

void register_group(CLI::App& app, Action& action) {
  auto* group = app.add_subcommand("group", "Consumer group tools");
  group->require_subcommand(1);
  auto f = std::make_shared<DeadFlags>();
  auto* rw = leaf(group, "rewind", "Deliver history again from a message id or a time", f);
  rw->add_option("--to-id", f->id, "deliver every message with id > N again");
  rw->add_option("--to-time", f->to_time,
                 "deliver every message created at/after T (UTC ISO-8601, or a duration ago)");
  rw->callback([&action, f] { action = [f] { return rewind(*f); }; });
  add_group_lifecycle(group, action);  // pause, resume, drop (cmd_group.cpp)
}

}  // namespace sqlstreams::cli
