// The shared band-average trend of a numeric series (spec §4.1.14): how much
// the recent end of a window moved against its early (post-warmup) part. The
// step-time trend note and step-memory creep both read it, so that the two
// sections cannot disagree on what "rising" means.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/thresholds.hpp"

namespace traceml::analysis {

/// A band of a series as fractions of its length: elements
/// [floor(n * start), ceil(n * end)), never empty.
struct TrendBand {
  double start = 0.0;
  double end = 1.0;
};

/// TraceML's TrendComputationConfig. The defaults are the step-time ones;
/// step-memory creep uses min_points 50 and warmup 0.
struct TrendComputationConfig {
  /// Only the latest this many finite values count; nullopt keeps them all.
  std::optional<std::int64_t> history_limit = thresholds::kTrendHistoryLimit;
  /// Fewer finite values than this, before or after the warmup cut, is no trend.
  std::int64_t min_points = thresholds::kTrendMinPoints;
  /// Leading fraction dropped before the bands are measured.
  double warmup_frac = thresholds::kTrendWarmupFrac;
  TrendBand baseline{thresholds::kTrendBaselineStart, thresholds::kTrendBaselineEnd};
  TrendBand mid{thresholds::kTrendMidStart, thresholds::kTrendMidEnd};
  TrendBand recent{thresholds::kTrendRecentStart, thresholds::kTrendRecentEnd};
};

/// The band averages of one series and the change between them.
struct TrendEvidence {
  double baseline_avg = 0.0;
  double mid_avg = 0.0;
  double recent_avg = 0.0;
  /// (recent - baseline) / baseline; nullopt when |baseline| <= 1e-12 (no
  /// meaningful relative change from zero).
  std::optional<double> pct;
  /// Finite values kept after history_limit and before the warmup cut
  /// (TraceML's points_used).
  std::int64_t points_used = 0;
};

/// Trend of a series in arrival order; nullopt when too few finite points.
std::optional<TrendEvidence> compute_trend(const std::vector<double>& series,
                                           const TrendComputationConfig& config = {});
/// Same, for a series with unmeasured points (they are skipped like NaN).
std::optional<TrendEvidence> compute_trend(const std::vector<std::optional<double>>& series,
                                           const TrendComputationConfig& config = {});

/// "↑ +12.5%" / "↓ -9.0%": the arrow is ↑ only for a strictly positive change.
std::string format_trend_pct(double pct);

/// "worsening" when pct >= kTrendChange, "improving" when pct <= -kTrendChange,
/// else (or when pct is null) nullopt: a change that small is noise.
std::optional<std::string> trend_state(std::optional<double> pct);

}  // namespace traceml::analysis
