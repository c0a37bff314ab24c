#include "timing/tick_clock.hpp"

#include <algorithm>
#include <cmath>
#include <mutex>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace traceml::timing {

namespace {

/// A (ticks, ns) pair read as close together as this thread can: the ns
/// reading between two tick readings, the closest of a few tries (a pair
/// broken by a preemption is thrown away).
struct Pair {
  std::int64_t ticks = 0;
  std::int64_t ns = 0;
};

Pair read_pair() noexcept {
  Pair best;
  std::int64_t best_gap = -1;
  for (int i = 0; i < 5; ++i) {
    const std::int64_t a = now_ticks();
    const std::int64_t ns = now_ns();
    const std::int64_t b = now_ticks();
    const std::int64_t gap = b - a;
    if (gap >= 0 && (best_gap < 0 || gap < best_gap)) {
      best_gap = gap;
      best = {a + gap / 2, ns};
    }
  }
  return best;
}

/// The rate is measured over at least this long before a tick is converted,
/// so that the two readings' jitter (tens of ns) is a small part of it.
constexpr std::int64_t kMinBaselineNs = 2'000'000;

std::once_flag g_selected;
TickSource g_source = TickSource::Steady;
Pair g_start;  // the first pair, taken when the clock was selected

}  // namespace

bool invariant_tsc_available() noexcept {
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(1, &a, &b, &c, &d) == 0 || (d & (1u << 4)) == 0) return false;  // no TSC
  if (__get_cpuid(0x80000000u, &a, &b, &c, &d) == 0 || a < 0x80000007u) return false;
  if (__get_cpuid(0x80000007u, &a, &b, &c, &d) == 0) return false;
  return (d & (1u << 8)) != 0;  // invariant TSC
#else
  return false;
#endif
}

TickSource choose_tick_source(const std::optional<std::string>& setting, std::string& why) {
  why.clear();
  const std::string v = setting.value_or("auto");
  if (v == "steady") return TickSource::Steady;
  if (v != "auto" && v != "tsc" && !v.empty())
    why = "TRACEML_CLOCK must be auto, tsc or steady; using auto";
  if (invariant_tsc_available()) return TickSource::Tsc;
  if (v == "tsc") why = "TRACEML_CLOCK=tsc: this CPU has no invariant TSC; using the steady clock";
  return TickSource::Steady;
}

TickSource select_tick_source(TickSource source) noexcept {
  std::call_once(g_selected, [source] {
    g_source = source;
    detail::g_tsc.store(source == TickSource::Tsc, std::memory_order_relaxed);
    g_start = read_pair();
  });
  return g_source;
}

TickSource tick_source() noexcept {
  return detail::g_tsc.load(std::memory_order_relaxed) ? TickSource::Tsc : TickSource::Steady;
}

TickMapping::TickMapping() noexcept : tsc_(tick_source() == TickSource::Tsc) {
  if (!tsc_) return;
  first_ticks_ = g_start.ticks;
  first_ns_ = g_start.ns;
  last_ticks_ = first_ticks_;
  last_ns_ = first_ns_;
}

void TickMapping::update() noexcept {
  if (!tsc_) return;
  Pair p = read_pair();
  // Too short a baseline gives a rough rate: wait it out (once, at most a
  // couple of milliseconds, on the converting thread).
  while (p.ns - first_ns_ < kMinBaselineNs)
    p = read_pair();
  if (p.ticks <= first_ticks_) return;  // a TSC that went back: keep the last rate
  ns_per_tick_ = double(p.ns - first_ns_) / double(p.ticks - first_ticks_);
  last_ticks_ = p.ticks;
  last_ns_ = p.ns;
}

std::int64_t TickMapping::to_ns(std::int64_t ticks) const noexcept {
  if (!tsc_) return ticks;
  return last_ns_ + std::llround(double(ticks - last_ticks_) * ns_per_tick_);
}

std::int64_t TickMapping::duration_ns(std::int64_t ticks) const noexcept {
  if (!tsc_) return std::max<std::int64_t>(ticks, 0);
  return std::max<std::int64_t>(std::llround(double(ticks) * ns_per_tick_), 0);
}

}  // namespace traceml::timing
