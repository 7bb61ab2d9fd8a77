// read_proc_file (tests/support): the /proc reads that count a host's handler children must
// survive a process ending mid-read. The CI once failed ProcessIsolation/exit0 with
// "basic_filebuf::underflow error reading the file: No such process": children_of() had opened
// /proc/<pid>/cmdline of a crashing child that the host reaped before the read.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <iterator>

#include "e2e_support.hpp"

namespace sqlstreams::e2e {
namespace {

TEST(ReadProcFile, ALiveProcessReadsItsCommandLine) {
  ScratchDir dir;
  testing::ChildProcess sleeper({"/bin/sleep", "60"}, {}, dir.file("sleep.log"));
  const std::string path = "/proc/" + std::to_string(sleeper.pid()) + "/cmdline";
  const std::string after_exec = std::string("/bin/sleep") + '\0' + "60" + '\0';
  // Until the exec: the spawned child first shows the test binary's own command line.
  EXPECT_TRUE(wait_until([&] { return testing::read_proc_file(path) == after_exec; }, 10s))
      << testing::read_proc_file(path).value_or("(unreadable)");
}

TEST(ReadProcFile, AProcessReapedAfterItsFileWasOpenedReadsAsGoneInsteadOfThrowing) {
  ScratchDir dir;
  testing::ChildProcess sleeper({"/bin/sleep", "60"}, {}, dir.file("sleep.log"));
  const std::string path = "/proc/" + std::to_string(sleeper.pid()) + "/cmdline";
  std::ifstream opened_while_alive(path);
  ASSERT_TRUE(opened_while_alive.is_open());
  sleeper.signal(SIGKILL);
  ASSERT_TRUE(sleeper.wait(10s).has_value());  // reaped: the pid's /proc entry is gone
  // The old children_of() read: it throws (ESRCH from read) and took the whole test down.
  EXPECT_THROW(std::string((std::istreambuf_iterator<char>(opened_while_alive)),
                           std::istreambuf_iterator<char>()),
               std::ios_base::failure);
  EXPECT_FALSE(testing::read_proc_file(path).has_value());
}

// thread_report (tests/support), what a test prints for a host that does not stop: every thread
// with its state, and gdb's stacks. Its gdb call once threw "posix_spawn failed for timeout" (a
// bare program name: posix_spawn does not search PATH) and turned a slow stop into an exception
// that hid the host's threads (DatabaseRestart, 2026-12-06).
TEST(ThreadReport, NamesEveryThreadOfALiveProcessAndItsStacks) {
  ScratchDir dir;
  testing::ChildProcess sleeper({"/bin/sleep", "60"}, {}, dir.file("sleep.log"));
  const std::string path = "/proc/" + std::to_string(sleeper.pid()) + "/comm";
  ASSERT_TRUE(wait_until([&] { return testing::read_proc_file(path) == "sleep\n"; }, 10s));
  std::string report;
  ASSERT_NO_THROW(report = testing::thread_report(sleeper.pid()));
  // "  <tid> sleep <state> <wchan>" (the state may still be R just after the exec).
  EXPECT_NE(report.find("  " + std::to_string(sleeper.pid()) + " sleep "), std::string::npos)
      << report;
  if (::access("/usr/bin/gdb", X_OK) == 0) {
    EXPECT_NE(report.find("gdb (exit "), std::string::npos) << report;
    EXPECT_NE(report.find("#0 "), std::string::npos) << "no stack in:\n" << report;
  }
  sleeper.signal(SIGKILL);
  (void)sleeper.wait(10s);
}

}  // namespace
}  // namespace sqlstreams::e2e
