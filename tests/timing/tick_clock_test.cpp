// The hot path's tick clock: which clock TRACEML_CLOCK and the CPU choose,
// and that ticks read on the TSC (this machine's, when it has an invariant
// one) convert to the monotonic clock's nanoseconds: a timestamp to within a
// few microseconds, a duration to within a fraction of a percent.
#include "timing/tick_clock.hpp"

#include <gtest/gtest.h>

#include <chrono>

namespace traceml::timing {
namespace {

TEST(TickClock, SettingAndCpuChooseTheClock) {
  std::string why;
  EXPECT_EQ(choose_tick_source("steady", why), TickSource::Steady);
  EXPECT_EQ(why, "");
  const TickSource best = invariant_tsc_available() ? TickSource::Tsc : TickSource::Steady;
  EXPECT_EQ(choose_tick_source(std::nullopt, why), best);
  EXPECT_EQ(why, "");
  EXPECT_EQ(choose_tick_source("auto", why), best);
  EXPECT_EQ(choose_tick_source("tsc", why), best);
  EXPECT_EQ(why.empty(), best == TickSource::Tsc) << why;
  EXPECT_EQ(choose_tick_source("fast", why), best);
  EXPECT_EQ(why, "TRACEML_CLOCK must be auto, tsc or steady; using auto");
}

/// Spins (a sleep would let the thread move between cores, which a TSC must
/// survive too, but a spin keeps the measured span exact).
void spin_for(std::chrono::milliseconds d) {
  const auto until = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < until) {
  }
}

TEST(TickClock, TicksConvertToTheMonotonicClock) {
  std::string why;
  const TickSource chosen = select_tick_source(choose_tick_source(std::nullopt, why));
  EXPECT_EQ(tick_source(), chosen);
  // The first call wins: a later choice does not switch clocks under running scopes.
  EXPECT_EQ(select_tick_source(TickSource::Steady), chosen);
  EXPECT_EQ(tick_source(), chosen);

  TickMapping map;
  for (int round = 0; round < 5; ++round) {
    const std::int64_t t0 = now_ticks();
    const std::int64_t n0 = now_ns();
    spin_for(std::chrono::milliseconds(20));
    const std::int64_t t1 = now_ticks();
    const std::int64_t n1 = now_ns();
    map.update();
    // A timestamp: near the monotonic reading taken beside it.
    EXPECT_NEAR(double(map.to_ns(t1)), double(n1), 20'000.0) << "round " << round;
    // A duration: the same span on both clocks, within 0.5 % (+ the reads' jitter).
    const double span = double(n1 - n0);
    EXPECT_NEAR(double(map.duration_ns(t1 - t0)), span, span * 0.005 + 20'000.0);
    EXPECT_GT(t1, t0);
  }
  EXPECT_EQ(map.duration_ns(-5), 0) << "a TSC read on another core may go back: never negative";
  if (chosen == TickSource::Steady) {
    EXPECT_EQ(map.ns_per_tick(), 1.0);
    EXPECT_EQ(map.to_ns(12345), 12345);
  }
}

}  // namespace
}  // namespace traceml::timing
