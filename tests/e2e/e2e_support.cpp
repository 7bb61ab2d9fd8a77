#include "e2e_support.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <optional>
#include <sstream>
#include <thread>

namespace sqlstreams::e2e {

namespace {

std::pair<int, std::string> pg_script(std::vector<std::string> args) {
  std::vector<std::string> argv{"/bin/bash", std::string(SQLSTREAMS_SOURCE_DIR) + "/scripts/pg.sh"};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::run_command(argv,
                              {{"SQLSTREAMS_PG_DB", "postgres"}, {"SQLSTREAMS_PG_FSYNC", "off"}});
}

}  // namespace

OwnCluster::OwnCluster() : port_(free_tcp_port()) {
  char tmpl[] = "/tmp/sqlstreams-e2e-pg-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  dir_ = tmpl;
  auto [code, out] = start();
  if (code != 0) throw std::runtime_error("pg.sh start failed: " + out);
  url_ = "postgresql://postgres@127.0.0.1:" + std::to_string(port_) + "/postgres";
}

OwnCluster::~OwnCluster() {
  stop();
  std::error_code ec;
  std::filesystem::remove_all(dir_, ec);
}

std::pair<int, std::string> OwnCluster::restart_immediate() {
  return pg_script({"restart-immediate", dir_});
}
std::pair<int, std::string> OwnCluster::stop() { return pg_script({"stop", dir_}); }
std::pair<int, std::string> OwnCluster::start() {
  return pg_script({"start", dir_, std::to_string(port_)});
}

std::string host_config(const HostOptions& o) {
  std::ostringstream t;
  if (o.migrate != "auto") t << "[database]\nmigrate = \"" << o.migrate << "\"\n\n";
  t << "[host]\n"
    << "name = \"" << o.name << "\"\n"
    << "shutdown_timeout = \"" << o.shutdown_timeout << "\"\n"
    << "log_format = \"json\"\n"
    << "http_listen = \"\"\n";
  if (!o.janitor_period.empty()) t << "janitor_period = \"" << o.janitor_period << "\"\n";
  t << "\n[[streams]]\nname = \"" << kStream << "\"\npartition_size = " << o.partition_size << "\n";
  if (!o.retention.empty()) t << "retention = \"" << o.retention << "\"\n";
  auto group = [&](const char* name, const std::string& extra) {
    t << "\n[[groups]]\n"
      << "name = \"" << name << "\"\n"
      << "stream = \"" << kStream << "\"\n"
      << "plugin = \"" << o.plugin << "\"\n"
      << "handler = \"" << name << "\"\n"
      << "concurrency = " << o.concurrency << "\n"
      << "batch_size = " << o.batch_size << "\n"
      << "lease_ttl = \"" << o.lease_ttl << "\"\n"
      << "handler_timeout = \"" << o.handler_timeout << "\"\n"
      << "poll_interval = \"20ms\"\n"
      << "max_poll_interval = \"200ms\"\n"
      << o.group_settings << "[groups.config]\n";
    if (!o.record_file.empty()) t << "record_file = \"" << o.record_file << "\"\n";
    if (o.sleep_ms > 0) t << "sleep_ms = " << o.sleep_ms << "\n";
    t << extra;
  };
  group(kCharge,
        o.charge_config + (o.charge_retry.empty() ? "" : "[groups.retry]\n" + o.charge_retry));
  if (o.audit_group) group(kAudit, o.audit_config);
  for (int i = 1; i <= o.noop_groups; ++i) {
    t << "\n[[groups]]\nname = \"idle-" << i << "\"\nstream = \"" << kStream
      << "\"\nplugin = \"noop.so\"\nhandler = \"noop\"\n";
  }
  return t.str();
}

Host::Host(const ScratchDir& dir, HostOptions options, const std::string& database_url)
    : testing::RunningHost(dir.file(options.name + ".toml"), host_config(options), database_url,
                           options.env, dir.file(options.name + ".log")),
      options_(std::move(options)) {}

std::string Host::holder() const { return options_.name + ":" + std::to_string(pid()); }

std::pair<int, std::string> cli(const std::vector<std::string>& args,
                                const std::string& database_url, const std::string& stdin_text) {
  std::vector<std::string> argv{SQLSTREAMS_BINARY};
  argv.insert(argv.end(), args.begin(), args.end());
  std::map<std::string, std::string> env;
  if (!database_url.empty()) env["SQLSTREAMS_DATABASE_URL"] = database_url;
  return testing::run_command(argv, env, stdin_text);
}

void declare(const std::string& database_url, const std::string& config_file) {
  auto [code, out] = cli({"declare", "--config", config_file}, database_url);
  ASSERT_EQ(code, 0) << out;
}

std::string declare_host(const ScratchDir& dir, const std::string& database_url,
                         const HostOptions& o, const std::string& file) {
  const std::string config = dir.file(file);
  std::ofstream(config) << host_config(o);
  declare(database_url, config);
  return config;
}

int64_t head(const std::string& url) {
  return scalar<int64_t>(
      url, "SELECT coalesce(max(id), 0) FROM " + testing::stream_family(url, kStream).messages);
}

bool drained(const std::string& url) {
  const testing::StreamFamily t = testing::stream_family(url, kStream);
  return scalar<bool>(url, "SELECT (SELECT coalesce(max(id), 0) FROM " + t.messages +
                               ") > 0 AND NOT EXISTS (SELECT 1 FROM " + t.cursors +
                               " WHERE committed < (SELECT max(id) FROM " + t.messages +
                               ")) AND NOT EXISTS (SELECT 1 FROM " + t.leases + ")");
}

void wait_drained(const std::string& url, Millis timeout) {
  if (wait_until([&] { return drained(url); }, timeout, 200ms)) return;
  const testing::StreamFamily t = testing::stream_family(url, kStream);
  std::ostringstream s;
  s << "not drained after " << timeout.count() << " ms; head " << head(url) << "\ncursors:";
  for (const auto& r :
       query(url, "SELECT g.name, c.claimed, c.committed, c.settled_head FROM " + t.cursors +
                      " c JOIN sqlstreams.groups g "
                      "ON g.id = c.group_id ORDER BY 1")) {
    s << "\n  " << r[0].c_str() << " claimed " << r[1].c_str() << " committed " << r[2].c_str()
      << " settled_head " << r[3].c_str();
  }
  s << "\nleases:";
  for (const auto& r : query(url, "SELECT group_id, low, high, expires_at, reclaims, holder FROM " +
                                      t.leases + " ORDER BY low LIMIT 20")) {
    s << "\n  group " << r[0].c_str() << " (" << r[1].c_str() << ", " << r[2].c_str()
      << "] expires " << r[3].c_str() << " reclaims " << r[4].c_str() << " holder " << r[5].c_str();
  }
  ADD_FAILURE() << s.str();
}

size_t calls(const Records& r, const std::string& group) {
  auto it = r.find(group);
  if (it == r.end()) return 0;
  size_t n = 0;
  for (const auto& [id, c] : it->second) n += static_cast<size_t>(c);
  return n;
}

size_t count_calls(const std::string& file, const std::string& group) {
  return static_cast<size_t>(count_of(testing::read_file(file), group + " "));
}

std::vector<int64_t> duplicates(const Records& r, const std::string& group) {
  std::vector<int64_t> out;
  auto it = r.find(group);
  if (it == r.end()) return out;
  for (const auto& [id, c] : it->second) {
    if (c > 1) out.push_back(id);
  }
  return out;
}

std::set<int64_t> timed_out_ids(const std::string& log, const std::string& group) {
  std::set<int64_t> out;
  std::istringstream lines(log);
  const std::string event = "\"event\":\"handler-timeout\"";
  const std::string of_group = "\"group\":\"" + group + "\"";
  const std::string id_key = "\"message_id\":\"";
  for (std::string line; std::getline(lines, line);) {
    if (line.find(event) == std::string::npos || line.find(of_group) == std::string::npos) continue;
    const size_t at = line.find(id_key);
    if (at == std::string::npos) continue;
    out.insert(std::stoll(line.substr(at + id_key.size())));
  }
  return out;
}

std::set<int64_t> failed_attempt_ids(const std::string& log,
                                     const std::vector<std::string>& record_files,
                                     const std::string& group) {
  std::set<int64_t> out = timed_out_ids(log, group);
  for (int64_t id : testing::retried_ids(record_files, group)) out.insert(id);
  return out;
}

std::string missing_ids(const Records& r, const std::string& group, int64_t n) {
  static const std::map<int64_t, int> none;
  auto it = r.find(group);
  const auto& seen = it == r.end() ? none : it->second;
  std::string out;
  int64_t count = 0;
  for (int64_t id = 1; id <= n; ++id) {
    if (seen.count(id)) continue;
    if (++count <= 20) out += std::to_string(id) + " ";
  }
  if (count > 20) out += "... (" + std::to_string(count) + " missing)";
  return out;
}

namespace {

// The "ts" of the first line of `event` ("2026-12-05T07:08:23.083Z") in seconds since the epoch.
std::optional<double> logged_time(const std::string& log, const std::string& event) {
  const auto at = log.find("\"event\":\"" + event + "\"");
  if (at == std::string::npos) return std::nullopt;
  const auto line = log.rfind('\n', at);
  const auto ts = log.find("\"ts\":\"", line == std::string::npos ? 0 : line);
  if (ts == std::string::npos || ts > at) return std::nullopt;
  std::tm tm{};
  std::istringstream in(log.substr(ts + 6, 19));
  in >> std::get_time(&tm, "%Y-%m-%dT%H:%M:%S");
  if (in.fail()) return std::nullopt;
  const double millis = std::atof(log.substr(ts + 6 + 19, 4).c_str());  // ".083" or ""
  return static_cast<double>(timegm(&tm)) + millis;
}

}  // namespace

double logged_seconds_between(const std::string& log, const std::string& from,
                              const std::string& to) {
  const auto a = logged_time(log, from);
  const auto b = logged_time(log, to);
  return a && b ? *b - *a : -1;
}

std::string lsan_options_for_lost_connections() {
  return testing::lsan_options_with(SQLSTREAMS_E2E_LSAN_SUPPRESSIONS);
}

}  // namespace sqlstreams::e2e
