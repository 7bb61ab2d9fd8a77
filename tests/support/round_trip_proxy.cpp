#include "round_trip_proxy.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <pqxx/pqxx>
#include <stdexcept>
#include <vector>

namespace sqlstreams::testing {
namespace {

int connect_to(const std::string& host, int port) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd >= 0 && ::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

// One proxied connection: bytes both ways, and whether the client spoke last.
struct Pair {
  int client = -1;
  int server = -1;
  bool client_spoke_last = false;
};

}  // namespace

RoundTripProxy::RoundTripProxy(const std::string& database_url) : database_url_(database_url) {
  {
    pqxx::connection probe(database_url);
    upstream_host_ = probe.hostname() ? probe.hostname() : "127.0.0.1";
    upstream_port_ = std::stoi(probe.port());
  }
  if (!upstream_host_.empty() && upstream_host_[0] == '/') {
    throw std::runtime_error("RoundTripProxy: the test database is reached over a unix socket");
  }
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (listen_fd_ < 0 || ::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      ::listen(listen_fd_, 16) != 0 ||
      ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    throw std::runtime_error("RoundTripProxy: cannot listen on the loopback");
  }
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

RoundTripProxy::~RoundTripProxy() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
  if (listen_fd_ >= 0) ::close(listen_fd_);
}

std::string RoundTripProxy::url() const {
  const char* sep = database_url_.find('?') == std::string::npos ? "?" : "&";
  return database_url_ + sep + "host=127.0.0.1&port=" + std::to_string(port_);
}

void RoundTripProxy::run() {
  std::vector<Pair> pairs;
  char buf[65536];
  while (!stop_) {
    std::vector<pollfd> fds{{listen_fd_, POLLIN, 0}};
    for (const auto& p : pairs) {
      fds.push_back({p.client, POLLIN, 0});
      fds.push_back({p.server, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 50) <= 0) continue;
    if (fds[0].revents & POLLIN) {
      const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        const int server = connect_to(upstream_host_, upstream_port_);
        if (server < 0) {
          ::close(client);
        } else {
          pairs.push_back({client, server, false});
        }
      }
      continue;  // the pairs and the poll entries no longer match: poll again
    }
    for (size_t i = 0; i < pairs.size(); ++i) {
      Pair& p = pairs[i];
      for (const bool from_client : {true, false}) {
        const pollfd& f = fds[1 + 2 * i + (from_client ? 0 : 1)];
        if (!(f.revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const int in = from_client ? p.client : p.server;
        const int out = from_client ? p.server : p.client;
        const ssize_t n = ::read(in, buf, sizeof buf);
        if (n <= 0) {
          ::close(p.client);
          ::close(p.server);
          p.client = p.server = -1;
          break;
        }
        if (from_client && !p.client_spoke_last) ++turns_;
        p.client_spoke_last = from_client;
        for (ssize_t sent = 0; sent < n;) {
          const ssize_t w = ::write(out, buf + sent, static_cast<size_t>(n - sent));
          if (w <= 0) break;
          sent += w;
        }
      }
    }
    std::erase_if(pairs, [](const Pair& p) { return p.client < 0; });
  }
  for (const auto& p : pairs) {
    ::close(p.client);
    ::close(p.server);
  }
}

}  // namespace sqlstreams::testing
