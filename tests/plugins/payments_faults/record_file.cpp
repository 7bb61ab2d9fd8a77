#include "record_file.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <thread>

namespace payments_faults {

RecordFile::RecordFile(const std::string& path) {
  if (path.empty()) return;
  fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw std::runtime_error("cannot open record_file '" + path + "': " + std::strerror(errno));
  }
}

RecordFile::~RecordFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RecordFile::append(const sqlstreams::MessageContext& m, std::string_view outcome) const {
  if (fd_ < 0) return;
  std::string line;
  line.reserve(m.group.size() + outcome.size() + 32);
  line.append(m.group).append(" ").append(std::to_string(m.id)).append(" ");
  line.append(std::to_string(m.attempt)).append(" ").append(outcome).append("\n");
  if (::write(fd_, line.data(), line.size()) != static_cast<ssize_t>(line.size())) {
    throw std::runtime_error(std::string("cannot append to record_file: ") + std::strerror(errno));
  }
}

void sleep_ms(int64_t ms) {
  if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
}

void wait_for_file(const std::string& path) {
  while (::access(path.c_str(), F_OK) != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
}

}  // namespace payments_faults
