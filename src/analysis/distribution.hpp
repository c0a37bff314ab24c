// Per-step distributions, small enough to travel in final_summary.json, and the
// rank test that `traceml compare` runs on two of them (DECISIONS 12).
//
// A run's per-step series (one value per analysed step) is summarised as a
// sketch: its length, 21 quantiles (0, 5, ..., 100 %) and its lag-1
// autocorrelation. compare rebuilds each side's distribution from the
// quantiles and runs a two-sided Mann-Whitney U test, counting each run's
// steps as n (1 - r) / (1 + r) independent ones (r: lag-1 autocorrelation),
// since consecutive steps of one run are not independent draws.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "analysis/order_statistics.hpp"  // quantile_of_sorted

namespace traceml::analysis {

/// Quantiles a sketch carries: at 0, 1/20, ..., 20/20 (so index 5, 10 and 15
/// are the quartiles).
inline constexpr std::size_t kSketchQuantiles = 21;

struct DistributionSketch {
  std::int64_t count = 0;         ///< values summarised (> 0)
  std::vector<double> quantiles;  ///< kSketchQuantiles values, non-decreasing
  std::optional<double> lag1;     ///< lag-1 autocorrelation; absent below 3 values
};

/// Lag-1 autocorrelation of a series in its order, in [-1, 1]; absent for
/// fewer than 3 values or a constant series.
std::optional<double> lag1_autocorrelation(const std::vector<double>& series);

/// The sketch of a series (any order of analysis: the series' own order is
/// kept for the autocorrelation); absent for an empty series.
std::optional<DistributionSketch> sketch_of(const std::vector<double>& series);

/// The number of independent values a sketch counts as: n (1 - r) / (1 + r)
/// for a positive lag-1 autocorrelation r (the AR(1) variance inflation),
/// n otherwise; never below 1 nor above n.
double effective_count(const DistributionSketch& s);

/// The outcome of a two-sided Mann-Whitney U test of B against A.
struct RankTest {
  /// P(a step of B is slower than a step of A) + P(tie) / 2: 0.5 is no
  /// shift, above 0.5 means B is slower (Vargha-Delaney A).
  double prob_b_slower = 0.5;
  double z = 0.0;        ///< normal approximation, continuity corrected
  double p_value = 1.0;  ///< two-sided
  double n_eff_a = 0.0;  ///< effective counts used (effective_count)
  double n_eff_b = 0.0;
};

/// The rank test on two sketches. Each side's distribution is rebuilt as
/// min(count, 1000) values at evenly spaced probabilities of its quantile
/// function (linear between the stored quantiles); the statistic comes from
/// those values, its variance from the effective counts. Absent when either
/// side has fewer than kMinRankTestCount effective values.
std::optional<RankTest> mann_whitney(const DistributionSketch& a, const DistributionSketch& b);

/// Below this many effective values on a side the normal approximation of U
/// is poor; compare then falls back to the IQR band alone.
inline constexpr double kMinRankTestCount = 8.0;

}  // namespace traceml::analysis
