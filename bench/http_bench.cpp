// bench/http_bench — phase `http` (docs/operating/http-push.md): one host draining a backlog
// through the stock push-delivery plugin plugins/http.so (handler `http`, Boost.Beast) to a
// receiver in this process (Boost.Beast on one thread of its own, loopback, keep-alive) that
// answers 204 at once or after 50 ms. The reference for the immediate receiver is the asynchronous
// no-op (async_io.so `timer-io` with delay 0) on the same backlog shape. The clock stops when every
// message was handled and every range commit was done. Two more rows measure a client alone
// against the same receiver, libcurl (curl_floor) and Boost.Beast (beast_floor), each with the
// receiver thread's share, and the ceiling each sets on the immediate row's ratio.
// Goals (bench/results/README.md#http-push-delivery-issue-31-benchrunsh---phases-http):
// 50 ms receiver ≥ 10,000 msg/s with ≥ 1,000 in flight; immediate receiver ≥ 0.3 × the async no-op;
// batch mode (100 per request) ≥ 50,000/s.
#include <curl/curl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <utility>  // before Asio: Boost 1.74's awaitable.hpp uses std::exchange unincluded
// clang-format off
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
// clang-format on
#include <filesystem>
#include <functional>
#include <stdexcept>
#include <thread>

#include "bench.hpp"
#include "http_receivers.hpp"

namespace bench {
namespace {

namespace fs = std::filesystem;
namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

// libcurl alone, with no host and no database: the packaged HTTP client's own cost per request
// and the receiver's, on this machine. `threads` loops (as transfer_threads), each with its own
// multi handle keeping `in_flight` POSTs of a 100 B body with the plugin's ten headers going
// (an easy handle is re-added as it completes), through libcurl's simplest loop
// (curl_multi_perform + curl_multi_poll). Any failed request or status other than 204 fails the
// bench: the floor must be real deliveries.
struct CurlFloor {
  double rate = 0;                          // requests/s
  double cpu_seconds_per_request = 0;       // the whole machine's busy CPU ÷ requests
  double receiver_seconds_per_request = 0;  // of it, the receiver's thread
};

// After a 500 ms warm-up (connections made), the requests completed over `seconds` and the
// CPU they took: the whole machine's and the receiver thread's, per request.
CurlFloor measure_window(const LoopbackReceiver& receiver, const std::atomic<uint64_t>& done,
                         double seconds) {
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const uint64_t done0 = done.load();
  const double busy0 = machine_busy_seconds(), receiver0 = receiver.cpu_seconds();
  const auto t0 = Clock::now();
  std::this_thread::sleep_for(std::chrono::duration<double>(seconds));
  const double elapsed = seconds_since(t0);
  const auto requests = static_cast<double>(done.load() - done0);
  const double busy = machine_busy_seconds() - busy0;
  const double receiver_busy = receiver.cpu_seconds() - receiver0;
  return CurlFloor{requests / elapsed, busy / requests, receiver_busy / requests};
}

CurlFloor curl_floor(const LoopbackReceiver& receiver, int threads, int in_flight, double seconds) {
  const std::string url = receiver.url();
  static const std::string body = make_payload(100, 0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0}, failed{0};
  auto loop = [&] {
    CURLM* multi = curl_multi_init();
    curl_slist* headers = nullptr;
    for (const char* h :
         {"Content-Type: application/json", "Expect:", "webhook-id: sqlstreams:bench:1234567",
          "webhook-timestamp: 1796580000", "sqlstreams-stream: bench", "sqlstreams-group: bench",
          "sqlstreams-message-id: 1234567", "sqlstreams-schema-version: 1", "sqlstreams-attempt: 1",
          "sqlstreams-created-at: 1796580000000"}) {
      headers = curl_slist_append(headers, h);
    }
    std::vector<CURL*> easies;
    for (int i = 0; i < in_flight; ++i) {
      CURL* e = curl_easy_init();
      curl_easy_setopt(e, CURLOPT_URL, url.c_str());
      curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(e, CURLOPT_POSTFIELDS, body.data());
      curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body.size()));
      curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers);
      curl_easy_setopt(
          e, CURLOPT_WRITEFUNCTION, +[](char*, size_t size, size_t n, void*) { return size * n; });
      curl_multi_add_handle(multi, e);
      easies.push_back(e);
    }
    int running = 0, queued = 0;
    while (!stop.load(std::memory_order_relaxed)) {
      curl_multi_perform(multi, &running);
      while (CURLMsg* msg = curl_multi_info_read(multi, &queued)) {
        if (msg->msg != CURLMSG_DONE) continue;
        long status = 0;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
        if (msg->data.result != CURLE_OK || status != 204) failed.fetch_add(1);
        done.fetch_add(1, std::memory_order_relaxed);
        CURL* e = msg->easy_handle;
        curl_multi_remove_handle(multi, e);
        curl_multi_add_handle(multi, e);
      }
      curl_multi_poll(multi, nullptr, 0, 100, nullptr);
    }
    for (CURL* e : easies) {
      curl_multi_remove_handle(multi, e);
      curl_easy_cleanup(e);
    }
    curl_multi_cleanup(multi);
    curl_slist_free_all(headers);
  };
  curl_global_init(CURL_GLOBAL_DEFAULT);  // before any thread (reference counted)
  std::vector<std::thread> loops;
  for (int i = 0; i < threads; ++i) loops.emplace_back(loop);
  const CurlFloor measured = measure_window(receiver, done, seconds);
  stop = true;
  for (auto& t : loops) t.join();
  curl_global_cleanup();
  if (failed.load() > 0) {
    throw std::runtime_error(
        fmt::format("curl floor: {} of {} requests failed", failed.load(), done.load()));
  }
  return measured;
}

// The same measurement with Boost.Beast (Boost 1.74, packaged) as the client: `threads` loops,
// each an io_context on its own thread with `connections` keep-alive connections, each sending
// the same POST (100 B, the plugin's ten headers) as soon as the previous answer was read. How
// far below libcurl a packaged client's cost per request goes on this machine. Any failed
// request or status other than 204 fails the bench.
CurlFloor beast_floor(const LoopbackReceiver& receiver, int threads, int connections,
                      double seconds) {
  static const std::string body = make_payload(100, 0);
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0}, failed{0};
  struct Connection : std::enable_shared_from_this<Connection> {
    Connection(net::io_context& io, std::atomic<bool>& s, std::atomic<uint64_t>& d,
               std::atomic<uint64_t>& f)
        : stream(io), stop(s), done(d), failed(f) {}
    void send() {
      if (stop.load(std::memory_order_relaxed)) return;
      http::async_write(stream, request, [self = shared_from_this()](beast::error_code ec, size_t) {
        if (ec) {
          self->failed.fetch_add(1);
          return;
        }
        self->response = {};
        http::async_read(self->stream, self->buffer, self->response,
                         [self](beast::error_code ec2, size_t) {
                           if (ec2 || self->response.result() != http::status::no_content) {
                             self->failed.fetch_add(1);
                             return;
                           }
                           self->done.fetch_add(1, std::memory_order_relaxed);
                           self->send();
                         });
      });
    }
    beast::tcp_stream stream;
    beast::flat_buffer buffer;
    http::request<http::string_body> request;
    http::response<http::empty_body> response;
    std::atomic<bool>& stop;
    std::atomic<uint64_t>& done;
    std::atomic<uint64_t>& failed;
  };
  std::vector<std::unique_ptr<net::io_context>> ios;
  std::vector<std::thread> loops;
  const net::ip::tcp::endpoint at(net::ip::make_address("127.0.0.1"),
                                  static_cast<unsigned short>(receiver.port()));
  for (int t = 0; t < threads; ++t) {
    ios.push_back(std::make_unique<net::io_context>(1));
    for (int c = 0; c < connections; ++c) {
      auto conn = std::make_shared<Connection>(*ios.back(), stop, done, failed);
      auto& rq = conn->request;
      rq.method(http::verb::post);
      rq.target("/hook");
      rq.version(11);
      rq.set(http::field::host, "127.0.0.1");
      rq.set(http::field::content_type, "application/json");
      for (auto [name, value] : {std::pair{"webhook-id", "sqlstreams:bench:1234567"},
                                 {"webhook-timestamp", "1796580000"},
                                 {"sqlstreams-stream", "bench"},
                                 {"sqlstreams-group", "bench"},
                                 {"sqlstreams-message-id", "1234567"},
                                 {"sqlstreams-schema-version", "1"},
                                 {"sqlstreams-attempt", "1"},
                                 {"sqlstreams-created-at", "1796580000000"}}) {
        rq.set(name, value);
      }
      rq.keep_alive(true);
      rq.body() = body;
      rq.prepare_payload();
      conn->stream.socket().connect(at);
      conn->stream.socket().set_option(net::ip::tcp::no_delay(true));
      conn->send();
    }
    loops.emplace_back([&io = *ios.back()] { io.run(); });
  }
  const CurlFloor measured = measure_window(receiver, done, seconds);
  stop = true;
  for (auto& io : ios) io->stop();
  for (auto& t : loops) t.join();
  if (failed.load() > 0) {
    throw std::runtime_error(
        fmt::format("beast floor: {} of {} requests failed", failed.load(), done.load()));
  }
  return measured;
}

// The floor of any HTTP/1.1 client here: no library, `threads` epoll loops with `connections`
// keep-alive sockets each, every socket writing the same POST as one preformatted string (the
// plugin's request: 100 B, its ten headers) as soon as the previous answer arrived, and reading
// answers as bytes (each a 204 without a body, ended by its blank line). One send and one receive
// a request on each side is what HTTP/1.1 without pipelining cannot go below; what this costs the
// two cores (mostly the kernel's loopback TCP) bounds every client's delivery rate here.
CurlFloor raw_floor(const LoopbackReceiver& receiver, int threads, int connections,
                    double seconds) {
  std::string request =
      "POST /hook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "webhook-id: sqlstreams:bench:1234567\r\nwebhook-timestamp: 1796580000\r\n"
      "sqlstreams-stream: bench\r\nsqlstreams-group: bench\r\nsqlstreams-message-id: "
      "1234567\r\nsqlstreams-schema-version: 1\r\nsqlstreams-attempt: 1\r\n"
      "sqlstreams-created-at: 1796580000000\r\n";
  const std::string body = make_payload(100, 0);
  request += fmt::format("Content-Length: {}\r\n\r\n", body.size()) + body;
  std::atomic<bool> stop{false};
  std::atomic<uint64_t> done{0}, failed{0};
  auto loop = [&] {
    const int ep = ::epoll_create1(EPOLL_CLOEXEC);
    std::vector<int> sockets;
    std::vector<std::string> pending(static_cast<size_t>(connections));
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(receiver.port()));
    for (int c = 0; c < connections; ++c) {
      const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      const int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
          ::send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
              static_cast<ssize_t>(request.size())) {
        failed.fetch_add(1);
        ::close(fd);
        continue;
      }
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u32 = static_cast<uint32_t>(sockets.size());
      ::epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
      sockets.push_back(fd);
    }
    epoll_event events[256];
    char chunk[16384];
    while (!stop.load(std::memory_order_relaxed)) {
      const int ready = ::epoll_wait(ep, events, 256, 100);
      for (int i = 0; i < ready; ++i) {
        const uint32_t k = events[i].data.u32;
        const ssize_t n = ::recv(sockets[k], chunk, sizeof chunk, 0);
        if (n <= 0) {
          failed.fetch_add(1);
          ::epoll_ctl(ep, EPOLL_CTL_DEL, sockets[k], nullptr);
          continue;
        }
        std::string& in = pending[k];
        in.append(chunk, static_cast<size_t>(n));
        size_t at = 0;
        for (size_t end; (end = in.find("\r\n\r\n", at)) != std::string::npos; at = end + 4) {
          if (in.compare(at, 12, "HTTP/1.1 204") != 0) failed.fetch_add(1);
          done.fetch_add(1, std::memory_order_relaxed);
          if (::send(sockets[k], request.data(), request.size(), MSG_NOSIGNAL) !=
              static_cast<ssize_t>(request.size())) {
            failed.fetch_add(1);
          }
        }
        in.erase(0, at);
      }
    }
    for (int fd : sockets) ::close(fd);
    ::close(ep);
  };
  std::vector<std::thread> loops;
  for (int i = 0; i < threads; ++i) loops.emplace_back(loop);
  const CurlFloor measured = measure_window(receiver, done, seconds);
  stop = true;
  for (auto& t : loops) t.join();
  if (failed.load() > 0) {
    throw std::runtime_error(
        fmt::format("raw floor: {} of {} requests failed", failed.load(), done.load()));
  }
  return measured;
}

// The better of 32 and 250 requests in flight per loop for one client (`measure(k)`).
CurlFloor best_floor(const char* client, const std::function<CurlFloor(int)>& measure) {
  CurlFloor best;
  for (int per_thread : {32, 250}) {
    const CurlFloor f = measure(per_thread);
    fmt::print(stderr,
               "  {} floor, 2 × {} in flight: {} ({:.1f} µs CPU per request, the receiver "
               "{:.1f})\n",
               client, per_thread, rate(f.rate), f.cpu_seconds_per_request * 1e6,
               f.receiver_seconds_per_request * 1e6);
    if (f.rate > best.rate) best = f;
  }
  return best;
}

}  // namespace

std::vector<Row> run_http(Db& db, const Options& o) {
  const int64_t n = o.http_backlog;
  std::vector<Row> rows;
  {
    BeastReceiver slow(std::chrono::milliseconds(50));
    constexpr int kInFlight = 4000;
    const AsyncDrained d =
        drain_async(db, "http-50ms", n, "http.so", "http",
                    fmt::format(R"({{"url": "{}", "timeout_ms": 20000}})", slow.url()), kInFlight);
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
    // The goal row's receiver is the minimal one (http_receivers.hpp); the same drain to the
    // Beast receiver (the row's receiver until 2026-12-07) follows it, for comparison.
    MinimalReceiver quick;
    // Three pairs, each the delivery then the no-op on backlogs of their own, judged by the
    // median pair's ratio: the no-op's own rate moved by a factor of 1.8 between single runs
    // (bench/results/README.md "A receiver that costs less than the client").
    // Each round: the delivery without pipelining (the plugin's default), the same with
    // pipeline_depth kPipelineDepth, then the no-op; each delivery's ratio is judged by its
    // median round.
    constexpr int kPairs = 3;
    constexpr int kPipelineDepth = 8;
    struct Delivery {
      AsyncDrained drained;
      uint64_t connections = 0;
      double receiver_seconds = 0;  // the receiver's CPU a request, in this drain
    };
    std::vector<Delivery> plain, pipelined;
    std::vector<AsyncDrained> noops;
    auto deliver = [&](const std::string& label, const std::string& extra) {
      const uint64_t connections = quick.connections();
      const uint64_t requests = quick.requests();
      const double cpu = quick.cpu_seconds();
      Delivery d;
      d.drained = drain_async(
          db, label, n, "http.so", "http",
          fmt::format(R"({{"url": "{}", "timeout_ms": 20000{}}})", quick.url(), extra), kInFlight);
      d.connections = quick.connections() - connections;
      d.receiver_seconds = (quick.cpu_seconds() - cpu) /
                           static_cast<double>(std::max<uint64_t>(1, quick.requests() - requests));
      return d;
    };
    for (int p = 0; p < kPairs; ++p) {
      plain.push_back(deliver(fmt::format("http-0ms-{}", p), ""));
      pipelined.push_back(deliver(fmt::format("http-0ms-pipelined-{}", p),
                                  fmt::format(R"(, "pipeline_depth": {})", kPipelineDepth)));
      noops.push_back(drain_async(db, fmt::format("async-noop-{}", p), n, "async_io.so", "timer-io",
                                  R"({"delay_ms": 0})", kInFlight));
    }
    // The median round of `ds` by its ratio to the same round's no-op, and the rounds' ratios.
    auto median_of = [&](const std::vector<Delivery>& ds) {
      std::vector<int> order(kPairs);
      for (int p = 0; p < kPairs; ++p) order[p] = p;
      auto ratio_of = [&](int p) { return ds[p].drained.rate / noops[p].rate; };
      std::sort(order.begin(), order.end(),
                [&](int a, int b) { return ratio_of(a) < ratio_of(b); });
      std::string rounds;
      for (int p = 0; p < kPairs; ++p) {
        rounds += fmt::format("{}{:.2f} ({} ÷ {})", p ? ", " : "", ratio_of(p),
                              rate(ds[p].drained.rate), rate(noops[p].rate));
      }
      return std::make_pair(order[kPairs / 2], rounds);
    };
    auto delivery_row = [&](const std::vector<Delivery>& ds, const std::string& what, bool judged) {
      const auto [mid, rounds] = median_of(ds);
      const Delivery& h = ds[mid];
      const AsyncDrained& noop = noops[mid];
      const double ratio = h.drained.rate / noop.rate;
      rows.push_back(Row{
          "11 http",
          fmt::format("{} — vs async_io.so `timer-io` (delay 0) on the same backlog; {} rounds, "
                      "the median round's figures and CPU per message (rounds: {})",
                      what, kPairs, rounds),
          fmt::format("{} ({} connections; {:.1f} µs, of which the receiver {:.1f})",
                      rate(h.drained.rate), grouped(static_cast<double>(h.connections)),
                      h.drained.cpu_seconds_per_message * 1e6, h.receiver_seconds * 1e6),
          fmt::format("{} ({:.1f} µs)", rate(noop.rate), noop.cpu_seconds_per_message * 1e6),
          fmt_ratio(ratio),
          judged ? fmt::format("≥ 0.3× the async no-op: {}", ratio >= 0.3 ? "MET" : "MISSED")
                 : ""});
      return mid;
    };
    delivery_row(pipelined,
                 fmt::format("same, a minimal receiver (one epoll loop) answering at once, "
                             "max_in_flight {}, pipeline_depth {} (HTTP/1.1 pipelining)",
                             kInFlight, kPipelineDepth),
                 true);
    const int mid = delivery_row(
        plain,
        fmt::format("the same without pipelining (pipeline_depth 1, the default), max_in_flight {}",
                    kInFlight),
        false);
    const AsyncDrained& h = plain[mid].drained;
    const AsyncDrained& noop = noops[mid];
    BeastReceiver beast_receiver(std::chrono::milliseconds(0));
    const AsyncDrained hb = drain_async(
        db, "http-0ms-beast", n, "http.so", "http",
        fmt::format(R"({{"url": "{}", "timeout_ms": 20000}})", beast_receiver.url()), kInFlight);
    rows.push_back(
        Row{"11 http",
            "the same drain to the Boost.Beast receiver (one thread; the row's receiver until "
            "2026-12-07), one run ÷ the median pair's no-op; CPU per message",
            fmt::format("{} ({:.1f} µs, of which the receiver {:.1f})", rate(hb.rate),
                        hb.cpu_seconds_per_message * 1e6,
                        beast_receiver.cpu_seconds() /
                            static_cast<double>(std::max<uint64_t>(1, beast_receiver.requests())) *
                            1e6),
            rate(noop.rate), fmt_ratio(hb.rate / noop.rate), ""});
    // The ceiling the client library sets on that ratio. The best of two in-flight depths.
    const double window = o.quick ? 1.0 : 3.0;
    const CurlFloor floor =
        best_floor("curl", [&](int k) { return curl_floor(quick, 2, k, window); });
    const CurlFloor beast =
        best_floor("beast", [&](int k) { return beast_floor(quick, 2, k, window); });
    // A delivery costs at least the floor's CPU per request plus the no-op drain's CPU per
    // message (claim, dispatch, commit, PostgreSQL), on the same cores.
    const double cores = std::thread::hardware_concurrency();
    const double ceiling = cores / (floor.cpu_seconds_per_request + noop.cpu_seconds_per_message);
    rows.push_back(Row{
        "11 http",
        fmt::format("libcurl alone, no host or database: the same receiver, 2 loops × the "
                    "better of 32 / 250 in flight, POST 100 B with the plugin's headers; CPU "
                    "per request; the ceiling it sets on the row above: {:.0f} cores ÷ (its CPU "
                    "per request + the async no-op's {:.1f} µs per message)",
                    cores, noop.cpu_seconds_per_message * 1e6),
        fmt::format("{} ({:.1f} µs CPU per request; the http drain used {:.1f} µs per message)",
                    rate(floor.rate), floor.cpu_seconds_per_request * 1e6,
                    h.cpu_seconds_per_message * 1e6),
        fmt::format("ceiling {}", rate(ceiling)), fmt_ratio(ceiling / noop.rate),
        fmt::format("the ceiling of the ratio above: {}",
                    ceiling >= 0.3 * noop.rate ? "≥ 0.3, the goal is reachable"
                                               : "< 0.3, the goal is out of reach")});
    const double beast_ceiling =
        cores / (beast.cpu_seconds_per_request + noop.cpu_seconds_per_message);
    rows.push_back(
        Row{"11 http",
            "Boost.Beast as the client instead, same receiver and requests, 2 loops × the better "
            "of 32 / 250 keep-alive connections; the ceiling a delivery over it would set",
            fmt::format("{} ({:.1f} µs CPU per request, of which the receiver {:.1f}; libcurl's "
                        "receiver {:.1f})",
                        rate(beast.rate), beast.cpu_seconds_per_request * 1e6,
                        beast.receiver_seconds_per_request * 1e6,
                        floor.receiver_seconds_per_request * 1e6),
            fmt::format("ceiling {}", rate(beast_ceiling)), fmt_ratio(beast_ceiling / noop.rate),
            fmt::format("with this client: {}", beast_ceiling >= 0.3 * noop.rate
                                                    ? "≥ 0.3, the goal is reachable"
                                                    : "< 0.3, the goal is out of reach")});
    const CurlFloor raw =
        best_floor("raw sockets", [&](int k) { return raw_floor(quick, 2, k, window); });
    const double raw_ceiling = cores / (raw.cpu_seconds_per_request + noop.cpu_seconds_per_message);
    rows.push_back(Row{
        "11 http",
        "no client library: 2 epoll loops × the better of 32 / 250 keep-alive sockets writing the "
        "plugin's request as one preformatted string, same receiver; the ceiling of any HTTP/1.1 "
        "delivery without pipelining (one send and one receive a request on each side)",
        fmt::format("{} ({:.1f} µs CPU per request, of which the receiver {:.1f})", rate(raw.rate),
                    raw.cpu_seconds_per_request * 1e6, raw.receiver_seconds_per_request * 1e6),
        fmt::format("ceiling {}", rate(raw_ceiling)), fmt_ratio(raw_ceiling / noop.rate),
        fmt::format("any HTTP/1.1 client: {}", raw_ceiling >= 0.3 * noop.rate
                                                   ? "≥ 0.3, the goal is reachable"
                                                   : "< 0.3, the goal is out of reach")});
  }
  {
    constexpr int kInFlight = 4000;
    BeastReceiver quick(std::chrono::milliseconds(0));
    const AsyncDrained b = drain_async(
        db, "http-batch", n, "http.so", "http",
        fmt::format(R"({{"url": "{}", "timeout_ms": 20000, "batch_max": 100}})", quick.url()),
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
