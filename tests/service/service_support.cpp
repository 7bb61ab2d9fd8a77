#include "service_support.hpp"

#include <arpa/inet.h>
#include <civetweb.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <sstream>

namespace sqlstreams::service_test {

HttpResult http_get(int port, const std::string& path) {
  HttpResult r;
  char error[256] = {};
  mg_connection* conn = mg_download("127.0.0.1", port, 0, error, sizeof error,
                                    "GET %s HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n", path.c_str());
  if (conn == nullptr) {
    r.error = error[0] ? error : "no connection";
    return r;
  }
  const mg_response_info* info = mg_get_response_info(conn);
  r.status = info ? info->status_code : 0;
  for (int i = 0; info && i < info->num_headers; ++i) {
    if (strcasecmp(info->http_headers[i].name, "Content-Type") == 0) {
      r.content_type = info->http_headers[i].value;
    }
  }
  char buf[8192];
  for (int n; (n = mg_read(conn, buf, sizeof buf)) > 0;) r.body.append(buf, n);
  mg_close_connection(conn);
  return r;
}

NotifySocket::NotifySocket(const std::string& path) : path_(path) {
  fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path_.c_str());
  unlink(path_.c_str());
  if (bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    throw std::runtime_error("cannot bind " + path_);
  }
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buf[4096];
      ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) continue;
      std::lock_guard lock(mu_);
      messages_.emplace_back(buf, static_cast<size_t>(n));
    }
  });
}

NotifySocket::~NotifySocket() {
  stop_ = true;
  thread_.join();
  close(fd_);
  unlink(path_.c_str());
}

std::vector<std::string> NotifySocket::messages() const {
  std::lock_guard lock(mu_);
  return messages_;
}

int NotifySocket::wait_for(const std::string& needle, Millis timeout, size_t from) const {
  int found = -1;
  wait_until(
      [&] {
        auto all = messages();
        for (size_t i = from; i < all.size(); ++i) {
          if (all[i].find(needle) != std::string::npos) {
            found = static_cast<int>(i);
            return true;
          }
        }
        return false;
      },
      timeout, 20ms);
  return found;
}

std::string host_toml(const HostSpec& s) {
  std::ostringstream t;
  t << "[host]\nname = \"" << s.name << "\"\nlog_format = \"json\"\nhttp_listen = \""
    << s.http_listen << "\"\nstatus_interval = \"" << s.status_interval
    << "\"\nshutdown_timeout = \"" << s.shutdown_timeout
    << "\"\nmaintenance_ttl = \"3s\"\n\n[[streams]]\nname = \"" << kStream
    << "\"\npartition_size = 100000\n";
  for (const auto& g : s.groups) {
    t << "\n[[groups]]\nname = \"" << g.name << "\"\nstream = \"" << kStream << "\"\nplugin = \""
      << g.plugin << "\"\nhandler = \"" << g.handler << "\"\nconcurrency = " << g.concurrency
      << "\nbatch_size = " << g.batch_size
      << "\npoll_interval = \"20ms\"\nmax_poll_interval = \"200ms\"\nlease_ttl = \"" << g.lease_ttl
      << "\"\nhandler_timeout = \"" << g.handler_timeout << "\"\n"
      << g.extra << "[groups.retry]\nmax_retries = " << g.max_retries
      << "\ninitial_backoff = \"100ms\"\n"
      << "base_delay = \"100ms\"\n[groups.config]\n"
      << g.config;
  }
  return t.str();
}

HostProcess::HostProcess(const ScratchDir& dir, const HostSpec& spec,
                         const std::string& database_url, std::map<std::string, std::string> env)
    : config_file_(dir.file(spec.name + ".toml")) {
  rewrite_config(spec);
  env["SQLSTREAMS_DATABASE_URL"] = database_url;
  process_ = std::make_unique<testing::ChildProcess>(
      std::vector<std::string>{SQLSTREAMS_BINARY, "run", "--config", config_file_, "--plugin-dir",
                               SQLSTREAMS_PLUGIN_DIR},
      env, dir.file(spec.name + ".log"));
}

void HostProcess::rewrite_config(const HostSpec& spec) { rewrite_config_text(host_toml(spec)); }

void HostProcess::rewrite_config_text(const std::string& toml) {
  std::string tmp = config_file_ + ".new";
  std::ofstream(tmp) << toml;
  std::filesystem::rename(tmp, config_file_);  // atomic: the host never reads half a file
}

int HostProcess::count_in_log(const std::string& needle) const {
  std::string text = log();
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) n++;
  return n;
}

bool HostProcess::wait_for_log(const std::string& needle, Millis timeout, int n) {
  return wait_until([&] { return count_in_log(needle) >= n || !process_->running(); }, timeout) &&
         count_in_log(needle) >= n;
}

std::optional<int> HostProcess::stop(Millis timeout) {
  process_->signal(SIGTERM);
  return process_->wait(timeout);
}

void produce_payments(const std::string& url, int64_t n, int64_t from) {
  pqxx::connection c(url);
  pqxx::work tx(c);
  tx.exec("SELECT sqlstreams.produce_batch('" + std::string(kStream) +
          "', array_agg(jsonb_build_object('order_id', 'order-' || g, 'amount_cents', 100 + g, "
          "'currency', 'EUR') ORDER BY g)) FROM generate_series(" +
          std::to_string(from) + ", " + std::to_string(from + n - 1) + ") AS g");
  tx.commit();
}

int64_t committed(const std::string& url, const std::string& group) {
  pqxx::connection c(url);
  pqxx::work tx(c);
  auto sid =
      tx.exec("SELECT id FROM sqlstreams.streams WHERE name = '" + std::string(kStream) + "'");
  if (sid.empty()) return 0;
  auto r =
      tx.exec("SELECT c.committed FROM sqlstreams.cursors_" + sid[0][0].as<std::string>() +
              " c JOIN sqlstreams.groups g ON g.id = c.group_id WHERE g.name = '" + group + "'");
  return r.empty() ? 0 : r[0][0].as<int64_t>();
}

std::map<std::string, std::map<int64_t, int>> read_records(const std::string& file) {
  std::map<std::string, std::map<int64_t, int>> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string group;
    int64_t id = 0;
    if (fields >> group >> id) out[group][id]++;
  }
  return out;
}

std::string tail(const std::string& text, size_t lines) {
  size_t at = text.size();
  for (size_t n = 0; n <= lines && at > 0; ++n) {
    at = text.rfind('\n', at - 1);
    if (at == std::string::npos) return text;
  }
  return text.substr(at + 1);
}

}  // namespace sqlstreams::service_test
