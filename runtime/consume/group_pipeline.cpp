// GroupPipeline: composes the parts (range queue, worker pool, committer, claimer, retrier),
// starts them, and stops them in the order a drain needs.
#include "consume/group_pipeline.hpp"

#include "consume/claimer.hpp"
#include "consume/committer.hpp"
#include "consume/range_queue.hpp"
#include "consume/retrier.hpp"
#include "consume/worker_pool.hpp"

namespace sqlstreams::consume {

GroupPipeline::GroupPipeline(PipelineOptions options,
                             std::unique_ptr<plugin_host::HandlerInstance> handler)
    : options_(std::move(options)) {
  if (!options_.emit_targets.empty() && handler) {
    auto policy = std::make_shared<plugin_host::EmitPolicy>();
    for (const auto& t : options_.emit_targets)
      policy->max_payload_bytes[t.name] = t.max_payload_bytes;
    policy->max_count = static_cast<size_t>(options_.group.max_emits_per_message);
    policy->max_bytes = options_.group.max_emit_bytes_per_message;
    handler->set_emit_policy(std::move(policy));
  }
  queue_ = std::make_unique<RangeQueue>(options_, metrics_);
  pool_ = std::make_unique<WorkerPool>(options_, *queue_, metrics_, std::move(handler));
  committer_ = std::make_unique<Committer>(options_, *queue_, metrics_,
                                           [pool = pool_.get()] { pool->check_timeouts(); });
  claimer_ = std::make_unique<Claimer>(options_, *queue_, metrics_, pool_->asynchronous());
  retrier_ = std::make_unique<Retrier>(options_, *queue_, metrics_, pool_->asynchronous());
}

GroupPipeline::~GroupPipeline() {
  if (claimer_->running() || committer_->running()) {
    stop(std::chrono::steady_clock::now() + options_.group.handler_timeout);
  }
}

void GroupPipeline::start() {
  pool_->start();
  committer_->start();
  claimer_->start();
  retrier_->start();
}

// Stop claiming, give unstarted work back, wait for in-flight handlers up to the deadline,
// commit finished prefixes and hand the rest back.
bool GroupPipeline::stop(std::chrono::steady_clock::time_point deadline) {
  committer_->set_stop_deadline(deadline);
  queue_->stop_claiming();
  claimer_->join();
  retrier_->join();
  queue_->stop_workers();
  const bool drained = pool_->stop(deadline);
  queue_->final_flush();
  committer_->join();
  return drained;
}

size_t GroupPipeline::ranges_in_flight() const { return queue_->ranges_in_flight(); }
int GroupPipeline::live_workers() const { return pool_->live_workers(); }
int GroupPipeline::hung_handlers() const { return pool_->hung_handlers(); }
bool GroupPipeline::paused() const { return queue_->paused(); }
bool GroupPipeline::operator_paused() const { return queue_->operator_paused(); }
bool GroupPipeline::dropped() const { return queue_->dropped(); }
bool GroupPipeline::asynchronous() const { return pool_->asynchronous(); }
size_t GroupPipeline::in_flight() const { return pool_->in_flight(); }
size_t GroupPipeline::peak_in_flight() const { return pool_->peak_in_flight(); }
uint64_t GroupPipeline::completions_dropped() const { return pool_->completions_dropped(); }
uint64_t GroupPipeline::stderr_lines_dropped() const { return pool_->stderr_lines_dropped(); }
uint64_t GroupPipeline::stderr_bytes_dropped() const { return pool_->stderr_bytes_dropped(); }

}  // namespace sqlstreams::consume
