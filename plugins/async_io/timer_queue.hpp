// async_io/timer_queue — one thread completing many pending messages at their due time: a
// min-heap of (due, sequence) → Completion, the thread sleeping until the earliest is due.
// Stands for an event loop waiting on sockets. Owns: the thread and every Completion handed to
// it. Threading: add() from any thread; the destructor stops the thread and drops (completes
// with a RETRY) whatever is still pending, unless release_pending() took it first.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <queue>
#include <sqlstreams/plugin.hpp>
#include <thread>
#include <utility>
#include <vector>

namespace async_io {

class TimerQueue {
 public:
  using Clock = std::chrono::steady_clock;

  TimerQueue() : thread_([this] { run(); }) {}
  ~TimerQueue() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  TimerQueue(const TimerQueue&) = delete;
  TimerQueue& operator=(const TimerQueue&) = delete;

  // Completes `done` with `result` at `due`, from the timer thread.
  void add(Clock::time_point due, sqlstreams::Completion done, sqlstreams::Result result) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      heap_.push(Timer{due, seq_++, std::make_shared<Pending>(std::move(done), std::move(result))});
    }
    cv_.notify_one();
  }

  // Takes every pending completion out of the queue (the caller completes them itself).
  std::vector<sqlstreams::Completion> release_pending() {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<sqlstreams::Completion> out;
    while (!heap_.empty()) {
      out.push_back(std::move(heap_.top().pending->done));
      heap_.pop();
    }
    return out;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return heap_.size();
  }

 private:
  struct Pending {
    Pending(sqlstreams::Completion d, sqlstreams::Result r)
        : done(std::move(d)), result(std::move(r)) {}
    sqlstreams::Completion done;
    sqlstreams::Result result;
  };
  struct Timer {
    Clock::time_point due;
    uint64_t seq;
    std::shared_ptr<Pending> pending;
    bool operator>(const Timer& o) const { return due != o.due ? due > o.due : seq > o.seq; }
  };

  void run() {
    std::vector<std::shared_ptr<Pending>> ready;
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      if (stopping_) return;
      if (heap_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const auto due = heap_.top().due;
      if (Clock::now() < due) {
        cv_.wait_until(lock, due);
        continue;
      }
      const auto now = Clock::now();
      while (!heap_.empty() && heap_.top().due <= now) {
        ready.push_back(heap_.top().pending);
        heap_.pop();
      }
      lock.unlock();  // complete outside the lock: the host may take its own locks
      for (auto& p : ready) p->done.complete(p->result);
      ready.clear();
      lock.lock();
    }
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> heap_;
  uint64_t seq_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: started after everything it reads
};

}  // namespace async_io
