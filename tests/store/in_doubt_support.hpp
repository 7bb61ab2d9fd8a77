// tests/store/in_doubt_support — makes a COMMIT's outcome unknown to the client, on purpose
// and deterministically: cluster-wide, commits wait for a synchronous standby that never comes
// (except in sessions that set synchronous_commit below `on`), the COMMIT of a session opened
// with in_doubt_session_options() hangs after its local commit, and its backend is terminated
// while it waits: the client sees a broken connection during COMMIT. Such a test runs alone
// (RUN_SERIAL: tests/store/CMakeLists.txt selects it by "InDoubt" in its name, which
// CommitsWaitForAStandby checks), so nothing else commits meanwhile; the configuration is
// restored afterwards.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <optional>
#include <pqxx/pqxx>
#include <string>
#include <thread>

#include "store/connection/session.hpp"
#include "store/errors.hpp"
#include "test_database.hpp"

namespace sqlstreams::testing {

// Cluster-wide: commits wait for a synchronous standby that never comes (see above).
class CommitsWaitForAStandby {
 public:
  explicit CommitsWaitForAStandby(const std::string& url) : url_(url) {
    const auto* test = ::testing::UnitTest::GetInstance()->current_test_info();
    const std::string name = std::string(test->test_suite_name()) + "." + test->name();
    if (name.find("InDoubt") == std::string::npos) {
      ADD_FAILURE() << name
                    << " changes the whole cluster's commits but its name lacks \"InDoubt\": "
                    << "tests/store/CMakeLists.txt runs only such tests serially";
    }
    set("ALTER SYSTEM SET synchronous_standby_names = 'sqlstreams_test_no_such_standby'",
        "ALTER SYSTEM SET synchronous_commit = 'local'", "sqlstreams_test_no_such_standby");
  }
  ~CommitsWaitForAStandby() {
    set("ALTER SYSTEM RESET synchronous_standby_names", "ALTER SYSTEM RESET synchronous_commit",
        "");
  }

 private:
  void set(const char* a, const char* b, const std::string& expect) {
    {
      pqxx::connection c(url_);
      pqxx::nontransaction n(c);
      n.exec(a);
      n.exec(b);
      n.exec("SELECT pg_reload_conf()");
    }
    for (int i = 0; i < 500; ++i) {  // the reload is asynchronous: wait until sessions see it
      pqxx::connection c(url_);
      pqxx::nontransaction n(c);
      if (n.exec1("SHOW synchronous_standby_names")[0].as<std::string>() == expect) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "configuration reload not seen";
  }
  std::string url_;
};

// A session whose commits wait for the missing standby (application_name "in-doubt-test").
inline store::SessionOptions in_doubt_session_options(store::SessionOptions o) {
  o.url += (o.url.find('?') == std::string::npos ? "?" : "&");
  o.url += "options=-csynchronous_commit%3Don";
  o.application_name = "in-doubt-test";
  return o;
}

// Runs `commit` (a store call on an in_doubt_session_options() session) while commits wait for
// the standby, terminates its backend once its COMMIT waits, and returns the StoreError kind it
// threw (nullopt if none).
template <class Fn>
std::optional<store::StoreError::Kind> run_in_doubt(const std::string& admin_url,
                                                    const TestDatabase& db, Fn&& commit) {
  std::optional<store::StoreError::Kind> error;
  CommitsWaitForAStandby standby(admin_url);
  std::thread t([&] {
    try {
      commit();
    } catch (const store::StoreError& e) {
      error = e.kind();
    }
  });
  bool terminated = false;
  for (int i = 0; i < 1000 && !terminated; ++i) {
    terminated = db.scalar<bool>(
        "SELECT coalesce(bool_or(pg_terminate_backend(pid)), false) FROM pg_stat_activity "
        "WHERE application_name = 'in-doubt-test' AND wait_event = 'SyncRep'");
    if (!terminated) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  t.join();
  EXPECT_TRUE(terminated) << "the COMMIT never waited for the standby";
  return error;
}

}  // namespace sqlstreams::testing
