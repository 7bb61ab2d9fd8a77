// plugin_host/load_probe — a plugin's load-time code runs first in a throwaway child
// (runtime/plugin_host/README.md#loading-step-by-step). dlopen runs a plugin's constructors and
// static initialisers: one that crashes, aborts, calls exit() or hangs would end the process that
// loads it. `sqlstreams plugin check` loads the file in a forked child; a host (`run`, SIGHUP,
// `config check`) loads each new image in a spawned child first (PluginRegistry::set_load_probe:
// `EXE __plugin-probe` maps the very sealed image the host will map, inherited as fd 3, and answers
// on fd 4) and maps it itself only when the child answered that it loaded. Both read and judge
// their child's answer here.
// The answer: one JSON document, the manifest ({"name", "version", ...}) or a refusal
// {"refused": {"path", "symbol", "expected", "found", "hint"}}, read up to 1 MiB. A child that
// ends any other way (a signal, an exit() from the plugin, no document) is a plugin that crashed
// while loading; one with no answer within the timeout is killed and reported as hung. The child
// runs in a process group of its own, killed before the child is reaped: whatever its plugin
// forked ends with it, and does not make it look hung (the child's own end ends the wait).
// While it waits, the host's probe calls LoadProbe::while_waiting at least every
// kLoaderWaitTick: the host pings systemd's watchdog from it (service/run_host.cpp), so a
// constructor that hangs for the whole timeout ends as a refused plugin (a rejected reload), not
// as a host killed by the watchdog on the thread that waits.
// Threading: every function is safe from any thread; each call owns its child.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>

namespace sqlstreams::plugin_host {

// What a loader child wrote before it ended (or closed its end of the pipe).
struct LoaderAnswer {
  std::string text;
  bool hung = false;     // no end and no answer within the timeout
  bool too_big = false;  // more than kMaxLoaderAnswerBytes
};
inline constexpr size_t kMaxLoaderAnswerBytes = 1 << 20;  // a manifest or a refusal is a few kB

// How often read_loader_answer calls `waiting` while the child has not answered.
inline constexpr std::chrono::milliseconds kLoaderWaitTick{250};

// Reads child `pid`'s answer from `fd` (the parent's read end of its pipe) until EOF, the
// child's end (its pidfd), `timeout` or kMaxLoaderAnswerBytes. When given, `waiting` runs on the
// calling thread at least every kLoaderWaitTick until then.
LoaderAnswer read_loader_answer(int fd, pid_t pid, std::chrono::seconds timeout,
                                const std::function<void()>& waiting = {});

// SIGKILLs the child first when `kill_child` (hung, too much answer), waits for it to end, kills
// what is left of its process group, reaps it and returns its wait status.
int reap_loader_child(pid_t pid, bool kill_child);

// The answer of a child that loaded `file`, judged: returns the JSON text of the manifest when
// it loaded; throws PluginLoadError with the child's own refusal (exit code `refused_code`), or
// naming `file` when it crashed, exited otherwise, hung or wrote too much.
std::string judge_loader_answer(const std::string& file, const LoaderAnswer& answer,
                                int wait_status, std::chrono::seconds timeout, int refused_code);

// The exit code of a loader child that refused the plugin with a PluginLoadError.
inline constexpr int kLoaderRefused = 3;

// The child's side of a host's probe (cli/main.cpp `__plugin-probe`): maps the sealed image at
// `image_fd`, checks it and its manifest exactly as the host will, writes the answer to
// `answer_fd` and _exit()s (0 loaded, kLoaderRefused refused). `file` names the plugin in errors;
// `parent` is the host's pid (a child orphaned before PR_SET_PDEATHSIG took effect exits).
[[noreturn]] void run_load_probe(int image_fd, int answer_fd, const std::string& file,
                                 pid_t parent);

}  // namespace sqlstreams::plugin_host
