#include "collector/write_queue.hpp"

#include <exception>
#include <utility>

namespace traceml::collector {

namespace {

using namespace std::chrono_literals;

/// Records queued between the I/O thread and the writer (the run in memory
/// has them already). A full queue makes the I/O thread wait, which slows the
/// ranks' sockets; their senders then drop and count, so the training never
/// waits and nothing is lost silently. 32 Ki records (~6 MiB, held twice:
/// the queue and the batch being written) is a twentieth of a second of
/// writing at the measured rate; the kernel's socket buffers and the
/// senders' 4 MiB absorb longer stalls.
constexpr std::size_t kQueueCapacity = 32 * 1024;

/// Longest time a received record stays uncommitted while the run goes on, so
/// that a crash of the collector loses at most this much telemetry.
constexpr auto kCommitInterval = 500ms;

/// How often the writer classifies the live board (LiveBoard::update) when
/// no live view does it: stalls are found within this of the rule's limit.
constexpr auto kBoardInterval = 500ms;

}  // namespace

WriteQueue::WriteQueue(std::unique_ptr<store::RunDbWriter> writer, Tick tick)
    : writer_(std::move(writer)), tick_(std::move(tick)) {
  queue_.reserve(kQueueCapacity + kPendingRecords);
  thread_ = std::thread([this] { loop(); });
}

WriteQueue::~WriteQueue() {
  stop();
}

void WriteQueue::put(std::vector<model::Record>& batch) {
  std::unique_lock<std::mutex> lk(mu_);
  if (queue_.size() >= kQueueCapacity && !stopping_) {
    io_waiting_ = true;
    not_full_.wait(lk, [&] { return queue_.size() < kQueueCapacity || stopping_; });
    io_waiting_ = false;
  }
  // The writer waits only for an empty queue: waking it for every record
  // cost a futex call each. An empty queue takes the records by swapping
  // buffers (records are a few hundred bytes: copying them was a tenth of
  // the collector's time); the writer's reserved buffer comes back as the
  // next batch.
  const bool was_empty = queue_.empty();
  if (was_empty)
    queue_.swap(batch);
  else
    queue_.insert(queue_.end(), batch.begin(), batch.end());
  lk.unlock();
  if (was_empty) not_empty_.notify_one();
  batch.clear();
  batch.reserve(kPendingRecords);
}

void WriteQueue::stop() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  not_empty_.notify_all();
  not_full_.notify_all();
  if (thread_.joinable()) thread_.join();
}

template <typename F>
void WriteQueue::guarded(F&& f) {
  if (error_ || !writer_) return;
  try {
    f();
  } catch (const std::exception& e) {
    error_ = e.what();
  }
}

void WriteQueue::write(const std::function<void(store::RunDbWriter&)>& f) {
  guarded([&] { f(*writer_); });
}

void WriteQueue::loop() {
  std::vector<model::Record> batch;
  // Both buffers at full size from the start: a vector grown by doubling
  // moved every record and faulted in fresh pages (3 % of the collector).
  batch.reserve(kQueueCapacity + kPendingRecords);
  auto last_commit = std::chrono::steady_clock::now();
  auto last_tick = last_commit;
  for (;;) {
    bool wake_io = false;
    {
      std::unique_lock<std::mutex> lk(mu_);
      not_empty_.wait_for(lk, kCommitInterval, [&] { return !queue_.empty() || stopping_; });
      if (queue_.empty() && stopping_) break;
      batch.swap(queue_);
      wake_io = io_waiting_;
    }
    if (wake_io) not_full_.notify_all();
    // After a failed write the queue is still drained (and dropped), so the
    // I/O thread never waits on a writer that cannot write.
    guarded([&] {
      for (const model::Record& r : batch)
        writer_->add(r);
    });
    batch.clear();
    const auto now = std::chrono::steady_clock::now();
    if (now - last_tick >= kBoardInterval) {
      // The board and the live snapshot must never cost the run its
      // writer: whatever they throw loses that tick, nothing more.
      try {
        if (tick_) tick_(now);
      } catch (...) {
      }
      last_tick = now;
    }
    if (now - last_commit >= kCommitInterval) {
      guarded([&] { writer_->flush(); });
      last_commit = now;
    }
  }
}

}  // namespace traceml::collector
