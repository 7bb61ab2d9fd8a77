// tests/e2e — helpers shared by the end-to-end tests: host configs, running `sqlstreams run`
// hosts, the CLI, drain checks and counts over the record files of payments_faults.so. What the
// service suite needs too (scratch folders, waits, the host process and its log, queries,
// producing payments, reading record files, text) lives in tests/support.
// Every wait polls with a timeout; nothing sleeps for a fixed long time.
// Threading: test thread only.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <pqxx/pqxx>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "host_process.hpp"
#include "payments.hpp"
#include "process.hpp"
#include "scratch.hpp"
#include "test_database.hpp"
#include "text.hpp"

namespace sqlstreams::e2e {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

// Seconds from `t` to now, on the steady clock.
inline double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// Seconds between the first log lines of events `from` and `to`, by the host's own "ts" fields
// (-1 when either is missing): how long the host itself took between them. A drain's promise
// (host-draining → host-stopped within shutdown_timeout) is judged by this, not by the test's
// wait for the process: that also counts the teardown after host-stopped (under ASan the leak
// check at exit, ~20 s on a machine at load 40) and the test process's own scheduling.
double logged_seconds_between(const std::string& log, const std::string& from,
                              const std::string& to);

inline constexpr const char* kStream = "payments.requested";
inline constexpr const char* kCharge = "charge-cards";
inline constexpr const char* kAudit = "audit-payments";

// A scratch folder /tmp/sqlstreams-e2e-XXXXXX, kept when the test failed or
// SQLSTREAMS_E2E_KEEP=1 (tests/support/scratch.hpp); polling waits with a deadline.
class ScratchDir : public testing::ScratchDir {
 public:
  ScratchDir() : testing::ScratchDir("sqlstreams-e2e") {}
};
using testing::count_of;
using testing::free_tcp_port;
using testing::produce_payments;
using testing::query;
using testing::read_records;
using testing::Records;
using testing::scalar;
using testing::tail;
using testing::wait_until;

// A throwaway PostgreSQL cluster of the test's own (scripts/pg.sh), stopped and removed after:
// for tests that stop or crash the database without disturbing the shared test cluster.
class OwnCluster {
 public:
  OwnCluster();
  ~OwnCluster();
  OwnCluster(const OwnCluster&) = delete;
  OwnCluster& operator=(const OwnCluster&) = delete;
  const std::string& url() const { return url_; }
  std::pair<int, std::string> restart_immediate();
  std::pair<int, std::string> stop();   // fast shutdown
  std::pair<int, std::string> start();  // again, same port and data

 private:
  int port_;
  std::string dir_;
  std::string url_;
};

// One host's configuration: stream payments.requested, group charge-cards and (optionally)
// audit-payments of `plugin` (the test plugin payments_faults.so by default: the knobs below and
// in charge_config are its own), both recording every call to `record_file`.
struct HostOptions {
  std::string name = "e2e-host";
  std::string shutdown_timeout = "10s";
  std::string lease_ttl = "6s";
  std::string handler_timeout = "1s";
  int concurrency = 4;
  int batch_size = 200;
  std::string plugin = "payments_faults.so";  // tests/plugins/payments_faults
  std::string record_file;                    // "" = no record file
  int64_t sleep_ms = 0;                       // per-message work in both handlers
  std::string charge_config;                  // extra TOML lines for charge-cards' [groups.config]
  std::string audit_config;    // extra TOML lines for audit-payments' [groups.config]
  std::string group_settings;  // extra TOML lines of every group's own table (`key = value`)
  std::string charge_retry;    // TOML lines for charge-cards' [groups.retry] ("" = defaults)
  bool audit_group = true;
  int noop_groups = 0;  // extra groups idle-1..N on the same stream running noop.so
  std::map<std::string, std::string> env;  // extra environment of the host process
  std::string migrate = "auto";            // database.migrate
  int64_t partition_size = 100000;         // the stream's
  std::string retention;                   // the stream's ("" = forever)
  std::string janitor_period;              // host.janitor_period ("" = default)
};
std::string host_config(const HostOptions& o);

// A `sqlstreams run` process with its own config file and log in `dir` (tests/support's
// RunningHost: log, count_in_log, wait_for_log, stop).
class Host : public testing::RunningHost {
 public:
  Host(const ScratchDir& dir, HostOptions options, const std::string& database_url);
  const HostOptions& options() const { return options_; }
  std::string holder() const;  // "<host name>:<pid>", as written into leases

 private:
  HostOptions options_;
};

// Runs `sqlstreams ARGS...` to completion with SQLSTREAMS_DATABASE_URL set (when given).
std::pair<int, std::string> cli(const std::vector<std::string>& args,
                                const std::string& database_url = "",
                                const std::string& stdin_text = "");

// Declares the config's streams and groups (`sqlstreams declare`), asserting success.
void declare(const std::string& database_url, const std::string& config_file);
// Writes host_config(o) to dir/<file> and declares it; returns the config file's path.
std::string declare_host(const ScratchDir& dir, const std::string& database_url,
                         const HostOptions& o, const std::string& file = "host.toml");
// Every message produced so far: max(id).
int64_t head(const std::string& url);

// True when every group's committed cursor reached max(id) and no range lease is left.
bool drained(const std::string& url);
// Waits for drained(); on timeout fails the test with the cursor and lease rows.
void wait_drained(const std::string& url, Millis timeout);

// Records and read_records (the record files of payments_faults.so): tests/support/payments.
size_t calls(const Records& r, const std::string& group);
// Handler calls of `group` in one record file, counted cheaply (for polling).
size_t count_calls(const std::string& file, const std::string& group);
// Ids handled more than once by `group`.
std::vector<int64_t> duplicates(const Records& r, const std::string& group);
// The message ids of `group` whose call a host logged as timed out (`handler-timeout`): a failed
// attempt, so the message runs again. A 1 s handler_timeout fires on a loaded machine (two
// hosts' calls stalled past it in one CI run), which a test that counts repeats must allow.
std::set<int64_t> timed_out_ids(const std::string& log, const std::string& group);
// timed_out_ids(log) and testing::retried_ids(record_files): every id whose attempt failed. The
// log alone misses timeouts past the first of a burst (the warning is rate-limited).
std::set<int64_t> failed_attempt_ids(const std::string& log,
                                     const std::vector<std::string>& record_files,
                                     const std::string& group);
// Ids in 1..n never handled by `group`, as a short printable list ("" = none missing).
std::string missing_ids(const Records& r, const std::string& group, int64_t n);

// LSAN_OPTIONS (the inherited ones plus lsan.supp) for hosts whose connections get cut.
std::string lsan_options_for_lost_connections();

}  // namespace sqlstreams::e2e
