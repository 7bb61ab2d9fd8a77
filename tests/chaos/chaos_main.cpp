// chaos_run — the long chaos run for development (scripts/chaos.sh): --minutes N --seed S
// [--hosts H] [--faults a,b,c] [--first-faults a,b] [--plant NAME] [--unordered]
// [--no-ordering-config]. Prints the
// seed, the fault log and a one-line verdict; exit 0 when no invariant was violated, 1 otherwise.
// The same seed replays the same fault schedule (timing still varies with the machine).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <sstream>

#include "chaos_session.hpp"

int main(int argc, char** argv) {
  using namespace sqlstreams::chaos;
  CLI::App app{"SQLStreams chaos run: randomized workload, faults, history checker"};
  double minutes = 5;
  uint64_t seed = 1;
  std::string faults, first_faults, plant;
  ChaosOptions o;
  app.add_option("--minutes", minutes, "how long the workload runs")->check(CLI::PositiveNumber);
  app.add_option("--seed", seed, "seed of the fault schedule and the plugin's outcomes");
  app.add_option("--hosts", o.hosts, "sqlstreams run hosts")->check(CLI::Range(1, 8));
  app.add_option("--faults", faults,
                 "comma-separated subset of: kill,stop,pg-restart,terminate,"
                 "rewind,dead-retry,dead-discard,reload (default: all)");
  app.add_option("--first-faults", first_faults,
                 "comma-separated faults injected first, in order (the short run: all-down)");
  app.add_option("--plant", plant, "a planted defect (test builds only)");
  bool unordered = false, no_ordering_config = false;
  app.add_flag("--unordered", unordered, "no ordered group g-o and no keyed workload");
  app.add_flag("--no-ordering-config", no_ordering_config,
               "g-o without `ordering = \"key\"`: an unordered group judged as ordered (the "
               "checker must report order/overlap/early)");
  CLI11_PARSE(app, argc, argv);
  o.seed = seed;
  o.duration = std::chrono::seconds(static_cast<int64_t>(minutes * 60));
  o.plant = plant;
  o.log_progress = true;
  o.ordered = !unordered;
  o.ordering_config = !no_ordering_config;
  if (!faults.empty()) {
    o.faults.clear();
    std::stringstream ss(faults);
    for (std::string f; std::getline(ss, f, ',');) {
      if (!kAllFaults.count(f)) {
        std::fprintf(stderr, "chaos: unknown fault '%s'\n", f.c_str());
        return 64;
      }
      o.faults.insert(f);
    }
  }
  std::stringstream first(first_faults);
  for (std::string f; std::getline(first, f, ',');) {
    if (!kAllFaults.count(f)) {
      std::fprintf(stderr, "chaos: unknown fault '%s'\n", f.c_str());
      return 64;
    }
    o.first_faults.push_back(f);
  }
  std::printf("chaos: seed %llu, %.1f minutes, %d hosts\n", static_cast<unsigned long long>(seed),
              minutes, o.hosts);
  std::fflush(stdout);
  const auto result = run_chaos_session(o);
  std::printf("%s", result.summary().c_str());
  std::printf("verdict seed=%llu %s%s\n", static_cast<unsigned long long>(seed),
              result.verdict.line().c_str(), result.quiescent ? "" : " (not quiescent)");
  return result.verdict.ok() && result.quiescent ? 0 : 1;
}
