#include "dispatcher.hpp"

#include <pthread.h>
#include <sys/socket.h>

#include <algorithm>
#include <array>
#include <boost/asio/buffer.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <deque>
#include <limits>
#include <list>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>

namespace sqlstreams_http {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

// A response body as Beast reads it: the first `cap` bytes are kept, the rest is read and
// dropped (a huge answer costs no memory; the request's deadline bounds its time).
struct CappedBody {
  struct value_type {
    std::string text;
    size_t cap = 0;
  };
  class reader {
   public:
    template <bool kIsRequest, class Fields>
    reader(http::header<kIsRequest, Fields>&, value_type& v) : v_(v) {}
    void init(const boost::optional<std::uint64_t>&, beast::error_code& ec) { ec = {}; }
    template <class Buffers>
    size_t put(const Buffers& buffers, beast::error_code& ec) {
      ec = {};
      size_t n = 0;
      for (auto it = net::buffer_sequence_begin(buffers); it != net::buffer_sequence_end(buffers);
           ++it) {
        const net::const_buffer b = *it;
        const size_t room = v_.cap > v_.text.size() ? v_.cap - v_.text.size() : 0;
        v_.text.append(static_cast<const char*>(b.data()), std::min(room, b.size()));
        n += b.size();
      }
      return n;
    }
    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& v_;
  };
};

// Idle connections a loop keeps for reuse; more are closed when their answer is read.
constexpr size_t kMaxIdleConnections = 4096;
// A connection idle for longer is checked (one non-blocking peek) before it is reused.
constexpr auto kCheckIdleAfter = std::chrono::seconds(1);
constexpr auto kResolvedFor = std::chrono::seconds(30);

// One keep-alive connection: plain TCP or TLS over it.
class Connection {
 public:
  Connection(net::io_context& io, net::ssl::context* tls) {
    if (tls != nullptr) {
      tls_ = std::make_unique<beast::ssl_stream<beast::tcp_stream>>(io, *tls);
    } else {
      tcp_ = std::make_unique<beast::tcp_stream>(io);
    }
  }
  beast::tcp_stream& tcp() { return tls_ ? beast::get_lowest_layer(*tls_) : *tcp_; }
  beast::ssl_stream<beast::tcp_stream>* tls() { return tls_.get(); }
  // Calls f with the stream requests go over (the TLS stream or the TCP one).
  template <class F>
  void with_stream(F&& f) {
    if (tls_) {
      f(*tls_);
    } else {
      f(*tcp_);
    }
  }
  // Whether an idle connection can carry another request: the peer has not closed it and sent
  // nothing unasked (a TLS close_notify is bytes too).
  bool still_open() {
    char c;
    const ssize_t n = ::recv(tcp().socket().native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT);
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }

  beast::flat_buffer buffer;
  Clock::time_point idle_since;

 private:
  std::unique_ptr<beast::ssl_stream<beast::tcp_stream>> tls_;
  std::unique_ptr<beast::tcp_stream> tcp_;
};

std::string with_reason(const std::string& what, const beast::error_code& ec) {
  return what + ": " + ec.message();
}

// A proxy's reason phrase in an error: printable ASCII, at most 64 bytes.
std::string reason_text(beast::string_view reason) {
  std::string out;
  for (const char c : reason.substr(0, 64)) out += c >= 0x20 && c < 0x7f ? c : '?';
  return out;
}

}  // namespace

struct Transfer {
  Request request;
  std::string head;  // request_head(): the request line and headers, then the body if it fitted
  std::unique_ptr<Connection> conn;
  bool reused = false;     // conn came from the idle connections
  bool resent = false;     // already sent once more on a new connection
  bool timed_out = false;  // the deadline passed: its connection was closed
  bool finished = false;   // `done` was called
  Clock::time_point deadline;
  std::list<std::shared_ptr<Transfer>>::iterator in_flight;  // in its loop's in_flight_
  std::optional<http::response_parser<CappedBody>> parser;
  std::optional<http::response_parser<http::empty_body>> tunnel_answer;  // a proxy's, to CONNECT
};

// Where a loop connects: the URL's host, or the forward proxy that carries its requests.
struct Route {
  Endpoint endpoint;              // the URL
  std::optional<Endpoint> proxy;  // settings.proxy
  std::string connect_head;       // an https:// URL through a proxy: the tunnel's CONNECT
  const Endpoint& peer() const { return proxy ? *proxy : endpoint; }
  // The peer as errors name it (never a credential: those are in the CONNECT's headers only).
  std::string peer_name() const {
    return proxy ? "proxy " + proxy->host_header : endpoint.host_header;
  }
};

class TransferLoop {
 public:
  TransferLoop(const Settings& settings, const Route& route, net::ssl::context* tls,
               std::chrono::milliseconds idle_close_after)
      : settings_(settings),
        route_(route),
        endpoint_(route.endpoint),
        tls_(tls),
        idle_close_after_(idle_close_after),
        work_(net::make_work_guard(io_)),
        resolver_(io_),
        deadline_timer_(io_),
        idle_timer_(io_) {
    thread_ = std::thread([this] {
      pthread_setname_np(pthread_self(), "http-transfer");  // as top -H shows it
      io_.run();
    });
  }

  ~TransferLoop() {
    work_.reset();
    io_.stop();
    thread_.join();
    idle_.clear();
    in_flight_.clear();  // each `done` still held is destroyed uncalled
  }

  // Requests submitted and not yet answered (read from any thread; a hint for Dispatcher::submit).
  size_t load() const { return load_.load(std::memory_order_relaxed); }

  void submit(std::shared_ptr<Transfer> t) {
    load_.fetch_add(1, std::memory_order_relaxed);
    bool first;
    {
      std::lock_guard<std::mutex> lock(mu_);
      first = submitted_.empty();
      submitted_.push_back(std::move(t));
    }
    if (first) net::post(io_, [this] { take_submitted(); });
  }

 private:
  void take_submitted() {
    std::vector<std::shared_ptr<Transfer>> batch;
    {
      std::lock_guard<std::mutex> lock(mu_);
      batch.swap(submitted_);
    }
    const Clock::time_point now = Clock::now();
    for (auto& t : batch) {
      t->deadline = now + std::chrono::milliseconds(settings_.timeout_ms);
      in_flight_.push_back(t);
      t->in_flight = std::prev(in_flight_.end());
      arm_deadline();
      if (auto conn = idle_connection(now)) {
        t->conn = std::move(conn);
        t->reused = true;
        send(std::move(t));
      } else {
        connect(std::move(t));
      }
    }
  }

  std::unique_ptr<Connection> idle_connection(Clock::time_point now) {
    while (!idle_.empty()) {
      std::unique_ptr<Connection> c = std::move(idle_.back());
      idle_.pop_back();
      if (now - c->idle_since < kCheckIdleAfter || c->still_open()) return c;
    }
    return nullptr;
  }

  // Arms the loop's one timer at the oldest deadline of a request still waiting for its answer.
  void arm_deadline() {
    if (deadline_armed_) return;
    const auto first = std::find_if(in_flight_.begin(), in_flight_.end(),
                                    [](const auto& t) { return !t->timed_out; });
    if (first == in_flight_.end()) return;
    deadline_armed_ = true;
    deadline_timer_.expires_at((*first)->deadline);
    deadline_timer_.async_wait([this](const beast::error_code&) {
      deadline_armed_ = false;
      time_out_overdue();
      arm_deadline();
    });
  }

  // Closes the connection of every request past its deadline (start order is deadline order);
  // its pending operation then completes and fail() answers "no answer within".
  void time_out_overdue() {
    const Clock::time_point now = Clock::now();
    for (auto it = in_flight_.begin(); it != in_flight_.end() && (*it)->deadline <= now;) {
      const std::shared_ptr<Transfer> t = *it++;  // fail() below erases t from in_flight_
      if (t->timed_out) continue;
      t->timed_out = true;
      if (t->conn) {
        beast::error_code ignored;
        t->conn->tcp().socket().close(ignored);
      } else {
        fail(t, "");  // still waiting for the host's address
      }
    }
  }

  // Closes the connections idle for idle_close_after_, the oldest first (idle_'s front), with one
  // timer armed at the oldest one's time.
  void arm_idle_close() {
    if (idle_timer_armed_ || idle_.empty()) return;
    idle_timer_armed_ = true;
    idle_timer_.expires_at(idle_.front()->idle_since + idle_close_after_);
    idle_timer_.async_wait([this](const beast::error_code&) {
      idle_timer_armed_ = false;
      const Clock::time_point now = Clock::now();
      while (!idle_.empty() && now - idle_.front()->idle_since >= idle_close_after_) {
        idle_.pop_front();
      }
      arm_idle_close();
    });
  }

  void connect(std::shared_ptr<Transfer> t) {
    if (!resolved_.empty() && Clock::now() - resolved_at_ < kResolvedFor) {
      open(std::move(t));
      return;
    }
    waiting_for_address_.push_back(std::move(t));
    if (resolving_) return;
    resolving_ = true;
    resolver_.async_resolve(
        route_.peer().host, route_.peer().port,
        [this](const beast::error_code& ec, tcp::resolver::results_type results) {
          resolving_ = false;
          std::vector<std::shared_ptr<Transfer>> waiting;
          waiting.swap(waiting_for_address_);
          if (!ec) {
            resolved_ = std::move(results);
            resolved_at_ = Clock::now();
          }
          for (auto& w : waiting) {
            if (w->finished) continue;
            if (ec) {
              fail(w, with_reason("cannot resolve " + route_.peer().host +
                                      (route_.proxy ? " (the proxy)" : ""),
                                  ec));
            } else {
              open(std::move(w));
            }
          }
        });
  }

  void open(std::shared_ptr<Transfer> t) {
    t->conn = std::make_unique<Connection>(io_, tls_);
    t->reused = false;
    beast::tcp_stream& stream = t->conn->tcp();
    stream.expires_at(std::min(
        t->deadline, Clock::now() + std::chrono::milliseconds(settings_.connect_timeout_ms)));
    stream.async_connect(resolved_, [this, t](const beast::error_code& ec, const tcp::endpoint&) {
      if (ec) {
        fail(t, ec == beast::error::timeout
                    ? "cannot connect to " + route_.peer_name() + " within " +
                          std::to_string(settings_.connect_timeout_ms) + " ms"
                    : with_reason("cannot connect to " + route_.peer_name(), ec));
        return;
      }
      beast::error_code ignored;
      t->conn->tcp().socket().set_option(tcp::no_delay(true), ignored);
      if (t->conn->tls() == nullptr) {
        t->conn->tcp().expires_never();
        send(t);
        return;
      }
      if (route_.connect_head.empty()) {
        handshake(t);
      } else {
        tunnel(t);
      }
    });
  }

  // Asks the proxy for a tunnel to the URL's host (CONNECT); the TLS handshake then goes through
  // it. The connect timeout still runs: it bounds the proxy's answer too.
  void tunnel(const std::shared_ptr<Transfer>& t) {
    net::async_write(
        t->conn->tcp(), net::buffer(route_.connect_head),
        [this, t](const beast::error_code& ec, size_t) {
          if (ec) {
            fail(t, ec == beast::error::timeout
                        ? "no answer from " + route_.peer_name() + " to CONNECT within " +
                              std::to_string(settings_.connect_timeout_ms) + " ms"
                        : with_reason("sending CONNECT to " + route_.peer_name() + " failed", ec));
            return;
          }
          t->tunnel_answer.emplace();
          t->tunnel_answer->header_limit(16 * 1024);
          t->tunnel_answer->skip(true);  // a CONNECT's answer has no body (RFC 9110 9.3.6)
          http::async_read(
              t->conn->tcp(), t->conn->buffer, *t->tunnel_answer,
              [this, t](const beast::error_code& read_ec, size_t) {
                if (read_ec) {
                  fail(t, read_ec == beast::error::timeout
                              ? "no answer from " + route_.peer_name() + " to CONNECT within " +
                                    std::to_string(settings_.connect_timeout_ms) + " ms"
                              : with_reason("no answer from " + route_.peer_name() + " to CONNECT",
                                            read_ec));
                  return;
                }
                const auto& answer = t->tunnel_answer->get();
                const unsigned status = answer.result_int();
                if (status < 200 || status > 299) {
                  fail(t, route_.peer_name() + " refused CONNECT to " + host_and_port(endpoint_) +
                              ": " + std::to_string(status) + " " + reason_text(answer.reason()) +
                              (status == 407 ? " (check proxy_credentials_file)" : ""));
                  return;
                }
                t->tunnel_answer.reset();
                if (t->conn->buffer.size() != 0) {  // bytes before our ClientHello: not a tunnel
                  fail(t, route_.peer_name() + " sent bytes after its answer to CONNECT");
                  return;
                }
                handshake(t);
              });
        });
  }

  void handshake(const std::shared_ptr<Transfer>& t) {
    auto& stream = *t->conn->tls();
    beast::error_code not_an_address;
    (void)net::ip::make_address(endpoint_.host, not_an_address);
    if (not_an_address) {  // a name: tell the server which certificate (SNI)
      SSL_set_tlsext_host_name(stream.native_handle(), endpoint_.host.c_str());
    }
    if (settings_.tls_verify)
      stream.set_verify_callback(net::ssl::host_name_verification(endpoint_.host));
    stream.async_handshake(net::ssl::stream_base::client, [this, t](const beast::error_code& ec) {
      if (ec) {
        fail(t, ec == beast::error::timeout
                    ? "TLS handshake with " + endpoint_.host_header + " not done within " +
                          std::to_string(settings_.connect_timeout_ms) + " ms"
                    : with_reason("TLS handshake with " + endpoint_.host_header + " failed", ec));
        return;
      }
      t->conn->tcp().expires_never();
      send(t);
    });
  }

  void send(std::shared_ptr<Transfer> t) {
    const std::array<net::const_buffer, 2> bytes{net::buffer(t->head),
                                                 net::buffer(t->request.body)};
    t->conn->with_stream([&](auto& stream) {
      net::async_write(stream, bytes, [this, t](const beast::error_code& ec, size_t) {
        if (ec) {
          if (!resend(t)) fail(t, with_reason("sending the request failed", ec));
          return;
        }
        read(t);
      });
    });
  }

  void read(const std::shared_ptr<Transfer>& t) {
    t->parser.emplace();
    t->parser->header_limit(64 * 1024);
    // No limit: CappedBody keeps what fits and drops the rest. (Not boost::none: Boost 1.74's
    // parser compares a Content-Length against the optional and fails every body with it.)
    t->parser->body_limit(std::numeric_limits<std::uint64_t>::max());
    t->parser->get().body().cap = settings_.answer_body_bytes();
    t->conn->with_stream([&](auto& stream) {
      http::async_read(stream, t->conn->buffer, *t->parser,
                       [this, t](const beast::error_code& ec, size_t) {
                         if (ec) {
                           if (t->parser->got_some() || !resend(t)) {
                             fail(t, with_reason("reading the answer failed", ec));
                           }
                           return;
                         }
                         answered(t);
                       });
    });
  }

  // A reused connection that failed before any byte of an answer: the peer closed it while it
  // was idle. Sends the request once more on a new one.
  bool resend(const std::shared_ptr<Transfer>& t) {
    if (!t->reused || t->resent || t->timed_out) return false;
    t->resent = true;
    t->conn.reset();
    connect(t);
    return true;
  }

  void answered(const std::shared_ptr<Transfer>& t) {
    auto& message = t->parser->get();
    if (message.result_int() >= 100 && message.result_int() < 200) {
      read(t);  // an interim answer (100 Continue, 103 Early Hints): the final one follows
      return;
    }
    if (message.result_int() == 407 && route_.proxy && !endpoint_.tls) {
      // The proxy's answer, not the receiver's: a transport error (RETRY), never a TERMINAL.
      fail(t, route_.peer_name() + " refused the request: 407 " + reason_text(message.reason()) +
                  " (check proxy_credentials_file)");
      return;
    }
    Answer answer;
    answer.status = static_cast<int>(message.result_int());
    if (auto it = message.find("Retry-After"); it != message.end()) {
      answer.retry_after = std::string(it->value().substr(0, 128));
    }
    answer.body = std::move(message.body().text);
    const bool keep = t->parser->keep_alive() && t->conn->buffer.size() == 0 &&
                      idle_.size() < kMaxIdleConnections && !t->timed_out;
    t->parser.reset();
    if (keep) {
      t->conn->idle_since = Clock::now();
      idle_.push_back(std::move(t->conn));
      arm_idle_close();
    }
    done(t, std::move(answer));
  }

  void fail(const std::shared_ptr<Transfer>& t, std::string error) {
    Answer answer;
    answer.transport_error =
        t->timed_out ? "no answer within " + std::to_string(settings_.timeout_ms) + " ms"
                     : std::move(error);
    t->conn.reset();
    done(t, std::move(answer));
  }

  void done(const std::shared_ptr<Transfer>& t, Answer answer) {
    if (t->finished) return;
    t->finished = true;
    load_.fetch_sub(1, std::memory_order_relaxed);
    in_flight_.erase(t->in_flight);
    auto callback = std::move(t->request.done);
    callback(std::move(answer));
  }

  const Settings& settings_;
  const Route& route_;
  const Endpoint& endpoint_;  // route_.endpoint
  net::ssl::context* const tls_;
  const std::chrono::milliseconds idle_close_after_;
  net::io_context io_{1};
  net::executor_work_guard<net::io_context::executor_type> work_;
  tcp::resolver resolver_;
  net::steady_timer deadline_timer_;
  net::steady_timer idle_timer_;
  std::atomic<size_t> load_{0};  // load(): any thread
  // Loop thread only, below.
  tcp::resolver::results_type resolved_;
  Clock::time_point resolved_at_;
  bool resolving_ = false;
  std::vector<std::shared_ptr<Transfer>> waiting_for_address_;
  bool deadline_armed_ = false;
  std::list<std::shared_ptr<Transfer>> in_flight_;  // in start order = deadline order
  std::deque<std::unique_ptr<Connection>> idle_;    // the most recently used last
  bool idle_timer_armed_ = false;
  std::mutex mu_;
  std::vector<std::shared_ptr<Transfer>> submitted_;  // guarded by mu_
  std::thread thread_;                                // last: starts after the rest exists
};

Dispatcher::Dispatcher(const Settings& settings, std::chrono::milliseconds idle_close_after)
    : settings_(settings), route_(std::make_unique<Route>()) {
  Route& route = *route_;
  route.endpoint = parse_endpoint(settings.url);
  const Endpoint& endpoint = route.endpoint;
  if (!settings.proxy.empty()) {
    route.proxy = parse_endpoint(settings.proxy);
    if (!settings.proxy_authorization.empty()) {
      add_header(proxy_lines_, "Proxy-Authorization", settings.proxy_authorization);
    }
    if (endpoint.tls) {
      route.connect_head = connect_head(endpoint, proxy_lines_);
      proxy_lines_.clear();  // a tunnel's requests go to the receiver: no proxy credentials
    }
  }
  target_ = request_target(endpoint, route.proxy.has_value() && !endpoint.tls);
  if (endpoint.tls) {
    tls_ = std::make_unique<net::ssl::context>(net::ssl::context::tls_client);
    const auto load = [](const char* what, const std::string& file, auto&& f) {
      beast::error_code ec;
      f(ec);
      if (ec)
        throw std::runtime_error("http: cannot load " + std::string(what) + " " + file + ": " +
                                 ec.message());
    };
    tls_->set_verify_mode(settings.tls_verify ? net::ssl::verify_peer : net::ssl::verify_none);
    if (settings.tls_ca_file.empty()) {
      load("the system's CA certificates", "",
           [&](auto& ec) { tls_->set_default_verify_paths(ec); });
    } else {
      load("tls_ca_file", settings.tls_ca_file,
           [&](auto& ec) { tls_->load_verify_file(settings.tls_ca_file, ec); });
    }
    if (!settings.tls_client_cert_file.empty()) {
      load("tls_client_cert_file", settings.tls_client_cert_file,
           [&](auto& ec) { tls_->use_certificate_chain_file(settings.tls_client_cert_file, ec); });
      load("tls_client_key_file", settings.tls_client_key_file, [&](auto& ec) {
        tls_->use_private_key_file(settings.tls_client_key_file, net::ssl::context::pem, ec);
      });
    }
  }
  loops_.reserve(static_cast<size_t>(settings.transfer_threads));
  for (int64_t i = 0; i < settings.transfer_threads; ++i) {
    loops_.push_back(
        std::make_unique<TransferLoop>(settings_, route, tls_.get(), idle_close_after));
  }
}

Dispatcher::~Dispatcher() { loops_.clear(); }

void Dispatcher::submit(Request request) {
  auto t = std::make_shared<Transfer>();
  t->head = request_head(route_->endpoint, target_, settings_.method,
                         std::move(request.header_lines), request.body.size(), proxy_lines_);
  // A body that fits the head's spare room (the plugin reserves it) travels in the head's buffer:
  // its own buffer is then freed here, on the thread that allocated it, not on a transfer thread
  // (memory freed across threads costs glibc's allocator most of a start thread's malloc time).
  if (t->head.capacity() - t->head.size() >= request.body.size()) {
    t->head.append(request.body);
    request.body = std::string();
  }
  t->request = std::move(request);
  // The loop with the fewest requests in flight, the next in turn among equals. Taken in turn
  // alone, the loops' loads drift apart and each grows its own connections to nearly the whole
  // max_in_flight (1,866 connections for max_in_flight 1,000 in the bench's drain).
  const size_t n = loops_.size();
  size_t best = next_.fetch_add(1, std::memory_order_relaxed) % n;
  size_t best_load = loops_[best]->load();
  for (size_t k = 1; k < n && best_load > 0; ++k) {
    const size_t i = (best + k) % n;
    const size_t load = loops_[i]->load();
    if (load < best_load) best = i, best_load = load;
  }
  loops_[best]->submit(std::move(t));
}

}  // namespace sqlstreams_http
