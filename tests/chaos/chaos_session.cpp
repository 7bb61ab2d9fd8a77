#include "chaos_session.hpp"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <pqxx/pqxx>
#include <sstream>

#include "e2e_support.hpp"
#include "scratch.hpp"

// The workload's own producers and monitor lose their connections on purpose
// (pg_terminate_backend, pg_ctl restart): libpqxx 6.4 then leaks one PGresult per lost
// connection (see tests/e2e/lsan.supp). Suppressed for chaos_tests and chaos_run alone.
extern "C" const char* __lsan_default_suppressions() { return "leak:libpqxx-6.4.so\n"; }

namespace sqlstreams::chaos {

std::string SessionResult::summary() const {
  std::ostringstream o;
  o << verdict.report() << "fault log:\n";
  for (const auto& e : events) o << "  " << e << "\n";
  o << "work dir (configs, host logs, records): " << work_dir << "\n";
  return o.str();
}

namespace {

// A failed run's evidence outlives its cluster: every table of the schema (not the messages) as
// tab-separated text in <work dir>/db/<table>.tsv, to replay what the checker saw.
void dump_control_tables(const std::string& url, const std::string& dir) {
  try {
    std::filesystem::create_directories(dir);
    pqxx::connection c(url);
    pqxx::work tx(c);
    for (const auto& t : tx.exec("SELECT tablename FROM pg_tables WHERE schemaname = "
                                 "'sqlstreams' AND tablename NOT LIKE 'messages%'")) {
      const std::string name = t[0].as<std::string>();
      std::ofstream out(dir + "/" + name + ".tsv");
      for (const auto& row : tx.exec("SELECT * FROM sqlstreams." + c.quote_name(name))) {
        for (pqxx::row::size_type i = 0; i < row.size(); ++i) {
          out << (i ? "\t" : "") << (row[i].is_null() ? "NULL" : row[i].c_str());
        }
        out << "\n";
      }
    }
  } catch (const std::exception& e) {
    std::ofstream(dir + "/dump-failed.txt") << e.what() << "\n";
  }
}

}  // namespace

SessionResult run_chaos_session(ChaosOptions options) {
  e2e::OwnCluster cluster;
  char tmpl[] = "/tmp/sqlstreams-chaos-XXXXXX";
  if (!mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
  std::filesystem::permissions(tmpl, std::filesystem::perms(0755));
  options.work_dir = tmpl;
  options.url = cluster.url();
  options.restart_database = [&cluster] { return cluster.restart_immediate().first == 0; };
  ::setenv("SQLSTREAMS_CHAOS_LSAN_OPTIONS", e2e::lsan_options_for_lost_connections().c_str(), 1);
  // The workload's own producers (store::Producer, in this process) see the plant too: the
  // producer's plants live there (common/chaos_plant.hpp reads the variable once, and
  // nothing in this process has read it before the run).
  if (!options.plant.empty()) ::setenv("SQLSTREAMS_CHAOS_PLANT", options.plant.c_str(), 1);

  SessionResult result;
  result.work_dir = options.work_dir;
  {
    ChaosRun run(options);
    result.quiescent = run.run();
    CheckInput in{options.url, options.seed, options.max_retries, result.quiescent,
                  run.record_files()};
    if (options.ordered) {  // judged as ordered whether or not its config says so
      for (const auto& s : kStreams)
        in.ordered[s.name + "/" + kOrderedGroup] = ordering_dead_of(s.name);
    }
    in.stop_grace_ns = static_cast<int64_t>(options.lease_ttl_ms.count()) * 1'000'000;
    result.verdict = check(in, run.history());
    if (!result.verdict.ok() || !result.quiescent) {
      dump_control_tables(options.url, options.work_dir + "/db");
    }
    std::lock_guard lk(run.history().mu);
    result.events = run.history().events;
  }
  if (result.verdict.ok() && result.quiescent && !testing::keep_requested()) {
    std::error_code ec;
    std::filesystem::remove_all(options.work_dir, ec);
    result.work_dir += " (removed)";
  }
  return result;
}

}  // namespace sqlstreams::chaos
