#include "analysis/trend.hpp"

#include <cmath>
#include <cstddef>

#include <fmt/format.h>

namespace traceml::analysis {

namespace {

// Below this a baseline is zero for practical purposes, and a relative change
// from it would be a division artefact rather than a trend.
constexpr double kBaselineEpsilon = 1e-12;

struct Slice {
  std::size_t begin = 0;
  std::size_t end = 0;
};

// [floor(n*start), ceil(n*end)) clamped into the series and to at least one
// element, so that short series still give every band a value. The products
// are taken in double exactly as TraceML does (n * 0.15 and friends are not
// exact), since a different rounding would move a band edge by one element.
Slice band_slice(std::size_t n, const TrendBand& band) {
  const double dn = static_cast<double>(n);
  const double raw_start = std::floor(dn * band.start);
  const double raw_end = std::ceil(dn * band.end);
  const double last = static_cast<double>(n - 1);
  const double start = raw_start < 0.0 ? 0.0 : (raw_start > last ? last : raw_start);
  double end = raw_end > dn ? dn : raw_end;
  if (end < start + 1.0) end = start + 1.0;
  return {static_cast<std::size_t>(start), static_cast<std::size_t>(end)};
}

double band_average(const std::vector<double>& values, std::size_t offset, const Slice& s) {
  double sum = 0.0;
  for (std::size_t i = s.begin; i < s.end; ++i)
    sum += values[offset + i];
  return sum / static_cast<double>(s.end - s.begin);
}

}  // namespace

std::optional<TrendEvidence> compute_trend(const std::vector<double>& series,
                                           const TrendComputationConfig& config) {
  std::vector<double> values;
  values.reserve(series.size());
  for (double v : series) {
    if (std::isfinite(v)) values.push_back(v);
  }
  const auto too_few = [&](std::size_t n) {
    return static_cast<std::int64_t>(n) < config.min_points;
  };
  if (too_few(values.size())) return std::nullopt;

  // Keep the latest history_limit values: offset is the index of the first kept one.
  std::size_t offset = 0;
  if (config.history_limit && *config.history_limit >= 0 &&
      values.size() > static_cast<std::size_t>(*config.history_limit)) {
    offset = values.size() - static_cast<std::size_t>(*config.history_limit);
  }
  const std::size_t used = values.size() - offset;
  if (too_few(used)) return std::nullopt;

  // The first steps of a run (allocator warm-up, compilation, cache fill) are
  // not representative of its baseline.
  const auto warmup =
      static_cast<std::size_t>(std::floor(static_cast<double>(used) * config.warmup_frac));
  const std::size_t stable_offset = offset + (warmup < used ? warmup : used);
  const std::size_t stable = values.size() - stable_offset;
  if (stable == 0 || too_few(stable)) return std::nullopt;

  TrendEvidence ev;
  ev.points_used = static_cast<std::int64_t>(used);
  ev.baseline_avg = band_average(values, stable_offset, band_slice(stable, config.baseline));
  ev.mid_avg = band_average(values, stable_offset, band_slice(stable, config.mid));
  ev.recent_avg = band_average(values, stable_offset, band_slice(stable, config.recent));
  if (std::fabs(ev.baseline_avg) > kBaselineEpsilon) {
    ev.pct = (ev.recent_avg - ev.baseline_avg) / ev.baseline_avg;
  }
  return ev;
}

std::optional<TrendEvidence> compute_trend(const std::vector<std::optional<double>>& series,
                                           const TrendComputationConfig& config) {
  std::vector<double> values;
  values.reserve(series.size());
  for (const auto& v : series) {
    if (v) values.push_back(*v);
  }
  return compute_trend(values, config);
}

std::string format_trend_pct(double pct) {
  // Python's "{:+.1f}" and fmt's alike, negative zero ("-0.0") included.
  return fmt::format("{}{:+.1f}%", pct > 0.0 ? "\u2191 " : "\u2193 ", pct * 100.0);
}

std::optional<std::string> trend_state(std::optional<double> pct) {
  if (!pct) return std::nullopt;
  if (*pct >= thresholds::kTrendChange) return std::string("worsening");
  if (*pct <= -thresholds::kTrendChange) return std::string("improving");
  return std::nullopt;
}

}  // namespace traceml::analysis
