// A bounded pool of CUDA events shared by the training threads (which take
// events to record scope boundaries) and the resolver thread (which gives them
// back once read). Creating an event costs a driver call, so events are made
// on first need and then reused; a run never holds more than the capacity.
// An event belongs to the device that was current when it was created and can
// only be recorded on that device's streams: use one pool per device (a rank
// normally drives one).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "timing/cuda_api.hpp"

namespace traceml::timing {

/// An event's slot in its pool: small, so a step's worth of intervals stays a
/// compact plain value that can travel through a ring.
using EventId = std::uint16_t;

class EventPool {
 public:
  /// About 340 steps of the GPU lagging the CPU at 12 scopes per step.
  static constexpr std::size_t kDefaultCapacity = 4096;
  static constexpr std::size_t kMaxCapacity = 65535;  // EventId's range

  /// `capacity` is clamped to [1, kMaxCapacity]. Nothing is created yet.
  explicit EventPool(const CudaApi& api, std::size_t capacity = kDefaultCapacity);
  /// Destroys every event created. Call only when no thread uses the pool.
  ~EventPool();
  EventPool(const EventPool&) = delete;
  EventPool& operator=(const EventPool&) = delete;

  /// Any thread, lock-free: a free event, created on first need with the
  /// calling thread's current device (so take events on the thread that
  /// records them). Absent when all `capacity` events are in use (counted in
  /// exhausted()) or creation failed (counted in create_failures()).
  std::optional<EventId> acquire() noexcept;
  /// Any thread, lock-free: gives an event back for reuse. The event may still
  /// be pending on the GPU; recording it again simply replaces that.
  void release(EventId id) noexcept;
  /// The CUDA event of a slot that acquire() returned.
  [[nodiscard]] void* event(EventId id) const noexcept { return events_[id]; }

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /// Events created so far (never more than capacity()).
  [[nodiscard]] std::size_t created() const noexcept;
  [[nodiscard]] std::int64_t exhausted() const noexcept;
  [[nodiscard]] std::int64_t create_failures() const noexcept;

 private:
  static constexpr std::uint32_t kNone = 0xFFFFFFFFu;
  bool pop_free(std::uint32_t& slot) noexcept;

  CudaApi api_;
  std::size_t capacity_;
  // events_[i] is written once, by the thread that creates slot i, before the
  // slot is handed anywhere; readers see it through that hand-off.
  std::unique_ptr<void*[]> events_;
  std::unique_ptr<std::atomic<std::uint32_t>[]> next_;  // free list links
  // Free list head: slot index in the low 32 bits, a version in the high 32
  // that each pop bumps, so a slot popped and pushed back between another
  // thread's read and its compare-exchange cannot fool it (ABA).
  std::atomic<std::uint64_t> head_;
  std::atomic<std::size_t> claimed_{0};  // slots handed out for creation
  std::atomic<std::int64_t> exhausted_{0};
  std::atomic<std::int64_t> create_failures_{0};
};

}  // namespace traceml::timing
