// What the HTML report's plots draw, taken from a run's telemetry: per-rank
// step series on the diagnosis clock over the analysed window, step memory,
// and the system and process samples, each reduced to at most kMaxColumns
// points per series so that a page's size does not grow with the run
// (docs/html-report.md "Downsampling"). Data only: html_plots draws it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/telemetry.hpp"
#include "report/summary_view.hpp"

namespace traceml::analysis {
struct StepWindow;
}

namespace traceml::report {

/// Columns (points) a series keeps at most. 240 columns across a ~1,000 px
/// plot are 4 px each: every column stays visible, and 64 ranks x 20,000
/// steps stay far below 2 MB (docs/html-report.md gives the measured size).
inline constexpr std::size_t kMaxColumns = 240;

/// A step longer than this many times its rank's median step is a spike:
/// the plots mark it, since a column's mean would hide one slow step in many.
inline constexpr double kSpikeFactor = 3.0;

/// `n` values cut into min(n, max_columns) consecutive buckets of as equal
/// size as can be: bucket b holds indices [starts[b], starts[b + 1]).
struct Buckets {
  std::vector<std::size_t> starts;  ///< size() == columns() + 1
  [[nodiscard]] std::size_t columns() const { return starts.empty() ? 0 : starts.size() - 1; }
};
Buckets make_buckets(std::size_t n, std::size_t max_columns = kMaxColumns);

/// The mean (max) of each bucket of `v` (v.size() == the n of `b`).
std::vector<double> bucket_mean(const std::vector<double>& v, const Buckets& b);
std::vector<double> bucket_max(const std::vector<double>& v, const Buckets& b);

/// The phases a step's time is made of, bottom to top in the stacked plot;
/// their sum is the step time (input wait + traced step, §4.1.5).
inline constexpr std::size_t kPhaseCount = 6;
extern const std::array<const char*, kPhaseCount> kPhaseNames;

/// A step's distribution for one rank, in ms, over the window's steps.
struct Quantiles {
  double p5 = 0, p25 = 0, p50 = 0, p75 = 0, p95 = 0, max = 0;
};

struct RankSteps {
  int rank = 0;
  std::string label;  ///< "R3/N0"
  std::string host;   ///< the rank's host name, "" when unknown (untrusted text)
  /// Step time and input wait per column (mean of the column's steps, ms);
  /// absent when the rank did not measure that metric on the window's clock.
  std::optional<std::vector<double>> step_ms;
  std::optional<std::vector<double>> input_ms;
  std::optional<Quantiles> step_quantiles;
};

/// One step that took kSpikeFactor x its rank's median or more.
struct Spike {
  int rank = 0;
  std::int64_t step = 0;
  std::size_t column = 0;
  double ms = 0.0;
  double times_median = 0.0;
};

/// A stall the run recorded (the summary's run.stalls: a rank that made no
/// progress for seconds, seen live by the collector), where the plots can
/// place it.
struct RecordedStall {
  long long rank = 0;
  std::string text;                   ///< "R0 stalled for 6.0 s at step 812, backward"
  std::optional<std::size_t> column;  ///< of the step columns, when its step is in the window
  std::optional<double> start_s;      ///< seconds on the sample axis (from the first sample)
  double duration_s = 0.0;
};

/// Steps a rank ran under LibTorch's profiler (the summary's `profiles`
/// with operators): left out of the analysed window, marked where they
/// would be.
struct ProfiledMark {
  long long rank = 0;
  std::string text;                   ///< "R1 steps 165-174 ran under LibTorch's profiler ..."
  std::optional<std::size_t> column;  ///< the column of the step after them, when in the window
};

/// A series over a shared x axis: one value per column, absent where the
/// column has no sample.
struct Series {
  std::string label;  ///< "R3/N0", "N0"
  std::string title;  ///< hover text (untrusted: escape it)
  std::vector<std::optional<double>> y;
};

/// Series that share an x axis: `columns` equal columns over
/// [x_first, x_first + x_span) (steps: span = last - first + 1; seconds:
/// last - first).
struct SeriesSet {
  double x_first = 0.0;
  double x_span = 0.0;
  std::size_t columns = 0;
  std::vector<Series> series;
  [[nodiscard]] bool empty() const { return series.empty(); }
};

struct PlotData {
  std::string clock;                   ///< "gpu" / "cpu"
  std::vector<std::int64_t> steps;     ///< the aligned step ids of the window
  Buckets columns;                     ///< of `steps`
  std::vector<RankSteps> ranks;        ///< ascending rank
  std::optional<std::size_t> shown;    ///< index into ranks: the representative rank
  std::optional<std::size_t> culprit;  ///< index into ranks: the rank the verdict names
  /// The representative rank's phases per column (ms, mean), kPhaseNames order.
  std::array<std::vector<double>, kPhaseCount> phases;
  std::vector<Spike> spikes;           ///< every rank's, longest first
  std::vector<RecordedStall> stalls;   ///< run.stalls of the summary
  std::vector<ProfiledMark> profiled;  ///< the summary's profiles with operators
  SeriesSet memory;                    ///< peak allocated bytes per rank, x = step (max per column)
  SeriesSet host_cpu;                  ///< per node, percent; x = seconds from the first sample
  SeriesSet gpu_util;                  ///< per node, percent (mean over its GPUs)
  SeriesSet process_cpu;               ///< per rank, percent of one core
  SeriesSet process_rss;               ///< per rank, bytes
  std::optional<double> samples_origin;  ///< unix seconds at x = 0 of the sample series
  std::int64_t window = 0;               ///< the analysed window (latest aligned steps per rank)
  std::size_t step_ranks = 0;            ///< ranks with step rows in the window
};

/// The plots' data of `t` as the summary `run` analysed it: the window is the
/// summary's (step_time.global.window.window_size), the representative rank
/// the text report's STEP TIMING rank, the culprit the straggler's.
/// `window`, when given, is the diagnosis's own alignment of `t` over that
/// window (analysis::Summary::step_window): drawn from without aligning the
/// steps again, which at the end of a 64 x 20,000 run costs a sixth of a second.
PlotData plot_data(const SummaryView& run, const model::Telemetry& t,
                   const analysis::StepWindow* window = nullptr);

}  // namespace traceml::report
