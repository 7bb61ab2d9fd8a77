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

struct Pipe;

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
  std::shared_ptr<Pipe> pipe;  // pipeline_depth > 1: the connection carrying it, until its answer
};

// pipeline_depth > 1: one keep-alive connection carrying up to that many requests at once
// (HTTP/1.1 pipelining, RFC 9112 9.3.2): the requests queued on it are written back to back in
// one write, and the answers are read in the order the requests were written.
struct Pipe {
  std::unique_ptr<Connection> conn;
  bool ready = false;    // connected (tunnelled, handshaken): requests can be written
  bool broken = false;   // failed or closed: carries nothing more (its handlers return)
  bool carried = false;  // answered a request: the peer may close it between two of them
  bool writing = false;
  bool reading = false;
  bool flush = false;     // in the loop's list of pipes to write
  bool has_room = false;  // in the loop's list of pipes that had room (checked when taken)
  std::list<std::shared_ptr<Pipe>>::iterator at;   // in the loop's pipes_
  std::deque<std::shared_ptr<Transfer>> queued;    // not written yet
  std::deque<std::shared_ptr<Transfer>> awaiting;  // written, in answer order
  Clock::time_point idle_since;
  size_t count() const { return queued.size() + awaiting.size(); }
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
        idle_timer_(io_),
        pipe_idle_timer_(io_) {
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
    for (auto& p : pipes_) p->queued.clear(), p->awaiting.clear();
    pipes_.clear();
    room_.clear();
    last_pipe_.reset();
    waiting_for_address_.clear();
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
    if (settings_.pipeline_depth > 1) {
      for (auto& t : batch) {
        t->deadline = now + std::chrono::milliseconds(settings_.timeout_ms);
        in_flight_.push_back(t);
        t->in_flight = std::prev(in_flight_.end());
        arm_deadline();
        enqueue(std::move(t), now);
      }
      flush_pipes();
      return;
    }
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
  // its pending operation then completes and fail() answers "no answer within". A pipelined
  // request ends its pipe at once (end_pipe: the requests behind it go on a new one).
  void time_out_overdue() {
    const Clock::time_point now = Clock::now();
    std::vector<std::shared_ptr<Transfer>> overdue;  // first all: a pipe's end finishes several
    for (auto it = in_flight_.begin(); it != in_flight_.end() && (*it)->deadline <= now; ++it) {
      if (!(*it)->timed_out) overdue.push_back(*it);
    }
    for (auto& t : overdue) t->timed_out = true;
    for (auto& t : overdue) {
      if (t->finished) continue;
      if (t->pipe) {
        end_pipe(t->pipe, "");  // each of its requests not overdue is sent again
      } else if (t->conn) {
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

  // Calls `then` with "" once the peer's address is known (resolved at most every
  // kResolvedFor), or with the error.
  void with_address(std::function<void(const std::string&)> then) {
    if (!resolved_.empty() && Clock::now() - resolved_at_ < kResolvedFor) {
      then("");
      return;
    }
    waiting_for_address_.push_back(std::move(then));
    if (resolving_) return;
    resolving_ = true;
    resolver_.async_resolve(
        route_.peer().host, route_.peer().port,
        [this](const beast::error_code& ec, tcp::resolver::results_type results) {
          resolving_ = false;
          std::vector<std::function<void(const std::string&)>> waiting;
          waiting.swap(waiting_for_address_);
          if (!ec) {
            resolved_ = std::move(results);
            resolved_at_ = Clock::now();
          }
          const std::string error = ec ? with_reason("cannot resolve " + route_.peer().host +
                                                         (route_.proxy ? " (the proxy)" : ""),
                                                     ec)
                                       : "";
          for (auto& w : waiting) w(error);
        });
  }

  void connect(std::shared_ptr<Transfer> t) {
    with_address([this, t](const std::string& error) {
      if (t->finished) return;
      if (!error.empty()) {
        fail(t, error);
        return;
      }
      t->conn = std::make_unique<Connection>(io_, tls_);
      t->reused = false;
      establish(*t->conn, t, t->deadline, [this, t](const std::string& failed) {
        if (failed.empty()) {
          send(t);
        } else {
          fail(t, failed);
        }
      });
    });
  }

  // Connects `c` (then opens the proxy's tunnel and does the TLS handshake when the route needs
  // them) and calls `then` with "" or the error. `owner` keeps `c` alive until then.
  using Then = std::function<void(const std::string&)>;
  void establish(Connection& c, std::shared_ptr<void> owner, Clock::time_point deadline,
                 Then then) {
    beast::tcp_stream& stream = c.tcp();
    stream.expires_at(
        std::min(deadline, Clock::now() + std::chrono::milliseconds(settings_.connect_timeout_ms)));
    stream.async_connect(resolved_, [this, &c, owner, then = std::move(then)](
                                        const beast::error_code& ec, const tcp::endpoint&) {
      if (ec) {
        then(ec == beast::error::timeout
                 ? "cannot connect to " + route_.peer_name() + " within " +
                       std::to_string(settings_.connect_timeout_ms) + " ms"
                 : with_reason("cannot connect to " + route_.peer_name(), ec));
        return;
      }
      beast::error_code ignored;
      c.tcp().socket().set_option(tcp::no_delay(true), ignored);
      if (c.tls() == nullptr) {
        c.tcp().expires_never();
        then("");
      } else if (route_.connect_head.empty()) {
        handshake(c, owner, then);
      } else {
        tunnel(c, owner, then);
      }
    });
  }

  // Asks the proxy for a tunnel to the URL's host (CONNECT); the TLS handshake then goes through
  // it. The connect timeout still runs: it bounds the proxy's answer too.
  void tunnel(Connection& c, const std::shared_ptr<void>& owner, const Then& then) {
    net::async_write(
        c.tcp(), net::buffer(route_.connect_head),
        [this, &c, owner, then](const beast::error_code& ec, size_t) {
          if (ec) {
            then(ec == beast::error::timeout
                     ? "no answer from " + route_.peer_name() + " to CONNECT within " +
                           std::to_string(settings_.connect_timeout_ms) + " ms"
                     : with_reason("sending CONNECT to " + route_.peer_name() + " failed", ec));
            return;
          }
          auto answer = std::make_shared<http::response_parser<http::empty_body>>();
          answer->header_limit(16 * 1024);
          answer->skip(true);  // a CONNECT's answer has no body (RFC 9110 9.3.6)
          http::async_read(
              c.tcp(), c.buffer, *answer,
              [this, &c, owner, then, answer](const beast::error_code& read_ec, size_t) {
                if (read_ec) {
                  then(read_ec == beast::error::timeout
                           ? "no answer from " + route_.peer_name() + " to CONNECT within " +
                                 std::to_string(settings_.connect_timeout_ms) + " ms"
                           : with_reason("no answer from " + route_.peer_name() + " to CONNECT",
                                         read_ec));
                  return;
                }
                const unsigned status = answer->get().result_int();
                if (status < 200 || status > 299) {
                  then(route_.peer_name() + " refused CONNECT to " + host_and_port(endpoint_) +
                       ": " + std::to_string(status) + " " + reason_text(answer->get().reason()) +
                       (status == 407 ? " (check proxy_credentials_file)" : ""));
                  return;
                }
                if (c.buffer.size() != 0) {  // bytes before our ClientHello: not a tunnel
                  then(route_.peer_name() + " sent bytes after its answer to CONNECT");
                  return;
                }
                handshake(c, owner, then);
              });
        });
  }

  void handshake(Connection& c, const std::shared_ptr<void>& owner, const Then& then) {
    auto& stream = *c.tls();
    beast::error_code not_an_address;
    (void)net::ip::make_address(endpoint_.host, not_an_address);
    if (not_an_address) {  // a name: tell the server which certificate (SNI)
      SSL_set_tlsext_host_name(stream.native_handle(), endpoint_.host.c_str());
    }
    if (settings_.tls_verify)
      stream.set_verify_callback(net::ssl::host_name_verification(endpoint_.host));
    stream.async_handshake(
        net::ssl::stream_base::client, [this, &c, owner, then](const beast::error_code& ec) {
          if (ec) {
            then(ec == beast::error::timeout
                     ? "TLS handshake with " + endpoint_.host_header + " not done within " +
                           std::to_string(settings_.connect_timeout_ms) + " ms"
                     : with_reason("TLS handshake with " + endpoint_.host_header + " failed", ec));
            return;
          }
          c.tcp().expires_never();
          then("");
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

  void start_parser(Transfer& t) {
    t.parser.emplace();
    t.parser->header_limit(64 * 1024);
    // No limit: CappedBody keeps what fits and drops the rest. (Not boost::none: Boost 1.74's
    // parser compares a Content-Length against the optional and fails every body with it.)
    t.parser->body_limit(std::numeric_limits<std::uint64_t>::max());
    t.parser->get().body().cap = settings_.answer_body_bytes();
  }

  void read(const std::shared_ptr<Transfer>& t) {
    start_parser(*t);
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

  // The answer a final response gives `t`'s request (its parser's message, moved from). A 407
  // from the proxy of a plain request is the proxy's, not the receiver's: a transport error
  // (RETRY), never a TERMINAL.
  Answer answer_of(const std::shared_ptr<Transfer>& t) {
    auto& message = t->parser->get();
    Answer answer;
    if (message.result_int() == 407 && route_.proxy && !endpoint_.tls) {
      answer.transport_error = route_.peer_name() + " refused the request: 407 " +
                               reason_text(message.reason()) + " (check proxy_credentials_file)";
      return answer;
    }
    answer.status = static_cast<int>(message.result_int());
    if (auto it = message.find("Retry-After"); it != message.end()) {
      answer.retry_after = std::string(it->value().substr(0, 128));
    }
    answer.body = std::move(message.body().text);
    return answer;
  }

  static bool interim(const std::shared_ptr<Transfer>& t) {
    const unsigned status = t->parser->get().result_int();
    return status >= 100 && status < 200;  // 100 Continue, 103 Early Hints: the final one follows
  }

  void answered(const std::shared_ptr<Transfer>& t) {
    if (interim(t)) {
      read(t);
      return;
    }
    Answer answer = answer_of(t);
    if (!answer.transport_error.empty()) {
      fail(t, std::move(answer.transport_error));
      return;
    }
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

  // Pipelining (pipeline_depth > 1), below. A request goes on the pipe that last took one when
  // it has room (so that requests submitted together are written together), else on the oldest
  // pipe that got room since (room_, a queue checked when taken: O(1) a request with thousands of
  // pipes), else on a new one.
  void enqueue(std::shared_ptr<Transfer> t, Clock::time_point now) {
    std::shared_ptr<Pipe> pipe = pipe_with_room(now);
    if (!pipe) pipe = open_pipe(t->deadline);
    put(std::move(t), pipe);
  }

  void put(std::shared_ptr<Transfer> t, const std::shared_ptr<Pipe>& pipe) {
    t->pipe = pipe;
    pipe->queued.push_back(std::move(t));
    if (!pipe->flush) {
      pipe->flush = true;
      to_flush_.push_back(pipe);
    }
  }

  std::shared_ptr<Pipe> pipe_with_room(Clock::time_point now) {
    const auto depth = static_cast<size_t>(settings_.pipeline_depth);
    if (last_pipe_ && !last_pipe_->broken && last_pipe_->count() < depth) return last_pipe_;
    while (!room_.empty()) {
      const std::shared_ptr<Pipe> p = room_.front();
      if (p->broken || p->count() >= depth) {
        room_.pop_front();
        p->has_room = false;
        continue;
      }
      // Idle for a while: the peer may have closed it meanwhile (one non-blocking peek).
      if (p->count() == 0 && p->ready && now - p->idle_since >= kCheckIdleAfter &&
          !p->conn->still_open()) {
        end_pipe(p, "");
        continue;
      }
      return last_pipe_ = p;
    }
    return nullptr;
  }

  // Lists `pipe` in room_ once it has room again.
  void note_room(const std::shared_ptr<Pipe>& pipe) {
    if (pipe->has_room || pipe->broken) return;
    pipe->has_room = true;
    room_.push_back(pipe);
  }

  std::shared_ptr<Pipe> open_pipe(Clock::time_point deadline) {
    auto pipe = std::make_shared<Pipe>();
    pipe->conn = std::make_unique<Connection>(io_, tls_);
    pipe->at = pipes_.insert(pipes_.end(), pipe);
    last_pipe_ = pipe;
    note_room(pipe);
    with_address([this, pipe, deadline](const std::string& error) {
      if (pipe->broken) return;
      if (!error.empty()) {
        end_pipe(pipe, error);
        return;
      }
      establish(*pipe->conn, pipe, deadline, [this, pipe](const std::string& failed) {
        if (pipe->broken) return;
        if (!failed.empty()) {
          end_pipe(pipe, failed);
          return;
        }
        pipe->ready = true;
        pump(pipe);
      });
    });
    return pipe;
  }

  void flush_pipes() {
    std::vector<std::shared_ptr<Pipe>> pipes;
    pipes.swap(to_flush_);
    for (auto& p : pipes) {
      p->flush = false;
      pump(p);
    }
  }

  // Writes what is queued (one write for all of it) and reads the next answer, unless a write or
  // a read is already under way.
  void pump(const std::shared_ptr<Pipe>& pipe) {
    if (pipe->broken || !pipe->ready) return;
    if (!pipe->writing && !pipe->queued.empty()) write_pipe(pipe);
    if (!pipe->reading && !pipe->awaiting.empty()) read_pipe(pipe);
  }

  // What one write sends, kept alive until its handler runs (a pipe ended meanwhile lets go of
  // its requests, and the write may still be under way).
  struct Written {
    std::vector<net::const_buffer> bytes;
    std::vector<std::shared_ptr<Transfer>> requests;
  };

  void write_pipe(const std::shared_ptr<Pipe>& pipe) {
    auto written = std::make_shared<Written>();
    written->bytes.reserve(pipe->queued.size() * 2);
    written->requests.reserve(pipe->queued.size());
    for (auto& t : pipe->queued) {
      written->bytes.push_back(net::buffer(t->head));
      if (!t->request.body.empty()) written->bytes.push_back(net::buffer(t->request.body));
      written->requests.push_back(t);
      pipe->awaiting.push_back(std::move(t));
    }
    pipe->queued.clear();
    pipe->writing = true;
    pipe->conn->with_stream([&](auto& stream) {
      net::async_write(stream, written->bytes,
                       [this, pipe, written](const beast::error_code& ec, size_t) {
                         pipe->writing = false;
                         if (pipe->broken) return;
                         if (ec) {
                           end_pipe(pipe, with_reason("sending the request failed", ec));
                           return;
                         }
                         pump(pipe);
                       });
    });
  }

  void read_pipe(const std::shared_ptr<Pipe>& pipe) {
    const std::shared_ptr<Transfer> t = pipe->awaiting.front();
    start_parser(*t);
    pipe->reading = true;
    pipe->conn->with_stream([&](auto& stream) {
      http::async_read(stream, pipe->conn->buffer, *t->parser,
                       [this, pipe, t](const beast::error_code& ec, size_t) {
                         pipe->reading = false;
                         if (pipe->broken) return;
                         if (ec) {
                           end_pipe(pipe, with_reason("reading the answer failed", ec));
                           return;
                         }
                         pipe_answered(pipe, t);
                       });
    });
  }

  void pipe_answered(const std::shared_ptr<Pipe>& pipe, const std::shared_ptr<Transfer>& t) {
    if (interim(t)) {
      pump(pipe);  // the same request's final answer follows
      return;
    }
    pipe->awaiting.pop_front();
    pipe->carried = true;
    note_room(pipe);
    const bool keep = t->parser->keep_alive();
    Answer answer = answer_of(t);
    t->parser.reset();
    t->pipe.reset();
    done(t, std::move(answer));
    if (!keep) {  // the receiver closes it: the requests behind this one go on another
      end_pipe(pipe, "the receiver closed the connection before answering", /*announced=*/true);
      return;
    }
    if (pipe->count() == 0) {
      pipe->idle_since = Clock::now();
      arm_pipe_idle_close();
    }
    pump(pipe);
  }

  // Ends a pipe and answers what it carried: a request past its deadline "no answer within"; one
  // that got part of its answer, or the first of a pipe that never answered (nothing says the
  // receiver would answer it on another), `error`; every other request is sent once more on
  // another pipe (the receiver has not answered it; it deduplicates by webhook-id if it handled
  // it), then `error` if that one fails too. `announced`: the receiver's answer said it closes the
  // connection (`Connection: close`), which is no failure: the requests behind that answer go on
  // another pipe as often as it takes (each pipe answers at least one).
  void end_pipe(std::shared_ptr<Pipe> pipe, const std::string& error,  // a copy: t->pipe goes
                bool announced = false) {
    if (pipe->broken) return;
    pipe->broken = true;
    beast::error_code ignored;
    pipe->conn->tcp().socket().close(ignored);
    pipes_.erase(pipe->at);  // room_ lets go of it when it comes to it
    if (last_pipe_ == pipe) last_pipe_.reset();
    std::vector<std::shared_ptr<Transfer>> carried(pipe->awaiting.begin(), pipe->awaiting.end());
    carried.insert(carried.end(), pipe->queued.begin(), pipe->queued.end());
    pipe->awaiting.clear();
    pipe->queued.clear();
    // "" when the pipe ended for another request's deadline.
    const std::string why = error.empty() ? "the connection carrying it was closed" : error;
    // Sent again on new connections, never on a kept one (the peer may have closed that too).
    std::shared_ptr<Pipe> fresh;
    bool first = true;
    for (auto& t : carried) {
      const bool got_some = t->parser && t->parser->got_some();
      // The first request of a pipe that never answered, or any of a pipe that could not be
      // opened: nothing says another connection would fare better.
      const bool peer_failed = pipe->ready ? first && !pipe->carried : !error.empty();
      first = false;
      t->pipe.reset();  // (its parser stays: a read may be under way into it until aborted)
      if (t->finished) continue;
      if (t->timed_out || (!announced && (t->resent || got_some || peer_failed))) {
        fail(t, why);
        continue;
      }
      if (!announced) t->resent = true;
      if (!fresh || fresh->count() >= static_cast<size_t>(settings_.pipeline_depth)) {
        fresh = open_pipe(t->deadline);
      }
      put(t, fresh);
    }
    flush_pipes();
  }

  // Closes the pipes idle for idle_close_after_, with one timer armed at the oldest one's time.
  void arm_pipe_idle_close() {
    if (pipe_timer_armed_) return;
    std::optional<Clock::time_point> oldest;
    for (const auto& p : pipes_) {
      if (p->count() == 0 && p->ready && (!oldest || p->idle_since < *oldest)) {
        oldest = p->idle_since;
      }
    }
    if (!oldest) return;
    pipe_timer_armed_ = true;
    pipe_idle_timer_.expires_at(*oldest + idle_close_after_);
    pipe_idle_timer_.async_wait([this](const beast::error_code&) {
      pipe_timer_armed_ = false;
      const Clock::time_point now = Clock::now();
      std::vector<std::shared_ptr<Pipe>> expired;
      for (const auto& p : pipes_) {
        if (p->count() == 0 && p->ready && now - p->idle_since >= idle_close_after_) {
          expired.push_back(p);
        }
      }
      for (auto& p : expired) end_pipe(p, "");
      arm_pipe_idle_close();
    });
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
  net::steady_timer pipe_idle_timer_;
  std::atomic<size_t> load_{0};  // load(): any thread
  // Loop thread only, below.
  tcp::resolver::results_type resolved_;
  Clock::time_point resolved_at_;
  bool resolving_ = false;
  std::vector<std::function<void(const std::string&)>> waiting_for_address_;
  bool deadline_armed_ = false;
  std::list<std::shared_ptr<Transfer>> in_flight_;  // in start order = deadline order
  std::deque<std::unique_ptr<Connection>> idle_;    // the most recently used last
  bool idle_timer_armed_ = false;
  std::list<std::shared_ptr<Pipe>> pipes_;  // pipelining: every pipe not ended, busy or idle
  std::shared_ptr<Pipe> last_pipe_;         // the pipe that took the last request
  std::deque<std::shared_ptr<Pipe>> room_;  // pipes that got room (some may be full or ended)
  std::vector<std::shared_ptr<Pipe>> to_flush_;
  bool pipe_timer_armed_ = false;
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
