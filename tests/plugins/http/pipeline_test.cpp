// plugins/http's Dispatcher with pipeline_depth > 1 (HTTP/1.1 pipelining) against the real
// loopback server of loopback_server.hpp: requests share connections and each gets the answer
// the receiver gave to it, in order; a request past its deadline ends its connection and the
// requests behind it are sent again on another; a receiver that closes after each answer, one
// that closes connections kept idle, interim answers, a refused connection and the client's own
// idle close all end with every request answered once.
#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dispatcher.hpp"
#include "loopback_server.hpp"

namespace sqlstreams_http {
namespace {

using namespace std::chrono_literals;
using loopback::LoopbackServer;
using loopback::round_of;

Settings pipelined(const LoopbackServer& server, int64_t depth) {
  Settings s = loopback::settings_for(server, 1);
  s.pipeline_depth = depth;
  return s;
}

// What each request of a batch was answered, by request body.
class Answers {
 public:
  void submit(Dispatcher& d, const std::string& body) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++submitted_;
    }
    Request r;
    r.body = body;
    r.done = [this, body](Answer a) {
      std::lock_guard<std::mutex> lock(mu_);
      got_[body].push_back(a.transport_error.empty() ? std::to_string(a.status) + " " + a.body
                                                     : a.transport_error);
      ++answered_;
      cv_.notify_all();
    };
    d.submit(std::move(r));
  }
  // Every answer so far, once all submitted requests were answered (or after 60 s).
  std::map<std::string, std::vector<std::string>> wait() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait_for(lock, 60s, [&] { return answered_ == submitted_; });
    return got_;
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int submitted_ = 0;
  int answered_ = 0;
  std::map<std::string, std::vector<std::string>> got_;
};

TEST(Pipelining, RequestsShareConnectionsAndEachGetsTheAnswerToItself) {
  LoopbackServer server;
  server.echo(true);  // each answer's body is its request's: a mix-up shows
  const Settings s = pipelined(server, 8);
  Dispatcher d(s);
  Answers answers;
  for (int i = 0; i < 400; ++i) answers.submit(d, "{\"n\":" + std::to_string(i) + "}");
  const auto got = answers.wait();
  ASSERT_EQ(got.size(), 400u);
  for (const auto& [body, seen] : got) {
    EXPECT_EQ(seen, std::vector<std::string>{"200 " + body}) << body;
  }
  EXPECT_GT(server.pipelined(), 0) << "no request came before the answer to the one before it";
  EXPECT_LE(server.accepted(), 400 / 8) << "at most 8 requests at once on each connection";
}

// The first request is never answered, and three more wait behind it on its connection: at its
// deadline it is "no answer within", its connection is closed, and the three are sent again on
// another connection and answered there.
TEST(Pipelining, ARequestPastItsDeadlineEndsItsConnectionAndTheOnesBehindItGoOnAnother) {
  LoopbackServer server;
  Settings s = pipelined(server, 4);
  s.timeout_ms = 1000;
  Dispatcher d(s);
  Answers answers;
  answers.submit(d, "\"hang\"");
  std::this_thread::sleep_for(300ms);  // their deadlines 300 ms later than the hang's
  for (int i = 0; i < 3; ++i) answers.submit(d, "{\"n\":" + std::to_string(i) + "}");
  const auto got = answers.wait();
  EXPECT_EQ(got.at("\"hang\""), std::vector<std::string>{"no answer within 1000 ms"});
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(got.at("{\"n\":" + std::to_string(i) + "}"), std::vector<std::string>{"200 "}) << i;
  }
  EXPECT_EQ(server.accepted(), 2);
  EXPECT_EQ(server.heads().size(), 7u) << "the three behind the hang were sent twice";
}

// `Connection: close` on every answer: each connection answers one request, and the requests
// written behind it are sent again on the next, as often as it takes.
TEST(Pipelining, AReceiverThatClosesAfterEachAnswerStillAnswersEveryRequest) {
  LoopbackServer server(/*one_per_connection=*/true);
  server.delay_answers(30ms);  // all 40 are written before the first answer
  const Settings s = pipelined(server, 8);
  Dispatcher d(s);
  EXPECT_EQ(round_of(d, 40), (std::map<std::string, int>{{"200", 40}}));
  EXPECT_EQ(server.accepted(), 40);
  EXPECT_GT(server.left_behind_a_close(), 0) << "nothing was written behind a closing answer";
}

TEST(Pipelining, IdleConnectionsTheReceiverClosesAreReplaced) {
  LoopbackServer server;
  const Settings s = pipelined(server, 4);
  Dispatcher d(s);
  loopback::rounds_closing_idle(d, server, 3, 100);
}

TEST(Pipelining, ConnectionsIdleTooLongAreClosedByTheClient) {
  LoopbackServer server;
  loopback::expect_the_client_closes_idle_connections(server, pipelined(server, 4));
}

TEST(Pipelining, InterimAnswersArePassedOverForTheFinalOne) {
  LoopbackServer server(/*one_per_connection=*/false, /*interim_first=*/true);
  const Settings s = pipelined(server, 4);
  Dispatcher d(s);
  EXPECT_EQ(round_of(d, 60), (std::map<std::string, int>{{"200", 60}}));
}

// Nothing listens: every request fails once with the connect error; none is sent again.
TEST(Pipelining, ARefusedConnectionFailsEachRequestOnceNamingTheHost) {
  int port;
  {
    LoopbackServer gone;
    port = gone.port();
  }
  Settings s;
  s.url = "http://127.0.0.1:" + std::to_string(port) + "/hook";
  s.transfer_threads = 1;
  s.pipeline_depth = 4;
  Dispatcher d(s);
  EXPECT_EQ(
      round_of(d, 10),
      (std::map<std::string, int>{
          {"cannot connect to 127.0.0.1:" + std::to_string(port) + ": Connection refused", 10}}));
}

}  // namespace
}  // namespace sqlstreams_http
