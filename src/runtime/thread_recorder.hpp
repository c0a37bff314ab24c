// What one training thread records: the phases and fetches since its last
// step, and the ring of finished steps waiting for the sender. Everything here
// runs on the owning thread without a lock, an allocation or a system call;
// only the ring is shared (with the sender thread).
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <utility>

#include "model/telemetry.hpp"
#include "runtime/spsc_ring.hpp"

namespace traceml::runtime {

/// A step's peak GPU memory as the framework's allocator saw it.
struct StepMemoryPeak {
  int device = 0;
  double peak_allocated_bytes = 0.0;
  double peak_reserved_bytes = 0.0;
};

/// A finished step as the training thread leaves it: end time, durations and
/// begin offsets in the hot path's ticks (timing::now_ticks()); the sender
/// converts them to now_ns() nanoseconds (timing::TickMapping), then into a
/// model::StepRecord.
struct RawStep {
  std::int64_t step = 0;
  std::int64_t end_ns = 0;                            ///< ticks until the sender converts it
  std::array<std::int64_t, model::kEventCount> ns{};  ///< ticks until the sender converts them
  /// Where event e first began, from the step scope's start (negative: before
  /// it, as a fetch for the step usually is); ticks until the sender converts them.
  std::array<std::int64_t, model::kEventCount> begin_ns{};
  std::uint8_t mask = 0;        ///< bit e: event e measured on this step
  std::uint8_t begin_mask = 0;  ///< bit e: begin_ns[e] holds where it first began
  std::uint16_t thread = 0;     ///< the recording thread (ThreadRecorder::thread)
  std::uint32_t scopes = 0;     ///< instrumented regions on this step (for the overhead estimate)
  /// Present when the program installed a GPU memory reader (traceml/torch.hpp).
  std::optional<StepMemoryPeak> memory;
};

/// Steps a thread can hold before the sender drains them (every 50 ms). At
/// 1 ms steps that is 4 s of slack; each slot is about 150 bytes.
inline constexpr std::size_t kStepRingCapacity = 4096;

class ThreadRecorder {
 public:
  /// `thread`: the rank's traced threads numbered from 0 in the order they
  /// first record (RecorderRegistry), the timeline's track per thread.
  explicit ThreadRecorder(std::size_t capacity = kStepRingCapacity, std::uint16_t thread = 0)
      : thread_(thread), ring_(capacity) {}

  // --- owning thread ---
  /// A scope of event `e` ran from `start` to `end` (ticks). Its first begin
  /// on the step is kept: one more store, the first time only.
  void add(model::Event e, std::int64_t start, std::int64_t end) noexcept {
    const auto i = std::size_t(e);
    const auto bit = std::uint8_t(1u << unsigned(e));
    acc_[i] += end - start;
    if ((mask_ & bit) == 0) first_[i] = start;
    mask_ = std::uint8_t(mask_ | bit);
    ++scopes_;
  }
  void add_fetch(std::int64_t start, std::int64_t end) noexcept {
    add(model::Event::InputWait, start, end);
    fetch_seen_ = true;
  }
  /// Enters a step; false when already inside one (nested scopes count once).
  bool enter_step() noexcept { return depth_++ == 0; }
  /// Leaves a step; true when it was the outermost one.
  bool leave_step() noexcept { return --depth_ == 0; }
  /// Inside a step scope now.
  [[nodiscard]] bool in_step() const noexcept { return depth_ > 0; }
  /// Forgets the phases and fetches gathered for the current step (a step
  /// left by an exception is not recorded).
  void discard() noexcept {
    acc_.fill(0);
    mask_ = 0;
    scopes_ = 0;
  }
  /// Builds the finished step from what was gathered, then resets. Input wait
  /// is a measured 0 on a thread that has timed fetches before (the loader is
  /// instrumented and this step waited for nothing); absent on one that never
  /// has (nobody measured it).
  RawStep finish(std::int64_t step, std::int64_t start_ns, std::int64_t end_ns) noexcept {
    RawStep s;
    s.step = step;
    s.end_ns = end_ns;
    s.ns = acc_;
    s.mask = mask_;
    s.begin_mask = mask_;
    s.thread = thread_;
    for (std::size_t e = 0; e < model::kEventCount; ++e)
      s.begin_ns[e] = (mask_ >> e & 1u) != 0 ? first_[e] - start_ns : 0;
    if (fetch_seen_) s.mask = std::uint8_t(s.mask | 1u << unsigned(model::Event::InputWait));
    const auto traced = std::size_t(model::Event::TracedStepTime);
    s.ns[traced] = end_ns - start_ns;
    s.mask = std::uint8_t(s.mask | 1u << traced);
    s.scopes = scopes_ + 1;
    discard();
    return s;
  }
  /// Queues a finished step for the sender; counts it as dropped when full.
  void publish(const RawStep& s) noexcept {
    if (!ring_.push(s))
      dropped_.store(dropped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
    if (ring_.filling()) filling_ = true;
  }
  /// True once after a publish found the ring half full (or full): the sender
  /// should drain now rather than at its next interval.
  bool take_filling() noexcept {
    const bool f = filling_;
    filling_ = false;
    return f;
  }

  // --- sender thread ---
  template <class F>
  std::size_t drain(F&& f) {
    return ring_.drain(std::forward<F>(f));
  }
  [[nodiscard]] std::int64_t dropped() const noexcept {
    return dropped_.load(std::memory_order_relaxed);
  }
  /// Set when the owning thread has exited: once drained, the recorder can go.
  std::atomic<bool> retired{false};

 private:
  std::array<std::int64_t, model::kEventCount> acc_{};
  std::array<std::int64_t, model::kEventCount> first_{};  // valid where mask_ has the bit
  std::uint8_t mask_ = 0;
  std::uint16_t thread_ = 0;
  std::uint32_t scopes_ = 0;
  int depth_ = 0;
  bool fetch_seen_ = false;
  bool filling_ = false;
  std::atomic<std::int64_t> dropped_{0};  // written by the owning thread only
  SpscRing<RawStep> ring_;
};

}  // namespace traceml::runtime
