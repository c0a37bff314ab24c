#include "analysis/step_window.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "analysis/history.hpp"
#include "analysis/step_alignment.hpp"

namespace traceml::analysis {

using model::Event;
using model::StepRecord;
using model::StepView;

namespace {

/// A metric of one event is named as the event is (model::kEventNames).
constexpr const char* event_key(Event e) {
  return model::kEventNames[static_cast<std::size_t>(e)];
}
constexpr std::array<const char*, kStepMetricCount> kMetricNames = {
    event_key(Event::InputWait),
    event_key(Event::H2D),
    event_key(Event::Forward),
    event_key(Event::Backward),
    event_key(Event::OptimizerStep),
    "step_time",
    event_key(Event::TracedStepTime),
    "residual_proxy",
    "compute",
    "step_time_cpu",
    "step_time_gpu",
    "traced_step_time_cpu",
    "traced_step_time_gpu",
    "dataloader_fetch"};

/// Each rank keeps this many windows of its latest steps before alignment, so
/// that ranks a little apart still share `window` common steps (TraceML's live
/// lookback; its summary path keeps one window and can align nothing when
/// ranks drift by more than a window).
constexpr std::int64_t kRankLookback = 4;

constexpr std::size_t idx(StepMetric m) {
  return static_cast<std::size_t>(m);
}

constexpr std::size_t idx_clock(Clock c) {
  return static_cast<std::size_t>(c);
}

/// A clock's value of an event: non-finite is "not measured", negative is 0
/// (spec §4.1.1 event normalisation).
inline std::optional<double> clock_value(const StepView& r, Event e, Clock c) {
  auto v = c == Clock::Gpu ? r.gpu_ms(e) : r.cpu_ms(e);
  if (!v || !std::isfinite(*v)) return std::nullopt;
  return std::max(0.0, *v);
}

/// Each rank's latest steps aligned: `window` of them times the lookback, all
/// when the window is unbounded (<= 0).
std::int64_t lookback_rows(std::int64_t window) {
  if (window <= 0) return -1;
  return window > std::numeric_limits<std::int64_t>::max() / kRankLookback
             ? std::numeric_limits<std::int64_t>::max()
             : window * kRankLookback;
}

/// Which events a rank reports on a clock over its aligned rows (spec §4.1.4).
struct Availability {
  std::array<bool, model::kEventCount> ok{};
};

std::optional<double> add(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b) return std::nullopt;
  return *a + *b;
}

/// One display metric's value on one row, on the selected clock, under the
/// rank's availability (§4.1.5).
std::optional<double> display_value(const StepView& r, StepMetric m, Clock c,
                                    const Availability& a) {
  auto value = [&](Event e) -> std::optional<double> {
    if (!a.ok[std::size_t(e)]) return std::nullopt;
    auto v = clock_value(r, e, c);
    return v ? v : std::optional<double>(0.0);  // only occurrence events can be absent here
  };
  auto compute = [&] {
    return add(add(value(Event::Forward), value(Event::Backward)), value(Event::OptimizerStep));
  };
  switch (m) {
    case StepMetric::InputWait:
      return value(Event::InputWait);
    case StepMetric::H2D:
      return value(Event::H2D);
    case StepMetric::Forward:
      return value(Event::Forward);
    case StepMetric::Backward:
      return value(Event::Backward);
    case StepMetric::OptimizerStep:
      return value(Event::OptimizerStep);
    case StepMetric::TracedStepTime:
      return value(Event::TracedStepTime);
    case StepMetric::StepTime:
      return add(value(Event::InputWait), value(Event::TracedStepTime));
    case StepMetric::Compute:
      return compute();
    case StepMetric::Residual: {
      const auto traced = value(Event::TracedStepTime);
      const auto comp = compute();
      if (!traced || !comp) return std::nullopt;
      return std::max(0.0, *traced - value(Event::H2D).value_or(0.0) - *comp);
    }
    default:
      return std::nullopt;  // clock aggregates have no per-step series
  }
}

/// What one pass over a rank's aligned rows learns, per clock: how often each
/// event was measured and its sum, the clamped residual and the step time
/// summed per step (averages are means of per-step values, as TraceML's are).
struct ClockSums {
  std::array<std::size_t, model::kEventCount> present{};
  std::array<double, model::kEventCount> sum{};
  double residual = 0.0;   // over rows with traced, forward and backward
  double step_time = 0.0;  // over rows with input wait and traced
};

/// Sums of the GPU activity records of a rank's aligned rows.
struct ActivitySums {
  std::int64_t steps = 0;
  double collective_ms = 0.0, h2d_bytes = 0.0, h2d_pageable_bytes = 0.0;
  double h2d_copies = 0.0, h2d_pageable_copies = 0.0;
  double idle = 0.0;  // per-step idle fractions
  std::int64_t idle_steps = 0;
};

struct RankScan {
  std::array<ClockSums, 2> clock;  // indexed by Clock
  bool gpu_complete = true;        // every row readable on the GPU clock
  std::size_t rows = 0;
  ActivitySums activity;
};

/// Adds a row's GPU activity. The idle share of a step is measured against
/// its GPU step time (input wait + traced step on the GPU clock), whatever
/// clock the window uses: busy_ms is GPU time, so only GPU time divides it.
void scan_activity(ActivitySums& out, const StepView& r, const model::StepGpuActivity& a) {
  ++out.steps;
  out.collective_ms += a.collective_ms;
  out.h2d_bytes += a.h2d_bytes;
  out.h2d_pageable_bytes += a.h2d_pageable_bytes;
  out.h2d_copies += double(a.h2d_copies);
  out.h2d_pageable_copies += double(a.h2d_pageable_copies);
  const auto input = clock_value(r, Event::InputWait, Clock::Gpu);
  const auto traced = clock_value(r, Event::TracedStepTime, Clock::Gpu);
  if (input && traced && *input + *traced > 0 && std::isfinite(a.busy_ms)) {
    out.idle += std::clamp(1.0 - a.busy_ms / (*input + *traced), 0.0, 1.0);
    ++out.idle_steps;
  }
}

/// Adds one aligned row to its rank's scan. This runs once per (rank, step)
/// of the window, millions of times on a large run, so it reads each clock's
/// values once into plain arrays.
void scan_row(RankScan& out, const StepView& r) {
  ++out.rows;
  if (const model::StepGpuActivity* a = r.activity()) scan_activity(out.activity, r, *a);
  const auto i = [](Event e) { return std::size_t(e); };
  for (Clock c : {Clock::Cpu, Clock::Gpu}) {
    ClockSums& cs = out.clock[std::size_t(c)];
    const bool gpu = c == Clock::Gpu;
    const unsigned mask = gpu ? r.gpu_mask() : r.cpu_mask();
    std::array<double, model::kEventCount> v{};
    std::array<bool, model::kEventCount> has{};
    for (std::size_t e = 0; e < model::kEventCount; ++e) {
      // Spec §4.1.1: non-finite is "not measured", negative is 0. A value
      // whose bit is clear is not read (its column may not exist).
      const bool measured = ((mask >> e) & 1u) != 0;
      const double raw = !measured ? 0.0 : gpu ? r.gpu(Event(e)) : r.cpu(Event(e));
      has[e] = measured && std::isfinite(raw);
      v[e] = has[e] ? std::max(0.0, raw) : 0.0;  // absent occurrence events count as 0
      cs.present[e] += has[e] ? 1 : 0;
      cs.sum[e] += v[e];
    }
    if (gpu) {
      // Spec §4.1.3: a row can be read on the GPU clock when input wait and the
      // traced step have GPU values and every other event it has does too.
      bool complete = has[i(Event::InputWait)] && has[i(Event::TracedStepTime)];
      for (Event e : {Event::H2D, Event::Forward, Event::Backward, Event::OptimizerStep}) {
        complete = complete && (has[i(e)] || !r.has(e));
      }
      out.gpu_complete = out.gpu_complete && complete;
    }
    if (has[i(Event::InputWait)] && has[i(Event::TracedStepTime)]) {
      cs.step_time += v[i(Event::InputWait)] + v[i(Event::TracedStepTime)];
    }
    if (has[i(Event::TracedStepTime)] && has[i(Event::Forward)] && has[i(Event::Backward)]) {
      // A rank that never measured the optimizer has no compute, and this sum
      // is then discarded.
      const double compute =
          v[i(Event::Forward)] + v[i(Event::Backward)] + v[i(Event::OptimizerStep)];
      cs.residual += std::max(0.0, v[i(Event::TracedStepTime)] - v[i(Event::H2D)] - compute);
    }
  }
}

/// Spec §4.1.4: "every-step" events must be measured on every row; occurrence
/// events (H2D, optimizer) on at least one, and count as 0 where absent.
Availability availability(const RankScan& scan, Clock c) {
  const ClockSums& cs = scan.clock[std::size_t(c)];
  Availability a;
  for (Event e : {Event::InputWait, Event::Forward, Event::Backward, Event::TracedStepTime}) {
    a.ok[std::size_t(e)] = scan.rows > 0 && cs.present[std::size_t(e)] == scan.rows;
  }
  for (Event e : {Event::H2D, Event::OptimizerStep}) {
    a.ok[std::size_t(e)] = cs.present[std::size_t(e)] > 0;
  }
  return a;
}

RankFacts rank_facts(int rank, const RankScan& scan, Clock clock) {
  const double n = double(scan.rows);
  auto mean = [&](Clock c, Event e) -> std::optional<double> {
    if (!availability(scan, c).ok[std::size_t(e)]) return std::nullopt;
    return scan.clock[std::size_t(c)].sum[std::size_t(e)] / n;
  };
  auto step_mean = [&](Clock c) -> std::optional<double> {
    const Availability a = availability(scan, c);
    if (!a.ok[std::size_t(Event::InputWait)] || !a.ok[std::size_t(Event::TracedStepTime)]) {
      return std::nullopt;
    }
    return scan.clock[std::size_t(c)].step_time / n;
  };
  RankFacts f;
  f.rank = rank;
  auto set = [&](StepMetric m, std::optional<double> v) { f.avg[idx(m)] = v; };
  set(StepMetric::InputWait, mean(clock, Event::InputWait));
  set(StepMetric::H2D, mean(clock, Event::H2D));
  set(StepMetric::Forward, mean(clock, Event::Forward));
  set(StepMetric::Backward, mean(clock, Event::Backward));
  set(StepMetric::OptimizerStep, mean(clock, Event::OptimizerStep));
  set(StepMetric::StepTime, step_mean(clock));
  set(StepMetric::TracedStepTime, mean(clock, Event::TracedStepTime));
  set(StepMetric::Compute,
      add(add(f[StepMetric::Forward], f[StepMetric::Backward]), f[StepMetric::OptimizerStep]));
  // The mean of the clamped per-step residuals, not one recomputed from averages.
  if (f[StepMetric::Compute] && f[StepMetric::TracedStepTime]) {
    set(StepMetric::Residual, scan.clock[std::size_t(clock)].residual / n);
  }
  set(StepMetric::StepTimeCpu, step_mean(Clock::Cpu));
  set(StepMetric::StepTimeGpu, step_mean(Clock::Gpu));
  set(StepMetric::TracedStepTimeCpu, mean(Clock::Cpu, Event::TracedStepTime));
  set(StepMetric::TracedStepTimeGpu, mean(Clock::Gpu, Event::TracedStepTime));
  set(StepMetric::DataloaderFetch, mean(Clock::Cpu, Event::InputWait));
  if (const ActivitySums& a = scan.activity; a.steps > 0) {
    const double k = double(a.steps);
    ActivityFacts af;
    af.steps = a.steps;
    af.collective_ms = a.collective_ms / k;
    af.h2d_bytes = a.h2d_bytes / k;
    af.h2d_copies = a.h2d_copies / k;
    af.h2d_pageable_copies = a.h2d_pageable_copies / k;
    af.h2d_pageable_bytes = a.h2d_pageable_bytes / k;
    if (a.h2d_bytes > 0) af.h2d_pageable_share = std::min(1.0, a.h2d_pageable_bytes / a.h2d_bytes);
    if (a.idle_steps > 0) af.gpu_idle_fraction = a.idle / double(a.idle_steps);
    f.activity = af;
  }
  return f;
}

std::optional<MetricStat> metric_stat(const std::vector<RankFacts>& facts, StepMetric m) {
  std::vector<std::pair<int, double>> vals;  // (rank, value), ascending rank
  for (const auto& f : facts) {
    if (f[m]) vals.emplace_back(f.rank, *f[m]);
  }
  return stat_of(vals);
}

}  // namespace

std::optional<MetricStat> stat_of(const std::vector<std::pair<int, double>>& vals) {
  if (vals.empty()) return std::nullopt;
  MetricStat s;
  s.ranks = vals.size();
  std::vector<double> only;
  only.reserve(vals.size());
  for (const auto& [r, v] : vals)
    only.push_back(v);
  s.median = median_of(only);
  s.worst = vals.front().second;
  s.worst_rank = vals.front().first;
  for (const auto& [r, v] : vals) {
    if (v > s.worst) {
      s.worst = v;
      s.worst_rank = r;
    }
  }
  // Nearest the median; a tie goes to the lower value, then the lower rank.
  // With an even count the two middle values are equally far from their mean
  // in exact arithmetic, but not always in floating point: distances that
  // differ by rounding alone count as a tie, or two ranks would swap roles
  // from run to run.
  auto closer = [&](const std::pair<int, double>& a, const std::pair<int, double>& b) {
    const double da = std::fabs(a.second - s.median);
    const double db = std::fabs(b.second - s.median);
    const double tol = 1e-9 * std::max({1.0, std::fabs(a.second), std::fabs(b.second)});
    if (std::fabs(da - db) > tol) return da < db;
    if (a.second != b.second) return a.second < b.second;
    return a.first < b.first;
  };
  const auto rep = *std::min_element(vals.begin(), vals.end(), closer);
  s.representative_rank = rep.first;
  s.representative = rep.second;
  if (vals.size() > 1) {
    if (s.median > 0) {
      s.skew = (s.worst - s.median) / s.median;
    } else if (s.worst <= 0) {
      s.skew = 0.0;
    }
  }
  return s;
}

namespace {

/// |reporting ∪ declared|, where the run declares each `rank` record's rank
/// and 0..world_size-1. Counted, not listed: a world size is only bounded by
/// the protocol, and the window needs no more than the number.
std::size_t expected_rank_count(const model::Telemetry& t, const std::vector<int>& reporting) {
  const int world = std::max(0, t.run.world_size.value_or(0));
  std::set<int> outside_world(reporting.begin(), reporting.end());
  for (const auto& r : t.ranks)
    outside_world.insert(r.global_rank);
  outside_world.erase(outside_world.lower_bound(0), outside_world.lower_bound(world));
  return std::size_t(world) + outside_world.size();
}

}  // namespace

bool is_step_row(const StepRecord& r) {
  return r.events.event_mask() != 0;
}

std::int64_t step_history(std::int64_t window) {
  return lookback_rows(window);
}

const char* step_metric_name(StepMetric m) {
  return kMetricNames[idx(m)];
}

namespace {

/// Takes out of `common` the steps any rank ran under LibTorch's profiler
/// (model::ProfiledSteps: their time holds the profiler's own cost), unless
/// that would leave none; returns how many it took out.
std::int64_t leave_out_profiled(const model::Telemetry& t, std::vector<std::int64_t>& common) {
  if (t.profiled_steps.empty()) return 0;
  const auto profiled = [&t](std::int64_t step) {
    for (const model::ProfiledSteps& p : t.profiled_steps)
      if (step >= p.first_step && step <= p.last_step) return true;
    return false;
  };
  const auto kept =
      std::count_if(common.begin(), common.end(), [&](std::int64_t s) { return !profiled(s); });
  if (kept == 0) return 0;
  const std::int64_t out = std::int64_t(common.size()) - kept;
  common.erase(std::remove_if(common.begin(), common.end(), profiled), common.end());
  return out;
}

}  // namespace

StepWindow build_step_window(const model::Telemetry& t, std::int64_t window) {
  StepWindow w;
  w.strategy = t.run.strategy;

  // Group usable rows by rank, in one pass in memory order. Ranks are
  // non-negative; a dense index serves the usual 0..N-1, a map the rest.
  constexpr int kDenseRanks = 1 << 20;
  std::vector<std::vector<StepRow>> dense_ranks;
  std::map<int, std::vector<StepRow>> sparse_ranks;
  // A row is known by its slot: chunk index * StepChunk::kRows + row, which
  // grows with arrival order (later duplicates win) and finds the chunk again.
  // Two passes over the rank column: the first counts each rank's rows, so
  // that the second fills lists of the right size. Rows come in runs of one
  // rank (a RunState log), or interleaved (a file): the list at hand is
  // looked up again only when the rank changes.
  const auto& chunks = t.steps.chunks();
  auto rows_of = [&](int rank) -> std::vector<StepRow>& {
    if (rank >= 0 && rank < kDenseRanks) {
      if (std::size_t(rank) >= dense_ranks.size()) dense_ranks.resize(std::size_t(rank) + 1);
      return dense_ranks[std::size_t(rank)];
    }
    return sparse_ranks[rank];
  };
  std::vector<std::size_t> dense_counts;
  std::map<int, std::size_t> sparse_counts;
  for (const bool fill : {false, true}) {
    std::vector<StepRow>* rows = nullptr;  // re-pointed after each lookup
    std::size_t* count = nullptr;
    int at_rank = 0;
    for (std::size_t ci = 0; ci < chunks.size(); ++ci) {
      const model::StepChunk& c = *chunks[ci];
      for (std::size_t i = 0; i < c.size(); ++i) {
        if (c.event_mask(i) == 0) continue;  // an empty events object is not a row
        const int rank = c.rank(i);
        const bool same = (fill ? rows != nullptr : count != nullptr) && rank == at_rank;
        at_rank = rank;
        if (fill) {
          if (!same) rows = &rows_of(rank);
          rows->push_back({c.step(i), ci * model::StepChunk::kRows + i});
          continue;
        }
        if (!same) {
          if (rank >= 0 && rank < kDenseRanks) {
            if (std::size_t(rank) >= dense_counts.size())
              dense_counts.resize(std::size_t(rank) + 1);
            count = &dense_counts[std::size_t(rank)];
          } else {
            count = &sparse_counts[rank];
          }
        }
        ++*count;
      }
    }
    if (fill) break;
    for (std::size_t r = 0; r < dense_counts.size(); ++r)
      if (dense_counts[r] > 0) rows_of(int(r)).reserve(dense_counts[r]);
    for (const auto& [rank, n] : sparse_counts)
      rows_of(rank).reserve(n);
  }

  std::vector<std::vector<StepRow>> per_rank;
  std::vector<int> reporting;  // the rank of each per_rank list
  auto take = [&](int rank, std::vector<StepRow>& rows) {
    if (rows.empty()) return;
    reporting.push_back(rank);
    sort_and_dedupe(rows);
    per_rank.push_back(std::move(rows));
  };
  for (std::size_t r = 0; r < dense_ranks.size(); ++r)
    take(int(r), dense_ranks[r]);
  for (auto& [rank, rows] : sparse_ranks)
    take(rank, rows);
  w.ranks_present = per_rank.size();
  if (per_rank.empty()) return w;  // no rank stepped: no data, not missing signals
  w.expected_ranks = expected_rank_count(t, reporting);
  // A bounded store has dropped old rows: the run's own count holds for them.
  w.distinct_steps = t.totals ? t.totals->step_ids : distinct_steps(per_rank);
  for (const auto& rows : per_rank)
    w.latest_step = std::max(w.latest_step.value_or(rows.back().step), rows.back().step);

  // Intersection of every rank's latest steps (spec §4.1.2), then the latest `window`.
  std::vector<std::size_t> first(per_rank.size(), 0);
  std::vector<std::size_t> order(per_rank.size());
  for (std::size_t k = 0; k < per_rank.size(); ++k) {
    first[k] = latest_start(per_rank[k].size(), lookback_rows(window));
    order[k] = k;
  }
  std::vector<std::int64_t> common = common_steps(per_rank, first, order);
  w.profiled_left_out = leave_out_profiled(t, common);
  if (window > 0) keep_latest(common, std::size_t(window));
  if (common.empty()) return w;
  w.steps = std::move(common);

  // The step-major table of used rows. Filling it transposes 1,024 per-rank
  // lists into one table: done in cache-sized tiles, since a rank-by-rank or
  // step-by-step walk misses the cache on nearly every access at that scale.
  const std::size_t n_ranks = per_rank.size();
  const std::size_t n_steps = w.steps.size();
  constexpr std::size_t kTile = 64;
  w.table.resize(n_steps * n_ranks);
  std::vector<std::size_t> cursor = first;
  for (std::size_t s0 = 0; s0 < n_steps; s0 += kTile) {
    const std::size_t s1 = std::min(n_steps, s0 + kTile);
    for (std::size_t k = 0; k < n_ranks; ++k) {
      const auto& rows = per_rank[k];
      std::size_t c = cursor[k];
      for (std::size_t s = s0; s < s1; ++s) {
        while (rows[c].step < w.steps[s])
          ++c;  // every aligned step is in every list
        const std::size_t slot = rows[c].row;
        w.table[s * n_ranks + k] = {chunks[slot / model::StepChunk::kRows].get(),
                                    slot % model::StepChunk::kRows};
      }
      cursor[k] = c;
    }
  }
  // Step by step: within a chunk (a file's rows, or a rank's) the rows of
  // consecutive steps lie next to each other in every column.
  std::vector<RankScan> scans(n_ranks);
  for (std::size_t s = 0; s < n_steps; ++s) {
    const StepView* row = &w.table[s * n_ranks];
    for (std::size_t k = 0; k < n_ranks; ++k)
      scan_row(scans[k], row[k]);
  }
  bool gpu = true;
  for (const auto& scan : scans)
    gpu = gpu && scan.gpu_complete;
  w.clock = gpu ? Clock::Gpu : Clock::Cpu;  // one GPU-less row forces the CPU clock for all
  for (std::size_t k = 0; k < n_ranks; ++k) {
    w.facts.push_back(rank_facts(reporting[k], scans[k], w.clock));
    w.availability.push_back(availability(scans[k], w.clock).ok);
  }
  for (std::size_t m = 0; m < kStepMetricCount; ++m) {
    w.stats[m] = metric_stat(w.facts, static_cast<StepMetric>(m));
  }
  return w;
}

std::vector<double> step_series(const StepWindow& w, StepMetric m, bool worst) {
  std::vector<double> series;
  std::vector<std::size_t> measured;  // indices into facts of ranks measuring m
  for (std::size_t i = 0; i < w.facts.size(); ++i) {
    if (w.facts[i][m]) measured.push_back(i);
  }
  if (measured.empty()) return series;
  series.reserve(w.steps.size());
  std::vector<double> at_step(measured.size());
  for (std::size_t s = 0; s < w.steps.size(); ++s) {
    for (std::size_t k = 0; k < measured.size(); ++k) {
      const std::size_t i = measured[k];
      at_step[k] =
          display_value(w.row(s, i), m, w.clock, Availability{w.availability[i]}).value_or(0.0);
    }
    series.push_back(worst ? *std::max_element(at_step.begin(), at_step.end())
                           : median_of(at_step));
  }
  return series;
}

std::vector<double> rank_step_series(const StepWindow& w, std::size_t rank_index, StepMetric m) {
  std::vector<double> series;
  series.reserve(w.steps.size());
  const Availability available{w.availability[rank_index]};
  for (std::size_t s = 0; s < w.steps.size(); ++s)
    series.push_back(display_value(w.row(s, rank_index), m, w.clock, available).value_or(0.0));
  return series;
}

std::array<std::vector<double>, 2> clock_step_series(const StepWindow& w) {
  std::array<std::vector<double>, 2> series;
  std::array<std::vector<std::size_t>, 2> measured;  // indices into facts
  for (const Clock c : {Clock::Cpu, Clock::Gpu}) {
    const StepMetric m = c == Clock::Gpu ? StepMetric::StepTimeGpu : StepMetric::StepTimeCpu;
    for (std::size_t i = 0; i < w.facts.size(); ++i) {
      if (w.facts[i][m]) measured[idx_clock(c)].push_back(i);
    }
    if (!measured[idx_clock(c)].empty()) series[idx_clock(c)].reserve(w.steps.size());
  }
  if (measured[0].empty() && measured[1].empty()) return series;
  // Step-major, like the table: one read of each row serves both clocks.
  std::array<std::vector<double>, 2> at_step;
  std::vector<std::uint8_t> wanted(w.facts.size(), 0);  // bit per clock
  for (std::size_t k = 0; k < 2; ++k) {
    at_step[k].reserve(measured[k].size());
    for (const std::size_t i : measured[k])
      wanted[i] = std::uint8_t(wanted[i] | (1u << k));
  }
  for (std::size_t s = 0; s < w.steps.size(); ++s) {
    at_step[0].clear();
    at_step[1].clear();
    for (std::size_t i = 0; i < w.facts.size(); ++i) {
      if (wanted[i] == 0) continue;
      const StepView& r = w.row(s, i);
      for (const Clock c : {Clock::Cpu, Clock::Gpu}) {
        const std::size_t k = idx_clock(c);
        if ((wanted[i] & (1u << k)) == 0) continue;
        const auto input = clock_value(r, Event::InputWait, c);
        const auto traced = clock_value(r, Event::TracedStepTime, c);
        if (input && traced) at_step[k].push_back(*input + *traced);
      }
    }
    for (std::size_t k = 0; k < 2; ++k) {
      if (!at_step[k].empty()) series[k].push_back(median_in_place(at_step[k]));
    }
  }
  return series;
}

}  // namespace traceml::analysis
