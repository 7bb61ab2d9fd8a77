// read_proc_file (tests/support): the /proc reads that count a host's handler children must
// survive a process ending mid-read. The CI once failed ProcessIsolation/exit0 with
// "basic_filebuf::underflow error reading the file: No such process": children_of() had opened
// /proc/<pid>/cmdline of a crashing child that the host reaped before the read.
#include <gtest/gtest.h>
#include <signal.h>

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

}  // namespace
}  // namespace sqlstreams::e2e
