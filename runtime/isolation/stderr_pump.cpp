// A handler child's stderr, read on a thread of its own and logged as escaped child-stderr events.
#include "isolation/stderr_pump.hpp"

#include <fcntl.h>
#include <poll.h>
#include <spdlog/spdlog.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "common/utf8.hpp"
#include "ops/logging.hpp"

namespace sqlstreams::isolation {
namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

StderrPump::StderrPump(UniqueFd read_end, std::string stream, std::string group, pid_t pid,
                       StderrBudget budget)
    : fd_(std::move(read_end)),
      wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)),
      stream_(std::move(stream)),
      group_(std::move(group)),
      pid_(pid),
      budget_(budget),
      byte_tokens_(static_cast<double>(budget.burst_bytes)),
      line_tokens_(static_cast<double>(budget.burst_lines)),
      refilled_ns_(now_ns()) {
  // spdlog's registry is a lazy static inside libspdlog (not instrumented by ThreadSanitizer):
  // made here, on the creating thread, before the reader thread exists, its first use is ordered
  // before every line the thread logs (a TSan job report when the pump came first, 2026-12-04).
  spdlog::default_logger_raw();
  thread_ = std::thread([this] { loop(); });
}

StderrPump::~StderrPump() {
  if (wake_.get() >= 0) {
    const uint64_t one = 1;
    (void)!::write(wake_.get(), &one, sizeof one);
  }
  thread_.join();
}

void StderrPump::loop() {
  if (fd_.get() < 0) return;
  ::fcntl(fd_.get(), F_SETFL, ::fcntl(fd_.get(), F_GETFL) | O_NONBLOCK);
  char buf[16 * 1024];
  bool stopping = false;
  size_t drained = 0;
  for (;;) {
    pollfd p[2] = {{fd_.get(), POLLIN, 0}, {wake_.get(), POLLIN, 0}};
    const int ready = ::poll(p, wake_.get() >= 0 ? 2 : 1, stopping ? 0 : -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) break;
    if ((p[1].revents & POLLIN) != 0) {
      uint64_t value = 0;
      (void)!::read(wake_.get(), &value, sizeof value);
      stopping = true;
    }
    if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) == 0) {
      if (stopping) break;  // nothing left to read
      continue;
    }
    const ssize_t n = ::read(fd_.get(), buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) {
      if (stopping) break;
      continue;
    }
    if (n <= 0) break;  // EOF: the child and all it forked closed stderr
    on_bytes(buf, static_cast<size_t>(n));
    drained += stopping ? static_cast<size_t>(n) : 0;
    if (drained >= kDrainLimit) break;
  }
  if (line_bytes_ > 0) end_line();  // a last line without its newline
  report_dropped();
  fd_.reset();
}

void StderrPump::on_bytes(const char* data, size_t n) {
  for (size_t i = 0; i < n;) {
    const char* nl = static_cast<const char*>(std::memchr(data + i, '\n', n - i));
    const size_t end = nl == nullptr ? n : static_cast<size_t>(nl - data);
    const size_t room = budget_.max_line_bytes - std::min(line_.size(), budget_.max_line_bytes);
    line_.append(data + i, std::min(end - i, room));
    line_bytes_ += end - i;
    if (nl == nullptr) break;
    end_line();
    i = end + 1;
  }
}

void StderrPump::end_line() {
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  if (take(line_.size())) {
    report_dropped();
    emit(line_, line_bytes_);
  } else {
    ++dropped_lines_;
    dropped_bytes_ += line_bytes_;
    // Bytes before lines (both seq_cst): whoever reads the lines and then the bytes never sees
    // a line whose bytes are not counted yet (the group's two metrics; a TSan run beside the
    // chaos lane read the lines between the two adds once).
    if (budget_.dropped_bytes_total) budget_.dropped_bytes_total->fetch_add(line_bytes_);
    if (budget_.dropped_lines_total) budget_.dropped_lines_total->fetch_add(1);
  }
  line_.clear();
  line_bytes_ = 0;
}

bool StderrPump::take(size_t bytes) {
  const int64_t now = now_ns();
  const double secs = static_cast<double>(now - refilled_ns_) / 1e9;
  refilled_ns_ = now;
  byte_tokens_ = std::min(static_cast<double>(budget_.burst_bytes),
                          byte_tokens_ + secs * static_cast<double>(budget_.bytes_per_second));
  line_tokens_ = std::min(static_cast<double>(budget_.burst_lines),
                          line_tokens_ + secs * static_cast<double>(budget_.lines_per_second));
  if (line_tokens_ < 1.0 || byte_tokens_ < static_cast<double>(bytes)) return false;
  line_tokens_ -= 1.0;
  byte_tokens_ -= static_cast<double>(bytes);
  return true;
}

void StderrPump::emit(const std::string& raw, size_t total_bytes) {
  const size_t kept = raw.size();
  spdlog::warn("child-stderr stream={} group={} child_pid={} bytes={} cut_bytes={} line={}",
               stream_, group_, pid_, total_bytes, total_bytes - std::min(kept, total_bytes),
               ops::log_quoted(sanitize_utf8(raw)));
}

void StderrPump::report_dropped() {
  if (dropped_lines_ == 0) return;
  spdlog::warn(
      "child-stderr-dropped stream={} group={} child_pid={} lines={} bytes={}: the child wrote "
      "more "
      "to stderr than its budget ({} lines, {} bytes per second)",
      stream_, group_, pid_, dropped_lines_, dropped_bytes_, budget_.lines_per_second,
      budget_.bytes_per_second);
  dropped_lines_ = 0;
  dropped_bytes_ = 0;
}

}  // namespace sqlstreams::isolation
