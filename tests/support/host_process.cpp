#include "host_process.hpp"

#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <utility>
#include <vector>

#include "scratch.hpp"
#include "text.hpp"

namespace sqlstreams::testing {

RunningHost::RunningHost(std::string config_file, const std::string& config_text,
                         const std::string& database_url, std::map<std::string, std::string> env,
                         const std::string& log_file)
    : config_file_(std::move(config_file)) {
  rewrite_config_text(config_text);
  env["SQLSTREAMS_DATABASE_URL"] = database_url;
  process_ = std::make_unique<ChildProcess>(
      std::vector<std::string>{SQLSTREAMS_BINARY, "run", "--config", config_file_, "--plugin-dir",
                               SQLSTREAMS_PLUGIN_DIR},
      std::move(env), log_file);
}

void RunningHost::rewrite_config_text(const std::string& toml) {
  const std::string tmp = config_file_ + ".new";
  std::ofstream(tmp) << toml;
  std::filesystem::rename(tmp, config_file_);
}

int RunningHost::count_in_log(const std::string& needle) const { return count_of(log(), needle); }

bool RunningHost::wait_for_log(const std::string& needle, std::chrono::milliseconds timeout,
                               int n) {
  return wait_until([&] { return count_in_log(needle) >= n || !process_->running(); }, timeout) &&
         count_in_log(needle) >= n;
}

std::optional<int> RunningHost::stop(std::chrono::milliseconds timeout) {
  process_->signal(SIGTERM);
  auto code = process_->wait(timeout);
  // Still running: say what it is doing (the caller's failure message has the log).
  if (!code) std::fprintf(stderr, "%s", thread_report(process_->pid()).c_str());
  return code;
}

}  // namespace sqlstreams::testing
