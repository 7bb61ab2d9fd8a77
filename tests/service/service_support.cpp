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

double metric_value(const std::string& page, const std::string& series) {
  const size_t at = ("\n" + page).find("\n" + series + " ");
  if (at == std::string::npos) return -1;
  return std::stod(page.substr(at + series.size() + 1));
}

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
      arrivals_.push_back(std::chrono::steady_clock::now());
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

std::vector<std::chrono::steady_clock::time_point> NotifySocket::arrivals() const {
  std::lock_guard lock(mu_);
  return arrivals_;
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
    : testing::RunningHost(dir.file(spec.name + ".toml"), host_toml(spec), database_url,
                           std::move(env), dir.file(spec.name + ".log")) {}

std::string lsan_options() {
  return testing::lsan_options_with(SQLSTREAMS_SERVICE_LSAN_SUPPRESSIONS);
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

std::string build_deb(const std::string& out_dir, std::string* output) {
  auto [code, out] = testing::run_command(
      {SQLSTREAMS_CPACK_COMMAND, "-G", "DEB", "--config",
       std::string(SQLSTREAMS_BINARY_DIR) + "/CPackConfig.cmake", "-B", out_dir});
  if (output != nullptr) *output = out;
  if (code != 0) return "";
  for (const auto& e : std::filesystem::directory_iterator(out_dir)) {
    if (e.path().extension() == ".deb") return e.path();
  }
  return "";
}

}  // namespace sqlstreams::service_test
