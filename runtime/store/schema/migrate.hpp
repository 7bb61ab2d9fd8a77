// store/schema/migrate — versioned schema migrations (migrations/V*.sql, embedded at build time).
// Owns: applying pending versions in order inside one transaction under an advisory lock
// (safe with many hosts starting at once; waited for at most a timeout, then the holder is
// named), recording version + sha256 checksum, refusing a
// database newer than this binary and refusing an applied file whose checksum changed.
// Threading: uses the caller's Session.
#pragma once

#include <string>
#include <vector>

#include "common/duration.hpp"
#include "store/connection/session.hpp"

namespace sqlstreams::store {

struct EmbeddedMigration {
  int version;
  const char* file;
  const char* sql;  // with the @schema@ placeholder
};

// All migrations compiled into this binary, ascending by version.
const std::vector<EmbeddedMigration>& embedded_migrations();

struct MigrationStatus {
  int database_version = 0;          // highest applied version (0 = none)
  int known_version = 0;             // highest version this binary knows
  std::vector<std::string> pending;  // files not yet applied
};

inline constexpr Millis kDefaultMigrateLockTimeout{60'000};

// Applies pending migrations; returns the files applied (empty when up to date).
// Throws StoreError kRejected when the database is newer or a checksum changed, and StoreError
// (sqlstate 55P03) naming the pid, role, application and client of every holder when the
// migrations' advisory lock is not free within `lock_timeout` (any role can take that lock).
std::vector<std::string> migrate(Session& session,
                                 Millis lock_timeout = kDefaultMigrateLockTimeout);

// Reads the state without changing anything; throws like migrate() on newer/tampered.
MigrationStatus migration_status(Session& session);

}  // namespace sqlstreams::store
