// tests/service — helpers for the service tests: real `sqlstreams run` hosts with their own
// config and log in a scratch folder, a datagram socket standing in for systemd's
// NOTIFY_SOCKET, a tiny HTTP GET (civetweb's client, the library the host serves with), and
// the committed cursor. Scratch folders, waits, the host process, producing payments and
// reading record files come from tests/support.
// Threading: test thread only (NotifySocket receives on its own thread).
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "host_process.hpp"
#include "payments.hpp"
#include "process.hpp"
#include "scratch.hpp"
#include "text.hpp"

namespace sqlstreams::service_test {

using namespace std::chrono_literals;
using Millis = std::chrono::milliseconds;

inline constexpr const char* kStream = "payments.requested";

// A scratch folder /tmp/sqlstreams-svc-XXXXXX kept when the test failed, a free loopback port,
// polling waits with a deadline (tests/support/scratch.hpp).
class ScratchDir : public testing::ScratchDir {
 public:
  ScratchDir() : testing::ScratchDir("sqlstreams-svc") {}
};
using testing::free_tcp_port;
using testing::has_line;
using testing::produce_payments;
using testing::read_records;
using testing::tail;
using testing::wait_until;

struct HttpResult {
  int status = 0;  // 0: no answer (error says why)
  std::string body;
  std::string content_type;
  std::string error;
};
HttpResult http_get(int port, const std::string& path);
// The value of the sample line of a /metrics page that starts with `series` ("name{labels}"),
// or -1 when there is none.
double metric_value(const std::string& page, const std::string& series);

// Binds a unix datagram socket; what the host sends to NOTIFY_SOCKET lands in messages().
class NotifySocket {
 public:
  explicit NotifySocket(const std::string& path);
  ~NotifySocket();
  const std::string& path() const { return path_; }
  std::vector<std::string> messages() const;
  // When each of messages() arrived (same indexes).
  std::vector<std::chrono::steady_clock::time_point> arrivals() const;
  // Waits for a message containing `needle` at index >= `from`; returns its index or -1.
  int wait_for(const std::string& needle, Millis timeout, size_t from = 0) const;

 private:
  std::string path_;
  int fd_ = -1;
  std::atomic<bool> stop_{false};
  mutable std::mutex mu_;
  std::vector<std::string> messages_;
  std::vector<std::chrono::steady_clock::time_point> arrivals_;
  std::thread thread_;
};

struct GroupSpec {
  std::string name = "charge-cards";
  std::string handler = "charge-cards";
  std::string plugin = "payments.so";
  int concurrency = 2;
  int batch_size = 50;
  std::string config;  // extra lines of [groups.config]
  std::string extra;   // extra lines of the [[groups]] table
  std::string handler_timeout = "5s";
  std::string lease_ttl = "10s";
  int max_retries = 1;
};

struct HostSpec {
  std::string name = "svc-host";
  std::string http_listen;  // "" = off
  std::string status_interval = "300ms";
  std::string shutdown_timeout = "10s";
  std::vector<GroupSpec> groups{GroupSpec{}};
};
std::string host_toml(const HostSpec& spec);

// `sqlstreams run --config <dir>/<name>.toml --plugin-dir <build>/plugins` (tests/support's
// RunningHost: log, count_in_log, wait_for_log, stop, rewrite_config_text).
class HostProcess : public testing::RunningHost {
 public:
  HostProcess(const ScratchDir& dir, const HostSpec& spec, const std::string& database_url,
              std::map<std::string, std::string> env = {});
  void rewrite_config(const HostSpec& spec) { rewrite_config_text(host_toml(spec)); }
};

// produce_payments, read_records, tail: tests/support.
// LSAN_OPTIONS (the inherited ones plus tests/service/lsan.supp) for hosts whose database
// connections get cut under them.
std::string lsan_options();
// Committed cursor of a group (0 when it does not exist yet).
int64_t committed(const std::string& url, const std::string& group);

// `cpack -G DEB` of this build tree (SQLSTREAMS_BINARY_DIR) into `out_dir`: the path of the
// .deb, or "" (and cpack's output in `output`) when it failed.
std::string build_deb(const std::string& out_dir, std::string* output);

}  // namespace sqlstreams::service_test
