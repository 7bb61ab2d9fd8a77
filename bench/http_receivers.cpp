#include "http_receivers.hpp"

#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <string_view>
#include <unordered_map>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format off
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on

#include "bench.hpp"

namespace bench {
namespace {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

[[noreturn]] void fail(const char* what) {
  throw std::runtime_error(fmt::format("minimal receiver: {}: {}", what, std::strerror(errno)));
}

// A complete request at `in[at..]`: its length (head and body), or 0 while it is incomplete.
// `close` is set for `Connection: close`. Bodies are framed by Content-Length only: the plugin
// sends no chunked bodies, and one here is refused (the bench then fails, not the count).
size_t frame(std::string_view in, bool& close) {
  bool closing = false;
  const size_t end = in.find("\r\n\r\n");
  if (end == std::string_view::npos) return 0;
  const std::string_view head = in.substr(0, end + 2);
  size_t length = 0;
  for (size_t line = head.find("\r\n"); line != std::string_view::npos && line + 2 < head.size();
       line = head.find("\r\n", line + 2)) {
    const std::string_view rest = head.substr(line + 2);
    auto starts = [&](std::string_view name) {
      if (rest.size() < name.size()) return false;
      for (size_t i = 0; i < name.size(); ++i) {
        if (std::tolower(static_cast<unsigned char>(rest[i])) != name[i]) return false;
      }
      return true;
    };
    if (starts("content-length:")) {
      size_t i = 15;
      while (i < rest.size() && rest[i] == ' ') ++i;
      while (i < rest.size() && rest[i] >= '0' && rest[i] <= '9')
        length = length * 10 + (rest[i++] - '0');
    } else if (starts("transfer-encoding:")) {
      throw std::runtime_error("minimal receiver: a chunked request (the plugin sends none)");
    } else if (starts("connection: close")) {
      closing = true;
    }
  }
  const size_t whole = end + 4 + length;
  if (in.size() < whole) return 0;
  close = closing;
  return whole;
}

constexpr std::string_view kAnswer = "HTTP/1.1 204 No Content\r\n\r\n";

}  // namespace

double LoopbackReceiver::cpu_seconds() const {
  return tid_.load() > 0 ? task_cpu_seconds(::getpid(), tid_.load()) : 0;
}

std::string LoopbackReceiver::url() const {
  return fmt::format("http://127.0.0.1:{}/hook", port());
}

// ---- BeastReceiver ----

struct BeastReceiver::State {
  struct Session : std::enable_shared_from_this<Session> {
    Session(net::ip::tcp::socket s, State& st)
        : stream(std::move(s)), timer(stream.get_executor()), state(st) {}
    void read() {
      request = {};
      http::async_read(stream, buffer, request,
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return;
                         self->state.owner.requests_.fetch_add(1, std::memory_order_relaxed);
                         if (self->state.delay.count() == 0) return self->write();
                         self->timer.expires_after(self->state.delay);
                         self->timer.async_wait([self](beast::error_code) { self->write(); });
                       });
    }
    void write() {
      response = {http::status::no_content, request.version()};
      response.keep_alive(request.keep_alive());
      http::async_write(stream, response,
                        [self = shared_from_this()](beast::error_code ec, size_t) {
                          if (!ec && self->response.keep_alive()) self->read();
                        });
    }
    beast::tcp_stream stream;
    net::steady_timer timer;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::empty_body> response;
    State& state;
  };

  State(BeastReceiver& o, std::chrono::milliseconds d)
      : owner(o), delay(d), acceptor(io, {net::ip::make_address("127.0.0.1"), 0}) {}
  void accept() {
    acceptor.async_accept([this](beast::error_code ec, net::ip::tcp::socket s) {
      if (!ec) {
        owner.connections_.fetch_add(1, std::memory_order_relaxed);
        std::make_shared<Session>(std::move(s), *this)->read();
      }
      accept();
    });
  }

  BeastReceiver& owner;
  std::chrono::milliseconds delay;
  net::io_context io;
  net::ip::tcp::acceptor acceptor;
  std::thread thread;
};

BeastReceiver::BeastReceiver(std::chrono::milliseconds delay)
    : state_(std::make_unique<State>(*this, delay)) {
  state_->accept();
  state_->thread = std::thread([this] {
    tid_ = static_cast<pid_t>(::gettid());
    state_->io.run();
  });
}

BeastReceiver::~BeastReceiver() {
  state_->io.stop();
  state_->thread.join();
}

int BeastReceiver::port() const { return state_->acceptor.local_endpoint().port(); }

// ---- MinimalReceiver ----

MinimalReceiver::MinimalReceiver() {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listener_ < 0) fail("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) fail("bind");
  if (::listen(listener_, 4096) != 0) fail("listen");
  socklen_t len = sizeof addr;
  if (::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) fail("getsockname");
  port_ = ntohs(addr.sin_port);
  epoll_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_ < 0 || wake_ < 0) fail("epoll/eventfd");
  for (int fd : {listener_, wake_}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = fd;
    if (::epoll_ctl(epoll_, EPOLL_CTL_ADD, fd, &ev) != 0) fail("epoll_ctl");
  }
  thread_ = std::thread([this] { run(); });
}

MinimalReceiver::~MinimalReceiver() {
  const uint64_t one = 1;
  (void)!::write(wake_, &one, sizeof one);
  thread_.join();
  for (int fd : {listener_, epoll_, wake_}) ::close(fd);
}

void MinimalReceiver::run() {
  tid_ = static_cast<pid_t>(::gettid());
  struct Connection {
    std::string in, out;
    size_t at = 0;  // where the next request starts in `in`
    bool close = false;
  };
  std::unordered_map<int, Connection> connections;
  auto drop = [&](int fd) {
    ::close(fd);  // also leaves the epoll set
    connections.erase(fd);
  };
  // Writes what is pending; waits for EPOLLOUT only when the socket is full.
  auto flush = [&](int fd, Connection& c) {
    while (!c.out.empty()) {
      const ssize_t n = ::send(fd, c.out.data(), c.out.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EAGAIN) {
        epoll_event ev{};
        ev.events = EPOLLIN | EPOLLOUT;
        ev.data.fd = fd;
        ::epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &ev);
        return true;
      }
      if (n <= 0) return false;
      c.out.erase(0, static_cast<size_t>(n));
    }
    return !c.close;
  };
  epoll_event events[256];
  char chunk[65536];
  for (;;) {
    const int ready = ::epoll_wait(epoll_, events, 256, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) fail("epoll_wait");
    for (int i = 0; i < ready; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_) {
        for (const auto& entry : connections) ::close(entry.first);
        return;
      }
      if (fd == listener_) {
        for (;;) {
          const int s = ::accept4(listener_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (s < 0) break;
          const int one = 1;
          ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.fd = s;
          ::epoll_ctl(epoll_, EPOLL_CTL_ADD, s, &ev);
          connections[s];
          connections_.fetch_add(1, std::memory_order_relaxed);
        }
        continue;
      }
      Connection& c = connections[fd];
      if (events[i].events & EPOLLOUT) {
        epoll_event ev{};
        ev.events = EPOLLIN;
        ev.data.fd = fd;
        ::epoll_ctl(epoll_, EPOLL_CTL_MOD, fd, &ev);
        if (!flush(fd, c)) {
          drop(fd);
          continue;
        }
      }
      if (!(events[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR))) continue;
      const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EAGAIN) continue;
      if (n <= 0) {
        drop(fd);
        continue;
      }
      c.in.append(chunk, static_cast<size_t>(n));
      uint64_t answered = 0;
      while (!c.close) {
        const size_t whole = frame(std::string_view(c.in).substr(c.at), c.close);
        if (whole == 0) break;
        c.at += whole;
        c.out.append(kAnswer);
        ++answered;
      }
      if (c.at == c.in.size()) {
        c.in.clear();
        c.at = 0;
      } else if (c.at > 65536) {
        c.in.erase(0, c.at);
        c.at = 0;
      }
      requests_.fetch_add(answered, std::memory_order_relaxed);
      if (!flush(fd, c)) drop(fd);
    }
  }
}

}  // namespace bench
