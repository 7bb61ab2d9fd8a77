// chaos.so — handler `chaos` for the fault-injecting history checker (tests/chaos): every
// message's behaviour is behaviour_of(seed, group, id) (chaos_plugin.hpp), and every call is
// recorded when it returns as one line
//   "<stream> <group> <id> <attempt> <outcome> <tag> <pid> <key> <seq> <start_ns> <end_ns>"
// appended with a single write(2) to record_file (O_APPEND: lines of concurrent hosts never
// interleave). key is the message key ("-" for none; whitespace replaced by '_'), seq the
// payload's per-key sequence number (-1 for none), start/end CLOCK_MONOTONIC in ns (one clock
// for every process of the machine: the checker compares runs of different hosts). outcome is
// ok | retry | terminal | delay | hang (a call that slept past handler_timeout: its host gave
// up on it, whatever it returned). A call whose host died in it leaves no line. Config:
// seed (required), record_file (required), slow_ms (20), hang_ms (60000), delay_ms (100),
// emit_to ("": none) — a call that returns OK first emits outputs_of(id) messages to that stream
// (ABI 1.3, the group's `emits`): {"tag": "chain-<id>-<i>-<pid>-<start_ns>", "src":
// "<stream>/<group>", "origin": id, "i": i} for i = 0 .. outputs_of(id) - 1
// (tests/chaos/README.md#the-chain-chaosoptionschain-on-by-default).
// Handler `chaos-async` (ABI 1.2): the same behaviours, config and records, completed from a timer
// thread of the instance instead of the calling thread: OK, RETRY, TERMINAL and DELAY at once,
// slow after slow_ms, a hang after hang_ms (past handler_timeout: the host drops it). Its outputs
// are emitted in handle_async() when the outcome will be OK (or a hang), its line is written when
// it completes. Completions still pending when the instance goes are dropped (no line, as a call
// its host died in). Threading: concurrent; the instances' state is immutable after construction
// but for the timer thread's queue (its own mutex).
#include "chaos_plugin.hpp"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>
#include <sqlstreams/plugin.hpp>
#include <string>
#include <thread>

namespace sqlstreams::chaos {

// What both handlers share: the config, the record file and the record line.
class Recorder {
 public:
  struct Settings {
    uint64_t seed = 0;
    std::string record_file;
    int64_t slow_ms = 20, hang_ms = 60000, delay_ms = 100;
    std::string emit_to;
  };

  static Settings parse(const nlohmann::json& config) {
    sqlstreams::ConfigReader r(config);
    Settings s;
    s.seed = static_cast<uint64_t>(r.get<int64_t>("seed", -1));
    if (!r.has("seed")) throw sqlstreams::ConfigError("config key 'seed' is required");
    s.record_file = r.get<std::string>("record_file", "");
    if (s.record_file.empty())
      throw sqlstreams::ConfigError("config key 'record_file' is required");
    s.slow_ms = r.get<int64_t>("slow_ms", s.slow_ms);
    s.hang_ms = r.get<int64_t>("hang_ms", s.hang_ms);
    s.delay_ms = r.get<int64_t>("delay_ms", s.delay_ms);
    s.emit_to = r.get<std::string>("emit_to", "");
    r.reject_unknown_keys();
    return s;
  }
  explicit Recorder(const nlohmann::json& config) : settings_(parse(config)) {
    fd_ = ::open(settings_.record_file.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0) {
      throw std::runtime_error("cannot open record_file '" + settings_.record_file +
                               "': " + std::strerror(errno));
    }
  }
  ~Recorder() { ::close(fd_); }
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  struct TagSeq {
    std::string tag = "-";
    int64_t seq = -1;
  };
  struct Call {
    TagSeq payload;
    int64_t start_ns = 0;
  };
  static TagSeq tag_and_seq(std::string_view payload) {
    TagSeq out;
    try {
      const auto j = nlohmann::json::parse(payload);
      if (j.is_object() && j.contains("tag") && j["tag"].is_string()) out.tag = j["tag"];
      if (j.is_object() && j.contains("seq") && j["seq"].is_number_integer()) out.seq = j["seq"];
    } catch (const std::exception&) {
    }
    return out;
  }
  static int64_t now_ns() {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
  }
  // Emits the chain's outputs of a call that returns OK (emit_to set); false when the host
  // refused them (it gave up on the call): the call is then a RETRY, recorded as one.
  bool emit_outputs(const sqlstreams::MessageContext& m, const Call& call,
                    std::string* error) const {
    if (settings_.emit_to.empty()) return true;
    try {
      for (int i = 0; i < outputs_of(m.id); ++i) {
        const std::string tag = "chain-" + std::to_string(m.id) + "-" + std::to_string(i) + "-" +
                                std::to_string(::getpid()) + "-" + std::to_string(call.start_ns);
        m.emit_json(settings_.emit_to, R"({"tag": ")" + tag + R"(", "src": ")" +
                                           std::string(m.stream) + "/" + std::string(m.group) +
                                           R"(", "origin": )" + std::to_string(m.id) +
                                           R"(, "i": )" + std::to_string(i) + "}");
      }
    } catch (const sqlstreams::EmitError& e) {
      *error = std::string("chaos: emit refused: ") + e.what();
      return false;
    }
    return true;
  }
  void record(const sqlstreams::MessageContext& m, const Call& call, const char* outcome) const {
    const std::string line = std::string(m.stream) + " " + std::string(m.group) + " " +
                             std::to_string(m.id) + " " + std::to_string(m.attempt) + " " +
                             outcome + " " + call.payload.tag + " " + std::to_string(::getpid()) +
                             " " + key_of(m) + " " + std::to_string(call.payload.seq) + " " +
                             std::to_string(call.start_ns) + " " + std::to_string(now_ns()) + "\n";
    if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
      throw std::runtime_error(std::string("cannot append to record_file: ") +
                               std::strerror(errno));
    }
  }
  const Settings& settings() const { return settings_; }

 private:
  static std::string key_of(const sqlstreams::MessageContext& m) {
    if (!m.message_key || m.message_key->empty()) return "-";
    std::string k(*m.message_key);
    for (char& c : k) {
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') c = '_';
    }
    return k;
  }

  const Settings settings_;
  int fd_ = -1;
};

class ChaosHandler : public sqlstreams::TypedHandler<std::string_view> {
 public:
  static constexpr const char* kName = "chaos";
  static constexpr int kSchemaVersion = 1;
  static constexpr bool kConcurrent = true;

  static void validate(const nlohmann::json& config) { Recorder::parse(config); }
  explicit ChaosHandler(const nlohmann::json& config) : recorder_(config) {}

  sqlstreams::Result handle(const std::string_view& payload,
                            const sqlstreams::MessageContext& m) override {
    const Behaviour b = behaviour_of(recorder_.settings().seed, m.group, m.id);
    const Recorder::Call call{Recorder::tag_and_seq(payload), Recorder::now_ns()};
    switch (b) {
      case Behaviour::kOk:
        return done(m, call, "ok", sqlstreams::ok());
      case Behaviour::kSlow:
        sleep_ms(recorder_.settings().slow_ms);
        return done(m, call, "ok", sqlstreams::ok());
      case Behaviour::kFlaky:
        if (m.attempt == 1) return done(m, call, "retry", sqlstreams::retry("chaos: flaky"));
        return done(m, call, "ok", sqlstreams::ok());
      case Behaviour::kFail:
        return done(m, call, "retry", sqlstreams::retry("chaos: always fails"));
      case Behaviour::kTerminal:
        recorder_.record(m, call, "terminal");
        sqlstreams::terminal("chaos: terminal");
      case Behaviour::kDelayOnce:
        if (m.attempt == 1)
          return done(m, call, "delay", sqlstreams::delay(recorder_.settings().delay_ms));
        return done(m, call, "ok", sqlstreams::ok());
      case Behaviour::kDelayFail:
        if (m.attempt <= 2)
          return done(m, call, "delay", sqlstreams::delay(recorder_.settings().delay_ms));
        return done(m, call, "retry", sqlstreams::retry("chaos: fails after delays"));
      case Behaviour::kTimeout:
        if (m.attempt == 1) {
          sleep_ms(recorder_.settings().hang_ms);
          return done(m, call, "hang", sqlstreams::ok());
        }
        return done(m, call, "ok", sqlstreams::ok());
    }
    return sqlstreams::retry("chaos: unknown behaviour");
  }

 private:
  static void sleep_ms(int64_t ms) {
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  sqlstreams::Result done(const sqlstreams::MessageContext& m, const Recorder::Call& call,
                          const char* outcome, sqlstreams::Result r) const {
    std::string refused;
    if (r.code == sqlstreams::Code::kOk && !recorder_.emit_outputs(m, call, &refused)) {
      recorder_.record(m, call, "retry");  // a call the host gave up on: not OK either
      return sqlstreams::retry(refused);
    }
    recorder_.record(m, call, outcome);
    return r;
  }

  Recorder recorder_;
};

// chaos-async's completing thread: runs each job at its time, in time order.
class TimerThread {
 public:
  using Clock = std::chrono::steady_clock;
  TimerThread() : thread_([this] { run(); }) {}
  ~TimerThread() {
    std::multimap<Clock::time_point, std::function<void()>> left;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
      left.swap(jobs_);
    }
    cv_.notify_all();
    thread_.join();
    // `left` goes here, outside the lock: its Completions are dropped (the host drops them).
  }
  TimerThread(const TimerThread&) = delete;
  TimerThread& operator=(const TimerThread&) = delete;

  void at(Clock::time_point due, std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.emplace(due, std::move(job));
    }
    cv_.notify_one();
  }

 private:
  void run() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stopping_) {
      if (jobs_.empty()) {
        cv_.wait(lock);
        continue;
      }
      const auto due = jobs_.begin()->first;
      if (Clock::now() < due) {
        cv_.wait_until(lock, due);
        continue;
      }
      auto job = std::move(jobs_.begin()->second);
      jobs_.erase(jobs_.begin());
      lock.unlock();
      try {
        job();
      } catch (const std::exception&) {  // the record could not be written: no line, no outcome
      }
      lock.lock();
    }
  }

  std::mutex mu_;
  std::condition_variable cv_;
  std::multimap<Clock::time_point, std::function<void()>> jobs_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the rest is built
};

class ChaosAsyncHandler : public sqlstreams::AsyncTypedHandler<std::string_view> {
 public:
  static constexpr const char* kName = "chaos-async";
  static constexpr int kSchemaVersion = 1;
  static constexpr bool kConcurrent = true;

  static void validate(const nlohmann::json& config) { Recorder::parse(config); }
  explicit ChaosAsyncHandler(const nlohmann::json& config) : recorder_(config) {}

  void handle_async(std::string_view payload, const sqlstreams::MessageContext& m,
                    sqlstreams::Completion done) override {
    const auto& cfg = recorder_.settings();
    const Behaviour b = behaviour_of(cfg.seed, m.group, m.id);
    const Recorder::Call call{Recorder::tag_and_seq(payload), Recorder::now_ns()};
    const char* outcome = "ok";
    sqlstreams::Result r = sqlstreams::ok();
    int64_t after_ms = 0;
    switch (b) {
      case Behaviour::kOk:
        break;
      case Behaviour::kSlow:
        after_ms = cfg.slow_ms;
        break;
      case Behaviour::kFlaky:
        if (m.attempt == 1) outcome = "retry", r = sqlstreams::retry("chaos: flaky");
        break;
      case Behaviour::kFail:
        outcome = "retry", r = sqlstreams::retry("chaos: always fails");
        break;
      case Behaviour::kTerminal:
        outcome = "terminal",
        r = sqlstreams::Result{sqlstreams::Code::kTerminal, {}, "chaos: terminal"};
        break;
      case Behaviour::kDelayOnce:
        if (m.attempt == 1) outcome = "delay", r = sqlstreams::delay(cfg.delay_ms);
        break;
      case Behaviour::kDelayFail:
        if (m.attempt <= 2) {
          outcome = "delay", r = sqlstreams::delay(cfg.delay_ms);
        } else {
          outcome = "retry", r = sqlstreams::retry("chaos: fails after delays");
        }
        break;
      case Behaviour::kTimeout:
        if (m.attempt == 1) outcome = "hang", after_ms = cfg.hang_ms;
        break;
    }
    std::string refused;
    if (r.code == sqlstreams::Code::kOk && !recorder_.emit_outputs(m, call, &refused)) {
      outcome = "retry", r = sqlstreams::retry(refused), after_ms = 0;
    }
    // The context's views stay valid until `done` is completed (plugin.hpp).
    auto pending = std::make_shared<sqlstreams::Completion>(std::move(done));
    auto complete = [this, m, call, outcome, r, pending]() {
      recorder_.record(m, call, outcome);
      pending->complete(r);
    };
    timers_.at(TimerThread::Clock::now() + std::chrono::milliseconds(after_ms), complete);
  }

 private:
  Recorder recorder_;
  TimerThread timers_;  // after recorder_: its thread stops before the recorder goes
};

}  // namespace sqlstreams::chaos

SQLSTREAMS_PLUGIN("chaos", "1.0.0", sqlstreams::chaos::ChaosHandler,
                  sqlstreams::chaos::ChaosAsyncHandler)
