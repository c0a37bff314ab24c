// A bounded single-producer single-consumer ring: the training thread pushes
// finished steps, the sender thread pops them. Push is wait-free (two atomic
// loads, one copy, one release store) and never allocates; a full ring
// refuses the element and the caller counts it as dropped.
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <type_traits>

namespace traceml::runtime {

template <class T>
class SpscRing {
  static_assert(std::is_trivially_copyable_v<T>, "ring elements are copied as plain bytes");

 public:
  /// `capacity` is rounded up to a power of two.
  explicit SpscRing(std::size_t capacity)
      : mask_(round_up(capacity) - 1), slots_(new T[mask_ + 1]) {}

  /// Producer only. False when full.
  bool push(const T& v) noexcept {
    const std::size_t head = head_.load(std::memory_order_relaxed);
    if (head - tail_cache_ > mask_) {
      tail_cache_ = tail_.load(std::memory_order_acquire);
      if (head - tail_cache_ > mask_) return false;
    }
    slots_[head & mask_] = v;
    head_.store(head + 1, std::memory_order_release);
    return true;
  }

  /// Producer only, after a push: true when the ring is half full or more.
  /// Looks at the consumer's index once every capacity/8 pushes only.
  bool filling() noexcept {
    const std::size_t head = head_.load(std::memory_order_relaxed);
    if (head < next_check_) return false;
    next_check_ = head + (mask_ + 1) / 8;
    tail_cache_ = tail_.load(std::memory_order_acquire);
    return head - tail_cache_ >= (mask_ + 1) / 2;
  }

  /// Consumer only. Calls f(element) for everything pushed so far; returns the count.
  template <class F>
  std::size_t drain(F&& f) {
    const std::size_t tail = tail_.load(std::memory_order_relaxed);
    const std::size_t head = head_.load(std::memory_order_acquire);
    for (std::size_t i = tail; i != head; ++i)
      f(slots_[i & mask_]);
    tail_.store(head, std::memory_order_release);
    return head - tail;
  }

  /// Consumer side: true when nothing is waiting (approximate from the producer's view).
  [[nodiscard]] bool empty() const noexcept {
    return head_.load(std::memory_order_acquire) == tail_.load(std::memory_order_acquire);
  }
  [[nodiscard]] std::size_t capacity() const noexcept { return mask_ + 1; }

 private:
  static std::size_t round_up(std::size_t n) {
    std::size_t c = 2;
    while (c < n)
      c <<= 1;
    return c;
  }
  const std::size_t mask_;
  std::unique_ptr<T[]> slots_;
  // Producer and consumer indexes on separate cache lines: the training thread
  // must not bounce a line with the sender thread on every step.
  alignas(64) std::atomic<std::size_t> head_{0};
  std::size_t tail_cache_ = 0;  // producer's last view of tail_
  std::size_t next_check_ = 0;  // producer: when filling() next looks at tail_
  alignas(64) std::atomic<std::size_t> tail_{0};
};

}  // namespace traceml::runtime
