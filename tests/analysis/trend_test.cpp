// The shared band trend (spec §4.1.14): finite filter, history limit, warmup
// cut, band slicing with TraceML's double arithmetic, the min_points gates,
// the near-zero baseline, and the note formatting and state words.
#include "analysis/trend.hpp"

#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include <gtest/gtest.h>

namespace traceml::analysis {
namespace {

/// 1, 2, ..., n: every band average is then the mean of its index range + 1.
std::vector<double> ramp(int n) {
  std::vector<double> v;
  for (int i = 1; i <= n; ++i)
    v.push_back(static_cast<double>(i));
  return v;
}

TrendComputationConfig no_warmup(std::int64_t min_points) {
  TrendComputationConfig c;
  c.min_points = min_points;
  c.warmup_frac = 0.0;
  return c;
}

TEST(TrendTest, DefaultsComeFromThresholds) {
  const TrendComputationConfig c;
  EXPECT_EQ(c.history_limit, std::optional<std::int64_t>(10000));
  EXPECT_EQ(c.min_points, 200);
  EXPECT_DOUBLE_EQ(c.warmup_frac, 0.10);
  EXPECT_DOUBLE_EQ(c.baseline.start, 0.15);
  EXPECT_DOUBLE_EQ(c.baseline.end, 0.25);
  EXPECT_DOUBLE_EQ(c.mid.start, 0.45);
  EXPECT_DOUBLE_EQ(c.mid.end, 0.55);
  EXPECT_DOUBLE_EQ(c.recent.start, 0.90);
  EXPECT_DOUBLE_EQ(c.recent.end, 1.00);
}

TEST(TrendTest, BandSlicingOnTenPoints) {
  // n = 10: baseline [floor(1.5), ceil(2.5)) = [1, 3) -> values 2, 3 -> 2.5;
  // mid [4, 6) -> 5, 6 -> 5.5; recent [9, 10) -> 10. pct = (10 - 2.5) / 2.5 = 3.
  const auto ev = compute_trend(ramp(10), no_warmup(10));
  ASSERT_TRUE(ev);
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 2.5);
  EXPECT_DOUBLE_EQ(ev->mid_avg, 5.5);
  EXPECT_DOUBLE_EQ(ev->recent_avg, 10.0);
  ASSERT_TRUE(ev->pct);
  EXPECT_DOUBLE_EQ(*ev->pct, 3.0);
  EXPECT_EQ(ev->points_used, 10);
}

TEST(TrendTest, BandEdgesUseDoubleProductsLikeTraceML) {
  // n = 100: 100 * 0.55 is 55.00000000000001 in double, so the mid band is
  // [45, 56) (11 values 46..56, mean 51), not the [45, 55) of exact arithmetic.
  // Baseline [15, 25) -> 16..25 -> 20.5; recent [90, 100) -> 91..100 -> 95.5.
  const auto ev = compute_trend(ramp(100), no_warmup(10));
  ASSERT_TRUE(ev);
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 20.5);
  EXPECT_DOUBLE_EQ(ev->mid_avg, 51.0);
  EXPECT_DOUBLE_EQ(ev->recent_avg, 95.5);
}

TEST(TrendTest, EmptyBandsAreClampedToOneElement) {
  // n = 3, defaults: baseline [floor(0.45), ceil(0.75)) = [0, 1); mid
  // [floor(1.35), ceil(1.65)) = [1, 2); recent [floor(2.7), 3) = [2, 3).
  auto ev = compute_trend(std::vector<double>{4.0, 6.0, 9.0}, no_warmup(1));
  ASSERT_TRUE(ev);
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 4.0);
  EXPECT_DOUBLE_EQ(ev->mid_avg, 6.0);
  EXPECT_DOUBLE_EQ(ev->recent_avg, 9.0);

  // A zero-width band [5, 5) becomes [5, 6); a band past the end [10, 10)
  // becomes the last element [9, 10).
  TrendComputationConfig c = no_warmup(1);
  c.baseline = {0.5, 0.5};
  c.mid = {1.0, 1.0};
  c.recent = {0.0, 0.0};
  ev = compute_trend(ramp(10), c);
  ASSERT_TRUE(ev);
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 6.0);
  EXPECT_DOUBLE_EQ(ev->mid_avg, 10.0);
  EXPECT_DOUBLE_EQ(ev->recent_avg, 1.0);

  // A single point is every band.
  ev = compute_trend(std::vector<double>{7.0}, no_warmup(1));
  ASSERT_TRUE(ev);
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 7.0);
  EXPECT_DOUBLE_EQ(ev->recent_avg, 7.0);
  EXPECT_DOUBLE_EQ(*ev->pct, 0.0);
}

TEST(TrendTest, WarmupIsDroppedBeforeTheBands) {
  // 222 points, defaults: warmup floor(22.2) = 22 dropped, 200 remain.
  // The 22 warm-up values are huge; the baseline [30, 50) of the remaining
  // 200 never sees them. Values: 1000 x22, then 10 up to the recent band
  // [180, 200) of the stable part, which is 12.
  std::vector<double> v(22, 1000.0);
  for (int i = 0; i < 200; ++i)
    v.push_back(i >= 180 ? 12.0 : 10.0);
  const auto ev = compute_trend(v);
  ASSERT_TRUE(ev);
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 10.0);
  EXPECT_DOUBLE_EQ(ev->mid_avg, 10.0);
  EXPECT_DOUBLE_EQ(ev->recent_avg, 12.0);
  EXPECT_DOUBLE_EQ(*ev->pct, 0.2);  // (12 - 10) / 10
  EXPECT_EQ(ev->points_used, 222);  // counted before the warmup cut
}

TEST(TrendTest, StepTimeDefaultsNeed222Points) {
  // 222 - floor(22.2) = 200 >= min_points; 221 - floor(22.1) = 199 < 200.
  EXPECT_TRUE(compute_trend(ramp(222)));
  EXPECT_FALSE(compute_trend(ramp(221)));
  // Below min_points before the warmup cut as well.
  EXPECT_FALSE(compute_trend(ramp(199)));
  EXPECT_FALSE(compute_trend(std::vector<double>{}));
}

TEST(TrendTest, MinPointsGateAtTheBoundary) {
  EXPECT_FALSE(compute_trend(ramp(49), no_warmup(50)));
  EXPECT_TRUE(compute_trend(ramp(50), no_warmup(50)));
}

TEST(TrendTest, NonFiniteValuesAreSkippedNotCounted) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> v = ramp(10);
  v.insert(v.begin() + 3, nan);
  v.insert(v.begin() + 7, inf);
  v.push_back(-inf);
  // Same bands as the clean 10-point ramp.
  auto ev = compute_trend(v, no_warmup(10));
  ASSERT_TRUE(ev);
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 2.5);
  EXPECT_DOUBLE_EQ(ev->recent_avg, 10.0);
  EXPECT_EQ(ev->points_used, 10);
  // 13 entries but only 10 finite: an 11-point minimum is not met.
  EXPECT_FALSE(compute_trend(v, no_warmup(11)));

  // Unmeasured points of an optional series are skipped the same way.
  std::vector<std::optional<double>> o;
  for (double x : ramp(10)) {
    o.emplace_back(x);
    o.emplace_back(std::nullopt);
  }
  ev = compute_trend(o, no_warmup(10));
  ASSERT_TRUE(ev);
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 2.5);
  EXPECT_DOUBLE_EQ(ev->mid_avg, 5.5);
  EXPECT_FALSE(compute_trend(o, no_warmup(11)));
}

TEST(TrendTest, HistoryLimitKeepsTheLatestPoints) {
  // 50 values of 1000, then 1..100; limit 100 keeps only the ramp:
  // baseline [15, 25) -> 16..25 -> 20.5; recent [90, 100) -> 95.5.
  std::vector<double> v(50, 1000.0);
  for (double x : ramp(100))
    v.push_back(x);
  TrendComputationConfig c = no_warmup(10);
  c.history_limit = 100;
  auto ev = compute_trend(v, c);
  ASSERT_TRUE(ev);
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 20.5);
  EXPECT_DOUBLE_EQ(ev->recent_avg, 95.5);
  EXPECT_EQ(ev->points_used, 100);

  // No limit: all 150 points; baseline [22, 38) -> values 1000 x16 -> 1000.
  c.history_limit = std::nullopt;
  ev = compute_trend(v, c);
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->points_used, 150);
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 1000.0);

  // The default 10000 limit: 10500 points use the latest 10000.
  ev = compute_trend(ramp(10500));
  ASSERT_TRUE(ev);
  EXPECT_EQ(ev->points_used, 10000);
  // Kept: 501..10500; warmup 1000 -> stable 1501..10500 (9000 points);
  // baseline [1350, 2250) -> 2851..3750 -> 3300.5.
  EXPECT_DOUBLE_EQ(ev->baseline_avg, 3300.5);
}

TEST(TrendTest, PctIsNullForANearZeroBaseline) {
  // Baseline band [1, 3) of ten points; recent [9, 10).
  auto series = [](double base) {
    std::vector<double> v(10, base);
    v[9] = 5.0;
    return v;
  };
  auto ev = compute_trend(series(0.0), no_warmup(10));
  ASSERT_TRUE(ev);
  EXPECT_FALSE(ev->pct);
  EXPECT_FALSE(compute_trend(series(1e-12), no_warmup(10))->pct);   // |b| <= 1e-12
  EXPECT_FALSE(compute_trend(series(-1e-12), no_warmup(10))->pct);  // absolute value
  ev = compute_trend(series(2e-12), no_warmup(10));
  ASSERT_TRUE(ev->pct);
  EXPECT_DOUBLE_EQ(*ev->pct, (5.0 - 2e-12) / 2e-12);
  // A negative baseline is a valid denominator.
  ev = compute_trend(series(-2.0), no_warmup(10));
  EXPECT_DOUBLE_EQ(*ev->pct, -3.5);  // (5 - -2) / -2
}

TEST(TrendTest, FormatsArrowAndSignedPercent) {
  EXPECT_EQ(format_trend_pct(0.125), "\u2191 +12.5%");
  EXPECT_EQ(format_trend_pct(0.08), "\u2191 +8.0%");
  EXPECT_EQ(format_trend_pct(-0.09), "\u2193 -9.0%");
  EXPECT_EQ(format_trend_pct(1.5), "\u2191 +150.0%");
  // Zero is not positive: down arrow, Python's "+0.0".
  EXPECT_EQ(format_trend_pct(0.0), "\u2193 +0.0%");
  // A tiny negative rounds to Python's "-0.0".
  EXPECT_EQ(format_trend_pct(-0.0004), "\u2193 -0.0%");
  // 0.0025 * 100 is exactly 0.25 in double; the tie rounds to even, as in Python.
  EXPECT_EQ(format_trend_pct(0.0025), "\u2191 +0.2%");
}

TEST(TrendTest, StateWordsAtTheEightPercentBoundary) {
  EXPECT_EQ(trend_state(0.08), std::optional<std::string>("worsening"));
  EXPECT_EQ(trend_state(0.5), std::optional<std::string>("worsening"));
  EXPECT_EQ(trend_state(0.0799), std::nullopt);
  EXPECT_EQ(trend_state(0.0), std::nullopt);
  EXPECT_EQ(trend_state(-0.0799), std::nullopt);
  EXPECT_EQ(trend_state(-0.08), std::optional<std::string>("improving"));
  EXPECT_EQ(trend_state(-0.3), std::optional<std::string>("improving"));
  EXPECT_EQ(trend_state(std::nullopt), std::nullopt);
}

}  // namespace
}  // namespace traceml::analysis
