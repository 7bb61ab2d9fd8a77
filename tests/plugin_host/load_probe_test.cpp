// Reading a loader child's answer (plugin_host/load_probe.hpp) within its bound
// (plugin-sdk/README.md#plugin-new-plugin-check-and-the-host-in-detail; `plugin check` used to read
// whatever its child wrote, for as long as it wrote; a plugin constructor that writes to the answer
// pipe could make the checking process grow without limit). The answer is read up to
// kMaxLoaderAnswerBytes: past that the read stops at once, the child is killed and the plugin is
// refused as one that wrote too much, never reported as hung after the timeout.
#include "plugin_host/load_probe.hpp"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "plugin_host/plugin_host.hpp"

namespace {

using sqlstreams::plugin_host::judge_loader_answer;
using sqlstreams::plugin_host::kLoaderRefused;
using sqlstreams::plugin_host::kMaxLoaderAnswerBytes;
using sqlstreams::plugin_host::LoaderAnswer;
using sqlstreams::plugin_host::PluginLoadError;
using sqlstreams::plugin_host::read_loader_answer;
using sqlstreams::plugin_host::reap_loader_child;

// Forks a child that writes `bytes` bytes to a pipe, then waits with the pipe open (as a loader
// whose plugin floods the answer and never ends). Returns its pid; *read_end is the parent's end.
pid_t flooding_child(size_t bytes, int* read_end) {
  int fds[2];
  if (::pipe(fds) != 0) return -1;
  const std::string chunk(64 * 1024, 'x');  // made before fork: the child only writes
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    for (size_t done = 0; done < bytes;) {
      const ssize_t n = ::write(fds[1], chunk.data(), std::min(chunk.size(), bytes - done));
      if (n <= 0) ::_exit(1);
      done += static_cast<size_t>(n);
    }
    for (;;) ::pause();  // keeps its end open until it is killed
  }
  ::close(fds[1]);
  *read_end = fds[0];
  return pid;
}

TEST(LoadProbe, AnAnswerPastItsBoundStopsTheReadAndIsRefusedNotHung) {
  int fd = -1;
  // 4 MiB, bounded so that a read without the limit stays small too (it waits for the timeout).
  const pid_t pid = flooding_child(4 * kMaxLoaderAnswerBytes, &fd);
  ASSERT_GT(pid, 0);
  const auto start = std::chrono::steady_clock::now();
  const LoaderAnswer answer = read_loader_answer(fd, pid, std::chrono::seconds(5));
  const auto took = std::chrono::steady_clock::now() - start;
  const int status = reap_loader_child(pid, true);  // the child never ends by itself
  ::close(fd);  // (after the kill: closed first, the child's next write ends it by SIGPIPE)
  EXPECT_TRUE(answer.too_big) << "read " << answer.text.size() << " bytes";
  EXPECT_FALSE(answer.hung) << "waited for the timeout instead of stopping at the bound";
  EXPECT_LE(answer.text.size(), kMaxLoaderAnswerBytes + 64 * 1024);
  EXPECT_LT(took, std::chrono::seconds(4));
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  try {
    judge_loader_answer("/plugins/flood.so", answer, status, std::chrono::seconds(5),
                        kLoaderRefused);
    ADD_FAILURE() << "an answer past the bound was accepted";
  } catch (const PluginLoadError& e) {
    EXPECT_EQ(e.path(), "/plugins/flood.so");
    EXPECT_NE(std::string(e.what()).find("wrote more than 1048576 bytes of answer"),
              std::string::npos)
        << e.what();
  }
}

TEST(LoadProbe, AnAnswerWithinItsBoundIsReadWhole) {
  int fd = -1;
  const pid_t pid = flooding_child(kMaxLoaderAnswerBytes / 2, &fd);
  ASSERT_GT(pid, 0);
  // The child keeps its end open: the read ends at the timeout, hung, with everything it wrote.
  const LoaderAnswer answer = read_loader_answer(fd, pid, std::chrono::seconds(1));
  reap_loader_child(pid, true);
  ::close(fd);
  EXPECT_FALSE(answer.too_big);
  EXPECT_TRUE(answer.hung);
  EXPECT_EQ(answer.text.size(), kMaxLoaderAnswerBytes / 2);
}

}  // namespace
