#include "workload.hpp"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <pqxx/pqxx>
#include <random>
#include <set>
#include <sstream>
#include <thread>

#include "hosts.hpp"
#include "process.hpp"
#include "producers.hpp"

namespace sqlstreams::chaos {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

std::pair<int, std::string> cli(const std::string& url, std::vector<std::string> args) {
  args.insert(args.begin(), SQLSTREAMS_BINARY);
  return testing::run_command(args, {{"SQLSTREAMS_DATABASE_URL", url}});
}

// Rewrites `file` in place (the same inode: open with O_TRUNC, write), as `cp` over an
// installed plugin or a build's relink does.
void write_in_place(const std::string& file, const std::string& bytes) {
  const int fd = ::open(file.c_str(), O_WRONLY | O_TRUNC | O_CLOEXEC);
  if (fd < 0) throw std::runtime_error("cannot open " + file + ": " + std::strerror(errno));
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw std::runtime_error("cannot write " + file + ": " + std::strerror(errno));
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
}

// The handler children (`sqlstreams __handler-child`) whose parent is one of `parents`.
std::set<int> handler_children(const std::set<int>& parents) {
  std::set<int> pids;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.empty() || !std::isdigit(static_cast<unsigned char>(name[0]))) continue;
    // read_proc_file: a process that ends between the open and the read must not throw (an
    // ifstream's read of its file fails with ESRCH as std::ios_base::failure: seen 2026-12-06).
    const auto stat = testing::read_proc_file(e.path() / "stat");
    if (!stat) continue;  // gone meanwhile
    const std::string line = stat->substr(0, stat->find('\n'));
    const size_t close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    int ppid = 0;
    if (!(rest >> state >> ppid) || !parents.count(ppid) || state == 'Z') continue;
    const auto args = testing::read_proc_file(e.path() / "cmdline");
    if (!args || args->find("__handler-child") == std::string::npos) continue;
    pids.insert(std::stoi(name));
  }
  return pids;
}

// SIGKILLs every handler child of `parents`; returns how many. Their hosts restart them.
int kill_handler_children(const std::set<int>& parents) {
  int killed = 0;
  for (const int pid : handler_children(parents)) {
    if (::kill(pid, SIGKILL) == 0) ++killed;
  }
  return killed;
}

// Whether handler child `pid` has mapped the plugin (the file or the host's sealed image, whose
// memfd is named after it): its start is past the point where it reads a plugin.
bool maps_plugin(int pid, const std::string& plugin_file_name) {
  const auto maps = testing::read_proc_file("/proc/" + std::to_string(pid) + "/maps");
  return maps && maps->find(plugin_file_name) != std::string::npos;
}

std::string read_whole(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

int64_t steady_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// A connection kept across one thread's polls, opened again after an error (the database
// restarts during the run). A new connection costs PostgreSQL ~40 ms of CPU on the 2-core
// machines: the drain's ~10 polls a second, each on a new connection, kept most of a core busy
// beside the hosts it waited for.
struct KeptConnection {
  std::string url;
  std::unique_ptr<pqxx::connection> c;
  pqxx::connection& get() {
    if (!c || !c->is_open()) c = std::make_unique<pqxx::connection>(url);
    return *c;
  }
  void drop() { c.reset(); }
};

}  // namespace

struct ChaosRun::Impl {
  ChaosOptions& o;
  History& h;
  std::vector<std::unique_ptr<ChaosHost>> hosts;
  std::unique_ptr<Producers> producers;
  std::atomic<bool> stop_faults{false}, stop_monitor{false};
  std::thread fault_thread, monitor_thread, operator_thread;
  const std::vector<std::string> groups;
  Clock::time_point t0 = Clock::now();
  std::mt19937_64 rng;
  // Rewinds begun per "stream/group" (the monitor tolerates a backward cursor across one).
  std::mutex rewinds_mu;
  std::map<std::string, int> rewinds_begun, rewinds_done;
  // The run's chaos.so as the hosts loaded it (replace-plugin restores it), and how many
  // replacements ran (the variant cycles: truncated, refused, good).
  std::string plugin_image;
  int replacements = 0;
  // Faults injected so far (a skipped one does not count): ChaosOptions::min_faults.
  std::atomic<int> faults_done{0};

  Impl(ChaosOptions& options, History& history)
      : o(options), h(history), groups(groups_of(options)), rng(options.seed) {}

  int64_t ms() const {
    return std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - t0).count();
  }
  void event(const std::string& what) {
    h.event(ms(), what);
    if (o.log_progress) std::fprintf(stderr, "chaos %7.1fs %s\n", ms() / 1000.0, what.c_str());
  }

  void sleep_unless_stopped(std::chrono::milliseconds d) {
    const auto until = Clock::now() + d;
    while (!stop_faults && Clock::now() < until) std::this_thread::sleep_for(20ms);
  }

  int64_t default_partition_rows() {
    try {
      pqxx::connection c(o.url);
      pqxx::nontransaction tx(c);
      int64_t n = 0;
      for (const auto& row : tx.exec("SELECT id FROM sqlstreams.streams")) {
        n += tx.exec("SELECT count(*) FROM sqlstreams.messages_" + row[0].as<std::string>() +
                     "_default")[0][0]
                 .as<int64_t>();
      }
      return n;
    } catch (const std::exception&) {
      return -1;
    }
  }

  ChaosHost& some_host() { return *hosts[rng() % hosts.size()]; }
  const StreamSpec& some_stream() { return kStreams[rng() % kStreams.size()]; }
  const std::string& some_group() { return groups[rng() % groups.size()]; }

  // Host starts, stops and kills, timed for the ordered invariants (History::disturbances).
  void start_host(ChaosHost& host) {
    host.start();
    std::lock_guard lk(h.mu);
    h.host_of_pid[host.pid()] = host.name();
  }
  void kill_host(ChaosHost& host) {
    const int pid = host.pid();
    host.kill();
    std::lock_guard lk(h.mu);
    h.disturbances.push_back(Disturbance{pid, host.name(), "kill", steady_ns(), steady_ns()});
  }
  // An operator command, timed (History::actions).
  std::pair<int, std::string> operator_cli(const std::string& kind, const std::string& stream,
                                           const std::string& group,
                                           std::vector<std::string> args) {
    const int64_t begin = steady_ns();
    auto r = cli(o.url, std::move(args));
    std::lock_guard lk(h.mu);
    h.actions.push_back(OperatorAction{kind, stream, group, begin, steady_ns()});
    return r;
  }

  // False when the fault was skipped (nothing was injected).
  bool fault(const std::string& kind) {
    if (kind == "kill") {
      auto& host = some_host();
      kill_host(host);
      event("kill " + host.name());
      sleep_unless_stopped(std::chrono::milliseconds(300 + rng() % 1200));
      start_host(host);
      event("restart " + host.name() + " pid " + std::to_string(host.pid()));
    } else if (kind == "stop") {
      auto& host = some_host();
      const int64_t stopped_at = steady_ns();
      host.pause();
      event("sigstop " + host.name());
      // Past its lease: its ranges are reclaimed meanwhile; its late outcomes must be refused.
      std::this_thread::sleep_for(o.lease_ttl_ms + 1500ms);
      host.resume();
      {
        std::lock_guard lk(h.mu);
        h.disturbances.push_back(
            Disturbance{host.pid(), host.name(), "stop", stopped_at, steady_ns()});
      }
      event("sigcont " + host.name());
    } else if (kind == "pg-restart") {
      if (!o.restart_database) return false;
      event("pg-restart begin");
      const bool ok = o.restart_database();
      event(std::string("pg-restart ") + (ok ? "done" : "FAILED"));
    } else if (kind == "terminate") {
      try {
        pqxx::connection c(o.url);
        pqxx::work tx(c);
        auto r = tx.exec_params(
            "SELECT pid, application_name, pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE (application_name LIKE 'sqlstreams%' OR application_name = 'chaos-producer') "
            "AND pid <> pg_backend_pid() AND (hashint8(pid::bigint # $1) & 3) = 0",
            static_cast<int64_t>(rng() & 0xffffff));
        tx.commit();
        std::string who;
        for (const auto& row : r) who += " " + row[1].as<std::string>();
        event("terminate " + std::to_string(r.size()) + " backends:" + who);
      } catch (const std::exception& e) {
        event(std::string("terminate failed: ") + e.what());
      }
    } else if (kind == "rewind") {
      const auto& s = some_stream();
      const auto& g = some_group();
      int64_t claimed = 0;
      try {
        pqxx::connection c(o.url);
        pqxx::work tx(c);
        auto ids = tx.exec_params(
            "SELECT s.id, g.id FROM sqlstreams.streams s JOIN sqlstreams.groups g ON "
            "g.stream_id = s.id WHERE s.name = $1 AND g.name = $2",
            s.name, g);
        claimed = tx.exec_params("SELECT claimed FROM sqlstreams.cursors_" +
                                     ids[0][0].as<std::string>() + " WHERE group_id = $1",
                                 ids[0][1].as<int64_t>())[0][0]
                      .as<int64_t>();
      } catch (const std::exception&) {
        claimed = 0;
      }
      const int64_t to = std::max<int64_t>(0, claimed - 20 - static_cast<int64_t>(rng() % 200));
      {
        std::lock_guard lk(rewinds_mu);
        rewinds_begun[s.name + "/" + g]++;
      }
      auto [code, out] = operator_cli(
          "rewind", s.name, g, {"group", "rewind", s.name, g, "--to-id", std::to_string(to)});
      {
        std::lock_guard lk(rewinds_mu);
        rewinds_done[s.name + "/" + g]++;
      }
      event("rewind " + s.name + " " + g + " to " + std::to_string(to) + " exit " +
            std::to_string(code));
    } else if (kind == "dead-retry" || kind == "dead-discard") {
      const auto& s = some_stream();
      const auto& g = some_group();
      std::vector<std::string> args{"dead",    kind == "dead-retry" ? "retry" : "discard",
                                    s.name,    g,
                                    "--limit", kind == "dead-retry" ? "20" : "3"};
      if (kind == "dead-discard") args.push_back("--yes");
      auto [code, out] = operator_cli(kind, s.name, g, args);
      event(kind + " " + s.name + " " + g + " exit " + std::to_string(code));
    } else if (kind == "all-down") {
      // Every host down while the producers keep writing: past the partitions made ahead, the
      // SQL producers' ids land in the default partitions (V007) and must all commit; the
      // hosts' janitors re-home them when they come back.
      // Down for 6-10 s, and longer (up to 30 s) until some ids have landed past the
      // partitions made ahead, in a default partition. Until then the producer paths that create
      // partitions as they write (store::Producer, the CLI) are held, as an application that
      // produces through SQL alone: otherwise whether any id ever passes the partitions is a
      // race with their healing (a run once saw none in 30 s).
      for (auto& host : hosts) kill_host(*host);
      event("all-down: every host killed");
      const auto down_since = Clock::now();
      if (producers) producers->hold_healing_paths(true);
      sleep_unless_stopped(std::chrono::milliseconds(6000 + rng() % 4000));
      int64_t rows = default_partition_rows();
      while (rows == 0 && !stop_faults && Clock::now() - down_since < 30s) {
        sleep_unless_stopped(500ms);
        rows = default_partition_rows();
      }
      if (producers) producers->hold_healing_paths(false);
      event("all-down: " + std::to_string(rows) + " rows in the default partitions");
      for (auto& host : hosts) start_host(*host);
      event("all-down: every host restarted");
    } else if (kind == "replace-plugin") {
      // The plugin file rewritten in place without a reload, for 2-4 s, then restored: the
      // hosts and their handler children (kIsolatedGroup's, restarted meanwhile by timeouts)
      // must go on running the image the hosts sealed; a child that fails to start for it
      // charges attempts (checker: child-start). Hosts start only in this thread, so none
      // starts while the file is bad.
      // A host still starting loads the file itself: wait until every host has logged
      // host-ready (a truncated file under a starting host made it exit 3: a run with the
      // replacements 300 ms after the start lost all three hosts).
      const auto ready_by = Clock::now() + 30s;
      auto all_ready = [&] {
        for (auto& host : hosts) {
          if (!host->ready()) return false;
        }
        return true;
      };
      while (!stop_faults && !all_ready() && Clock::now() < ready_by) {
        std::this_thread::sleep_for(50ms);
      }
      if (!all_ready()) {
        event("replace-plugin skipped: a host is not ready");
        return false;
      }
      static const char* const kVariants[] = {"truncated", "refused", "good"};
      const std::string variant = kVariants[replacements++ % 3];
      const std::string file = plugin_dir_of(o) + "/chaos.so";
      std::string bytes = plugin_image;
      if (variant == "truncated") bytes.resize(bytes.size() / 2);
      if (variant == "refused") bytes = "not a plugin\n";
      write_in_place(file, bytes);
      // Handler children restart while the file is bad: a crash of one is what made the old
      // code load the file (a hung call's kill does too, but not reliably within the window).
      std::set<int> parents;
      for (auto& host : hosts) parents.insert(host->pid());
      std::this_thread::sleep_for(200ms);
      const std::set<int> before = handler_children(parents);
      const int killed = kill_handler_children(parents);
      event("replace-plugin " + variant + " (in place, no reload); " + std::to_string(killed) +
            " handler children killed");
      sleep_unless_stopped(std::chrono::milliseconds(2000 + rng() % 2000));
      // Then held until the children started since the kill are past reading a plugin (mapped
      // it, or ended): a child's start is not bounded by a clock here (twelve sanitized children
      // starting at once on a slow 2-core machine took longer than the 2-4 s, read the restored
      // file, and a plant run caught nothing: 2026-12-06). At most 30 s.
      // The children waited for are the first ones seen after the kill (a failed start's own
      // restart is not waited for).
      const auto held_until = Clock::now() + 30s;
      std::set<int> waited_for;
      size_t pending = 0;
      while (!stop_faults && Clock::now() < held_until) {
        const std::set<int> now = handler_children(parents);
        if (waited_for.empty()) {
          for (const int pid : now) {
            if (!before.count(pid)) waited_for.insert(pid);
          }
        }
        pending = 0;
        for (const int pid : waited_for) {
          if (now.count(pid) && !maps_plugin(pid, "chaos.so")) ++pending;
        }
        if ((killed == 0 || !waited_for.empty()) && pending == 0) break;
        std::this_thread::sleep_for(100ms);
      }
      write_in_place(file, plugin_image);
      event("replace-plugin restored; waited for " + std::to_string(waited_for.size()) +
            " restarted handler children" +
            (pending == 0 ? "" : ", " + std::to_string(pending) + " still starting"));
    } else if (kind == "reload") {
      auto& host = some_host();
      host.reload_with_changed_group();
      event("reload " + host.name() + " (g-b concurrency changed)");
    }
    return true;
  }

  void fault_loop() {
    std::vector<std::string> kinds(o.faults.begin(), o.faults.end());
    if (kinds.empty()) return;
    for (size_t n = 0; !stop_faults; ++n) {
      const auto span = o.fault_every_max - o.fault_every_min;
      sleep_unless_stopped(o.fault_every_min +
                           std::chrono::milliseconds(span.count() ? rng() % span.count() : 0));
      if (stop_faults) break;
      const std::string kind =
          n < o.first_faults.size() ? o.first_faults[n] : kinds[rng() % kinds.size()];
      const auto began = Clock::now();
      if (fault(kind)) ++faults_done;
      const auto took = std::chrono::duration_cast<std::chrono::milliseconds>(Clock::now() - began);
      if (took > 3s && kind != "stop" && kind != "kill" && kind != "all-down") {
        event(kind + " took " + std::to_string(took.count()) + " ms");
      }
    }
  }

  // The operator of the ordered groups whose dead letters hold their key (ordering_dead =
  // "hold"), every 1-2 s: one round in four it retries up to 20 of their dead letters (they run
  // again, the key still held), the others it discards every dead letter, releasing the key.
  // Slower, a hot key whose every eighth message dies would fall ever further behind. With
  // `drain` (after the producers stopped) it always discards. It calls the functions `dead
  // retry` / `dead discard` call (store/reporting/operator_actions.cpp), not the CLI: a process
  // every second loaded the 2-core machine (the faults' operator commands still use the CLI).
  void release_held_keys(std::mt19937_64& r, bool drain, KeptConnection& kept) {
    for (const auto& s : kStreams) {
      if (ordering_dead_of(s.name) != "hold") continue;
      const bool retry = !drain && r() % 4 == 0;
      const int64_t begin = steady_ns();
      try {
        pqxx::work tx(kept.get());
        tx.exec_params(std::string("SELECT count(*) FROM sqlstreams.") +
                           (retry ? "dead_retry" : "dead_discard") +
                           "((SELECT g.id FROM sqlstreams.groups g JOIN sqlstreams.streams st ON "
                           "st.id = g.stream_id WHERE st.name = $1 AND g.name = $2), NULL, NULL, "
                           "NULL, NULL, $3, 'chaos-operator')",
                       s.name, kOrderedGroup, retry ? 20 : 1000000);
        tx.commit();
      } catch (const std::exception&) {
        kept.drop();
        continue;  // the database restarts during the run: the next round
      }
      std::lock_guard lk(h.mu);
      h.actions.push_back(OperatorAction{retry ? "dead-retry" : "dead-discard", s.name,
                                         kOrderedGroup, begin, steady_ns()});
    }
  }
  void operator_loop() {
    std::mt19937_64 r(o.seed * 7 + 3);
    KeptConnection kept{o.url};
    while (!stop_faults) {
      sleep_unless_stopped(std::chrono::milliseconds(1000 + r() % 1000));
      if (!stop_faults) release_held_keys(r, false, kept);
    }
  }

  // Samples every group's cursor and oldest range lease in one statement, 10 times a second:
  // `committed` must never pass an open lease, and never move backward except across a rewind.
  void monitor_loop();
  bool quiescent(KeptConnection& kept, std::string* why, std::string* state = nullptr);
  // Waits until quiescent (true) or no progress for quiesce_timeout (false).
  bool drain();
};

void ChaosRun::Impl::monitor_loop() {
  struct Last {
    int64_t committed = 0;
    int begun = 0;
    bool rewinding = false;
  };
  std::map<std::string, Last> last;  // "stream/group" -> the previous sample
  std::unique_ptr<pqxx::connection> c;
  while (!stop_monitor) {
    std::this_thread::sleep_for(100ms);
    try {
      if (!c || !c->is_open()) c = std::make_unique<pqxx::connection>(o.url);
      // Rewind counters read before and after the query: a rewind that overlaps either
      // sample (or began between two) may have moved the cursor back.
      std::map<std::string, int> begun, done, begun_after;
      {
        std::lock_guard lk(rewinds_mu);
        begun = rewinds_begun;
        done = rewinds_done;
      }
      struct Row {
        std::string key;
        int64_t committed;
        std::optional<int64_t> low;
      };
      std::vector<Row> rows;
      pqxx::work tx(*c);
      for (const auto& row : tx.exec("SELECT id, name FROM sqlstreams.streams ORDER BY id")) {
        const std::string sid = row[0].as<std::string>(), stream = row[1].as<std::string>();
        // One statement: one snapshot of the cursor and the leases together.
        auto r = tx.exec("SELECT g.name, c.committed, (SELECT min(l.low) FROM sqlstreams.leases_" +
                         sid + " l WHERE l.group_id = c.group_id) FROM sqlstreams.cursors_" + sid +
                         " c JOIN sqlstreams.groups g ON g.id = c.group_id");
        for (const auto& cr : r) {
          rows.push_back(
              Row{stream + "/" + cr[0].as<std::string>(), cr[1].as<int64_t>(),
                  cr[2].is_null() ? std::nullopt : std::optional<int64_t>(cr[2].as<int64_t>())});
        }
      }
      tx.commit();
      {
        std::lock_guard lk(rewinds_mu);
        begun_after = rewinds_begun;
      }
      for (const auto& row : rows) {
        const std::string& key = row.key;
        if (row.low && row.committed > *row.low) {
          std::lock_guard lk(h.mu);
          h.monitor_violations.push_back("passed-lease: " + key + " committed " +
                                         std::to_string(row.committed) + " > open lease low " +
                                         std::to_string(*row.low) + " at " + std::to_string(ms()) +
                                         " ms");
        }
        const bool rewinding = begun[key] != done[key] || begun_after[key] != begun[key];
        auto it = last.find(key);
        if (it != last.end() && row.committed < it->second.committed &&
            begun[key] == it->second.begun && !it->second.rewinding && !rewinding) {
          std::lock_guard lk(h.mu);
          h.monitor_violations.push_back("backward: " + key + " committed " +
                                         std::to_string(it->second.committed) + " -> " +
                                         std::to_string(row.committed) + " without a rewind at " +
                                         std::to_string(ms()) + " ms");
        }
        last[key] = Last{row.committed, begun_after[key], rewinding};
      }
      std::lock_guard lk(h.mu);
      h.monitor_samples++;
    } catch (const std::exception&) {
      c.reset();  // the database restarts during the run
    }
  }
}

// After the producers stopped: waits for quiescence, releasing held keys as an operator would.
// Liveness: "stuck" means no progress for quiesce_timeout, not "slower than a fixed budget"
// (a long run under load ends with a backlog it is still working through).
bool ChaosRun::Impl::drain() {
  std::string why, last_state, last_waiting;
  auto deadline = Clock::now() + o.quiesce_timeout;
  bool quiet = false;
  std::mt19937_64 drain_rng(o.seed);
  auto next_release = Clock::now();
  KeptConnection kept{o.url};  // ~10 polls a second
  while (Clock::now() < deadline) {
    std::string state;
    if ((quiet = quiescent(kept, &why, &state))) break;
    // Where the drain's time goes: the first group not yet quiet, each time that changes.
    const std::string waiting = why.substr(0, why.find(':'));
    if (waiting != last_waiting) {
      last_waiting = waiting;
      event("drain: waiting for " + why);
    }
    // A held key's successors wait for an operator: one who discards every 100 ms. A hot key
    // whose every eighth message dies drains one dead letter per round, so the round's period
    // is the drain's: at 1 s the short run spent ~100 s here.
    if (o.ordered && Clock::now() >= next_release) {
      release_held_keys(drain_rng, true, kept);
      next_release = Clock::now() + 100ms;
    }
    if (state != last_state) {
      last_state = state;
      deadline = Clock::now() + o.quiesce_timeout;
    }
    std::this_thread::sleep_for(o.ordered ? 100ms : 250ms);
  }
  event(quiet ? "quiescent" : "NOT quiescent: " + why);
  return quiet;
}

// Quiescent: no range lease, no exception row but dead letters (ready, inflight, or whatever an
// ordered group keeps for a held key), every group committed = claimed >= the stream's max(id).
// `state` gets every group's numbers: the caller's measure of progress.
bool ChaosRun::Impl::quiescent(KeptConnection& kept, std::string* why, std::string* state) {
  bool quiet = true;
  try {
    pqxx::work tx(kept.get());
    for (const auto& row : tx.exec("SELECT id, name FROM sqlstreams.streams ORDER BY id")) {
      const std::string sid = row[0].as<std::string>(), stream = row[1].as<std::string>();
      auto r = tx.exec(
          "SELECT g.name, c.committed, c.claimed, (SELECT coalesce(max(id), 0) FROM "
          "sqlstreams.messages_" +
          sid + "), (SELECT count(*) FROM sqlstreams.leases_" + sid +
          " l WHERE l.group_id = c.group_id), (SELECT count(*) FROM sqlstreams.exceptions_" + sid +
          " e WHERE e.group_id = c.group_id AND e.status <> 'dead') FROM "
          "sqlstreams.cursors_" +
          sid + " c JOIN sqlstreams.groups g ON g.id = c.group_id");
      for (const auto& cr : r) {
        const int64_t committed = cr[1].as<int64_t>(), claimed = cr[2].as<int64_t>(),
                      head = cr[3].as<int64_t>(), leases = cr[4].as<int64_t>(),
                      open = cr[5].as<int64_t>();
        if (state) {
          *state += stream + "/" + cr[0].as<std::string>() + " " + std::to_string(committed) + " " +
                    std::to_string(claimed) + " " + std::to_string(leases) + " " +
                    std::to_string(open) + ";";
        }
        if (committed != claimed || claimed < head || leases != 0 || open != 0) {
          if (why && quiet) {
            *why = stream + "/" + cr[0].as<std::string>() + ": committed " +
                   std::to_string(committed) + " claimed " + std::to_string(claimed) + " head " +
                   std::to_string(head) + " leases " + std::to_string(leases) + " ready/inflight " +
                   std::to_string(open);
          }
          quiet = false;
        }
      }
    }
    return quiet;
  } catch (const std::exception& e) {
    kept.drop();
    if (why) *why = e.what();
    return false;
  }
}

bool ChaosRun::run() {
  auto& m = *impl_;
  std::filesystem::create_directories(plugin_dir_of(options_));
  m.plugin_image = read_whole(std::string(SQLSTREAMS_PLUGIN_DIR) + "/chaos.so");
  {
    const std::string copy = plugin_dir_of(options_) + "/chaos.so";
    std::ofstream(copy, std::ios::binary) << m.plugin_image;
    std::filesystem::permissions(
        copy, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
                  std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
                  std::filesystem::perms::others_exec);
  }
  ChaosHost declarer(options_, 0);  // writes chaos-h0.toml: the same streams and groups
  auto [code, out] = testing::run_command(
      {SQLSTREAMS_BINARY, "declare", "--config", options_.work_dir + "/chaos-h0.toml"},
      {{"SQLSTREAMS_DATABASE_URL", options_.url}});
  if (code != 0) throw std::runtime_error("sqlstreams declare failed: " + out);
  {  // the application's own table, beside the streams (Producers' unrelated writer)
    pqxx::connection c(options_.url);
    pqxx::nontransaction t(c);
    t.exec("CREATE TABLE IF NOT EXISTS public.chaos_app (n bigint)");
  }
  for (int i = 1; i <= options_.hosts; ++i) {
    m.hosts.push_back(std::make_unique<ChaosHost>(options_, i));
    m.start_host(*m.hosts.back());
  }
  // The run's clock starts when every host is ready: a slow machine's start-up (ASan hosts
  // beside a busy suite took seconds) must not eat a short run's fault window. A host that
  // never gets ready is the run's to report (host-exit), not a reason to wait on.
  {
    const auto ready_by = Clock::now() + 60s;
    auto all_ready = [&m] {
      for (auto& host : m.hosts) {
        if (!host->ready()) return false;
      }
      return true;
    };
    while (!all_ready() && Clock::now() < ready_by) std::this_thread::sleep_for(50ms);
    m.event(all_ready() ? "hosts ready" : "hosts not all ready after 60 s: running anyway");
  }
  m.event(
      "started " + std::to_string(options_.hosts) + " hosts, seed " +
      std::to_string(options_.seed) + (options_.plant.empty() ? "" : ", plant " + options_.plant) +
      (options_.ordered
           ? (options_.ordering_config ? ", ordered g-o" : ", g-o keyed but configured unordered")
           : ""));
  m.producers = std::make_unique<Producers>(options_.url, options_.seed, history_, options_.ordered,
                                            options_.hot_keys);
  m.producers->start();
  m.monitor_thread = std::thread([&m] { m.monitor_loop(); });
  m.fault_thread = std::thread([&m] { m.fault_loop(); });
  if (options_.ordered) m.operator_thread = std::thread([&m] { m.operator_loop(); });

  std::this_thread::sleep_for(options_.duration);
  // At least min_faults faults injected (ChaosOptions::min_faults), within 4 durations.
  if (m.faults_done < options_.min_faults) {
    const auto cap = Clock::now() + 3 * options_.duration;
    while (m.faults_done < options_.min_faults && Clock::now() < cap) {
      std::this_thread::sleep_for(100ms);
    }
    m.event("ran past the duration until " + std::to_string(m.faults_done.load()) + " of " +
            std::to_string(options_.min_faults) + " faults were injected");
  }
  m.stop_faults = true;
  m.fault_thread.join();
  if (m.operator_thread.joinable()) m.operator_thread.join();
  m.producers->stop();
  m.event("producers stopped after " + std::to_string(m.producers->attempted()) +
          " messages; the unrelated writer committed " +
          std::to_string(m.producers->unrelated_commits()) + " long transactions");
  for (auto& host : m.hosts) {
    host->resume();
    if (!host->running()) {
      // Every fault restarts what it stopped: a host that is gone exited by itself.
      const std::string what = host->name() + " was not running at the end (exit): restarted";
      m.event(what);
      {
        std::lock_guard lk(history_.mu);
        history_.host_exits.push_back(what + " (log " + host->log_file() + ")");
      }
      m.start_host(*host);
    }
  }
  bool quiet = false;
  if (options_.drain) {
    quiet = m.drain();
  } else {
    m.event("no drain: the safety invariants only");
  }
  m.stop_monitor = true;
  m.monitor_thread.join();
  for (auto& host : m.hosts) host->ask_to_stop();
  for (auto& host : m.hosts) {
    const int rc = host->terminate(15000);
    if (rc != 0) m.event(host->name() + " exit " + std::to_string(rc) + " on SIGTERM");
  }
  m.event("hosts stopped");
  return quiet;
}

ChaosRun::ChaosRun(ChaosOptions options)
    : options_(std::move(options)), impl_(std::make_unique<Impl>(options_, history_)) {}

ChaosRun::~ChaosRun() {
  impl_->stop_faults = true;
  impl_->stop_monitor = true;
  if (impl_->fault_thread.joinable()) impl_->fault_thread.join();
  if (impl_->operator_thread.joinable()) impl_->operator_thread.join();
  if (impl_->monitor_thread.joinable()) impl_->monitor_thread.join();
  if (impl_->producers) impl_->producers->stop();
  for (auto& host : impl_->hosts) host->terminate(10000);
}

std::vector<std::string> ChaosRun::record_files() const {
  std::vector<std::string> files;
  for (const auto& host : impl_->hosts) files.push_back(host->record_file());
  return files;
}

std::vector<std::string> ChaosRun::host_logs() const {
  std::vector<std::string> logs;
  for (const auto& e : std::filesystem::directory_iterator(options_.work_dir)) {
    if (e.path().extension() == ".log") logs.push_back(e.path().string());
  }
  return logs;
}

}  // namespace sqlstreams::chaos
