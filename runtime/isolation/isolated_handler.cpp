// The host side of process isolation: a pool of handler children, one request each at a time.
#include <fmt/format.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <thread>
#include <vector>

#include "common/random.hpp"
#include "common/utf8.hpp"
#include "isolation/isolation.hpp"

namespace sqlstreams::isolation {
namespace {

using plugin_host::Outcome;
using plugin_host::OutcomeKind;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kStartTimeout{60'000};  // spawn → Ready
constexpr std::chrono::milliseconds kExitGrace{5'000};      // EOF/stop → reaped, then SIGKILL

// Spawns children from one long-lived thread: PR_SET_PDEATHSIG fires when the spawning THREAD
// ends, and worker threads come and go (written off, replaced, reloaded).
class Launcher {
 public:
  Launcher() : thread_([this] { loop(); }) {}
  ~Launcher() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  SpawnedChild spawn(std::function<SpawnedChild()> job) {
    std::packaged_task<SpawnedChild()> task(std::move(job));
    auto result = task.get_future();
    {
      std::lock_guard lock(mu_);
      jobs_.push_back(std::move(task));
    }
    cv_.notify_all();
    return result.get();
  }

 private:
  void loop() {
    std::unique_lock lock(mu_);
    for (;;) {
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (jobs_.empty()) return;
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::packaged_task<SpawnedChild()>> jobs_;
  bool stop_ = false;
  std::thread thread_;  // last: starts after the members it uses
};

struct Slot {
  pid_t pid = -1;
  std::unique_ptr<Channel> channel;  // null while down
  bool busy = false;                 // a caller owns it (running a request or restarting it)
  int crashes = 0;                   // consecutive crashes (restart backoff)
  Clock::time_point started{};
  Clock::time_point restart_at{};
};

class IsolatedHandler final : public plugin_host::HandlerInstance {
 public:
  explicit IsolatedHandler(IsolationOptions o)
      : o_(std::move(o)), slots_(static_cast<size_t>(std::max(o_.children, 1))) {}

  ~IsolatedHandler() override {
    for (auto& s : slots_) {
      if (!s.channel) continue;
      s.channel.reset();  // the child reads EOF and exits
      const int status = reap(s.pid, kExitGrace);
      spdlog::debug("handler-process-stopped stream={} group={} pid={}: {}", o_.stream, o_.group,
                    s.pid, describe_exit(status));
    }
  }

  void start_all() {
    for (auto& s : slots_) start(s);  // throws PluginLoadError
  }

  Outcome handle(const plugin_host::MessageView& m) noexcept override {
    try {
      Outcome unavailable;
      Slot* slot = acquire(unavailable);
      if (slot == nullptr) return unavailable;
      struct Release {
        IsolatedHandler* self;
        Slot* slot;
        ~Release() { self->release(*slot); }
      } release_when_done{this, slot};
      return run(*slot, m);
    } catch (const std::exception& e) {
      return {OutcomeKind::kRetry,
              {},
              sanitize_utf8(std::string("host error while handling: ") + e.what(), 8192)};
    }
  }

  bool concurrent() const override { return concurrent_; }
  const std::string& plugin_name() const override { return plugin_name_; }

 private:
  // A free child (or a down one due for restart), waiting while every child is busy; nullptr
  // with `unavailable` set when none is up and none is due.
  Slot* acquire(Outcome& unavailable) {
    std::unique_lock lock(mu_);
    const auto give_up = Clock::now() + o_.handler_timeout + 2 * kAnswerGrace;
    for (;;) {
      const auto now = Clock::now();
      Slot* due = nullptr;
      bool any_busy = false;
      auto next_restart = Clock::time_point::max();
      for (auto& s : slots_) {
        if (s.busy) {
          any_busy = true;
        } else if (s.channel) {
          s.busy = true;
          return &s;
        } else if (s.restart_at <= now) {
          due = due ? due : &s;
        } else {
          next_restart = std::min(next_restart, s.restart_at);
        }
      }
      if (due != nullptr) {
        due->busy = true;
        return due;
      }
      if (!any_busy || now >= give_up) {
        unavailable = {OutcomeKind::kRetry,
                       {},
                       any_busy ? "handler process busy" : "handler process restarting"};
        return nullptr;
      }
      cv_.wait_until(lock, std::min(next_restart, give_up));
    }
  }

  void release(Slot& slot) {
    {
      std::lock_guard lock(mu_);
      slot.busy = false;
    }
    cv_.notify_all();
  }

  Outcome run(Slot& slot, const plugin_host::MessageView& m) {
    if (!slot.channel) {
      try {
        start(slot);
      } catch (const std::exception& e) {
        ++slot.crashes;
        went_down(slot, Clock::now());
        return {OutcomeKind::kRetry,
                {},
                sanitize_utf8(std::string("handler process restarting: ") + e.what(), 8192)};
      }
    }
    RequestFrame request;
    request.seq = ++seq_;
    request.id = m.id;
    request.schema_version = m.schema_version;
    request.attempt = m.attempt;
    request.created_at_unix_ms = m.created_at_unix_ms;
    request.stream = m.stream;
    request.group = m.group;
    request.payload = m.payload;
    if (m.message_key) request.message_key = std::string(*m.message_key);
    std::string broke;
    bool timed_out = false;
    try {
      if (slot.channel->send(request)) {
        const auto reply =
            slot.channel->receive(Clock::now() + o_.handler_timeout + kAnswerGrace, &timed_out);
        if (reply) {
          const auto* r = std::get_if<ReplyFrame>(&*reply);
          if (r != nullptr && r->seq == request.seq) return to_outcome(*r);
          broke = "handler process broke the protocol: an unexpected frame";
        }
      }
    } catch (const FrameError& e) {
      broke = std::string("handler process broke the protocol: ") + e.what();
    }
    return crashed(slot, m, timed_out, broke);
  }

  Outcome crashed(Slot& slot, const plugin_host::MessageView& m, bool timed_out,
                  const std::string& broke) {
    if (timed_out || !broke.empty()) ::kill(slot.pid, SIGKILL);
    const int status = reap(slot.pid, kExitGrace);
    std::string error = describe_exit(status);
    if (timed_out) {
      error += fmt::format(": killed, no answer within handler_timeout + {}s",
                           kAnswerGrace.count() / 1000);
    } else if (!broke.empty()) {
      error += ": " + broke;
    }
    const auto now = Clock::now();
    slot.crashes = now - slot.started >= o_.restart.stable_after ? 1 : slot.crashes + 1;
    const auto delay = went_down(slot, now);
    spdlog::error(
        "handler-process-crashed stream={} group={} pid={} {} message_id={} attempt={} "
        "restart_in_ms={}: {}",
        o_.stream, o_.group, slot.pid,
        WIFSIGNALED(status) ? fmt::format("signal={}", WTERMSIG(status))
                            : fmt::format("status={}", WEXITSTATUS(status)),
        m.id, m.attempt, delay.count(), error);
    return {OutcomeKind::kRetry, {}, sanitize_utf8(error, 8192)};
  }

  // Marks the slot down; returns the delay before its restart.
  std::chrono::milliseconds went_down(Slot& slot, Clock::time_point now) {
    slot.channel.reset();
    const auto delay = restart_delay(o_.restart, std::max(slot.crashes, 1), random_.next01());
    std::lock_guard lock(mu_);
    slot.restart_at = now + delay;
    return delay;
  }

  // Spawns the slot's child and waits for its Ready; throws PluginLoadError / runtime_error.
  void start(Slot& slot) {
    auto child = launcher_.spawn([&] {
      return spawn_child(o_.executable, o_.stream + "/" + o_.group, o_.log_level, o_.log_format);
    });
    InitFrame init{o_.plugin_dir.string(), o_.plugin, o_.handler, o_.stream, o_.group,
                   o_.config_json};
    std::optional<Frame> answer;
    bool timed_out = false;
    std::string problem;
    try {
      if (child.channel->send(init)) {
        answer = child.channel->receive(Clock::now() + kStartTimeout, &timed_out);
      }
    } catch (const FrameError& e) {
      problem = e.what();
    }
    if (answer) {
      if (const auto* ready = std::get_if<ReadyFrame>(&*answer)) {
        if (plugin_name_.empty()) plugin_name_ = ready->plugin_name;
        concurrent_ = ready->concurrent;
        slot.pid = child.pid;
        slot.channel = std::move(child.channel);
        slot.started = Clock::now();
        spdlog::info("handler-process-started stream={} group={} pid={} plugin={} handler={}",
                     o_.stream, o_.group, slot.pid, o_.plugin, o_.handler);
        return;
      }
    }
    if (answer || timed_out || !problem.empty()) ::kill(child.pid, SIGKILL);
    child.channel.reset();
    const int status = reap(child.pid, kExitGrace);
    if (answer) {
      if (const auto* failed = std::get_if<FailedFrame>(&*answer)) {
        throw plugin_host::PluginLoadError(failed->path, failed->symbol, failed->expected,
                                           failed->found, failed->hint);
      }
      problem = "an unexpected first frame";
    }
    const std::string found =
        timed_out         ? fmt::format("no answer within {}s", kStartTimeout.count() / 1000)
        : problem.empty() ? describe_exit(status)
                          : "a protocol error: " + problem;
    throw plugin_host::PluginLoadError(
        o_.plugin, fmt::format("handler '{}' in a handler process", o_.handler),
        "a handler process that loads the plugin and creates the handler", found,
        "the plugin crashed or stopped while loading; run the group with isolation = "
        "\"inprocess\" under a debugger, or check the host's stderr above");
  }

  Outcome to_outcome(const ReplyFrame& r) {
    std::string error = sanitize_utf8(r.error, 8192);
    switch (r.kind) {
      case static_cast<uint8_t>(OutcomeKind::kOk):
        return {OutcomeKind::kOk, {}, {}};
      case static_cast<uint8_t>(OutcomeKind::kRetry):
        return {OutcomeKind::kRetry, {}, std::move(error)};
      case static_cast<uint8_t>(OutcomeKind::kTerminal):
        return {OutcomeKind::kTerminal, {}, std::move(error)};
      case static_cast<uint8_t>(OutcomeKind::kDelay):
        if (r.delay_ms >= 0) {
          return {OutcomeKind::kDelay,
                  std::min(std::chrono::milliseconds(r.delay_ms), plugin_host::kMaxDelay),
                  std::move(error)};
        }
        [[fallthrough]];
      default:
        return {OutcomeKind::kRetry,
                {},
                fmt::format("handler process sent an invalid outcome (kind {}, delay {} ms)",
                            r.kind, r.delay_ms)};
    }
  }

  const IsolationOptions o_;
  Launcher launcher_;
  RandomSource random_;
  std::mutex mu_;  // guards Slot::busy and restart_at; a busy slot belongs to its caller
  std::condition_variable cv_;
  std::vector<Slot> slots_;
  std::atomic<uint64_t> seq_{0};
  std::string plugin_name_;  // set by the first start, before any handle()
  std::atomic<bool> concurrent_{false};
};

}  // namespace

std::unique_ptr<plugin_host::HandlerInstance> make_isolated_handler(IsolationOptions options) {
  auto handler = std::make_unique<IsolatedHandler>(std::move(options));
  handler->start_all();
  return handler;
}

}  // namespace sqlstreams::isolation
