// tests/support — shared helpers for integration and e2e tests (real PostgreSQL only).
// scripts/test.sh starts a throwaway cluster and exports SQLSTREAMS_TEST_DATABASE_URL (an
// admin URL) and SQLSTREAMS_TEST_PG_DIR. Each TestDatabase creates a fresh database on that
// cluster, so tests can run in parallel, and drops it afterwards (but on a throwaway cluster:
// SQLSTREAMS_TEST_THROWAWAY_CLUSTER=1, whose every DROP DATABASE would cost a checkpoint).
// A TestDatabase(Schema::kMigrated) is a copy of one migrated template database per cluster and
// set of migrations (PostgreSQL's own suite copies an initdb template the same way): the copy
// costs a file copy, a migration costs a few hundred DDL statements.
// Tests may use libpqxx directly (the "only store/ includes libpqxx" rule is for runtime/).
// Threading: one TestDatabase per test; sql() opens a new connection per call (but inside a
// PollingConnections scope of the calling thread, e.g. a wait_until() predicate).
#pragma once

#include <cstdint>
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

// One statement in its own transaction on `url`: a new connection per call, except on a thread
// inside a PollingConnections scope (below).
pqxx::result query(const std::string& url, const std::string& statement);

// While one lives on a thread, query(), scalar(), TestDatabase::sql() and stream_family(url, …)
// on that thread keep one connection per URL and reuse it, instead of opening one per call; the
// connections close when the outermost scope ends. wait_until() opens one around its polls: a
// new connection costs PostgreSQL ~40 ms of CPU on the 2-core CI machines (a backend's fork and
// start-up), so a test polling every 50 ms used to keep most of a core busy on connections alone.
// A reused connection that was cut since its last use (a PostgreSQL restart, a terminated
// backend) is replaced once, as a new connection per call would have been. Nothing else of a
// session outlives a statement: each runs in its own committed transaction.
class PollingConnections {
 public:
  PollingConnections();
  ~PollingConnections();
  PollingConnections(const PollingConnections&) = delete;
  PollingConnections& operator=(const PollingConnections&) = delete;
};
// First column of the first row of query(url, statement) as T.
template <class T>
T scalar(const std::string& url, const std::string& statement) {
  return query(url, statement).at(0).at(0).as<T>();
}

// Replaces the database name of a postgresql:// URL.
std::string with_database(const std::string& url, const std::string& db);

// The qualified names of one stream's table family (messages_N and its partitions, cursors_N,
// leases_N, exceptions_N, deliveries_N, the id sequence, next_id_N()), built by the runtime's own
// store::StreamTables with schema "sqlstreams". Tests name a stream's tables through this, never
// as a literal `sqlstreams.messages_1`: the id is the one the database assigned to the stream
// (tests/docs/family_names_test.cpp fails on such a literal under tests/).
struct StreamFamily {
  int64_t id = 0;
  std::string messages, cursors, leases, exceptions, deliveries;
  std::string id_seq;   // sqlstreams.messages_N_id_seq
  std::string next_id;  // sqlstreams.next_id_N (the function, without its "()")
  // sqlstreams.messages_N_p<k>, and its pg_class name messages_N_p<k> (as the janitor reports it).
  std::string partition(int64_t k) const;
  std::string partition_name(int64_t k) const;
  // sqlstreams.messages_N_default (V007), and its pg_class name.
  std::string partition_default() const;
  std::string partition_default_name() const;
};

// The family of stream `id`, without asking the database.
StreamFamily stream_family(int64_t id);
// The family of the stream named `stream` in sqlstreams.streams of the database at `url` (or
// `db`); throws std::runtime_error naming the stream when there is none.
StreamFamily stream_family(const std::string& url, const std::string& stream);
StreamFamily stream_family(const TestDatabase& db, const std::string& stream);

}  // namespace sqlstreams::testing
