#include "timing/event_pool.hpp"

#include <algorithm>

namespace traceml::timing {
namespace {

constexpr std::uint64_t kVersionStep = std::uint64_t{1} << 32;
constexpr std::uint64_t kSlotMask = 0xFFFFFFFFu;

}  // namespace

EventPool::EventPool(const CudaApi& api, std::size_t capacity)
    : api_(api),
      capacity_(std::clamp<std::size_t>(capacity, 1, kMaxCapacity)),
      events_(new void*[capacity_]()),
      next_(new std::atomic<std::uint32_t>[capacity_]),
      head_(kNone) {}

EventPool::~EventPool() {
  const std::size_t n = std::min(claimed_.load(), capacity_);
  for (std::size_t i = 0; i < n; ++i) {
    if (events_[i] != nullptr && api_.event_destroy != nullptr) api_.event_destroy(events_[i]);
  }
}

bool EventPool::pop_free(std::uint32_t& slot) noexcept {
  std::uint64_t h = head_.load(std::memory_order_acquire);
  while ((h & kSlotMask) != kNone) {
    const auto top = std::uint32_t(h & kSlotMask);
    const std::uint64_t next =
        ((h & ~kSlotMask) + kVersionStep) | next_[top].load(std::memory_order_relaxed);
    if (head_.compare_exchange_weak(h, next, std::memory_order_acquire,
                                    std::memory_order_acquire)) {
      slot = top;
      return true;
    }
  }
  return false;
}

std::optional<EventId> EventPool::acquire() noexcept {
  std::uint32_t slot = 0;
  if (pop_free(slot)) return EventId(slot);
  // Nothing free: claim a fresh slot while under capacity.
  std::size_t claimed = claimed_.load(std::memory_order_relaxed);
  do {
    if (claimed >= capacity_) {
      exhausted_.fetch_add(1, std::memory_order_relaxed);
      return std::nullopt;
    }
  } while (!claimed_.compare_exchange_weak(claimed, claimed + 1, std::memory_order_relaxed));
  void* ev = nullptr;
  if (api_.event_create_with_flags == nullptr ||
      api_.event_create_with_flags(&ev, kCudaEventDefault) != kCudaSuccess || ev == nullptr) {
    // The slot stays empty: CUDA that cannot create events will not time
    // anything, and the pool stays bounded either way.
    create_failures_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  events_[claimed] = ev;
  return EventId(claimed);
}

void EventPool::release(EventId id) noexcept {
  if (std::size_t(id) >= capacity_) return;
  std::uint64_t h = head_.load(std::memory_order_relaxed);
  std::uint64_t next = 0;
  do {
    next_[id].store(std::uint32_t(h & kSlotMask), std::memory_order_relaxed);
    next = (h & ~kSlotMask) | id;
  } while (
      !head_.compare_exchange_weak(h, next, std::memory_order_release, std::memory_order_relaxed));
}

std::size_t EventPool::created() const noexcept {
  const std::size_t claimed = std::min(claimed_.load(std::memory_order_relaxed), capacity_);
  return claimed - std::size_t(create_failures_.load(std::memory_order_relaxed));
}

std::int64_t EventPool::exhausted() const noexcept {
  return exhausted_.load(std::memory_order_relaxed);
}

std::int64_t EventPool::create_failures() const noexcept {
  return create_failures_.load(std::memory_order_relaxed);
}

}  // namespace traceml::timing
