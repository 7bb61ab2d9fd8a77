// bench/http_bench — phase `http` (docs/operating/http-push.md): one host draining a backlog
// through the stock push-delivery plugin plugins/http.so (handler `http`, libcurl multi) to a
// receiver in this process (Boost.Beast on one thread of its own, loopback, keep-alive) that
// answers 204 at once or after 50 ms. The reference for the immediate receiver is the asynchronous
// no-op (async_io.so `timer-io` with delay 0) on the same backlog shape. The clock stops when every
// message was handled and every range commit was done.
// Goals (bench/results/README.md#http-push-delivery-issue-31-benchrunsh---phases-http):
// 50 ms receiver ≥ 10,000 msg/s with ≥ 1,000 in flight; immediate receiver ≥ 0.3 × the async no-op;
// batch mode (100 per request) ≥ 50,000/s.
#include <fmt/format.h>
#include <unistd.h>

#include <atomic>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format off
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "bench.hpp"

namespace bench {
namespace {

namespace fs = std::filesystem;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// A loopback HTTP/1.1 receiver answering every request 204, after `delay` when it is not zero.
class Receiver {
 public:
  explicit Receiver(std::chrono::milliseconds delay)
      : delay_(delay), acceptor_(io_, {net::ip::make_address("127.0.0.1"), 0}) {
    accept();
    thread_ = std::thread([this] { io_.run(); });
  }
  ~Receiver() {
    io_.stop();
    thread_.join();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  uint64_t requests() const { return requests_.load(); }
  uint64_t connections() const { return connections_.load(); }

 private:
  struct Session : std::enable_shared_from_this<Session> {
    Session(net::ip::tcp::socket s, Receiver& r)
        : stream(std::move(s)), timer(stream.get_executor()), owner(r) {}
    void read() {
      request = {};
      http::async_read(stream, buffer, request,
                       [self = shared_from_this()](beast::error_code ec, size_t) {
                         if (ec) return;
                         self->owner.requests_.fetch_add(1, std::memory_order_relaxed);
                         if (self->owner.delay_.count() == 0) return self->write();
                         self->timer.expires_after(self->owner.delay_);
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
    Receiver& owner;
  };

  void accept() {
    acceptor_.async_accept([this](beast::error_code ec, net::ip::tcp::socket s) {
      if (!ec) {
        connections_.fetch_add(1, std::memory_order_relaxed);
        std::make_shared<Session>(std::move(s), *this)->read();
      }
      accept();
    });
  }

  std::chrono::milliseconds delay_;
  net::io_context io_;
  net::ip::tcp::acceptor acceptor_;
  std::atomic<uint64_t> requests_{0};
  std::atomic<uint64_t> connections_{0};
  std::thread thread_;
};

std::string url_of(const Receiver& r) { return fmt::format("http://127.0.0.1:{}/hook", r.port()); }

}  // namespace

std::vector<Row> run_http(Db& db, const Options& o) {
  const int64_t n = o.http_backlog;
  std::vector<Row> rows;
  {
    Receiver slow(std::chrono::milliseconds(50));
    constexpr int kInFlight = 4000;
    const AsyncDrained d = drain_async(
        db, "http-50ms", n, "http.so", "http",
        fmt::format(R"({{"url": "{}", "timeout_ms": 20000}})", url_of(slow)), kInFlight);
    const bool met = d.rate >= 10'000 && d.peak >= 1'000;
    rows.push_back(Row{
        "11 http",
        fmt::format("{} × 100 B backlog, http.so to a loopback receiver answering 204 after "
                    "50 ms, {} start threads, max_in_flight {}, batch_size {}",
                    grouped(static_cast<double>(n)), kAsyncStartThreads, kInFlight, kAsyncBatch),
        fmt::format("{}, peak {} in flight", rate(d.rate), grouped(static_cast<double>(d.peak))),
        fmt::format("{} requests on {} connections", grouped(static_cast<double>(slow.requests())),
                    grouped(static_cast<double>(slow.connections()))),
        "", fmt::format("≥ 10,000 msg/s with ≥ 1,000 in flight: {}", met ? "MET" : "MISSED")});
  }
  {
    constexpr int kInFlight = 1000;
    Receiver quick(std::chrono::milliseconds(0));
    const AsyncDrained h = drain_async(
        db, "http-0ms", n, "http.so", "http",
        fmt::format(R"({{"url": "{}", "timeout_ms": 20000}})", url_of(quick)), kInFlight);
    const AsyncDrained noop = drain_async(db, "async-noop", n, "async_io.so", "timer-io",
                                          R"({"delay_ms": 0})", kInFlight);
    const double ratio = h.rate / noop.rate;
    rows.push_back(
        Row{"11 http",
            fmt::format("same, receiver answering at once, max_in_flight {} — vs async_io.so "
                        "`timer-io` (delay 0) on the same backlog",
                        kInFlight),
            fmt::format("{} ({} connections)", rate(h.rate),
                        grouped(static_cast<double>(quick.connections()))),
            rate(noop.rate), fmt_ratio(ratio),
            fmt::format("≥ 0.3× the async no-op: {}", ratio >= 0.3 ? "MET" : "MISSED")});
  }
  {
    constexpr int kInFlight = 4000;
    Receiver quick(std::chrono::milliseconds(0));
    const AsyncDrained b = drain_async(
        db, "http-batch", n, "http.so", "http",
        fmt::format(R"({{"url": "{}", "timeout_ms": 20000, "batch_max": 100}})", url_of(quick)),
        kInFlight);
    rows.push_back(
        Row{"11 http",
            fmt::format("same, batch mode (batch_max 100: one JSON array per request), receiver "
                        "answering at once, max_in_flight {}",
                        kInFlight),
            fmt::format("{} ({} requests)", rate(b.rate),
                        grouped(static_cast<double>(quick.requests()))),
            "", "", fmt::format("≥ 50,000 msg/s: {}", b.rate >= 50'000 ? "MET" : "MISSED")});
  }
  return rows;
}

}  // namespace bench
