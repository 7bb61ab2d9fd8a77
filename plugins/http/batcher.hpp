// plugins/http — batch mode (`batch_max` > 1): messages accepted by handle_async() wait here
// until `batch_max` of them (or `batch_max_bytes` of elements) are together or the first has
// waited `batch_linger_ms`; then one request carries them all as a JSON array and its answer
// decides each (decide_batch: all or nothing, or per message when the receiver names outcomes).
// Threading: add() from any thread; one thread of its own forms the batches and hands each to
// the Dispatcher. Destroying it stops that thread; messages still waiting are dropped (their
// `done` destroyed uncalled).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dispatcher.hpp"
#include "outcome.hpp"
#include "settings.hpp"

namespace sqlstreams_http {

struct BatchItem {
  int64_t id = 0;
  std::string element;  // the JSON object this message is in the array
  std::function<void(const Decision&)> done;
};

class Batcher {
 public:
  // `headers` builds a request's header lines from its message count, first and last id and
  // body.
  using HeaderMaker = std::function<std::string(size_t, int64_t, int64_t, const std::string&)>;
  Batcher(const Settings& settings, Dispatcher& dispatcher, HeaderMaker headers);
  ~Batcher();
  Batcher(const Batcher&) = delete;
  Batcher& operator=(const Batcher&) = delete;

  void add(BatchItem item);

 private:
  void run();
  void send(std::vector<BatchItem> items);

  const Settings& settings_;
  Dispatcher& dispatcher_;
  HeaderMaker headers_;
  std::mutex mu_;
  std::condition_variable wake_;
  std::vector<BatchItem> pending_;                     // guarded by mu_
  size_t pending_bytes_ = 0;                           // guarded by mu_
  std::chrono::steady_clock::time_point first_since_;  // guarded by mu_ (pending_ not empty)
  bool stopping_ = false;                              // guarded by mu_
  std::thread thread_;                                 // last: starts after the rest exists
};

}  // namespace sqlstreams_http
