#include "hosts.hpp"

#include <signal.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <vector>

#include "chaos_plugin.hpp"
#include "store/produce/producer.hpp"
#include "workload.hpp"

namespace sqlstreams::chaos {

static_assert(kManyOutputs >= static_cast<int>(store::Producer::kCopyFromRows),
              "one message's outputs alone go by COPY");

ChaosHost::ChaosHost(const ChaosOptions& options, int index)
    : options_(options), name_("chaos-h" + std::to_string(index)) {
  config_file_ = options_.work_dir + "/" + name_ + ".toml";
  record_file_ = options_.work_dir + "/" + name_ + ".records";
  write_config();
}

void ChaosHost::write_config() {
  std::ostringstream t;
  t << "[host]\nname = \"" << name_ << "\"\nshutdown_timeout = \"5s\"\nlog_format = \"json\"\n"
    << "http_listen = \"\"\nmaintenance_ttl = \"2s\"\njanitor_period = \"1s\"\n";
  for (const auto& s : kStreams) {
    t << "\n[[streams]]\nname = \"" << s.name << "\"\npartition_size = 1000\n"
      << "retention = \"" << options_.retention
      << "\"\nallow_drop_past_committed = " << (s.allow_drop_past_committed ? "true" : "false")
      << "\n";
  }
  if (options_.chain) {
    t << "\n[[streams]]\nname = \"" << kChainStream << "\"\npartition_size = 1000\n";
  }
  // The chain's consumer: like g-a, without faults of its own (rewinds and operator actions
  // pick the producers' streams).
  if (options_.chain) {
    t << "\n[[groups]]\nname = \"" << kChainGroup << "\"\nstream = \"" << kChainStream << "\"\n"
      << "plugin = \"chaos.so\"\nhandler = \"chaos\"\nconcurrency = 4\nbatch_size = 50\n"
      << "lease_ttl = \"" << options_.lease_ttl << "\"\nhandler_timeout = \"500ms\"\n"
      << "poll_interval = \"20ms\"\nmax_poll_interval = \"200ms\"\naudit = \"all\"\n"
      << "[groups.retry]\nmax_retries = " << options_.max_retries << "\n"
      << "initial_backoff = \"50ms\"\nbase_delay = \"50ms\"\nexponent = 2\n"
      << "max_delay = \"200ms\"\njitter = 0\n"
      << "[groups.config]\nseed = " << static_cast<int64_t>(options_.seed & 0x7fffffffffff)
      << "\nrecord_file = \"" << record_file_ << "\"\nhang_ms = 1500\ndelay_ms = 100\n";
  }
  for (const auto& s : kStreams) {
    for (const auto& g : groups_of(options_)) {
      const bool emits = options_.chain && emits_to_chain(s.name, g);
      const bool async = s.name == kAsyncGroup.first && g == kAsyncGroup.second;
      t << "\n[[groups]]\nname = \"" << g << "\"\nstream = \"" << s.name << "\"\n"
        << "plugin = \"chaos.so\"\nhandler = \"" << (async ? "chaos-async" : "chaos") << "\"\n"
        << "concurrency = " << (g == "g-b" ? concurrency_b_ : 4) << "\n"
        << "batch_size = 50\nlease_ttl = \"" << options_.lease_ttl << "\"\n"
        << "handler_timeout = \"500ms\"\npoll_interval = \"20ms\"\nmax_poll_interval = \"200ms\"\n"
        << "max_range_reclaims = 3\naudit = \"all\"\n";
      if (s.name == kIsolatedGroup.first && g == kIsolatedGroup.second) {
        t << "isolation = \"process\"\n";
      }
      if (async) t << "max_in_flight = " << kAsyncMaxInFlight << "\n";
      if (g == kOrderedGroup && options_.ordering_config) {
        t << "ordering = \"key\"\nordering_dead = \"" << ordering_dead_of(s.name) << "\"\n";
      }
      if (emits) {
        t << "emits = [\"" << kChainStream << "\"]\nmax_emits_per_message = " << kManyOutputs
          << "\n";
      }
      t << "[groups.retry]\nmax_retries = " << options_.max_retries << "\n"
        << "initial_backoff = \"50ms\"\nbase_delay = \"50ms\"\nexponent = 2\n"
        << "max_delay = \"200ms\"\njitter = 0\n"
        << "[groups.config]\nseed = " << static_cast<int64_t>(options_.seed & 0x7fffffffffff)
        << "\nrecord_file = \"" << record_file_ << "\"\nhang_ms = 1500\ndelay_ms = 100\n";
      if (emits) t << "emit_to = \"" << kChainStream << "\"\n";
    }
  }
  std::ofstream out(config_file_ + ".tmp");
  out << t.str();
  out.close();
  if (std::rename((config_file_ + ".tmp").c_str(), config_file_.c_str()) != 0) {
    throw std::runtime_error("cannot write " + config_file_);
  }
}

pid_t ChaosHost::pid() const { return process_ ? process_->pid() : -1; }
bool ChaosHost::running() const { return process_ && process_->running(); }
bool ChaosHost::ready() const {
  if (!running()) return false;
  std::ifstream in(log_file_);
  const std::string log((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return log.find("\"event\":\"host-ready\"") != std::string::npos;
}

void ChaosHost::start() {
  std::map<std::string, std::string> env{{"SQLSTREAMS_DATABASE_URL", options_.url}};
  if (!options_.plant.empty()) env["SQLSTREAMS_CHAOS_PLANT"] = options_.plant;
  // Hosts whose connections get cut may leak libpqxx 6.4 objects (see tests/e2e/lsan.supp).
  if (const char* lsan = std::getenv("SQLSTREAMS_CHAOS_LSAN_OPTIONS")) env["LSAN_OPTIONS"] = lsan;
  log_file_ = options_.work_dir + "/" + name_ + "." + std::to_string(generation_++) + ".log";
  process_ = std::make_unique<testing::ChildProcess>(
      std::vector<std::string>{SQLSTREAMS_BINARY, "run", "--config", config_file_, "--plugin-dir",
                               plugin_dir_of(options_)},
      env, log_file_);
  stopped_ = false;
  asked_to_stop_ = false;
}

void ChaosHost::kill() {
  if (!process_) return;
  if (stopped_) resume();
  process_->signal(SIGKILL);
  process_->wait(std::chrono::seconds(10));
}

void ChaosHost::pause() {
  if (!process_ || stopped_) return;
  process_->signal(SIGSTOP);
  stopped_ = true;
}

void ChaosHost::resume() {
  if (!process_ || !stopped_) return;
  process_->signal(SIGCONT);
  stopped_ = false;
}

void ChaosHost::reload_with_changed_group() {
  concurrency_b_ = concurrency_b_ == 4 ? 2 : 4;
  write_config();
  if (process_ && process_->running()) process_->signal(SIGHUP);
}

void ChaosHost::ask_to_stop() {
  if (!process_ || asked_to_stop_) return;
  if (stopped_) resume();
  process_->signal(SIGTERM);
  asked_to_stop_ = true;
}

int ChaosHost::terminate(int timeout_ms) {
  if (!process_) return 0;
  ask_to_stop();
  if (auto code = process_->wait(std::chrono::milliseconds(timeout_ms))) return *code;
  process_->signal(SIGKILL);
  process_->wait(std::chrono::seconds(10));
  return -1;
}

}  // namespace sqlstreams::chaos
