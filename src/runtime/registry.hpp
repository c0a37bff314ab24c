// Where the sender finds what the training threads recorded: the recorder of
// every thread that has recorded a scope, and the queue of sampler readings.
// Registering a thread takes a lock once per thread, never per step.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <variant>
#include <vector>

#include "model/telemetry.hpp"
#include "runtime/thread_recorder.hpp"

namespace traceml::runtime {

class RecorderRegistry {
 public:
  /// A new recorder for the calling thread, owned by the registry. Threads
  /// are numbered from 0 in the order they first record (the timeline's
  /// track per thread); past 65535 threads the number stays at the last.
  ThreadRecorder* add() {
    std::uint16_t thread = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      thread = next_thread_;
      if (next_thread_ < 0xFFFF) ++next_thread_;
    }
    auto r = std::make_unique<ThreadRecorder>(kStepRingCapacity, thread);  // outside the lock
    std::lock_guard<std::mutex> lock(mu_);
    recorders_.push_back(std::move(r));
    return recorders_.back().get();
  }
  /// Sender: hands every waiting step to f; frees recorders of exited threads
  /// once they are empty. Returns the number of steps.
  template <class F>
  std::size_t drain(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    std::size_t n = 0;
    for (auto it = recorders_.begin(); it != recorders_.end();) {
      const bool retired = (*it)->retired.load(std::memory_order_acquire);
      n += (*it)->drain(f);
      if (retired) {
        dropped_of_removed_ += (*it)->dropped();
        it = recorders_.erase(it);
      } else {
        ++it;
      }
    }
    return n;
  }
  /// Steps dropped because a ring was full, over every recorder ever registered.
  std::int64_t dropped() {
    std::lock_guard<std::mutex> lock(mu_);
    std::int64_t d = dropped_of_removed_;
    for (const auto& r : recorders_)
      d += r->dropped();
    return d;
  }

 private:
  std::mutex mu_;
  std::vector<std::unique_ptr<ThreadRecorder>> recorders_;
  std::int64_t dropped_of_removed_ = 0;
  std::uint16_t next_thread_ = 0;
};

using Sample = std::variant<model::ProcessSample, model::SystemSample>;

/// Sampler readings waiting for the sender; bounded, drops (and counts) the
/// newest when full.
class SampleQueue {
 public:
  static constexpr std::size_t kCapacity = 4096;
  void push(Sample s) {
    std::lock_guard<std::mutex> lock(mu_);
    if (q_.size() >= kCapacity) {
      ++dropped_;
      return;
    }
    q_.push_back(std::move(s));
  }
  std::deque<Sample> take() {
    std::lock_guard<std::mutex> lock(mu_);
    std::deque<Sample> out;
    out.swap(q_);
    return out;
  }
  std::int64_t dropped() {
    std::lock_guard<std::mutex> lock(mu_);
    return dropped_;
  }

 private:
  std::mutex mu_;
  std::deque<Sample> q_;
  std::int64_t dropped_ = 0;
};

}  // namespace traceml::runtime
