#include "chaos_session.hpp"

#include <cstdlib>
#include <filesystem>
#include <sstream>

#include "e2e_support.hpp"

namespace sqlstreams::chaos {

std::string SessionResult::summary() const {
  std::ostringstream o;
  o << verdict.report() << "fault log:\n";
  for (const auto& e : events) o << "  " << e << "\n";
  o << "work dir (configs, host logs, records): " << work_dir << "\n";
  return o.str();
}

SessionResult run_chaos_session(ChaosOptions options) {
  e2e::OwnCluster cluster;
  char tmpl[] = "/tmp/sqlstreams-chaos-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  std::filesystem::permissions(tmpl, std::filesystem::perms(0755));
  options.work_dir = tmpl;
  options.url = cluster.url();
  options.restart_database = [&cluster] { return cluster.restart_immediate().first == 0; };
  ::setenv("SQLSTREAMS_CHAOS_LSAN_OPTIONS", e2e::lsan_options_for_lost_connections().c_str(), 1);

  SessionResult result;
  result.work_dir = options.work_dir;
  {
    ChaosRun run(options);
    result.quiescent = run.run();
    CheckInput in{options.url, options.seed, options.max_retries, result.quiescent,
                  run.record_files()};
    result.verdict = check(in, run.history());
    std::lock_guard lk(run.history().mu);
    result.events = run.history().events;
  }
  const char* keep = std::getenv("SQLSTREAMS_E2E_KEEP");
  if (result.verdict.ok() && result.quiescent && !(keep && *keep && std::string(keep) != "0")) {
    std::error_code ec;
    std::filesystem::remove_all(options.work_dir, ec);
    result.work_dir += " (removed)";
  }
  return result;
}

}  // namespace sqlstreams::chaos
