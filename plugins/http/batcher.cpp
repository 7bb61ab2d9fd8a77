#include "batcher.hpp"

#include <memory>

namespace sqlstreams_http {
namespace {

int64_t unix_now_s() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

Batcher::Batcher(const Settings& settings, Dispatcher& dispatcher, HeaderMaker headers)
    : settings_(settings), dispatcher_(dispatcher), headers_(std::move(headers)) {
  thread_ = std::thread([this] { run(); });
}

Batcher::~Batcher() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_one();
  thread_.join();
}

void Batcher::add(BatchItem item) {
  bool wake;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (pending_.empty()) first_since_ = std::chrono::steady_clock::now();
    pending_bytes_ += item.element.size() + 1;
    pending_.push_back(std::move(item));
    // The first (starts the linger) and a full batch wake the thread; the rest need not.
    wake = pending_.size() == 1 || pending_.size() >= settings_.batch_max ||
           pending_bytes_ >= settings_.batch_max_bytes;
  }
  if (wake) wake_.notify_one();
}

void Batcher::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !pending_.empty(); });
    if (stopping_) return;
    const auto due = first_since_ + std::chrono::milliseconds(settings_.batch_linger_ms);
    wake_.wait_until(lock, due, [&] {
      return stopping_ || pending_.size() >= settings_.batch_max ||
             pending_bytes_ >= settings_.batch_max_bytes;
    });
    if (stopping_) return;
    // One batch: up to batch_max messages and batch_max_bytes (at least one message).
    size_t count = 0;
    size_t bytes = 0;
    while (
        count < pending_.size() && count < settings_.batch_max &&
        (count == 0 || bytes + pending_[count].element.size() + 1 <= settings_.batch_max_bytes)) {
      bytes += pending_[count].element.size() + 1;
      ++count;
    }
    std::vector<BatchItem> batch(std::make_move_iterator(pending_.begin()),
                                 std::make_move_iterator(pending_.begin() + count));
    pending_.erase(pending_.begin(), pending_.begin() + count);
    pending_bytes_ -= bytes;
    if (!pending_.empty()) first_since_ = std::chrono::steady_clock::now();
    lock.unlock();
    send(std::move(batch));
    lock.lock();
  }
}

void Batcher::send(std::vector<BatchItem> items) {
  Request request;
  size_t size = 2;
  for (const auto& item : items) size += item.element.size() + 1;
  request.body.reserve(size);
  request.body += '[';
  std::vector<int64_t> ids;
  ids.reserve(items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    if (i > 0) request.body += ',';
    request.body += items[i].element;
    ids.push_back(items[i].id);
  }
  request.body += ']';
  request.header_lines = headers_(items.size(), ids.front(), ids.back(), request.body);
  auto shared = std::make_shared<std::vector<BatchItem>>(std::move(items));
  const AnswerPolicy& policy = settings_.answers;
  request.done = [shared, ids = std::move(ids), &policy](Answer answer) {
    const auto decisions = decide_batch(answer, policy, unix_now_s(), ids);
    for (size_t i = 0; i < shared->size(); ++i) (*shared)[i].done(decisions[i]);
  };
  dispatcher_.submit(std::move(request));
}

}  // namespace sqlstreams_http
