// declare_all and prepare_database (moved here from cli/).
#include "service/declare.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/errors.hpp"
#include "store/schema/catalog.hpp"
#include "store/schema/migrate.hpp"

namespace sqlstreams::service {
namespace {
std::string dashed(std::string setting) {
  for (char& c : setting) c = c == '_' ? '-' : c;
  return setting;
}
}  // namespace

store::OrderingMode ordering_mode(const config::GroupConfig& g) {
  if (g.ordering == config::Ordering::kNone) return store::OrderingMode::kNone;
  return g.ordering_dead == config::OrderingDead::kHold ? store::OrderingMode::kKeyHold
                                                        : store::OrderingMode::kKeyRelease;
}

void declare_all(store::Session& session, const config::Config& config) {
  for (const auto& s : config.streams) {
    store::StreamSpec spec{s.name,
                           s.partition_size,
                           s.retention,
                           s.allow_drop_past_committed,
                           s.max_payload_bytes,
                           s.notify,
                           s.idempotency_window};
    auto declared = store::declare_stream(session, spec);
    if (declared.created) {
      spdlog::info("stream-created stream={} id={} partition_size={}", s.name, declared.stream.id,
                   s.partition_size);
    }
    // Fleet-wide settings are the database's (V008); a config that differs is stale or an
    // intended change not applied yet: say so at every declaration, change nothing.
    for (const auto& d : declared.differences) {
      spdlog::warn(
          "stream-setting-differs stream={} setting={} database={} config={} (the database's "
          "value holds for every host; to change it: sqlstreams stream set {} --{} {})",
          s.name, d.setting, d.database, d.config, s.name, dashed(d.setting), d.config);
    }
  }
  for (const auto& g : config.groups) {
    auto stream = store::find_stream(session, g.stream);
    if (!stream) {
      throw ControlPlaneError(ExitCode::kDatabase,
                              "stream '" + g.stream + "' vanished while declaring");
    }
    // The group's ordering is fixed at creation: a differing config is refused (StoreError
    // kRejected naming both), never followed.
    auto declared = store::declare_group(
        session, *stream, g.name,
        g.start == config::GroupStart::kHead ? store::StartAt::kHead : store::StartAt::kBeginning,
        store::kDeclareProofTimeout, ordering_mode(g));
    if (declared.created) {
      spdlog::info("group-created stream={} group={} id={} start={}", g.stream, g.name,
                   declared.group.id, declared.start_position);
    }
  }
}

void prepare_database(store::Session& session, const config::Config& config) {
  if (config.database.migrate == config::MigrateMode::kAuto) {
    for (const auto& f : store::migrate(session, config.database.migrate_lock_timeout))
      spdlog::info("migration-applied file={}", f);
  } else {
    auto st = store::migration_status(session);
    if (!st.pending.empty()) {
      throw ControlPlaneError(ExitCode::kDatabase,
                              fmt::format("database schema is at version {}, this host needs {} "
                                          "({} pending) and database.migrate = \"check\"",
                                          st.database_version, st.known_version, st.pending.size()),
                              "run `sqlstreams migrate --config FILE` first");
    }
  }
  declare_all(session, config);
  auto bad = store::streams_violating_cache_rule(session);
  if (!bad.empty()) {
    std::string names;
    for (const auto& b : bad) names += (names.empty() ? "" : ", ") + b;
    throw ControlPlaneError(
        ExitCode::kDatabase,
        fmt::format("refusing to run: the id sequence of stream(s) {} is not CACHE 1; cached "
                    "ids are drawn out of time order and the claim fence could skip messages",
                    names),
        "ALTER SEQUENCE <schema>.messages_<id>_id_seq CACHE 1");
  }
}

}  // namespace sqlstreams::service
