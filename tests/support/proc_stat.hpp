// tests/support/proc_stat — CPU time from a /proc/<pid>/stat or /proc/<pid>/task/<tid>/stat file,
// and how often this process's threads of one name went to sleep (header-only: the plugin unit
// tests use it without the support library).
// Threading: none (reads the files once per call).
#pragma once

#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>

namespace sqlstreams::testing {

// utime + stime in clock ticks (sysconf(_SC_CLK_TCK) a second); 0 when the file is gone.
inline long cpu_ticks(const std::string& stat_path) {
  std::ifstream in(stat_path);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t name_end = text.rfind(')');
  if (name_end == std::string::npos) return 0;
  // Fields after the command name (which may hold spaces) start after the last ')', at field 3.
  std::istringstream rest(text.substr(name_end + 2));
  std::string field;
  long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {
    if (i == 14) utime = std::stol(field);
    if (i == 15) stime = std::stol(field);
  }
  return utime + stime;
}

// The voluntary context switches (each a wait: a futex, a poll, a sleep) of this process's live
// threads whose name (/proc/self/task/<tid>/comm) is `name`, summed.
inline long voluntary_switches(const std::string& name) {
  long total = 0;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string thread_name;
    if (!std::getline(comm, thread_name) || thread_name != name) continue;
    std::ifstream status(task.path() / "status");
    for (std::string line; std::getline(status, line);) {
      const std::string key = "voluntary_ctxt_switches:";
      if (line.rfind(key, 0) == 0) total += std::stol(line.substr(key.size()));
    }
  }
  return total;
}

}  // namespace sqlstreams::testing
