// Maintenance runners on one database (real PostgreSQL, real clock, short TTLs): exactly one
// runner holds a worker; a refused renewal stops the work at once (on a manual steady clock:
// the renewal is sent when the test moves the clock to half the TTL, not after real waiting); a
// crashed holder's worker moves within the TTL; a graceful stop hands over at once; heartbeats
// and status.
#include "maintain/runner.hpp"

#include <atomic>
#include <thread>

#include "maintain_fixture.hpp"
#include "scratch.hpp"
#include "store/reporting/status.hpp"

namespace sqlstreams::testing {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

// Counts its passes; every pass must carry a fence.
class CountingWorker final : public maintain::MaintenanceWorker {
 public:
  CountingWorker(store::WorkerKey key, std::atomic<int>& runs)
      : MaintenanceWorker(std::move(key), fast()), runs_(runs) {}
  void run(SysTime, const store::WorkerFence* fence) override {
    EXPECT_NE(fence, nullptr);
    runs_++;
  }
  static maintain::Schedule fast() {
    maintain::Schedule s;
    s.period = 50ms;
    return s;
  }

 private:
  std::atomic<int>& runs_;
};

class RunnerTest : public MaintainTest {
 protected:
  std::unique_ptr<maintain::MaintenanceRunner> runner(const std::string& name,
                                                      std::atomic<int>& runs,
                                                      const SteadyClock* steady = nullptr) {
    maintain::RunnerOptions o;
    if (steady != nullptr) o.steady_clock = steady;
    o.session = options();
    o.holder = name + ":1";
    o.host = store::HostInfo{name, 1, "test", SystemClock::instance().now()};
    o.ttl = ttl_;
    std::vector<maintain::WorkerSpec> specs;
    specs.push_back({key_, "janitor", [&runs, key = key_](store::Session&) {
                       return std::make_unique<CountingWorker>(key, runs);
                     }});
    return std::make_unique<maintain::MaintenanceRunner>(std::move(o), std::move(specs));
  }
  std::string holder() {
    auto r = db_.sql(
        "SELECT holder FROM sqlstreams.workers WHERE kind = 'janitor' AND "
        "expires_at > now()");
    return r.empty() || r[0][0].is_null() ? "" : r[0][0].as<std::string>();
  }

  Millis ttl_ = 1000ms;
  store::WorkerKey key_{"janitor", "stream:1"};
};

TEST_F(RunnerTest, OnlyOneRunnerHoldsAWorkerAndItMovesWhenTheHolderDies) {
  std::atomic<int> runs_a{0}, runs_b{0};
  auto a = runner("host-a", runs_a);
  auto b = runner("host-b", runs_b);
  a->start();
  b->start();
  ASSERT_TRUE(wait_until([&] { return a->held().size() + b->held().size() == 1; }, 3s));
  // For a few TTLs, never both, and only the holder runs the work.
  auto until = Steady::now() + 2500ms;
  while (Steady::now() < until) {
    ASSERT_LE(a->held().size() + b->held().size(), 1u);
    std::this_thread::sleep_for(10ms);
  }
  const bool a_holds = !a->held().empty();
  auto& holder_runs = a_holds ? runs_a : runs_b;
  auto& other_runs = a_holds ? runs_b : runs_a;
  EXPECT_GT(holder_runs.load(), 10);
  EXPECT_EQ(other_runs.load(), 0);
  EXPECT_EQ(holder(), a_holds ? "host-a:1" : "host-b:1");

  // The holder crashes: nothing is released; the other takes over once the lease expires.
  auto& dead = a_holds ? a : b;
  auto& live = a_holds ? b : a;
  const auto crashed = Steady::now();
  dead->abandon();
  ASSERT_TRUE(wait_until([&] { return !live->held().empty(); }, ttl_ * 3));
  const auto took = std::chrono::duration_cast<Millis>(Steady::now() - crashed);
  EXPECT_LE(took, ttl_ + ttl_ / 2) << "a TTL plus one acquire interval at most";
  EXPECT_EQ(holder(), a_holds ? "host-b:1" : "host-a:1");
  const int before = other_runs.load();
  EXPECT_TRUE(wait_until([&] { return other_runs.load() > before + 3; }, 2s));
  live->stop();
}

TEST_F(RunnerTest, ARefusedRenewalStopsTheWorkAtOnce) {
  // The runner's schedule runs on a manual clock: a pass, a renewal or an acquire round happens
  // only when the test moves it (the lease's expiry stays on the database's clock).
  ManualSteadyClock clock;
  std::atomic<int> runs{0};
  auto a = runner("host-a", runs, &clock);
  a->start();
  ASSERT_TRUE(wait_until(
      [&] {
        clock.advance(CountingWorker::fast().period);
        return !a->held().empty() && runs.load() > 2;
      },
      3s));
  // Another holder takes the row (as after a clock jump or a partition): the next renewal,
  // at half the TTL, is refused and the work stops.
  db_.sql(
      "UPDATE sqlstreams.workers SET token = gen_random_uuid(), holder = 'thief:9', "
      "expires_at = now() + interval '1 hour'");
  clock.advance(ttl_ / 2);
  ASSERT_TRUE(wait_until([&] { return a->held().empty(); }, 3s));
  const int stopped_at = runs.load();
  // Ten periods of the worker pass on the runner's clock, each seen by its threads (they look
  // at the clock every ManualSteadyClock::kRecheck): no pass.
  for (int i = 0; i < 10; ++i) {
    clock.advance(CountingWorker::fast().period);
    std::this_thread::sleep_for(2 * ManualSteadyClock::kRecheck);
  }
  EXPECT_EQ(runs.load(), stopped_at) << "no pass after the lease was lost";
  EXPECT_EQ(holder(), "thief:9");
  // The thief's lease expires: the runner takes it back at its next acquire round.
  db_.sql("UPDATE sqlstreams.workers SET expires_at = now() - interval '1 second'");
  EXPECT_TRUE(wait_until(
      [&] {
        clock.advance(ttl_ / 4);
        return !a->held().empty();
      },
      3s));
  a->stop();
}

TEST_F(RunnerTest, AGracefulStopHandsOverAtOnceAndHeartbeatsShowInStatus) {
  ttl_ = 30'000ms;  // long: only a release can explain a quick handover
  std::atomic<int> runs_a{0}, runs_b{0};
  auto a = runner("host-a", runs_a);
  a->start();
  ASSERT_TRUE(wait_until([&] { return !a->held().empty(); }, 3s));
  auto b = runner("host-b", runs_b);
  b->start();
  ASSERT_TRUE(wait_until(
      [&] {
        return db_.scalar<int64_t>(
                   "SELECT count(*) FROM sqlstreams.hosts WHERE expires_at > "
                   "now()") == 2;
      },
      3s));
  auto status = store::read_status(*session_, SystemClock::instance().now());
  ASSERT_EQ(status.hosts.size(), 2u);
  EXPECT_EQ(status.hosts[0].name, "host-a");
  EXPECT_TRUE(status.hosts[0].live);
  ASSERT_EQ(status.hosts[0].workers.size(), 1u);
  EXPECT_EQ(status.hosts[0].workers[0], "janitor payments.requested");
  EXPECT_TRUE(status.hosts[1].workers.empty());
  ASSERT_EQ(status.streams.size(), 1u);
  EXPECT_EQ(status.streams[0].janitor, "host-a:1");

  a->stop();
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM sqlstreams.hosts"), 1)
      << "a stopped host removes its row";
  ASSERT_TRUE(wait_until([&] { return !b->held().empty(); }, 3s));
  EXPECT_EQ(holder(), "host-b:1");
  b->stop();
  EXPECT_EQ(db_.scalar<int64_t>("SELECT count(*) FROM sqlstreams.workers WHERE holder IS NOT "
                                "NULL"),
            0);
}

}  // namespace
}  // namespace sqlstreams::testing
