// From the aligned rows to the signals: one walk over the window's steps
// gathers each rank's peak and the per-step worst and median of both metrics
// (the medians bracketed, since consecutive steps look alike), then each
// metric's skew, pressure and creep.
#include "analysis/step_memory_signals.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <limits>
#include <utility>

#include "analysis/order_statistics.hpp"
#include "analysis/thresholds.hpp"

namespace traceml::analysis::step_memory {

namespace {

namespace th = thresholds;

/// One metric over the aligned window.
struct MetricSeries {
  std::vector<double> rank_peaks;  ///< max over the window, parallel to window.ranks
  std::vector<double> worst;       ///< per step: the maximum over the ranks
  std::vector<double> median;      ///< per step: the median over the ranks
};

/// The per-step medians of one metric over every rank. Consecutive steps have
/// nearly the same spread of values, so the values ranked just below and above
/// the last median bracket the next one: a single pass counts the values below
/// the bracket and keeps those inside it, and only those few are selected
/// from. When the median falls outside the bracket the step is selected from
/// in full. Either way the result is exactly the median of all the values
/// (peaks are never NaN: the reader rejects non-finite amounts).
class StepMedians {
 public:
  /// The median of v (reordered).
  double operator()(std::vector<double>& v) {
    const std::size_t n = v.size();
    const std::size_t upper = n / 2;  // sorted position of the upper middle
    const std::size_t lower = n % 2 ? upper : upper - 1;
    if (n < kMinBracketed) return select_median(v.begin(), n, 0, n);
    if (bracket_) {
      inside_.resize(n);
      std::size_t below = 0;
      std::size_t kept = 0;
      for (const double x : v) {
        below += x < lo_;
        inside_[kept] = x;
        // `&`, not `&&`: a branch here mispredicts on every other value.
        kept += static_cast<std::size_t>((lo_ <= x) & (x <= hi_));
      }
      // Sorted, the values below the bracket come first, then those inside it:
      // positions [below, below + kept) of the whole are the bracket's.
      if (below <= lower && upper < below + kept) return select(inside_.begin(), kept, below, n);
    }
    return select(v.begin(), n, 0, n);
  }

 private:
  // Below this many ranks a plain selection costs next to nothing.
  static constexpr std::size_t kMinBracketed = 64;

  /// select_median, then the bracket for the next step: the values about
  /// n / 8 ranks either side of the median (or the extremes of `v`).
  double select(std::vector<double>::iterator v, std::size_t count, std::size_t first,
                std::size_t total) {
    const double median = select_median(v, count, first, total);
    const std::size_t mid = total / 2 - first;  // the upper middle, now in place
    const auto at = v + static_cast<std::ptrdiff_t>(mid);
    const auto end = v + static_cast<std::ptrdiff_t>(count);
    const std::size_t reach = total / 8 + 4;
    if (mid >= reach) {
      std::nth_element(v, at - static_cast<std::ptrdiff_t>(reach), at);
      lo_ = *(at - static_cast<std::ptrdiff_t>(reach));
    } else {
      lo_ = mid > 0 ? *std::min_element(v, at) : *at;
    }
    if (count - 1 - mid >= reach) {
      std::nth_element(at + 1, at + static_cast<std::ptrdiff_t>(reach), end);
      hi_ = *(at + static_cast<std::ptrdiff_t>(reach));
    } else {
      hi_ = mid + 1 < count ? *std::max_element(at + 1, end) : *at;
    }
    bracket_ = true;
    return median;
  }

  bool bracket_ = false;
  double lo_ = 0.0;
  double hi_ = 0.0;
  std::vector<double> inside_;
};

/// Per-rank maxima and the per-step worst and median of both peaks over the
/// aligned window, in one walk over the steps; row_at(r, i) is the row of
/// rank index r at step index i.
template <typename RowAt>
void walk_window(const model::Telemetry& t, const AlignedWindow& w, const RowAt& row_at,
                 MetricSeries& allocated, MetricSeries& reserved) {
  const std::size_t n_ranks = w.ranks.size();
  const std::size_t n_steps = w.steps.size();
  std::vector<double> col_allocated(n_ranks), col_reserved(n_ranks);
  for (MetricSeries* m : {&allocated, &reserved}) {
    m->rank_peaks.assign(n_ranks, -std::numeric_limits<double>::infinity());
    m->worst.reserve(n_steps);
    m->median.reserve(n_steps);
  }
  StepMedians allocated_median, reserved_median;
  for (std::size_t i = 0; i < n_steps; ++i) {
    // The step's worst, folded in rank order like max_element (the first of
    // equal values stays), while the rows are read.
    const auto& head = t.step_memory[row_at(0, i)];
    double worst_allocated = *head.peak_allocated_bytes;
    double worst_reserved = *head.peak_reserved_bytes;
    for (std::size_t r = 0; r < n_ranks; ++r) {
      const auto& row = t.step_memory[row_at(r, i)];
      const double a = *row.peak_allocated_bytes;
      const double v = *row.peak_reserved_bytes;
      col_allocated[r] = a;
      col_reserved[r] = v;
      worst_allocated = std::max(worst_allocated, a);
      worst_reserved = std::max(worst_reserved, v);
      allocated.rank_peaks[r] = std::max(allocated.rank_peaks[r], a);
      reserved.rank_peaks[r] = std::max(reserved.rank_peaks[r], v);
    }
    allocated.worst.push_back(worst_allocated);
    reserved.worst.push_back(worst_reserved);
    allocated.median.push_back(allocated_median(col_allocated));
    reserved.median.push_back(reserved_median(col_reserved));
  }
}

void aligned_series(const model::Telemetry& t, const AlignedWindow& w, MetricSeries& allocated,
                    MetricSeries& reserved) {
  const bool even =
      std::none_of(w.rows.begin(), w.rows.end(), [](const RowList& rows) { return rows.stored(); });
  if (!even) {
    const auto row_at = [&](std::size_t r, std::size_t i) { return w.row(r, i); };
    walk_window(t, w, row_at, allocated, reserved);
    return;
  }
  // Every rank's rows evenly spaced (the usual case): plain arithmetic, which
  // keeps the walk as fast as reading the rows in order.
  std::vector<RowIndex> base, stride;
  for (std::size_t r = 0; r < w.ranks.size(); ++r) {
    base.push_back(w.row(r, 0));
    stride.push_back(w.rows[r].stride());
  }
  const auto row_at = [&](std::size_t r, std::size_t i) { return base[r] + i * stride[r]; };
  walk_window(t, w, row_at, allocated, reserved);
}

std::optional<Creep> assess_creep(const std::vector<double>& worst,
                                  const std::vector<double>& median) {
  TrendComputationConfig cfg;
  cfg.min_points = th::kCreepMinPoints;
  cfg.warmup_frac = th::kCreepWarmupFrac;
  const auto w = compute_trend(worst, cfg);
  const auto m = compute_trend(median, cfg);
  if (!w || !m) return std::nullopt;
  Creep c;
  c.worst = *w;
  c.median = *m;
  c.delta = w->recent_avg - w->baseline_avg;
  // Both the worst rank and the typical rank must rise band over band: a
  // one-off spike in the recent band, or a dip after a high start, is not creep.
  const bool direction_ok = w->recent_avg > w->mid_avg && m->recent_avg > m->mid_avg &&
                            w->mid_avg > w->baseline_avg && m->mid_avg > m->baseline_avg;
  c.early = direction_ok && c.delta > 0.0;
  c.confirmed = direction_ok && c.delta >= th::kCreepConfirmedDelta;
  c.score = std::max(0.0, c.delta) / th::kCreepScoreDeltaScale +
            std::max(0.0, w->pct.value_or(0.0)) * th::kCreepWorstGrowthWeight +
            std::max(0.0, m->pct.value_or(0.0)) * th::kCreepMedianGrowthWeight;
  return c;
}

MetricSignals assess_metric(const char* name, const AlignedWindow& w, MetricSeries series,
                            const std::optional<double>& gpu_total) {
  MetricSignals s;
  s.name = name;
  s.steps_used = static_cast<std::int64_t>(w.steps.size());
  s.rank_peaks = std::move(series.rank_peaks);
  // Strictly greater: the lowest rank keeps a tie (DECISIONS.md quirk 7).
  std::size_t worst = 0;
  for (std::size_t r = 1; r < s.rank_peaks.size(); ++r) {
    if (s.rank_peaks[r] > s.rank_peaks[worst]) worst = r;
  }
  s.worst_rank = w.ranks[worst];
  s.worst_peak = s.rank_peaks[worst];
  s.median_peak = median_of(s.rank_peaks);
  s.skew = s.median_peak > 0.0 ? (s.worst_peak - s.median_peak) / s.median_peak : 0.0;
  if (gpu_total) s.pressure = s.worst_peak / *gpu_total;
  if (s.steps_used >= th::kStepMemoryMinSteps) s.creep = assess_creep(series.worst, series.median);
  return s;
}

}  // namespace

std::vector<MetricSignals> metric_signals(const model::Telemetry& t, const AlignedWindow& w,
                                          const std::optional<double>& gpu_total) {
  std::vector<MetricSignals> metrics;
  if (w.steps.empty()) return metrics;
  MetricSeries allocated, reserved;
  aligned_series(t, w, allocated, reserved);
  metrics.push_back(assess_metric(kAllocated, w, std::move(allocated), gpu_total));
  metrics.push_back(assess_metric(kReserved, w, std::move(reserved), gpu_total));
  return metrics;
}

const MetricSignals* find_metric(const std::vector<MetricSignals>& metrics,
                                 const std::string& name) {
  for (const auto& m : metrics) {
    if (m.name == name) return &m;
  }
  return nullptr;
}

std::string label_of(const std::string& metric) {
  std::string label = metric;
  std::replace(label.begin(), label.end(), '_', ' ');
  return label;
}

}  // namespace traceml::analysis::step_memory
