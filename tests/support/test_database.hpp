// tests/support — shared helpers for integration and e2e tests (real PostgreSQL only).
// scripts/test.sh starts a throwaway cluster and exports SQLSTREAMS_TEST_DATABASE_URL (an
// admin URL) and SQLSTREAMS_TEST_PG_DIR. Each TestDatabase creates a fresh database on that
// cluster, so tests can run in parallel, and drops it afterwards (but on a throwaway cluster:
// SQLSTREAMS_TEST_THROWAWAY_CLUSTER=1, whose every DROP DATABASE would cost a checkpoint).
// A TestDatabase(Schema::kMigrated) is a copy of one migrated template database per cluster and
// set of migrations (PostgreSQL's own suite copies an initdb template the same way): the copy
// costs a file copy, a migration costs a few hundred DDL statements.
// Tests may use libpqxx directly (the "only store/ includes libpqxx" rule is for runtime/).
// Threading: one TestDatabase per test; sql() opens a new connection per call.
#pragma once

#include <pqxx/pqxx>
#include <string>
#include <vector>

namespace sqlstreams::testing {

// The admin URL; fails the test (never skips) when the environment does not provide one.
std::string admin_url();

class TestDatabase {
 public:
  // kEmpty: a new database with nothing of SQLStreams in it (what `migrate` and a first host
  // start meet). kMigrated: the same after `sqlstreams migrate` (what a fixture that migrates
  // first would make, without paying for it).
  enum class Schema { kEmpty, kMigrated };
  explicit TestDatabase(Schema schema = Schema::kEmpty);
  ~TestDatabase();
  TestDatabase(const TestDatabase&) = delete;
  TestDatabase& operator=(const TestDatabase&) = delete;

  const std::string& url() const { return url_; }
  const std::string& name() const { return name_; }
  // Runs one statement in its own transaction and returns the result.
  pqxx::result sql(const std::string& statement) const;
  // First column of the first row as T.
  template <class T>
  T scalar(const std::string& statement) const {
    return sql(statement).at(0).at(0).as<T>();
  }

 private:
  std::string name_;
  std::string url_;
};

// LOGIN roles for one test. Roles are cluster-wide, so each name carries the process id; each
// role is dropped (with what it owns in `db`) when this object goes, which must be before `db`.
class TestLogins {
 public:
  explicit TestLogins(const TestDatabase& db) : db_(db) {}
  ~TestLogins();
  TestLogins(const TestLogins&) = delete;
  TestLogins& operator=(const TestLogins&) = delete;

  // A new LOGIN role IN ROLE `granted` (e.g. "sqlstreams_producer"); returns a URL connecting
  // to the test database as that role.
  std::string login_as(const std::string& granted);

 private:
  const TestDatabase& db_;
  std::vector<std::string> roles_;
};

// One statement in its own transaction on `url` (a new connection per call).
pqxx::result query(const std::string& url, const std::string& statement);
// First column of the first row of query(url, statement) as T.
template <class T>
T scalar(const std::string& url, const std::string& statement) {
  return query(url, statement).at(0).at(0).as<T>();
}

// Replaces the database name of a postgresql:// URL.
std::string with_database(const std::string& url, const std::string& db);

}  // namespace sqlstreams::testing
