// The per-step distribution sketch and the rank test compare runs on it
// (DECISIONS 12): quantiles, autocorrelation, effective counts, and the
// Mann-Whitney U test against values worked out by hand.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "analysis/distribution.hpp"

namespace {

using traceml::analysis::DistributionSketch;
using traceml::analysis::effective_count;
using traceml::analysis::kSketchQuantiles;
using traceml::analysis::lag1_autocorrelation;
using traceml::analysis::mann_whitney;
using traceml::analysis::quantile_of_sorted;
using traceml::analysis::sketch_of;

/// 0.5/n, 1.5/n, ... scaled into [lo, lo + width): a uniform sample, in an
/// order whose consecutive values are not positively correlated.
std::vector<double> uniform(double lo, double width, int n, int stride) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i)
    v.push_back(lo + width * (double((i * stride) % n) + 0.5) / double(n));
  return v;
}

TEST(Distribution, QuantilesInterpolateLikeNumpy) {
  const std::vector<double> v = {1.0, 2.0, 3.0, 4.0};
  EXPECT_DOUBLE_EQ(quantile_of_sorted(v, 0.0), 1.0);
  EXPECT_DOUBLE_EQ(quantile_of_sorted(v, 0.25), 1.75);  // numpy.percentile(v, 25)
  EXPECT_DOUBLE_EQ(quantile_of_sorted(v, 0.5), 2.5);
  EXPECT_DOUBLE_EQ(quantile_of_sorted(v, 1.0), 4.0);
  EXPECT_DOUBLE_EQ(quantile_of_sorted({7.0}, 0.3), 7.0);
}

TEST(Distribution, SketchKeepsCountOrderFreeQuantilesAndLag1) {
  const auto s = sketch_of({5.0, 1.0, 4.0, 2.0, 3.0});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->count, 5);
  ASSERT_EQ(s->quantiles.size(), kSketchQuantiles);
  EXPECT_DOUBLE_EQ(s->quantiles.front(), 1.0);
  EXPECT_DOUBLE_EQ(s->quantiles[10], 3.0);
  EXPECT_DOUBLE_EQ(s->quantiles.back(), 5.0);
  ASSERT_TRUE(s->lag1);
  // mean 3; deviations 2,-2,1,-1,0: sum of lagged products -4-2-1+0 = -7 over 10.
  EXPECT_DOUBLE_EQ(*s->lag1, -0.7);
  EXPECT_FALSE(sketch_of({}));
  EXPECT_FALSE(sketch_of({2.0, 2.0, 2.0})->lag1);  // constant: undefined
  EXPECT_FALSE(lag1_autocorrelation({1.0, 2.0}));  // too short
}

TEST(Distribution, EffectiveCountDeflatesPositiveAutocorrelationOnly) {
  DistributionSketch s;
  s.count = 100;
  s.lag1 = 0.5;
  EXPECT_DOUBLE_EQ(effective_count(s), 100.0 * 0.5 / 1.5);
  s.lag1 = -0.4;
  EXPECT_DOUBLE_EQ(effective_count(s), 100.0);
  s.lag1 = 1.0;
  EXPECT_DOUBLE_EQ(effective_count(s), 1.0);  // a run is at least one observation
  s.lag1.reset();
  EXPECT_DOUBLE_EQ(effective_count(s), 100.0);
}

TEST(Distribution, MannWhitneyOnUniformShift) {
  // U(0, 1) against U(0.2, 1.2), 400 values a side. Rebuilt from the
  // sketch, each side is a grid from 0.00125 to 0.99875 with spacing
  // 0.998/400, so B is A moved 80.16 grid steps: a pair (i, j) has B slower
  // when i - j <= 80, all but 1 + ... + 319 = 51040 of the 160000 pairs,
  // A = 108960/160000 = 0.681 (a continuous U(0,1) gives 1 - 0.8^2/2 = 0.68).
  // U's sd is sqrt(400*400*801/12) = 3268.0: z = (0.181*160000 - 0.5)/3268.0.
  const auto a = sketch_of(uniform(0.0, 1.0, 400, 153));
  const auto b = sketch_of(uniform(0.2, 1.0, 400, 153));
  const auto t = mann_whitney(*a, *b);
  ASSERT_TRUE(t);
  EXPECT_NEAR(t->prob_b_slower, 0.681, 1e-9);
  EXPECT_NEAR(t->z, (0.181 * 160000 - 0.5) / std::sqrt(160000.0 * 801 / 12), 1e-6);
  EXPECT_LT(t->p_value, 1e-15);
  EXPECT_DOUBLE_EQ(t->n_eff_a, 400.0);
  // Swapped sides: the mirror image.
  const auto r = mann_whitney(*b, *a);
  EXPECT_NEAR(r->prob_b_slower, 1.0 - t->prob_b_slower, 1e-12);
  EXPECT_NEAR(r->z, -t->z, 1e-9);
  EXPECT_NEAR(r->p_value, t->p_value, 1e-12);
}

TEST(Distribution, MannWhitneyOnEqualAndSmallShifts) {
  const auto a = sketch_of(uniform(10.0, 4.0, 200, 77));
  const auto same = mann_whitney(*a, *a);
  ASSERT_TRUE(same);
  EXPECT_DOUBLE_EQ(same->prob_b_slower, 0.5);
  EXPECT_DOUBLE_EQ(same->z, 0.0);
  EXPECT_DOUBLE_EQ(same->p_value, 1.0);
  // A shift of 1 % of the width over 200 values: the grids (spacing
  // 3.98/200) are 2.01 steps apart, so B is slower in all pairs but
  // 1 + ... + 197 = 19503 of 40000: A = 0.512425,
  // z = (0.012425 * 40000 - 0.5) / sqrt(40000 * 401 / 12) = 0.4294, p = 0.668.
  const auto b = sketch_of(uniform(10.04, 4.0, 200, 77));
  const auto t = mann_whitney(*a, *b);
  EXPECT_NEAR(t->prob_b_slower, 20497.0 / 40000.0, 1e-9);
  EXPECT_NEAR(t->p_value, std::erfc(0.42943 / std::sqrt(2.0)), 1e-4);
  EXPECT_GT(t->p_value, 0.05);
  // Every value tied: no shift at all.
  const auto flat = sketch_of(std::vector<double>(50, 3.0));
  EXPECT_DOUBLE_EQ(mann_whitney(*flat, *flat)->p_value, 1.0);
}

TEST(Distribution, MannWhitneyNeedsEnoughIndependentValues) {
  const auto seven = sketch_of(uniform(0.0, 1.0, 7, 3));
  const auto many = sketch_of(uniform(0.0, 1.0, 100, 39));
  EXPECT_FALSE(mann_whitney(*seven, *many));
  // 100 values with lag-1 autocorrelation 0.9 count as 100 * 0.1 / 1.9 = 5.3.
  DistributionSketch drift = *many;
  drift.lag1 = 0.9;
  EXPECT_FALSE(mann_whitney(drift, *many));
  // Autocorrelation widens the test: the same shift, a larger p.
  DistributionSketch shifted = *sketch_of(uniform(0.1, 1.0, 100, 39));
  const double p_independent = mann_whitney(*many, shifted)->p_value;
  DistributionSketch a = *many;
  a.lag1 = 0.5;
  shifted.lag1 = 0.5;
  EXPECT_GT(mann_whitney(a, shifted)->p_value, p_independent);
  // Malformed sketches are refused, not trusted.
  DistributionSketch bad = *many;
  bad.quantiles[3] = bad.quantiles[2] - 1.0;  // decreasing
  EXPECT_FALSE(mann_whitney(bad, *many));
  bad = *many;
  bad.quantiles.pop_back();
  EXPECT_FALSE(mann_whitney(bad, *many));
  bad = *many;
  bad.quantiles[0] = std::nan("");
  EXPECT_FALSE(mann_whitney(bad, *many));
}

}  // namespace
