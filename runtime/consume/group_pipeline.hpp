// consume/group_pipeline — everything that runs one consumer group on this host (DESIGN §6):
//   claimer thread   reclaims expired leases first, then observe → prove → claim (the fence);
//                    at most `queue_ranges` claimed ranges are in flight (backpressure);
//   worker threads   `concurrency` threads run the handler per message, in claim order;
//   committer thread batches finished ranges into one token-guarded transaction, renews the
//                    leases of ranges in flight, and runs the cursor advancer about once a second.
// stop(): stop claiming, give unstarted messages back, wait for in-flight handlers up to the
// deadline, commit finished prefixes and hand the rest back (reclaimable, not counted a crash).
// Threading: start()/stop() from one control thread; everything else is internal.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "common/clock.hpp"
#include "config/config.hpp"
#include "consume/group_metrics.hpp"
#include "consume/range_work.hpp"
#include "plugin_host/plugin_host.hpp"
#include "store/catalog.hpp"
#include "store/group_store.hpp"
#include "store/session.hpp"

namespace sqlstreams::consume {

struct PipelineOptions {
  config::GroupConfig group;
  store::SessionOptions session;
  store::GroupRef ref;
  bool notify = false;         // LISTEN for the stream's wake-up hint
  std::string holder;          // "<host name>:<pid>", written into leases and audit rows
  const Clock* clock = &SystemClock::instance();
  std::function<double()> random01;  // injected jitter source; default: a seeded mt19937_64
  bool run_advancer = true;
};

class GroupPipeline {
 public:
  GroupPipeline(PipelineOptions options, std::unique_ptr<plugin_host::HandlerInstance> handler);
  ~GroupPipeline();
  GroupPipeline(const GroupPipeline&) = delete;
  GroupPipeline& operator=(const GroupPipeline&) = delete;

  void start();
  // Drains (see above). Returns false when handlers were still running at the deadline: the
  // caller must then end the process without destroying this object.
  bool stop(std::chrono::steady_clock::time_point deadline);

  const GroupMetrics& metrics() const { return metrics_; }
  const PipelineOptions& options() const { return options_; }
  size_t ranges_in_flight() const;

 private:
  struct Task {
    std::shared_ptr<RangeWork> range;
    size_t index;
  };

  void claim_loop();
  void worker_loop();
  void commit_loop();

  void enqueue(store::ClaimedRange range);
  void run_one(const std::shared_ptr<RangeWork>& range, size_t index);
  void finish_slot(const std::shared_ptr<RangeWork>& range, size_t index, SlotState state);
  // Commits `ranges` (retrying transient errors until `give_up`); returns when done.
  void commit_batch(store::GroupStore& store,
                    const std::vector<std::shared_ptr<RangeWork>>& ranges,
                    std::chrono::steady_clock::time_point give_up);
  void renew_leases(store::GroupStore& store);
  void sleep_idle(std::chrono::milliseconds d);
  double random01();

  PipelineOptions options_;
  std::unique_ptr<plugin_host::HandlerInstance> handler_;
  std::set<int32_t> accepted_versions_;
  GroupMetrics metrics_;

  mutable std::mutex mu_;
  std::condition_variable work_cv_;    // workers: tasks available / stopping
  std::condition_variable claim_cv_;   // claimer: capacity freed / stopping
  std::condition_variable commit_cv_;  // committer: ranges finished / flush
  std::deque<Task> tasks_;
  std::map<std::string, std::shared_ptr<RangeWork>> active_;  // by lease token
  std::vector<std::shared_ptr<RangeWork>> finished_;
  bool stop_claiming_ = false;
  bool stop_workers_ = false;
  bool final_flush_ = false;
  int running_workers_ = 0;
  int busy_workers_ = 0;

  std::mutex rng_mu_;
  uint64_t rng_state_;

  std::thread claimer_;
  std::thread committer_;
  std::vector<std::thread> workers_;
};

}  // namespace sqlstreams::consume
