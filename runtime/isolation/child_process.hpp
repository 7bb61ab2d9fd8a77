// isolation/child_process — spawning and reaping one handler child: `/proc/self/exe
// __handler-child --fd 3 ...` started with posix_spawn, its end of a socketpair at fd 3, the
// host's sealed plugin image at fd 4 (every other host fd is close-on-exec or closed by the child),
// stdin/stdout inherited, stderr the write end of a pipe whose read end the host keeps
// (SpawnedChild::stderr_read, read and logged by isolation/stderr_pump: a plugin's stderr never
// reaches the host's log raw), no signal blocked, in a process group of its own (the group ends
// with it, reap()). restart_delay() is the pure capped exponential backoff between restarts.
// Threading: spawn_child() from any thread (the child's PR_SET_PDEATHSIG is tied to the thread that
// spawned it: callers spawn from a thread that lives as long as the child, see
// isolated_handler.cpp); reap() and describe_exit() from any thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <string>

#include "isolation/frame.hpp"

namespace sqlstreams::isolation {

struct SpawnedChild {
  pid_t pid = -1;
  std::unique_ptr<Channel> channel;  // the host's end
  UniqueFd stderr_read;              // the read end of the child's stderr (close-on-exec)
};

// Throws std::runtime_error when the socketpair or posix_spawn fails. `label` only names the
// child in `ps` ("stream/group"). `log_level`/`log_format` are passed on so the child logs like
// the host (to its stderr, which is the pipe behind stderr_read).
// `executable` is the sqlstreams binary (normally /proc/self/exe: the very version running).
// `image_fd` >= 0: the host's sealed plugin image, inherited by the child at fd 4 (kChildImageFd,
// `--image-fd 4`) so that it maps the host's image and never the file on disk
// (runtime/isolation/README.md#the-supervisor).
inline constexpr int kChildImageFd = 4;
SpawnedChild spawn_child(const std::string& executable, const std::string& label,
                         const std::string& log_level, const std::string& log_format,
                         int image_fd = -1);

// Waits for `pid` to end, up to `grace`, then SIGKILLs it and waits; then SIGKILLs what is left
// of its process group (processes the plugin forked) and reaps it. Returns the wait status.
int reap(pid_t pid, std::chrono::milliseconds grace);

// "handler process crashed (signal 11)" / "handler process exited (status 70)".
std::string describe_exit(int wait_status);

// The delay before restart number `crashes` (1 = after the first crash): initial × 2^(n-1),
// capped at max, then scaled by a jitter factor in [1 - jitter, 1] from `random01` in [0, 1).
struct RestartPolicy {
  std::chrono::milliseconds initial{100};
  std::chrono::milliseconds max{10'000};
  double jitter = 0.2;
  // A child that ran at least this long before it crashed starts the count again at 1.
  std::chrono::milliseconds stable_after{30'000};
};
std::chrono::milliseconds restart_delay(const RestartPolicy& policy, int crashes, double random01);

}  // namespace sqlstreams::isolation
