// isolation — `isolation = "process"` groups (runtime/isolation/README.md): the group's handler
// runs in supervised child processes, so a plugin that segfaults, aborts, calls exit() or hangs
// costs one failed attempt of the message it was running, never the host or another group.
//
//   [[groups]]
//   name = "charge-cards"   plugin = "payments.so"   handler = "charge"
//   isolation = "process"   # default "inprocess"
//
// The host side is a plugin_host::HandlerInstance backed by a POOL of `concurrency` children,
// each running one message at a time (not one multiplexed child): a crash fails exactly the
// message its child was running, a hung handler is killed without touching its neighbours, and
// each child's handler instance keeps the plugin's own threading contract (a non-concurrent
// handler is never called concurrently). The price: `concurrency` processes and handler
// instances per group (as if the group ran on that many hosts).
// A child is `/proc/self/exe __handler-child` (cli/main.cpp → run_handler_child): it maps the
// host's sealed image of the plugin (runtime/plugin_host/README.md#loading-step-by-step: the memfd
// PluginRegistry::image gives, inherited at fd 4; the init frame carries its SHA-256, which the
// child checks, refusing a mismatch), never the file on disk, so a file replaced or broken without
// a reload changes nothing a restarted child runs: only a reload, which creates new children from
// the newly committed image, does. It validates and creates the instance with the group's config,
// answers Ready (or Failed: the host rethrows the PluginLoadError, exit 3 at start-up), then serves
// frames (frame.hpp) until the channel closes. It dies with the host (PR_SET_PDEATHSIG) and on EOF.
// Batches (max_batch() = 64): handle_batch() writes every request of a batch at once and reads
// the replies as they come (poll, non-blocking both ways); the child runs them in order and
// replies to each as soon as it ran, so the round trip is paid per batch. handle() is a batch
// of one. A child that dies mid-batch: the first unanswered message is the one it was running
// and gets the crash outcome; earlier ones keep theirs; handle_batch() returns there and the
// rest (never run) stays the caller's. A child found dead when a batch starts (it died while
// idle) charges nothing: its first message gets kDelay "handler process restarting" until the
// restart is due, like a batch that finds no child up. A sink that stops the batch gets the child
// SIGKILLed (it may have started the next message) and restarted, without counting a crash. Faults:
// a child that dies mid-request, or does not answer within handler_timeout + 1s (then SIGKILLed),
// yields OutcomeKind::kRetry "handler process crashed (signal N)" / "handler process exited (status
// N)"; the runtime's retry policy counts the attempt (max_retries → dead). The child is reaped at
// once and restarted by the next caller after restart_delay() (capped exponential, jittered). While
// no child of the group is up, every message of a batch gets kDelay "handler process restarting"
// (until the first restart is due) at once: it never ran, so no retry budget is spent; a restart
// that fails is that message's kRetry. Log events: handler-process-started, handler-process-crashed
// (stream, group, pid, signal/status, message id); child-stderr / child-stderr-dropped: each
// line a child writes to its stderr (a pipe to the host, one reader thread per child:
// stderr_pump.hpp), escaped, cut and rate-limited. Threading: handle()/handle_batch() from any
// number of threads (each takes a free child, waiting while all are busy); the destructor closes
// every channel and reaps every child. Children are spawned from one launcher thread per instance,
// which outlives them (PR_SET_PDEATHSIG follows the spawning thread, not the process).
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "isolation/child_process.hpp"
#include "isolation/stderr_pump.hpp"
#include "plugin_host/plugin_host.hpp"

namespace sqlstreams::isolation {

inline constexpr std::chrono::milliseconds kAnswerGrace{1000};  // past handler_timeout

struct IsolationOptions {
  std::filesystem::path plugin_dir;
  std::string plugin, handler, stream, group, config_json;
  // The host's sealed image of `plugin` (PluginRegistry::image): every child, at every restart,
  // maps exactly this image (inherited fd, its SHA-256 checked by the child), never the file on
  // disk. image_fd < 0: children load `plugin` from plugin_dir (tests and tools only).
  int image_fd = -1;
  std::string image_sha256;
  int children = 4;  // the group's concurrency
  std::chrono::milliseconds handler_timeout{30'000};
  RestartPolicy restart;
  std::string log_level = "info";
  std::string log_format = "auto";            // auto | text | json, as host.log_format
  std::string executable = "/proc/self/exe";  // tests name the sqlstreams binary
  StderrBudget stderr_budget;                 // what each child's stderr may put in the log
};

// Starts every child and waits until each created its handler instance. Throws
// plugin_host::PluginLoadError when a child refuses the plugin (its own message) or dies first.
std::unique_ptr<plugin_host::HandlerInstance> make_isolated_handler(IsolationOptions options);

// The host's check of the outputs a handler process sent with an OK reply: they come from the
// plugin's process, so they are held again to the policy the host gave it (`policy` null: the
// group does not emit), each output (plugin_host::check_output) and the call's budget (count,
// payload bytes). "" when they pass, and then they are appended to `into`; else why not (the
// call becomes a RETRY, and nothing of it is kept).
std::string take_child_outputs(const plugin_host::EmitPolicy* policy,
                               const std::vector<OutputFrame>& outputs,
                               std::vector<plugin_host::Output>& into);

// The child's side: serves the channel on `fd` until it closes; returns the exit status.
// `parent` is the host's pid (a child orphaned before PR_SET_PDEATHSIG took effect exits).
// `image_fd` >= 0: the host's sealed plugin image (spawn_child), mapped instead of the file.
int run_handler_child(int fd, pid_t parent, int image_fd = -1);

}  // namespace sqlstreams::isolation
