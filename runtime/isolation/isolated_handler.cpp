// The host side of process isolation: a pool of handler children, one request each at a time.
#include <fmt/format.h>
#include <poll.h>
#include <signal.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "common/random.hpp"
#include "common/utf8.hpp"
#include "isolation/isolation.hpp"
#include "isolation/stderr_pump.hpp"

namespace sqlstreams::isolation {
namespace {

using plugin_host::Outcome;
using plugin_host::OutcomeKind;
using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kStartTimeout{60'000};  // spawn → Ready
constexpr std::chrono::milliseconds kExitGrace{5'000};      // EOF/stop → reaped, then SIGKILL
constexpr size_t kMaxBatch = 64;  // messages per round trip to a child (max_batch())

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

struct ChildSlot {
  pid_t pid = -1;
  std::unique_ptr<Channel> channel;         // null while down
  std::unique_ptr<StderrPump> stderr_pump;  // the child's stderr; ended once it is reaped
  bool busy = false;                        // a caller owns it (running a request or restarting it)
  int crashes = 0;                          // consecutive crashes (restart backoff)
  Clock::time_point started{};
  Clock::time_point restart_at{};
  uint64_t policy_sent = 0;  // the emit policy generation this child has (0: none)
};

// Options whose stderr budget sums every child's dropped lines (and their bytes) in one counter.
IsolationOptions counting_drops(IsolationOptions o) {
  o.stderr_budget.dropped_lines_total = std::make_shared<std::atomic<uint64_t>>(0);
  o.stderr_budget.dropped_bytes_total = std::make_shared<std::atomic<uint64_t>>(0);
  return o;
}

class IsolatedHandler final : public plugin_host::HandlerInstance {
 public:
  explicit IsolatedHandler(IsolationOptions o)
      : o_(counting_drops(std::move(o))), slots_(static_cast<size_t>(std::max(o_.children, 1))) {}

  ~IsolatedHandler() override {
    for (auto& s : slots_) {
      if (!s.channel) continue;
      s.channel.reset();  // the child reads EOF and exits
      const int status = reap(s.pid, kExitGrace);
      s.stderr_pump.reset();  // logs what the child wrote last, closes the pipe
      spdlog::debug("handler-process-stopped stream={} group={} pid={}: {}", o_.stream, o_.group,
                    s.pid, describe_exit(status));
    }
  }

  void start_all() {
    for (auto& s : slots_) start(s);  // throws PluginLoadError
  }

  Outcome handle(const plugin_host::MessageView& m) noexcept override {
    struct One final : plugin_host::BatchSink {
      Outcome out{OutcomeKind::kRetry, {}, "host error: no outcome"};
      bool on_outcome(size_t, const Outcome& o) noexcept override {
        out = o;
        return true;
      }
    } one;
    (void)handle_batch(std::span<const plugin_host::MessageView>(&m, 1), one);
    return std::move(one.out);
  }

  size_t max_batch() const override { return kMaxBatch; }
  uint64_t stderr_lines_dropped() const override {
    return o_.stderr_budget.dropped_lines_total->load();
  }
  uint64_t stderr_bytes_dropped() const override {
    return o_.stderr_budget.dropped_bytes_total->load();
  }
  // The longest a call can take: a message waits for a free child (acquire: at most
  // handler_timeout + 2 grace), may start a down one (kStartTimeout, then the reap), and then
  // runs until its answer or the kill (handler_timeout + grace). A start slower than the handler
  // timeout (a plugin that loads a model at create, or children restarting at once on a loaded
  // machine) is the start's to judge, never the watchdog's.
  std::optional<std::chrono::milliseconds> enforced_timeout() const override {
    return 2 * o_.handler_timeout + 3 * kAnswerGrace + kStartTimeout + kExitGrace;
  }

  size_t handle_batch(std::span<const plugin_host::MessageView> messages,
                      plugin_host::BatchSink& sink) noexcept override {
    if (messages.empty()) return 0;
    size_t answered = 0;
    try {
      Outcome unavailable;
      ChildSlot* slot = acquire(unavailable);
      if (slot == nullptr) {  // the same answer for the whole batch: none of it can run now
        for (answered = 0; answered < messages.size();) {
          if (!sink.on_outcome(answered++, unavailable)) break;
        }
        return answered;
      }
      struct Release {
        IsolatedHandler* self;
        ChildSlot* slot;
        ~Release() { self->release(*slot); }
      } release_when_done{this, slot};
      return run(*slot, messages, sink, answered);
    } catch (const std::exception& e) {
      if (answered >= messages.size()) return answered;
      (void)sink.on_outcome(
          answered, {OutcomeKind::kRetry,
                     {},
                     sanitize_utf8(std::string("host error while handling: ") + e.what(), 8192)});
      return answered + 1;
    }
  }

  bool concurrent() const override { return concurrent_; }
  const std::string& plugin_name() const override { return plugin_name_; }
  // Each child gets the policy before its next request (run()), a restarted one too.
  void set_emit_policy(std::shared_ptr<const plugin_host::EmitPolicy> policy) override {
    std::lock_guard lock(mu_);
    emit_policy_ = std::move(policy);
    ++policy_generation_;
  }

 private:
  // A free child (or a down one due for restart), waiting while every child is busy; nullptr
  // with `unavailable` set when none is up and none is due (kDelay until the first restart is
  // due), or when every child stayed busy past a whole handler timeout (kRetry).
  ChildSlot* acquire(Outcome& unavailable) {
    std::unique_lock lock(mu_);
    const auto give_up = Clock::now() + o_.handler_timeout + 2 * kAnswerGrace;
    for (;;) {
      const auto now = Clock::now();
      ChildSlot* due = nullptr;
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
      if (!any_busy) {
        // Every child is down and none is due: the message never ran, so it is not charged an
        // attempt (a DELAY spends no retry budget); it comes back when a child may be up.
        const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next_restart - now);
        unavailable = {OutcomeKind::kDelay, std::max(wait, std::chrono::milliseconds(1)),
                       "handler process restarting"};
        return nullptr;
      }
      if (now >= give_up) {
        unavailable = {OutcomeKind::kRetry, {}, "handler process busy"};
        return nullptr;
      }
      cv_.wait_until(lock, std::min(next_restart, give_up));
    }
  }

  void release(ChildSlot& slot) {
    {
      std::lock_guard lock(mu_);
      slot.busy = false;
    }
    cv_.notify_all();
  }

  // Writes every request of the batch while reading the replies as they come (a full socket
  // in either direction never blocks the other), handing each outcome to `sink` in order.
  // `answered` counts the outcomes handed over. Returns the messages that got an outcome.
  size_t run(ChildSlot& slot, std::span<const plugin_host::MessageView> messages,
             plugin_host::BatchSink& sink, size_t& answered) {
    if (!slot.channel) {
      try {
        start(slot);
      } catch (const std::exception& e) {
        ++slot.crashes;
        went_down(slot, Clock::now());
        (void)sink.on_outcome(
            0, {OutcomeKind::kRetry,
                {},
                sanitize_utf8(std::string("handler process restarting: ") + e.what(), 8192)});
        return 1;
      }
    }
    if (died_while_idle(slot)) {
      // Gone between batches (the OOM killer, a plugin's own thread): the batch never ran, so
      // it is not charged an attempt (runtime/isolation/README.md#the-supervisor); it comes back
      // when the child may be up.
      (void)crashed(slot, nullptr, false, "it died between messages; no message was charged");
      const auto wait =
          std::chrono::ceil<std::chrono::milliseconds>(restart_at(slot) - Clock::now());
      (void)sink.on_outcome(0, {OutcomeKind::kDelay, std::max(wait, std::chrono::milliseconds(1)),
                                "handler process restarting"});
      return 1;
    }
    const uint64_t first_seq = seq_.fetch_add(messages.size()) + 1;
    std::string out;
    std::shared_ptr<const plugin_host::EmitPolicy> policy;
    uint64_t generation = 0;
    {
      std::lock_guard lock(mu_);
      policy = emit_policy_;
      generation = policy_generation_;
    }
    if (policy && slot.policy_sent != generation) {
      EmitPolicyFrame f{{}, policy->max_count, policy->max_bytes};
      for (const auto& [stream, max] : policy->max_payload_bytes) {
        f.max_payload_bytes.emplace_back(stream, max);
      }
      out += encode(f);
      slot.channel->set_max_frame_bytes(
          max_frame_from_emitting_child(policy->max_count, policy->max_bytes));
      slot.policy_sent = generation;
    }
    for (size_t i = 0; i < messages.size(); ++i) {
      out += encode(request_of(messages[i], first_seq + i));
    }
    Channel& channel = *slot.channel;
    size_t sent = 0;
    bool timed_out = false;
    std::string broke;
    auto deadline = Clock::now() + o_.handler_timeout + kAnswerGrace;
    try {
      while (answered < messages.size()) {
        while (auto frame = channel.next_buffered()) {
          const auto* r = std::get_if<ReplyFrame>(&*frame);
          if (r == nullptr || r->seq != first_seq + answered) {
            throw FrameError("an unexpected frame");
          }
          const bool go_on = sink.on_outcome(answered, to_outcome(*r, policy.get()));
          ++answered;
          if (answered == messages.size()) return answered;
          if (!go_on) {
            stopped(slot, messages[answered - 1]);
            return answered;
          }
          deadline = Clock::now() + o_.handler_timeout + kAnswerGrace;
        }
        pollfd p{channel.fd(), static_cast<short>(POLLIN | (sent < out.size() ? POLLOUT : 0)), 0};
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        const int ready = ::poll(&p, 1, static_cast<int>(std::max<int64_t>(left.count(), 0)));
        if (ready < 0 && errno == EINTR) continue;
        if (ready == 0) {
          timed_out = true;
          break;
        }
        if ((p.revents & POLLOUT) != 0 && sent < out.size()) {
          const ssize_t n = channel.send_some(out.data() + sent, out.size() - sent);
          // A child gone mid-write: what it answered is still to be read, then EOF.
          sent = n < 0 ? out.size() : sent + static_cast<size_t>(n);
        }
        if ((p.revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !channel.read_available()) {
          while (auto frame = channel.next_buffered()) {  // answers written before it died
            const auto* r = std::get_if<ReplyFrame>(&*frame);
            if (r == nullptr || r->seq != first_seq + answered) {
              throw FrameError("an unexpected frame");
            }
            (void)sink.on_outcome(answered, to_outcome(*r, policy.get()));
            if (++answered == messages.size()) break;
          }
          break;
        }
      }
    } catch (const FrameError& e) {
      broke = std::string("handler process broke the protocol: ") + e.what();
    }
    if (answered == messages.size()) {  // every answer arrived, then the channel closed
      (void)crashed(slot, nullptr, false, broke);
      return answered;
    }
    // The child ran the batch in order: the first unanswered message is the one it was running.
    (void)sink.on_outcome(answered, crashed(slot, &messages[answered], timed_out, broke));
    return answered + 1;
  }

  // Between batches a child writes nothing, so a readable or hung-up channel means it is gone
  // (or broke the protocol, which crashed() handles alike).
  static bool died_while_idle(ChildSlot& slot) {
    pollfd p{slot.channel->fd(), POLLIN, 0};
    return ::poll(&p, 1, 0) > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR)) != 0;
  }

  Clock::time_point restart_at(const ChildSlot& slot) {
    std::lock_guard lock(mu_);
    return slot.restart_at;
  }

  static RequestFrame request_of(const plugin_host::MessageView& m, uint64_t seq) {
    RequestFrame request;
    request.seq = seq;
    request.id = m.id;
    request.schema_version = m.schema_version;
    request.attempt = m.attempt;
    request.created_at_unix_ms = m.created_at_unix_ms;
    request.stream = m.stream;
    request.group = m.group;
    request.payload = m.payload;
    if (m.message_key) request.message_key = std::string(*m.message_key);
    return request;
  }

  // The caller stopped the batch after `last`: the child may be running the next message
  // already (it never waits for the host between messages), which nobody wants any more. It is
  // killed and restarted after the shortest backoff, without counting a crash.
  void stopped(ChildSlot& slot, const plugin_host::MessageView& last) {
    ::kill(slot.pid, SIGKILL);
    (void)reap(slot.pid, kExitGrace);
    spdlog::warn(
        "handler-process-stopped stream={} group={} pid={} after_message_id={}: the batch was "
        "stopped (handler timeout or lease); the child is restarted",
        o_.stream, o_.group, slot.pid, last.id);
    slot.crashes = 0;
    went_down(slot, Clock::now());
  }

  // `m` is the message the child was running (null: it died between batches).
  Outcome crashed(ChildSlot& slot, const plugin_host::MessageView* m, bool timed_out,
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
        m ? m->id : 0, m ? m->attempt : 0, delay.count(), error);
    return {OutcomeKind::kRetry, {}, sanitize_utf8(error, 8192)};
  }

  // Marks the slot down; returns the delay before its restart.
  // The child is reaped: its stderr pump logs what is left and closes the pipe.
  std::chrono::milliseconds went_down(ChildSlot& slot, Clock::time_point now) {
    slot.channel.reset();
    slot.stderr_pump.reset();
    const auto delay = restart_delay(o_.restart, std::max(slot.crashes, 1), random_.next01());
    std::lock_guard lock(mu_);
    slot.restart_at = now + delay;
    return delay;
  }

  // Spawns the slot's child and waits for its Ready; throws PluginLoadError / runtime_error.
  void start(ChildSlot& slot) {
    auto child = launcher_.spawn([&] {
      return spawn_child(o_.executable, o_.stream + "/" + o_.group, o_.log_level, o_.log_format,
                         o_.image_fd);
    });
    // From the start: what a plugin prints while it loads is logged too.
    auto pump = std::make_unique<StderrPump>(std::move(child.stderr_read), o_.stream, o_.group,
                                             child.pid, o_.stderr_budget);
    InitFrame init{o_.plugin_dir.string(), o_.plugin,      o_.handler, o_.stream, o_.group,
                   o_.config_json,         o_.image_sha256};
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
        slot.stderr_pump = std::move(pump);
        slot.started = Clock::now();
        slot.policy_sent = 0;  // a new child: it gets the emit policy before its first request
        spdlog::info(
            "handler-process-started stream={} group={} pid={} plugin={} handler={} sha256={}",
            o_.stream, o_.group, slot.pid, o_.plugin, o_.handler,
            o_.image_sha256.empty() ? "-" : o_.image_sha256.substr(0, 16));
        return;
      }
    }
    if (answer || timed_out || !problem.empty()) ::kill(child.pid, SIGKILL);
    child.channel.reset();
    const int status = reap(child.pid, kExitGrace);
    pump.reset();  // what the child printed before it failed is in the log before the error
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
        "\"inprocess\" under a debugger, or check the host's log above (child-stderr)");
  }

  Outcome to_outcome(const ReplyFrame& r, const plugin_host::EmitPolicy* policy) {
    std::string error = sanitize_utf8(r.error, 8192);
    switch (r.kind) {
      case static_cast<uint8_t>(OutcomeKind::kOk): {
        Outcome ok{OutcomeKind::kOk, {}, {}};
        if (auto why = take_child_outputs(policy, r.outputs, ok.outputs); !why.empty()) {
          return {
              OutcomeKind::kRetry,
              {},
              sanitize_utf8("handler process sent outputs outside the group's emit policy: " + why,
                            8192)};
        }
        return ok;
      }
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
  std::mutex mu_;  // guards ChildSlot::busy and restart_at; a busy slot belongs to its caller
  std::condition_variable cv_;
  std::vector<ChildSlot> slots_;
  std::atomic<uint64_t> seq_{0};
  std::shared_ptr<const plugin_host::EmitPolicy> emit_policy_;  // guarded by mu_
  uint64_t policy_generation_ = 0;                              // guarded by mu_
  std::string plugin_name_;  // set by the first start, before any handle()
  std::atomic<bool> concurrent_{false};
};

}  // namespace

std::string take_child_outputs(const plugin_host::EmitPolicy* policy,
                               const std::vector<OutputFrame>& outputs,
                               std::vector<plugin_host::Output>& into) {
  if (outputs.empty()) return "";
  if (policy == nullptr) return "outputs from a group that does not emit";
  if (outputs.size() > policy->max_count) {
    return fmt::format("{} outputs (max_emits_per_message {})", outputs.size(), policy->max_count);
  }
  std::vector<plugin_host::Output> taken;
  int64_t bytes = 0;
  for (const auto& o : outputs) {
    plugin_host::Output output{o.stream, o.payload, o.schema_version, o.key, o.idempotency_key};
    if (auto why = plugin_host::check_output(*policy, output); !why.empty()) return why;
    bytes += static_cast<int64_t>(output.payload.size());
    if (bytes > policy->max_bytes) {
      return fmt::format("more than max_emit_bytes_per_message ({}) of payloads",
                         policy->max_bytes);
    }
    taken.push_back(std::move(output));
  }
  into.insert(into.end(), std::make_move_iterator(taken.begin()),
              std::make_move_iterator(taken.end()));
  return "";
}

std::unique_ptr<plugin_host::HandlerInstance> make_isolated_handler(IsolationOptions options) {
  auto handler = std::make_unique<IsolatedHandler>(std::move(options));
  handler->start_all();
  return handler;
}

}  // namespace sqlstreams::isolation
