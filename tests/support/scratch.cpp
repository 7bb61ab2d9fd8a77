#include "scratch.hpp"

#include <gtest/gtest.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <thread>

#include "test_database.hpp"

namespace sqlstreams::testing {

ScratchDir::ScratchDir(const std::string& prefix) {
  std::string tmpl = "/tmp/" + prefix + "-XXXXXX";
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed for " + tmpl);
  path_ = tmpl;
  std::filesystem::permissions(path_, std::filesystem::perms(0755));
}

bool keep_requested() {
  const char* keep = std::getenv("SQLSTREAMS_E2E_KEEP");
  return keep != nullptr && *keep != '\0' && std::string(keep) != "0";
}

ScratchDir::~ScratchDir() {
  if (::testing::Test::HasFailure() || keep_requested()) {
    std::fprintf(stderr, "keeping %s (host configs, logs and record files)\n", path_.c_str());
    return;
  }
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

int free_tcp_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error("socket() failed");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    close(fd);
    throw std::runtime_error("no free TCP port");
  }
  close(fd);
  return ntohs(a.sin_port);
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout,
                std::chrono::milliseconds every) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  const PollingConnections reuse;  // the predicate's queries share a connection per URL
  for (;;) {
    if (pred()) return true;
    if (std::chrono::steady_clock::now() >= deadline) return false;
    std::this_thread::sleep_for(every);
  }
}

}  // namespace sqlstreams::testing
