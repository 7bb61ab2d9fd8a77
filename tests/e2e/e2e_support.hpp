// tests/e2e — helpers shared by the end-to-end tests: scratch folders, host configs, running
// `sqlstreams run` hosts, polling waits, producing payments and reading the payments plugin's
// record files ("<group> <message id> <attempt> <outcome>" per handler call).
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
#include <string>
#include <utility>
#include <vector>

#include "process.hpp"
#include "scratch.hpp"
#include "test_database.hpp"

namespace sqlstreams::e2e {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

inline constexpr const char* kStream = "payments.requested";
inline constexpr const char* kCharge = "charge-cards";
inline constexpr const char* kAudit = "audit-payments";

// A scratch folder /tmp/sqlstreams-e2e-XXXXXX, kept when the test failed or
// SQLSTREAMS_E2E_KEEP=1 (tests/support/scratch.hpp); polling waits with a deadline.
class ScratchDir : public testing::ScratchDir {
 public:
  ScratchDir() : testing::ScratchDir("sqlstreams-e2e") {}
};
using testing::free_tcp_port;
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
  std::string charge_retry;  // TOML lines for charge-cards' [groups.retry] ("" = defaults)
  bool audit_group = true;
  int noop_groups = 0;  // extra groups idle-1..N on the same stream running noop.so
  std::map<std::string, std::string> env;  // extra environment of the host process
  std::string migrate = "auto";            // database.migrate
  int64_t partition_size = 100000;         // the stream's
  std::string retention;                   // the stream's ("" = forever)
  std::string janitor_period;              // host.janitor_period ("" = default)
};
std::string host_config(const HostOptions& o);

// A `sqlstreams run` process with its own config file and log in `dir`.
class Host {
 public:
  Host(const ScratchDir& dir, HostOptions options, const std::string& database_url);
  const HostOptions& options() const { return options_; }
  testing::ChildProcess& process() { return *process_; }
  pid_t pid() const { return process_->pid(); }
  std::string holder() const;  // "<host name>:<pid>", as written into leases
  std::string log() const { return process_->log(); }
  int count_in_log(const std::string& needle) const;
  // Waits for `needle` in the log; false on timeout or when the process ended first.
  bool wait_for_log(const std::string& needle, Millis timeout);
  // SIGTERM, then the exit code (nullopt when still running after `timeout`).
  std::optional<int> stop(Millis timeout);

 private:
  HostOptions options_;
  std::string config_file_;
  std::unique_ptr<testing::ChildProcess> process_;
};

// Runs `sqlstreams ARGS...` to completion with SQLSTREAMS_DATABASE_URL set (when given).
std::pair<int, std::string> cli(const std::vector<std::string>& args,
                                const std::string& database_url = "",
                                const std::string& stdin_text = "");

// One statement in its own transaction on `url`.
pqxx::result query(const std::string& url, const std::string& sql);
template <class T>
T scalar(const std::string& url, const std::string& sql) {
  return query(url, sql).at(0).at(0).as<T>();
}

// Declares the config's streams and groups (`sqlstreams declare`), asserting success.
void declare(const std::string& database_url, const std::string& config_file);
int64_t stream_id(const std::string& url);
// Produces payments order-<from> .. order-<from + n - 1> with produce_batch in transactions
// of `batch` messages.
void produce_payments(const std::string& url, int64_t n, int64_t from = 1, int64_t batch = 5000);
// Every message produced so far: max(id).
int64_t head(const std::string& url);

// True when every group's committed cursor reached max(id) and no range lease is left.
bool drained(const std::string& url);
// Waits for drained(); on timeout fails the test with the cursor and lease rows.
void wait_drained(const std::string& url, Millis timeout);

// group -> message id -> number of handler calls, from the record files (complete lines only).
using Records = std::map<std::string, std::map<int64_t, int>>;
Records read_records(const std::vector<std::string>& files);
size_t calls(const Records& r, const std::string& group);
// Handler calls of `group` in one record file, counted cheaply (for polling).
size_t count_calls(const std::string& file, const std::string& group);
// Ids handled more than once by `group`.
std::vector<int64_t> duplicates(const Records& r, const std::string& group);
// Ids in 1..n never handled by `group`, as a short printable list ("" = none missing).
std::string missing_ids(const Records& r, const std::string& group, int64_t n);

// LSAN_OPTIONS (the inherited ones plus lsan.supp) for hosts whose connections get cut.
std::string lsan_options_for_lost_connections();

// The last `lines` lines of `text`, for failure messages.
std::string tail(const std::string& text, size_t lines = 30);
// Occurrences of `needle` in `text`.
int count_of(const std::string& text, const std::string& needle);

}  // namespace sqlstreams::e2e
