#include "analysis/distribution.hpp"

#include <algorithm>
#include <cmath>

namespace traceml::analysis {

namespace {

/// Values rebuilt from a sketch for the U statistic: enough that the
/// statistic's own error is far below any p-value that matters.
constexpr std::int64_t kMaxRebuilt = 1000;

/// `k` values at probabilities (i + 0.5) / k of the sketch's quantile function.
std::vector<double> rebuild(const DistributionSketch& s) {
  const std::int64_t k = std::clamp<std::int64_t>(s.count, 1, kMaxRebuilt);
  std::vector<double> out;
  out.reserve(std::size_t(k));
  const double last = double(s.quantiles.size() - 1);
  for (std::int64_t i = 0; i < k; ++i) {
    const double pos = (double(i) + 0.5) / double(k) * last;
    const auto lo = std::size_t(std::floor(pos));
    const std::size_t hi = std::min(lo + 1, s.quantiles.size() - 1);
    out.push_back(s.quantiles[lo] + (s.quantiles[hi] - s.quantiles[lo]) * (pos - double(lo)));
  }
  return out;  // non-decreasing, as the quantiles are
}

/// P(b > a) + P(b == a) / 2 over all pairs, for ascending a and b.
double prob_greater(const std::vector<double>& a, const std::vector<double>& b) {
  double wins = 0.0;
  std::size_t below = 0;  // values of a < y
  std::size_t upto = 0;   // values of a <= y
  for (const double y : b) {
    while (below < a.size() && a[below] < y)
      ++below;
    upto = std::max(upto, below);
    while (upto < a.size() && a[upto] <= y)
      ++upto;
    wins += double(below) + 0.5 * double(upto - below);
  }
  return wins / (double(a.size()) * double(b.size()));
}

bool valid(const DistributionSketch& s) {
  if (s.count < 1 || s.quantiles.size() != kSketchQuantiles) return false;
  for (std::size_t i = 0; i < s.quantiles.size(); ++i) {
    if (!std::isfinite(s.quantiles[i])) return false;
    if (i > 0 && s.quantiles[i] < s.quantiles[i - 1]) return false;
  }
  return true;
}

}  // namespace

std::optional<double> lag1_autocorrelation(const std::vector<double>& series) {
  const std::size_t n = series.size();
  if (n < 3) return std::nullopt;
  double mean = 0.0;
  for (const double v : series)
    mean += v;
  mean /= double(n);
  double var = 0.0;
  double cov = 0.0;
  for (std::size_t i = 0; i < n; ++i) {
    const double d = series[i] - mean;
    var += d * d;
    if (i + 1 < n) cov += d * (series[i + 1] - mean);
  }
  if (!(var > 0.0) || !std::isfinite(var) || !std::isfinite(cov)) return std::nullopt;
  return std::clamp(cov / var, -1.0, 1.0);
}

std::optional<DistributionSketch> sketch_of(const std::vector<double>& series) {
  if (series.empty()) return std::nullopt;
  DistributionSketch s;
  s.count = std::int64_t(series.size());
  s.lag1 = lag1_autocorrelation(series);
  std::vector<double> sorted = series;
  std::sort(sorted.begin(), sorted.end());
  s.quantiles.reserve(kSketchQuantiles);
  for (std::size_t i = 0; i < kSketchQuantiles; ++i)
    s.quantiles.push_back(quantile_of_sorted(sorted, double(i) / double(kSketchQuantiles - 1)));
  return s;
}

double effective_count(const DistributionSketch& s) {
  const double n = double(std::max<std::int64_t>(s.count, 1));
  const double r = s.lag1.value_or(0.0);
  if (!(r > 0.0)) return n;
  // r -> 1 would count a whole run as no evidence; a run always counts as one.
  return std::clamp(n * (1.0 - r) / (1.0 + r), 1.0, n);
}

std::optional<RankTest> mann_whitney(const DistributionSketch& a, const DistributionSketch& b) {
  if (!valid(a) || !valid(b)) return std::nullopt;
  RankTest t;
  t.n_eff_a = effective_count(a);
  t.n_eff_b = effective_count(b);
  if (t.n_eff_a < kMinRankTestCount || t.n_eff_b < kMinRankTestCount) return std::nullopt;
  t.prob_b_slower = prob_greater(rebuild(a), rebuild(b));
  const double n1 = t.n_eff_a;
  const double n2 = t.n_eff_b;
  const double u_shift = (t.prob_b_slower - 0.5) * n1 * n2;
  const double sigma = std::sqrt(n1 * n2 * (n1 + n2 + 1.0) / 12.0);
  const double corrected = std::max(0.0, std::fabs(u_shift) - 0.5);
  t.z = std::copysign(corrected / sigma, u_shift);
  t.p_value = std::clamp(std::erfc(std::fabs(t.z) / std::sqrt(2.0)), 0.0, 1.0);
  return t;
}

}  // namespace traceml::analysis
