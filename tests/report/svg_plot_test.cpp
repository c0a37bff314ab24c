// The axes of the HTML report's plots (report/html/svg_plot.hpp): nice_ticks
// must end and give a usable axis for any finite values -- issue 30's
// report never returned because a range one ulp wide (83.386 and the next
// double, from quantile interpolation) made its tick loop add a step too
// small to change the tick.
#include "report/html/svg_plot.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <climits>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using traceml::report::svg::Chart;
using traceml::report::svg::nice_ticks;

constexpr double kInf = std::numeric_limits<double>::infinity();

double up(double v, int ulps = 1) {
  for (int i = 0; i < ulps; ++i)
    v = std::nextafter(v, kInf);
  return v;
}

/// What every axis needs: 2 to target + 3 ticks, finite, ascending, and
/// covering [lo, hi] unless the values are zero to a plot (below 1e-290).
void expect_axis(double lo, double hi, int target = 5) {
  SCOPED_TRACE(testing::Message() << "nice_ticks(" << std::hexfloat << lo << ", " << hi << ", "
                                  << std::dec << target << ")");
  const std::vector<double> t = nice_ticks(lo, hi, target);
  ASSERT_GE(t.size(), 2u);
  EXPECT_LE(t.size(), std::size_t(std::clamp(target, 1, 100)) + 3);
  for (std::size_t i = 0; i < t.size(); ++i) {
    ASSERT_TRUE(std::isfinite(t[i])) << i;
    if (i > 0) {
      ASSERT_GT(t[i], t[i - 1]) << i;
    }
  }
  if (!std::isfinite(lo) || !std::isfinite(hi) || hi < lo) return;
  if (std::max(std::fabs(lo), std::fabs(hi)) < 1e-290) return;
  // Up to a millionth of the values' size: a lo of -1e-143 under a hi of
  // 1e236 is 0 on that axis.
  const double tolerance = 1e-6 * std::max(std::fabs(lo), std::fabs(hi));
  EXPECT_LE(t.front(), lo + tolerance);
  EXPECT_GE(t.back(), hi - tolerance);
}

TEST(NiceTicks, OrdinaryRangesKeepTheirTicks) {
  EXPECT_EQ(nice_ticks(0, 100), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(0, 93), (std::vector<double>{0, 20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(28, 92), (std::vector<double>{20, 40, 60, 80, 100}));
  EXPECT_EQ(nice_ticks(-5, 5), (std::vector<double>{-6, -4, -2, 0, 2, 4, 6}));
  // Equal values: widened by a tenth of lo (from zero: to 1).
  EXPECT_EQ(nice_ticks(0, 0), (std::vector<double>{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}));
  EXPECT_EQ(nice_ticks(50, 50), (std::vector<double>{50, 51, 52, 53, 54, 55}));
}

// The report of issue 30: lo = 83.386 and hi one ulp above it. Before the
// fix this never returned (and grew `ticks` until memory ran out).
TEST(NiceTicks, ARangeOneUlpWideEnds) {
  const double lo = 83.386;
  const std::vector<double> t = nice_ticks(lo, up(lo));
  EXPECT_EQ(t, (std::vector<double>{82, 84, 86, 88, 90, 92}));
  EXPECT_EQ(t, nice_ticks(lo, lo));  // drawn as the one value it is
  expect_axis(lo, up(lo));
}

TEST(NiceTicks, NearEqualValuesAtEveryMagnitude) {
  for (const double lo : {0.0, std::numeric_limits<double>::denorm_min(), DBL_MIN, 1e-300, 1e-290,
                          1e-200, 1e-20, 1e-9, 0.1, 1.0, 83.386, 1e9, 1e15, 9.2e18, 1e20, 1e200,
                          1e300, DBL_MAX / 2, DBL_MAX / 1.0000001}) {
    for (const double sign : {1.0, -1.0}) {
      for (const int ulps : {0, 1, 2, 3, 16, 1000}) {
        const double a = sign * lo;
        expect_axis(a, up(a, ulps));
      }
    }
  }
  expect_axis(DBL_MAX, DBL_MAX);
  expect_axis(std::nextafter(DBL_MAX, 0.0), DBL_MAX);
  expect_axis(-DBL_MAX, std::nextafter(-DBL_MAX, 0.0));
}

TEST(NiceTicks, ExtremeSpans) {
  expect_axis(0, std::numeric_limits<double>::denorm_min());
  expect_axis(0, 1e-300);
  expect_axis(0, 1e300);
  expect_axis(0, DBL_MAX);
  expect_axis(-DBL_MAX, DBL_MAX);
  expect_axis(-1e300, 1e300);
  expect_axis(-DBL_MAX, 0);
  expect_axis(1e-300, 1e300);
  expect_axis(-1e-300, 1e-300);
  expect_axis(9.2e18, 9.2e18 + 240);  // a step axis of ids near 2^63
  // The ends are the axis where no double step can cross the range.
  EXPECT_EQ(nice_ticks(-DBL_MAX, DBL_MAX), (std::vector<double>{-DBL_MAX, DBL_MAX}));
}

TEST(NiceTicks, OddArgumentsStillGiveAnAxis) {
  expect_axis(5, 1);  // reversed: drawn from lo
  for (const int target : {INT_MIN, -1, 0, 1, 2, 6, 100, 1000, INT_MAX})
    expect_axis(0, 93, target);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(nice_ticks(nan, 1), (std::vector<double>{0, 1}));
  EXPECT_EQ(nice_ticks(0, kInf), (std::vector<double>{0, 1}));
  EXPECT_EQ(nice_ticks(-kInf, kInf), (std::vector<double>{0, 1}));
}

// Random ranges a few ulps wide and random spans at random magnitudes:
// every one gives an axis (and returns).
TEST(NiceTicks, RandomRanges) {
  std::mt19937_64 rng(30);
  std::uniform_real_distribution<double> exponent(-320, 308);
  std::uniform_int_distribution<int> ulps(0, 8);
  std::uniform_real_distribution<double> unit(-1, 1);
  for (int i = 0; i < 20000; ++i) {
    const double a = unit(rng) * std::pow(10.0, exponent(rng));
    if (!std::isfinite(a)) continue;
    expect_axis(a, up(a, ulps(rng)));
    const double b = a + std::fabs(unit(rng)) * std::pow(10.0, exponent(rng));
    if (std::isfinite(b)) expect_axis(a, b, 1 + i % 12);
    if (HasFailure()) return;
  }
}

// A chart's y axis over such a range writes finite coordinates, and a value
// that is not finite lands at an end of the plot, not at "nan".
TEST(Chart, CoordinatesOfDegenerateScalesAreFinite) {
  for (const auto& [lo, hi] : std::vector<std::pair<double, double>>{
           {83.386, up(83.386)}, {0, 0}, {-DBL_MAX, DBL_MAX}, {0, DBL_MAX}, {1e-300, 1e-300}}) {
    Chart c(200, "test");
    c.y_axis(lo, hi, [](double v) { return std::to_string(v); });
    for (const double v : {lo, hi, 0.0, kInf, -kInf, std::numeric_limits<double>::quiet_NaN()}) {
      const double y = c.y(v);
      EXPECT_TRUE(std::isfinite(y)) << lo << " " << hi << " " << v;
      EXPECT_GE(y, c.top());
      EXPECT_LE(y, c.bottom());
    }
    EXPECT_EQ(c.str().find("nan"), std::string::npos);
  }
}

}  // namespace
