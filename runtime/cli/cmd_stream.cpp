// `sqlstreams stream set STREAM [--retention D|forever] [--allow-drop-past-committed B]
// [--max-payload-bytes N] [--notify B] [--from-config]` (docs/operating/service.md#fleet-settings):
// the one way to change a stream's fleet-wide settings. Hosts declaring an existing stream keep the
// database's values and log `stream-setting-differs`; this command changes them for the whole fleet
// and records who did it in stream_actions (store/reporting/stream_settings.hpp). --from-config
// takes every fleet setting from the config file's stream of that name; a flag given beside it
// wins. Nothing to change is a usage error (64); an unknown stream is 65.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "cli/commands.hpp"
#include "common/errors.hpp"
#include "store/errors.hpp"
#include "store/reporting/stream_settings.hpp"

namespace sqlstreams::cli {
namespace {

struct StreamSetFlags {
  DatabaseFlags db;
  std::string stream;
  std::optional<std::string> retention, allow_drop, notify, idempotency_window;
  std::optional<int64_t> max_payload_bytes;
  bool from_config = false;
};

bool bool_arg(const char* flag, const std::string& v) {
  if (v == "true") return true;
  if (v == "false") return false;
  throw ControlPlaneError(ExitCode::kUsage,
                          fmt::format("{}: expected true or false, got {}", flag, printable(v)));
}

std::optional<Millis> retention_arg(const std::string& v) {
  if (v == "forever") return std::nullopt;
  std::string error;
  auto d = parse_duration(v, &error);
  if (!d || d->count() == 0) {
    throw ControlPlaneError(
        ExitCode::kUsage,
        fmt::format("--retention: {} is not a positive duration{}", printable(v),
                    error.empty() ? "" : " (" + error + ")"),
        "give a duration such as 7d, 12h or 90m, or forever to keep every message");
  }
  return d;
}

store::StreamSettingsChange change_of(const StreamSetFlags& f,
                                      const std::optional<config::Config>& config) {
  store::StreamSettingsChange c;
  if (f.from_config) {
    if (!config) {
      throw ControlPlaneError(ExitCode::kUsage, "--from-config needs --config FILE");
    }
    const config::StreamConfig* found = nullptr;
    for (const auto& s : config->streams) {
      if (s.name == f.stream) found = &s;
    }
    if (!found) {
      throw ControlPlaneError(
          ExitCode::kUsage, fmt::format("--from-config: {} declares no stream {}", f.db.config_file,
                                        printable(f.stream)));
    }
    c.retention = found->retention;
    c.allow_drop_past_committed = found->allow_drop_past_committed;
    c.max_payload_bytes = found->max_payload_bytes;
    c.notify = found->notify;
    c.idempotency_window = found->idempotency_window;
  }
  if (f.retention) c.retention = retention_arg(*f.retention);
  if (f.allow_drop)
    c.allow_drop_past_committed = bool_arg("--allow-drop-past-committed", *f.allow_drop);
  if (f.notify) c.notify = bool_arg("--notify", *f.notify);
  if (f.idempotency_window) {
    std::string error;
    auto d = parse_duration(*f.idempotency_window, &error);
    if (!d || d->count() == 0) {
      throw ControlPlaneError(
          ExitCode::kUsage,
          fmt::format("--idempotency-window: {} is not a positive duration{}",
                      printable(*f.idempotency_window), error.empty() ? "" : " (" + error + ")"),
          "give a duration such as 24h, 7d or 30m");
    }
    c.idempotency_window = *d;
  }
  if (f.max_payload_bytes) {
    if (*f.max_payload_bytes < 1 || *f.max_payload_bytes > (int64_t{1} << 26)) {
      throw ControlPlaneError(ExitCode::kUsage,
                              fmt::format("--max-payload-bytes: {} is outside 1 .. 67108864 "
                                          "(64 MiB)",
                                          *f.max_payload_bytes));
    }
    c.max_payload_bytes = static_cast<int32_t>(*f.max_payload_bytes);
  }
  if (c.empty()) {
    throw ControlPlaneError(ExitCode::kUsage, "nothing to change",
                            "give --retention, --allow-drop-past-committed, --max-payload-bytes, "
                            "--notify, --idempotency-window, or --from-config with --config FILE");
  }
  return c;
}

// One setting's value as the config spells it.
std::string spelled(const std::string& setting, const nlohmann::json& v) {
  if (setting == "retention") {
    return v.is_null() ? std::string("forever") : format_duration(Millis(v.get<int64_t>()));
  }
  if (setting == "idempotency_window") return format_duration(Millis(v.get<int64_t>()));
  return v.dump();
}

int stream_set(const StreamSetFlags& f) {
  auto config = maybe_load(f.db.config_file);
  const store::StreamSettingsChange change = change_of(f, config);
  auto options = f.db.resolve(config);
  options.application_name = "sqlstreams stream set";
  store::Session session(options);
  const std::string actor = operator_actor();
  store::StreamSettingsResult r;
  try {
    r = store::set_stream_settings(session, f.stream, change, actor);
  } catch (const store::StoreError& e) {
    if (e.kind() != store::StoreError::Kind::kRejected) throw;
    throw ControlPlaneError(ExitCode::kData, e.what(), "list the streams with: sqlstreams status");
  }
  if (!r.audit_id) {
    std::printf("stream %s already has these settings; nothing changed\n", f.stream.c_str());
    return 0;
  }
  std::string what;
  const nlohmann::json changes = nlohmann::json::parse(r.changes_json);
  for (const auto& [setting, fromto] : changes.items()) {
    what += fmt::format("{}{} {} -> {}", what.empty() ? "" : ", ", setting,
                        spelled(setting, fromto["from"]), spelled(setting, fromto["to"]));
  }
  spdlog::info("stream-settings-changed-by-operator stream={} actor={} changes={} audit_id={}",
               f.stream, actor, r.changes_json, *r.audit_id);
  std::printf(
      "stream %s: %s (recorded in stream_actions, id %lld). Every host's janitor applies "
      "retention and allow_drop_past_committed at its next pass; SQL producers see "
      "max_payload_bytes and notify at once, running hosts at their next start or reload; "
      "every producer sees idempotency_window at once.\n",
      f.stream.c_str(), what.c_str(), static_cast<long long>(*r.audit_id));
  return 0;
}

}  // namespace

void register_stream(CLI::App& app, Action& action) {
  auto* stream = app.add_subcommand("stream", "A stream's fleet-wide settings");
  stream->require_subcommand(1);
  auto f = std::make_shared<StreamSetFlags>();
  auto* set = stream->add_subcommand(
      "set",
      "Change a stream's retention, allow_drop_past_committed, max_payload_bytes, notify or "
      "idempotency_window for every host (audited in stream_actions)");
  f->db.add_to(set, false);
  set->add_option("stream", f->stream, "stream name")->required();
  set->add_option("--retention", f->retention, "how long messages are kept: 7d, 12h, or forever");
  set->add_option("--allow-drop-past-committed", f->allow_drop,
                  "true: retention may drop messages a group has not committed");
  set->add_option("--max-payload-bytes", f->max_payload_bytes, "largest payload, 1 .. 64 MiB");
  set->add_option("--notify", f->notify, "true: producers send a pg_notify wake-up hint");
  set->add_option("--idempotency-window", f->idempotency_window,
                  "how long idempotency keys are remembered: 24h, 7d");
  set->add_flag("--from-config", f->from_config,
                "take every setting from the --config file's stream of that name");
  set->callback([&action, f] { action = [f] { return stream_set(*f); }; });
}

}  // namespace sqlstreams::cli
