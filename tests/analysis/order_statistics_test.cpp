// The shared median and quantile: odd and even counts, duplicates, and the
// bracketed selection Step Memory makes among the middle values only.
#include "analysis/order_statistics.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace traceml::analysis {
namespace {

TEST(OrderStatistics, MedianOfAnOddCountIsTheMiddleValue) {
  EXPECT_DOUBLE_EQ(median_of({5.0}), 5.0);
  EXPECT_DOUBLE_EQ(median_of({3.0, 1.0, 2.0}), 2.0);
  EXPECT_DOUBLE_EQ(median_of({9.0, 1.0, 1.0, 7.0, 1.0}), 1.0);
}

TEST(OrderStatistics, MedianOfAnEvenCountIsTheMeanOfTheMiddleTwo) {
  EXPECT_DOUBLE_EQ(median_of({4.0, 1.0}), 2.5);
  EXPECT_DOUBLE_EQ(median_of({10.0, 0.0, 3.0, 5.0}), 4.0);
  EXPECT_DOUBLE_EQ(median_of({2.0, 2.0, 2.0, 2.0}), 2.0);
}

TEST(OrderStatistics, MedianInPlaceAgreesWithASortForEveryCount) {
  for (std::size_t n = 1; n < 40; ++n) {
    std::vector<double> v;
    for (std::size_t i = 0; i < n; ++i)
      v.push_back(double((i * 37 + 11) % 17) - 8.0);  // shuffled, with repeats
    std::vector<double> sorted = v;
    std::sort(sorted.begin(), sorted.end());
    const double expected = n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0;
    EXPECT_DOUBLE_EQ(median_in_place(v), expected) << n;
  }
}

TEST(OrderStatistics, SelectMedianAmongTheMiddleValuesOfALargerWhole) {
  // The whole is {0, 1, ..., 9}; v holds its sorted positions [3, 7): 3..6.
  std::vector<double> v = {6.0, 3.0, 5.0, 4.0};
  EXPECT_DOUBLE_EQ(select_median(v.begin(), v.size(), 3, 10), 4.5);  // (4 + 5) / 2
  std::vector<double> odd = {5.0, 3.0, 4.0};                         // positions [3, 6) of 0..10
  EXPECT_DOUBLE_EQ(select_median(odd.begin(), odd.size(), 3, 11), 5.0);
}

TEST(OrderStatistics, QuantileInterpolatesBetweenOrderStatistics) {
  const std::vector<double> v = {1.0, 2.0, 3.0, 4.0};
  EXPECT_DOUBLE_EQ(quantile_of_sorted(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile_of_sorted(v, 0.25), 1.75);  // numpy.percentile(v, 25)
  EXPECT_DOUBLE_EQ(quantile_of_sorted(v, 0.5), median_of(v));
  EXPECT_DOUBLE_EQ(quantile_of_sorted(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(quantile_of_sorted(v, -1.0), 1.0);  // clamped
  EXPECT_DOUBLE_EQ(quantile_of_sorted(v, 2.0), 4.0);
}

// Step times of the largest doubles sum to infinity (valid telemetry, issue
// 30): the interpolation gave inf * 0 = NaN for an order statistic that is
// finite, and inf - inf = NaN between two infinities.
TEST(OrderStatistics, QuantileNextToInfinityIsTheOrderStatistic) {
  const double inf = std::numeric_limits<double>::infinity();
  const double max = std::numeric_limits<double>::max();
  EXPECT_EQ(quantile_of_sorted({1.0, inf}, 0.0), 1.0);
  EXPECT_EQ(quantile_of_sorted({1.0, 2.0, inf}, 0.5), 2.0);
  EXPECT_EQ(quantile_of_sorted({inf, inf}, 0.5), inf);
  EXPECT_EQ(quantile_of_sorted({1.0, inf}, 0.5), inf);
  EXPECT_EQ(quantile_of_sorted({-max, max}, 0.5), 0.0);               // the difference overflows
  EXPECT_FALSE(std::signbit(quantile_of_sorted({-0.0, -0.0}, 0.5)));  // as before: +0
}

}  // namespace
}  // namespace traceml::analysis
