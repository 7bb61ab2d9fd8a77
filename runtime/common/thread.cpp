#include "common/thread.hpp"

#include <pthread.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <exception>

namespace sqlstreams {

void abort_on_thread_exception(const std::string& name) noexcept {
  std::string what = "an exception that is not a std::exception";
  try {
    throw;
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {
  }
  spdlog::critical(
      "thread-exception thread={} what={}: an exception escaped a runtime thread (a bug in the "
      "runtime, please report it with this line); the process aborts so that systemd restarts "
      "it and other hosts reclaim its leases",
      name, what);
  spdlog::shutdown();
  std::abort();
}

std::thread start_thread(std::string name, std::function<void()> body) {
  return std::thread([name = std::move(name), body = std::move(body)] {
    ::pthread_setname_np(::pthread_self(), name.substr(0, 15).c_str());
    try {
      body();
    } catch (...) {
      abort_on_thread_exception(name);
    }
  });
}

}  // namespace sqlstreams
