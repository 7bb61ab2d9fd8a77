#include "test_database.hpp"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <stdexcept>

#include "process.hpp"
#include "store/core/stream_tables.hpp"

namespace sqlstreams::testing {
namespace {

// FNV-1a over the migrations' file names and text: a template made from other migrations (a
// long-lived development cluster, an edited migration) is never copied.
std::string migrations_fingerprint() {
  std::vector<std::filesystem::path> files;
  for (const auto& entry :
       std::filesystem::directory_iterator(std::string(SQLSTREAMS_SOURCE_DIR) + "/migrations")) {
    if (entry.path().extension() == ".sql") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  uint64_t hash = 14695981039346656037ULL;
  auto mix = [&hash](const std::string& bytes) {
    for (unsigned char c : bytes) hash = (hash ^ c) * 1099511628211ULL;
  };
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    mix(file.filename().string());
    mix(std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  return hex;
}

// The migrated template of this cluster, made once by whichever test process asks first (the
// others wait on the advisory lock): `sqlstreams migrate` on a scratch database, renamed to its
// final name only when complete, then closed to connections (a copy needs a template nobody is
// connected to).
std::string migrated_template() {
  static std::once_flag once;
  static std::string name;
  std::call_once(once, [] {
    const std::string final_name = "sqlstreams_template_" + migrations_fingerprint();
    pqxx::connection admin(admin_url());
    pqxx::nontransaction tx(admin);
    tx.exec("SELECT pg_advisory_lock(hashtext('sqlstreams-test-template'))");
    if (tx.exec_params("SELECT 1 FROM pg_database WHERE datname = $1", final_name).empty()) {
      const std::string scratch = final_name + "_" + std::to_string(getpid());
      tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(scratch));
      tx.exec("CREATE DATABASE " + tx.quote_name(scratch));
      auto [code, out] = run_command(
          {SQLSTREAMS_BINARY, "migrate", "--database-url", with_database(admin_url(), scratch)});
      if (code != 0) {
        throw std::runtime_error(
            "cannot make the migrated template database (sqlstreams migrate "
            "exited " +
            std::to_string(code) + "): " + out);
      }
      tx.exec("ALTER DATABASE " + tx.quote_name(scratch) + " RENAME TO " +
              tx.quote_name(final_name));
      tx.exec("ALTER DATABASE " + tx.quote_name(final_name) +
              " WITH IS_TEMPLATE true ALLOW_CONNECTIONS false");
    }
    tx.exec("SELECT pg_advisory_unlock(hashtext('sqlstreams-test-template'))");
    name = final_name;
  });
  return name;
}

bool throwaway_cluster() {
  const char* v = std::getenv("SQLSTREAMS_TEST_THROWAWAY_CLUSTER");
  return v != nullptr && std::string(v) == "1";
}

// "<pid>_<8 hex digits>", drawn once per process: what makes a test's database and role names
// unique on the cluster. The pid alone is not: pids wrap at /proc/sys/kernel/pid_max (32,768
// here), and on a throwaway cluster a test's database is never dropped, so a later test process
// with the same pid and test name met "database ... already exists" (found repeating
// IdempotentProduceTest.* 5 times beside a build, 2026-12-06).
const std::string& process_tag() {
  static const std::string tag = [] {
    std::random_device rd;
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", static_cast<unsigned>(rd()));
    return std::to_string(getpid()) + "_" + hex;
  }();
  return tag;
}
}  // namespace

std::string admin_url() {
  const char* url = std::getenv("SQLSTREAMS_TEST_DATABASE_URL");
  if (!url || !*url) {
    throw std::runtime_error(
        "SQLSTREAMS_TEST_DATABASE_URL is not set: run the suite with scripts/test.sh, which "
        "starts a throwaway PostgreSQL");
  }
  return url;
}

std::string with_database(const std::string& url, const std::string& db) {
  auto scheme = url.find("://");
  auto slash = url.find('/', scheme == std::string::npos ? 0 : scheme + 3);
  auto query = url.find('?');
  std::string base = slash == std::string::npos ? url : url.substr(0, slash);
  std::string rest = query == std::string::npos ? "" : url.substr(query);
  return base + "/" + db + rest;
}

TestDatabase::TestDatabase(Schema schema) {
  static std::atomic<int> counter{0};
  const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string test = info ? std::string(info->name()) : "t";
  for (auto& c : test) {
    if (!isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  name_ = "t_" + process_tag() + "_" + std::to_string(counter++) + "_" + test.substr(0, 30);
  for (auto& c : name_) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  const std::string from =
      schema == Schema::kMigrated ? migrated_template() : std::string("template1");
  pqxx::connection admin(admin_url());
  pqxx::nontransaction tx(admin);
  // FILE_COPY: a copy of the template's files and two checkpoints (cheap on the suite's fsync-off
  // cluster) instead of WAL-logging every block of it (CONTRIBUTING.md#build-speed).
  tx.exec("CREATE DATABASE " + tx.quote_name(name_) + " TEMPLATE " + tx.quote_name(from) +
          " STRATEGY FILE_COPY");
  url_ = with_database(admin_url(), name_);
}

TestDatabase::~TestDatabase() {
  if (throwaway_cluster()) return;  // the cluster goes as a whole at the end of the run
  try {
    pqxx::connection admin(admin_url());
    pqxx::nontransaction tx(admin);
    tx.exec("DROP DATABASE IF EXISTS " + tx.quote_name(name_) + " WITH (FORCE)");
  } catch (const std::exception& e) {
    fprintf(stderr, "warning: could not drop test database %s: %s\n", name_.c_str(), e.what());
  }
}

namespace {

// The calling thread's reused connections: open only while `depth` > 0.
struct Polling {
  int depth = 0;
  std::map<std::string, std::unique_ptr<pqxx::connection>> by_url;
};
thread_local Polling polling;

pqxx::result run_statement(pqxx::connection& c, const std::string& statement) {
  pqxx::work tx(c);
  auto r = tx.exec(statement);
  tx.commit();
  return r;
}

// Runs `use` on a connection to `url`: the thread's reused one inside a PollingConnections scope,
// else a new one.
template <class Use>
auto with_connection(const std::string& url, Use use) {
  if (polling.depth == 0) {
    pqxx::connection c(url);
    return use(c);
  }
  auto& slot = polling.by_url[url];
  const bool reused = slot != nullptr;
  if (!reused) slot = std::make_unique<pqxx::connection>(url);
  try {
    return use(*slot);
  } catch (const pqxx::broken_connection&) {
    slot.reset();
    if (!reused) throw;
    slot = std::make_unique<pqxx::connection>(url);  // cut since its last use: once more, new
    return use(*slot);
  }
}

}  // namespace

PollingConnections::PollingConnections() { ++polling.depth; }

PollingConnections::~PollingConnections() {
  if (--polling.depth == 0) polling.by_url.clear();
}

pqxx::result query(const std::string& url, const std::string& statement) {
  return with_connection(url, [&](pqxx::connection& c) { return run_statement(c, statement); });
}

pqxx::result TestDatabase::sql(const std::string& statement) const {
  return query(url_, statement);
}

namespace {

store::StreamTables tables_of(int64_t id) { return store::StreamTables("sqlstreams", id); }

}  // namespace

std::string StreamFamily::partition(int64_t k) const { return tables_of(id).partition(k); }

std::string StreamFamily::partition_name(int64_t k) const {
  return tables_of(id).partition_name(k);
}

std::string StreamFamily::partition_default() const { return tables_of(id).partition_default(); }

std::string StreamFamily::partition_default_name() const {
  return tables_of(id).partition_default_name();
}

StreamFamily stream_family(int64_t id) {
  const store::StreamTables t = tables_of(id);
  StreamFamily f;
  f.id = id;
  f.messages = t.messages;
  f.cursors = t.cursors;
  f.leases = t.leases;
  f.exceptions = t.exceptions;
  f.deliveries = t.deliveries;
  f.id_seq = t.id_seq;
  f.next_id = t.schema + ".next_id_" + std::to_string(id);  // StreamTables does not name it
  return f;
}

StreamFamily stream_family(const std::string& url, const std::string& stream) {
  const auto r = with_connection(url, [&](pqxx::connection& c) {
    pqxx::read_transaction tx(c);
    return tx.exec_params("SELECT id FROM sqlstreams.streams WHERE name = $1", stream);
  });
  if (r.empty()) {
    throw std::runtime_error("stream_family: no stream named '" + stream +
                             "' in sqlstreams.streams");
  }
  return stream_family(r[0][0].as<int64_t>());
}

StreamFamily stream_family(const TestDatabase& db, const std::string& stream) {
  return stream_family(db.url(), stream);
}

TestLogins::~TestLogins() {
  for (const auto& role : roles_) {
    try {
      db_.sql("DROP OWNED BY " + role);
      db_.sql("DROP ROLE " + role);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "cannot drop test role " << role << ": " << e.what();
    }
  }
}

std::string TestLogins::login_as(const std::string& granted) {
  static std::atomic<int> counter{0};
  const std::string role = "t" + process_tag() + "_" + std::to_string(counter++) + "_" +
                           granted.substr(granted.find('_') + 1);
  db_.sql("CREATE ROLE " + role + " LOGIN IN ROLE " + granted);
  roles_.push_back(role);
  const std::string& url = db_.url();
  const size_t start = url.find("://") + 3;
  return url.substr(0, start) + role + url.substr(url.find('@', start));
}

}  // namespace sqlstreams::testing
