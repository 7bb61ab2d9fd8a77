#include "store/schema/migrate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>

#include "store/core/pq.hpp"
#include "store/core/sqlstate.hpp"
#include "store/schema/catalog.hpp"

namespace sqlstreams::store {
namespace {

// Statement names (store/core/statement.hpp).
constexpr StatementName kMigrationsTable{"migrations_table_exists"};
constexpr StatementName kAppliedMigrations{"applied_migrations"};
constexpr StatementName kChecksum{"migration_checksum"};
constexpr StatementName kLockHolders{"migrate_lock_holders"};
constexpr StatementName kMigrateLockTimeout{"migrate_lock_timeout"};
constexpr StatementName kMigrateLock{"migrate_lock"};
constexpr StatementName kDefaultLockTimeout{"default_lock_timeout"};
constexpr StatementName kCreateSchema{"create_schema"};
constexpr StatementName kCreateMigrationsTable{"create_migrations_table"};
constexpr StatementName kMigration{"migration"};
constexpr StatementName kRecordMigration{"record_migration"};

constexpr const char* kLockKey = "sqlstreams.migrate";

std::string render(const EmbeddedMigration& m, const Session& session) {
  std::string sql = m.sql;
  const std::string placeholder = "@schema@";
  for (size_t pos = sql.find(placeholder); pos != std::string::npos;
       pos = sql.find(placeholder, pos)) {
    sql.replace(pos, placeholder.size(), session.schema_sql());
    pos += session.schema_sql().size();
  }
  return sql;
}

struct Applied {
  std::string file;
  std::string checksum;
};

// Reads applied rows (empty when the migrations table does not exist yet).
std::map<int, Applied> read_applied(pqxx::transaction_base& tx, const Session& session) {
  std::map<int, Applied> applied;
  auto exists = exec1(tx, kMigrationsTable, "SELECT to_regclass($1) IS NOT NULL",
                      session.schema_sql() + ".migrations")[0]
                    .as<bool>();
  if (!exists) return applied;
  for (const auto& row :
       exec(tx, kAppliedMigrations,
            fmt::format("SELECT version, file, checksum FROM {}.migrations ORDER BY version",
                        session.schema_sql()))) {
    applied[row[0].as<int>()] = Applied{row[1].as<std::string>(), row[2].as<std::string>()};
  }
  return applied;
}

std::string checksum_of(pqxx::transaction_base& tx, const char* sql) {
  return exec1(tx, kChecksum, "SELECT encode(sha256(convert_to($1, 'UTF8')), 'hex')", sql)[0]
      .as<std::string>();
}

// Throws when the database is newer than this binary or an applied file changed.
void verify(pqxx::transaction_base& tx, const std::map<int, Applied>& applied) {
  const auto& known = embedded_migrations();
  int known_max = known.empty() ? 0 : known.back().version;
  if (!applied.empty() && applied.rbegin()->first > known_max) {
    throw StoreError(
        StoreError::Kind::kRejected,
        fmt::format("database schema is at version {} ({}), newer than this binary knows (up to "
                    "{}); upgrade sqlstreams on this host before running it against this database",
                    applied.rbegin()->first, applied.rbegin()->second.file, known_max));
  }
  for (const auto& m : known) {
    auto it = applied.find(m.version);
    if (it == applied.end()) continue;
    std::string sum = checksum_of(tx, m.sql);
    if (sum != it->second.checksum) {
      throw StoreError(
          StoreError::Kind::kRejected,
          fmt::format("migration {} was changed after it was applied (checksum in database {}, "
                      "in this binary {}); applied migrations are immutable: restore the "
                      "original file and add a new V{:03}__*.sql instead",
                      m.file, it->second.checksum.substr(0, 12), sum.substr(0, 12),
                      known.back().version + 1));
    }
  }
}

// Sessions other roles control name themselves: print their text without control characters.
std::string clean(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return text;
}

// Who holds the migrations' advisory lock in this database, as "pid 123 (role r, application
// "a", client c, lock held since t)", or "" when nobody does any more.
std::string lock_holders(pqxx::connection& conn) {
  pqxx::read_transaction tx(conn);
  // A bigint advisory key is stored as classid (high 32 bits) and objid (low 32), objsubid 1.
  auto rows = exec(
      tx, kLockHolders,
      "SELECT l.pid, coalesce(a.usename::text, '?'), coalesce(a.application_name, ''), "
      "coalesce(host(a.client_addr), 'local socket or hidden'), "
      "coalesce(to_char(a.xact_start AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS\"Z\"'), '?') "
      "FROM pg_locks l LEFT JOIN pg_stat_activity a ON a.pid = l.pid "
      "WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1 "
      "AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database()) "
      "AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtext($1)::bigint "
      "ORDER BY l.pid",
      kLockKey);
  std::string out;
  for (const auto& row : rows) {
    if (!out.empty()) out += ", ";
    out += fmt::format("pid {} (role {}, application \"{}\", client {}, transaction since {})",
                       row[0].as<int64_t>(), clean(row[1].as<std::string>()),
                       clean(row[2].as<std::string>()), clean(row[3].as<std::string>()),
                       row[4].as<std::string>());
  }
  return out;
}

[[noreturn]] void throw_lock_timeout(pqxx::connection& conn, Millis lock_timeout) {
  const std::string holders = lock_holders(conn);
  std::string message = fmt::format(
      "migrate: gave up after waiting {} for the migrations lock "
      "(pg_advisory_xact_lock(hashtext('{}')) in this database); ",
      format_duration(lock_timeout), kLockKey);
  message += holders.empty() ? "it was released meanwhile: run again"
                             : "held by " + holders +
                                   "; end that session (SELECT pg_terminate_backend(pid)) or raise "
                                   "database.migrate_lock_timeout / --lock-timeout";
  throw StoreError(StoreError::Kind::kOther, message, kSqlstateLockNotAvailable);
}

}  // namespace

std::vector<std::string> migrate(Session& session, Millis lock_timeout) {
  auto applied_now = guarded(session, "migrate", [&]() -> std::vector<std::string> {
    auto& conn = connection_of(session);
    bool timed_out = false;
    std::optional<pqxx::work> tx_holder;
    tx_holder.emplace(conn);
    pqxx::work& tx = *tx_holder;
    // Any role may take this lock: wait a bounded time, then name who holds it.
    exec(tx, kMigrateLockTimeout,
         fmt::format("SET LOCAL lock_timeout = {}", std::max<int64_t>(1, lock_timeout.count())));
    try {
      exec(tx, kMigrateLock, "SELECT pg_advisory_xact_lock(hashtext($1))", kLockKey);
    } catch (const pqxx::sql_error& e) {
      if (condition_of(sqlstate_of(e)) != Condition::kLockNotAvailable) throw;
      timed_out = true;
    }
    if (timed_out) {
      tx_holder.reset();  // roll back the failed transaction before asking who holds the lock
      throw_lock_timeout(conn, lock_timeout);
    }
    exec(tx, kDefaultLockTimeout,
         "SET LOCAL lock_timeout TO DEFAULT");  // the DDL below waits as long as it must
    exec(tx, kCreateSchema, fmt::format("CREATE SCHEMA IF NOT EXISTS {}", session.schema_sql()));
    exec(tx, kCreateMigrationsTable,
         fmt::format(
             "CREATE TABLE IF NOT EXISTS {}.migrations (version integer PRIMARY KEY, file text NOT "
             "NULL, checksum text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())",
             session.schema_sql()));
    auto applied = read_applied(tx, session);
    verify(tx, applied);
    std::vector<std::string> done;
    for (const auto& m : embedded_migrations()) {
      if (applied.count(m.version)) continue;
      exec(tx, kMigration, render(m, session));
      exec(tx, kRecordMigration,
           fmt::format("INSERT INTO {}.migrations (version, file, checksum) VALUES ($1, "
                       "$2, encode(sha256(convert_to($3, 'UTF8')), 'hex'))",
                       session.schema_sql()),
           m.version, m.file, m.sql);
      done.emplace_back(m.file);
    }
    tx.commit();
    return done;
  });
  // Streams whose hosts were all down get partitions ahead of their head again, each in a
  // transaction of its own (never in the migrating one: DDL waits for the stream's writers).
  for (const auto& stream : list_streams(session)) {
    create_ahead_of_head(session, stream.id, kDeclarePartitionsAhead);
  }
  return applied_now;
}

MigrationStatus migration_status(Session& session) {
  return guarded(session, "migration status", [&] {
    auto& conn = connection_of(session);
    pqxx::read_transaction tx(conn);
    auto applied = read_applied(tx, session);
    verify(tx, applied);
    MigrationStatus status;
    status.database_version = applied.empty() ? 0 : applied.rbegin()->first;
    const auto& known = embedded_migrations();
    status.known_version = known.empty() ? 0 : known.back().version;
    for (const auto& m : known) {
      if (!applied.count(m.version)) status.pending.emplace_back(m.file);
    }
    return status;
  });
}

}  // namespace sqlstreams::store
