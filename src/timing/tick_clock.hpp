// The hot path's clock: ticks, converted to nanoseconds off the training
// thread. On x86-64 with an invariant TSC a tick is a TSC count (rdtsc, a few
// ns); elsewhere, or with TRACEML_CLOCK=steady, a tick is a CLOCK_MONOTONIC
// nanosecond (now_ns(), one vDSO call). The choice is made once per process,
// before anything is recorded, and never changes after: a scope that began
// on one clock always ends on it.
//
// TickMapping turns ticks into now_ns()'s nanoseconds: a line through an
// anchor taken at start, whose slope the sender refines at every flush from
// a new (ticks, now_ns) pair, so the longer the run the more exact the rate.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

#include "timing/clock.hpp"

#if defined(__x86_64__)
#include <x86intrin.h>
#endif

namespace traceml::timing {

enum class TickSource : std::uint8_t { Steady, Tsc };

namespace detail {
/// Set once by select_tick_source() before recording starts.
inline std::atomic<bool> g_tsc{false};
}  // namespace detail

/// A tick now; never 0 (0 is the hot path's "not recording").
inline std::int64_t now_ticks() noexcept {
#if defined(__x86_64__)
  if (detail::g_tsc.load(std::memory_order_relaxed)) {
    const auto t = static_cast<std::int64_t>(__rdtsc() & 0x7fffffffffffffffULL);
    return t == 0 ? 1 : t;
  }
#endif
  return now_ns();
}

/// What the CPU offers: a TSC whose rate does not change with frequency
/// scaling or sleep states (CPUID's "invariant TSC").
bool invariant_tsc_available() noexcept;

/// The clock to use, from TRACEML_CLOCK's value (`auto` or unset, `tsc`,
/// `steady`) and the CPU. `tsc` on a CPU without an invariant TSC falls back
/// to steady; `why` then says so (and for a value it does not know).
TickSource choose_tick_source(const std::optional<std::string>& setting, std::string& why);

/// Makes now_ticks() read `source`. The first call wins: later calls (a
/// second init() after shutdown()) keep the clock the process started with,
/// and return it.
TickSource select_tick_source(TickSource source) noexcept;

/// The clock now_ticks() reads.
TickSource tick_source() noexcept;

/// Ticks to now_ns()'s nanoseconds. Owned by the thread that converts (the
/// sender); construct it after select_tick_source(), and update() before
/// converting (the first update waits until the rate has been measured over
/// 2 ms since the clock was selected).
class TickMapping {
 public:
  TickMapping() noexcept;

  /// Takes a new (ticks, ns) pair and refines the rate from the first one.
  void update() noexcept;

  /// A tick reading as now_ns() nanoseconds.
  [[nodiscard]] std::int64_t to_ns(std::int64_t ticks) const noexcept;
  /// A difference of ticks as nanoseconds; never negative.
  [[nodiscard]] std::int64_t duration_ns(std::int64_t ticks) const noexcept;
  /// A signed span of ticks (an offset between two readings) as nanoseconds.
  [[nodiscard]] std::int64_t offset_ns(std::int64_t ticks) const noexcept {
    return ticks < 0 ? -duration_ns(-ticks) : duration_ns(ticks);
  }
  /// Nanoseconds per tick (1 on the steady clock).
  [[nodiscard]] double ns_per_tick() const noexcept { return ns_per_tick_; }
  /// Whether ticks are TSC counts, and the latest (ticks, ns) pair the line
  /// goes through: with ns_per_tick(), all another process needs to convert.
  [[nodiscard]] bool tsc() const noexcept { return tsc_; }
  [[nodiscard]] std::int64_t anchor_ticks() const noexcept { return last_ticks_; }
  [[nodiscard]] std::int64_t anchor_ns() const noexcept { return last_ns_; }

 private:
  bool tsc_ = false;
  std::int64_t first_ticks_ = 0;
  std::int64_t first_ns_ = 0;
  std::int64_t last_ticks_ = 0;
  std::int64_t last_ns_ = 0;
  double ns_per_tick_ = 1.0;
};

}  // namespace traceml::timing
