// async_io.so — handler `timer-io`: an asynchronous (ABI 1.2) handler standing for one that waits
// on the network. handle_async() only files the message with a timer thread (TimerQueue) and
// returns; that one thread completes every message when its "I/O" is done, so thousands of
// messages are in flight without a thread each (the group's max_in_flight bounds them).
// Config (all optional):
//   delay_ms = 100          how long each message's "I/O" takes (0..600000)
//   on_destroy = "drop"     what happens to messages still pending when the group stops: "drop"
//                           (their Completions are destroyed: the host drops them), or
//                           "complete_late" (completed OK by a detached thread 50 ms after the
//                           instance is gone — harmless, the host drops and counts them)
// Payload (optional fields, any others ignored): {"delay_ms": N} overrides the delay for this
// message; {"outcome": "ok" | "retry" | "terminal" | "delay"} chooses the result;
// {"emit_to": "stream"} emits {"from": <message id>} to that stream when the message is accepted
// (ABI 1.3: written only if the later completion is OK and commits).
// Threading: concurrent; handle_async() from any number of host threads, completions from the
// timer thread.
#include <chrono>
#include <sqlstreams/plugin.hpp>
#include <string>
#include <thread>

#include "timer_queue.hpp"

namespace async_io {

struct Io {
  int64_t delay_ms = -1;  // -1: the configured delay
  std::string outcome = "ok";
  std::string emit_to;  // "" = emit nothing
};

inline void from_json(const nlohmann::json& j, Io& io) {
  if (!j.is_object()) return;
  if (auto it = j.find("delay_ms"); it != j.end() && it->is_number_integer()) {
    io.delay_ms = it->get<int64_t>();
  }
  if (auto it = j.find("outcome"); it != j.end() && it->is_string()) {
    io.outcome = it->get<std::string>();
  }
  if (auto it = j.find("emit_to"); it != j.end() && it->is_string()) {
    io.emit_to = it->get<std::string>();
  }
}

class TimerIo : public sqlstreams::AsyncTypedHandler<Io> {
 public:
  static constexpr const char* kName = "timer-io";
  static constexpr int kSchemaVersion = 1;
  static constexpr bool kConcurrent = true;

  static void validate(const nlohmann::json& config) { (void)Settings::read(config); }

  explicit TimerIo(const nlohmann::json& config) : settings_(Settings::read(config)) {}

  ~TimerIo() override {
    if (!settings_.complete_late) return;  // ~TimerQueue drops what is pending
    auto pending = timers_.release_pending();
    std::thread([pending = std::move(pending)]() mutable {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));  // well after destroy()
      for (auto& done : pending) done.complete(sqlstreams::ok());
    }).detach();
  }

  void handle_async(Io io, const sqlstreams::MessageContext& message,
                    sqlstreams::Completion done) override {
    if (!io.emit_to.empty()) {
      message.emit_json(io.emit_to, "{\"from\": " + std::to_string(message.id) + "}");
    }
    const int64_t ms = io.delay_ms >= 0 ? io.delay_ms : settings_.delay_ms;
    timers_.add(TimerQueue::Clock::now() + std::chrono::milliseconds(ms), std::move(done),
                result_of(io.outcome));
  }

 private:
  struct Settings {
    int64_t delay_ms = 100;
    bool complete_late = false;
    static Settings read(const nlohmann::json& config) {
      sqlstreams::ConfigReader r(config);
      Settings s;
      s.delay_ms = r.get<int64_t>("delay_ms", 100);
      if (s.delay_ms < 0 || s.delay_ms > 600'000) {
        throw sqlstreams::ConfigError::at("delay_ms", "delay_ms must be 0..600000");
      }
      const std::string on_destroy = r.get<std::string>("on_destroy", "drop");
      if (on_destroy != "drop" && on_destroy != "complete_late") {
        throw sqlstreams::ConfigError::at("on_destroy",
                                          "on_destroy must be \"drop\" or \"complete_late\"");
      }
      s.complete_late = on_destroy == "complete_late";
      r.reject_unknown_keys();
      return s;
    }
  };

  static sqlstreams::Result result_of(const std::string& outcome) {
    if (outcome == "retry") return sqlstreams::retry("timer-io: asked to retry");
    if (outcome == "terminal") return {sqlstreams::Code::kTerminal, {}, "timer-io: terminal"};
    if (outcome == "delay") return sqlstreams::delay(1000);
    return sqlstreams::ok();
  }

  const Settings settings_;
  TimerQueue timers_;  // after settings_; destroyed first: its thread stops before the rest
};

}  // namespace async_io

SQLSTREAMS_PLUGIN("async_io", "1.0.0", async_io::TimerIo)
