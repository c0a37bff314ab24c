#include "report/html/plot_data.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <utility>

#include "analysis/number_format.hpp"
#include "analysis/order_statistics.hpp"
#include "analysis/step_window.hpp"
#include "analysis/summary.hpp"

namespace traceml::report {

const std::array<const char*, kPhaseCount> kPhaseNames = {"input wait", "H2D",       "forward",
                                                          "backward",   "optimizer", "residual"};

namespace {

using analysis::StepMetric;

constexpr std::array<StepMetric, kPhaseCount> kPhaseMetrics = {
    StepMetric::InputWait, StepMetric::H2D,           StepMetric::Forward,
    StepMetric::Backward,  StepMetric::OptimizerStep, StepMetric::Residual};

std::string rank_label_of(int rank, const model::RankIdentity* id) {
  std::string s = "R" + std::to_string(rank);
  if (id != nullptr && id->node_rank) s += "/N" + std::to_string(*id->node_rank);
  return s;
}

/// The identity record of `rank`; null when the run has none.
const model::RankIdentity* identity_of(const std::map<int, const model::RankIdentity*>& ids,
                                       int rank) {
  const auto id = ids.find(rank);
  return id == ids.end() ? nullptr : id->second;
}

/// A rank's line: labelled "R3/N0", titled with its host when known.
Series rank_series(int rank, const std::map<int, const model::RankIdentity*>& ids,
                   std::vector<std::optional<double>> y) {
  const model::RankIdentity* identity = identity_of(ids, rank);
  Series s;
  s.label = rank_label_of(rank, identity);
  s.title = s.label;
  if (identity != nullptr && identity->hostname) s.title += " " + *identity->hostname;
  s.y = std::move(y);
  return s;
}

Quantiles quantiles_of(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  Quantiles q;
  q.p5 = analysis::quantile_of_sorted(v, 0.05);
  q.p25 = analysis::quantile_of_sorted(v, 0.25);
  q.p50 = analysis::quantile_of_sorted(v, 0.50);
  q.p75 = analysis::quantile_of_sorted(v, 0.75);
  q.p95 = analysis::quantile_of_sorted(v, 0.95);
  q.max = v.back();
  return q;
}

/// Values placed in columns, reduced to one value a column (mean or max);
/// a column without a value stays absent.
class Columns {
 public:
  explicit Columns(std::size_t n) : sum_(n, 0.0), max_(n, 0.0), count_(n, 0) {}
  void add(std::size_t c, double v) {
    if (!std::isfinite(v)) return;
    max_[c] = count_[c] == 0 ? v : std::max(max_[c], v);
    sum_[c] += v;
    ++count_[c];
  }
  [[nodiscard]] bool empty() const {
    return std::all_of(count_.begin(), count_.end(), [](std::size_t n) { return n == 0; });
  }
  [[nodiscard]] std::vector<std::optional<double>> mean() const {
    std::vector<std::optional<double>> out(sum_.size());
    for (std::size_t c = 0; c < sum_.size(); ++c)
      if (count_[c] > 0) out[c] = sum_[c] / double(count_[c]);
    return out;
  }
  [[nodiscard]] std::vector<std::optional<double>> max() const {
    std::vector<std::optional<double>> out(max_.size());
    for (std::size_t c = 0; c < max_.size(); ++c)
      if (count_[c] > 0) out[c] = max_[c];
    return out;
  }

 private:
  std::vector<double> sum_;
  std::vector<double> max_;
  std::vector<std::size_t> count_;
};

/// Column of `x` on an axis [first, last] cut into `n` equal columns.
std::size_t column_of(double x, double first, double last, std::size_t n) {
  if (n <= 1 || last <= first) return 0;
  const double at = (x - first) / (last - first) * double(n);
  return std::min(n - 1, static_cast<std::size_t>(std::max(0.0, at)));
}

/// Column of step offset `d` (< span) among `columns` equal columns of
/// `span` steps: floor(d * columns / span). Step ids reach 2^63 - 1, where
/// the product overflows: there, the last column whose first offset,
/// ceil(c * span / columns) = c * q + ceil(c * r / columns), is at most d.
std::size_t step_column(std::uint64_t d, std::uint64_t span, std::uint64_t columns) {
  if (span <= std::numeric_limits<std::uint64_t>::max() / columns) return d * columns / span;
  const std::uint64_t q = span / columns;
  const std::uint64_t r = span % columns;
  const auto start = [&](std::uint64_t c) { return c * q + (c * r + columns - 1) / columns; };
  std::uint64_t lo = 0;  // start(lo) <= d < start(hi)
  std::uint64_t hi = columns;
  while (hi - lo > 1) {
    const std::uint64_t mid = lo + (hi - lo) / 2;
    (start(mid) <= d ? lo : hi) = mid;
  }
  return std::size_t(lo);
}

/// Per-rank step memory: peak allocated bytes, the largest of each column
/// (a peak is what a column must not hide), x = step id.
SeriesSet memory_series(const model::Telemetry& t,
                        const std::map<int, const model::RankIdentity*>& ids) {
  SeriesSet set;
  std::optional<std::int64_t> first, last;
  for (const auto& r : t.step_memory) {
    if (!r.peak_allocated_bytes) continue;
    first = std::min(first.value_or(r.step), r.step);
    last = std::max(last.value_or(r.step), r.step);
  }
  if (!first) return set;
  // In unsigned arithmetic: last - first + 1 of ids near 2^63 overflows int64.
  const std::uint64_t span = std::uint64_t(*last) - std::uint64_t(*first) + 1;
  set.columns = std::size_t(std::min<std::uint64_t>(span, kMaxColumns));
  set.x_first = double(*first);
  set.x_span = double(span);
  std::map<int, Columns> per_rank;
  for (const auto& r : t.step_memory) {
    if (!r.peak_allocated_bytes) continue;
    auto it = per_rank.try_emplace(r.global_rank, set.columns).first;
    // Steps as whole columns: step s goes to floor((s - first) * columns / span).
    it->second.add(step_column(std::uint64_t(r.step) - std::uint64_t(*first), span, set.columns),
                   *r.peak_allocated_bytes);
  }
  for (const auto& [rank, cols] : per_rank)
    set.series.push_back(rank_series(rank, ids, cols.max()));
  return set;
}

/// The system and process samples on one time axis (seconds from the first
/// sample), the mean of each column: a sample is a reading at an instant,
/// and the mean of a column's readings is what it held over that time.
void sample_series(const model::Telemetry& t, const std::map<int, const model::RankIdentity*>& ids,
                   PlotData& out) {
  std::optional<double> first, last;
  std::map<int, std::size_t> per_node, per_rank;
  auto see = [&](double ts) {
    first = std::min(first.value_or(ts), ts);
    last = std::max(last.value_or(ts), ts);
  };
  for (const auto& s : t.system) {
    see(s.ts);
    ++per_node[s.node_rank];
  }
  for (const auto& p : t.process) {
    see(p.ts);
    ++per_rank[p.global_rank];
  }
  if (!first) return;
  out.samples_origin = *first;
  // About two samples a column at most: with one, the jitter of the
  // sampling interval leaves columns empty, and a line breaks at each.
  std::size_t most = 0;
  for (const auto& [k, n] : per_node)
    most = std::max(most, n);
  for (const auto& [k, n] : per_rank)
    most = std::max(most, n);
  const std::size_t n = std::min((most + 1) / 2, kMaxColumns);
  for (SeriesSet* set : {&out.host_cpu, &out.gpu_util, &out.process_cpu, &out.process_rss}) {
    set->x_first = 0.0;
    set->x_span = *last - *first;
    set->columns = n;
  }
  std::map<int, Columns> cpu, gpu, pcpu, rss;
  auto at = [&](std::map<int, Columns>& m, int key) -> Columns& {
    return m.try_emplace(key, n).first->second;
  };
  for (const auto& s : t.system) {
    const std::size_t c = column_of(s.ts, *first, *last, n);
    if (s.cpu_percent) at(cpu, s.node_rank).add(c, *s.cpu_percent);
    double util = 0.0;
    std::size_t gpus = 0;
    for (const auto& g : s.gpus) {
      if (!g.util_percent) continue;
      util += *g.util_percent;
      ++gpus;
    }
    if (gpus > 0) at(gpu, s.node_rank).add(c, util / double(gpus));
  }
  for (const auto& p : t.process) {
    const std::size_t c = column_of(p.ts, *first, *last, n);
    if (p.cpu_percent) at(pcpu, p.global_rank).add(c, *p.cpu_percent);
    if (p.rss_bytes) at(rss, p.global_rank).add(c, *p.rss_bytes);
  }
  auto fill_nodes = [](const std::map<int, Columns>& m, SeriesSet& set) {
    for (const auto& [node, cols] : m) {
      if (cols.empty()) continue;
      const std::string label = "N" + std::to_string(node);
      set.series.push_back({label, label, cols.mean()});
    }
  };
  auto fill_ranks = [&ids](const std::map<int, Columns>& m, SeriesSet& set) {
    for (const auto& [rank, cols] : m) {
      if (cols.empty()) continue;
      set.series.push_back(rank_series(rank, ids, cols.mean()));
    }
  };
  fill_nodes(cpu, out.host_cpu);
  fill_nodes(gpu, out.gpu_util);
  fill_ranks(pcpu, out.process_cpu);
  fill_ranks(rss, out.process_rss);
}

/// The column of step `step` (one between two aligned steps: the next's);
/// none before or after the window.
std::optional<std::size_t> column_of_step(const PlotData& out, std::int64_t step) {
  if (out.steps.empty()) return std::nullopt;
  const auto at = std::lower_bound(out.steps.begin(), out.steps.end(), step);
  if (at == out.steps.end() || (*at != step && at == out.steps.begin())) return std::nullopt;
  const auto i = std::size_t(at - out.steps.begin());
  const auto& st = out.columns.starts;
  return std::size_t(std::upper_bound(st.begin(), st.end(), i) - st.begin() - 1);
}

/// The summary's profiles with operators, placed on the step columns.
void profiled_marks(const SummaryView& run, PlotData& out) {
  using namespace json_read;
  const Json* list = array_child(run.root, "profiles");
  if (list == nullptr) return;
  for (const Json& p : *list) {
    const auto rank = integer(child(&p, "rank"));
    const auto first = integer(child(&p, "first_step"));
    const auto last = integer(child(&p, "last_step"));
    if (!rank || !first || !last || integer(child(&p, "ops")).value_or(0) <= 0) continue;
    ProfiledMark m;
    m.rank = *rank;
    m.text = "R" + std::to_string(*rank) + " steps " + std::to_string(*first) + "-" +
             std::to_string(*last) + " ran under LibTorch's profiler (left out of the analysis): " +
             text_or(child(&p, "path"));
    if (const std::string reason = text_or(child(&p, "reason")); !reason.empty())
      m.text += "; asked by --profile auto: " + reason;
    // Left out of the window: marked at the first step after them.
    m.column = column_of_step(out, *last + 1);
    out.profiled.push_back(std::move(m));
  }
}

/// run.stalls of the summary, placed on the step columns and the sample axis.
void recorded_stalls(const SummaryView& run, PlotData& out) {
  using namespace json_read;
  const Json* stalls = array_child(object_child(run.root, "run"), "stalls");
  if (stalls == nullptr) return;
  for (const Json& s : *stalls) {
    const auto rank = integer(child(&s, "rank"));
    if (!rank) continue;
    RecordedStall r;
    r.rank = *rank;
    r.duration_s = std::max(0.0, number(child(&s, "duration_s")).value_or(0.0));
    const auto step = integer(child(&s, "step"));
    r.text = "R" + std::to_string(*rank) + " " + text_or(child(&s, "kind"), "stalled") + " for " +
             analysis::fixed(r.duration_s, 1) + " s";
    if (step) r.text += " at step " + std::to_string(*step);
    if (const auto phase = text(child(&s, "phase"))) r.text += ", " + *phase;
    // A step before the window is not on the plots; one between two
    // aligned steps goes to the column of the next.
    if (step) r.column = column_of_step(out, *step);
    if (const auto start = number(child(&s, "start")); start && out.samples_origin)
      r.start_s = *start - *out.samples_origin;
    out.stalls.push_back(std::move(r));
  }
}

}  // namespace

Buckets make_buckets(std::size_t n, std::size_t max_columns) {
  Buckets b;
  if (n == 0 || max_columns == 0) return b;
  const std::size_t columns = std::min(n, max_columns);
  b.starts.reserve(columns + 1);
  for (std::size_t c = 0; c <= columns; ++c)
    b.starts.push_back(c * n / columns);
  return b;
}

std::vector<double> bucket_mean(const std::vector<double>& v, const Buckets& b) {
  std::vector<double> out;
  out.reserve(b.columns());
  for (std::size_t c = 0; c < b.columns(); ++c) {
    double sum = 0.0;
    for (std::size_t i = b.starts[c]; i < b.starts[c + 1]; ++i)
      sum += v[i];
    out.push_back(sum / double(b.starts[c + 1] - b.starts[c]));
  }
  return out;
}

std::vector<double> bucket_max(const std::vector<double>& v, const Buckets& b) {
  std::vector<double> out;
  out.reserve(b.columns());
  for (std::size_t c = 0; c < b.columns(); ++c)
    out.push_back(*std::max_element(v.begin() + std::ptrdiff_t(b.starts[c]),
                                    v.begin() + std::ptrdiff_t(b.starts[c + 1])));
  return out;
}

PlotData plot_data(const SummaryView& run, const model::Telemetry& t,
                   const analysis::StepWindow* window) {
  PlotData out;
  out.window =
      json_read::integer(json_read::path(run.step_time, {"global", "window", "window_size"}))
          .value_or(analysis::Options{}.window);
  std::map<int, const model::RankIdentity*> ids;
  for (const auto& r : t.ranks)
    ids[r.global_rank] = &r;  // the later record wins, as everywhere

  std::optional<analysis::StepWindow> built;
  if (window == nullptr) window = &built.emplace(analysis::build_step_window(t, out.window));
  const analysis::StepWindow& w = *window;
  out.clock = analysis::clock_name(w.clock);
  out.steps = w.steps;
  out.columns = make_buckets(w.steps.size());
  out.step_ranks = w.ranks_present;
  if (!w.steps.empty()) {
    for (std::size_t i = 0; i < w.facts.size(); ++i) {
      RankSteps r;
      r.rank = w.facts[i].rank;
      const model::RankIdentity* identity = identity_of(ids, r.rank);
      r.label = rank_label_of(r.rank, identity);
      if (identity != nullptr && identity->hostname) r.host = *identity->hostname;
      if (w.facts[i][StepMetric::StepTime]) {
        const std::vector<double> step = analysis::rank_step_series(w, i, StepMetric::StepTime);
        r.step_ms = bucket_mean(step, out.columns);
        r.step_quantiles = quantiles_of(step);
        const double median = r.step_quantiles->p50;
        for (std::size_t s = 0; median > 0.0 && s < step.size(); ++s) {
          if (step[s] < kSpikeFactor * median) continue;
          const auto col = std::size_t(
              std::upper_bound(out.columns.starts.begin(), out.columns.starts.end(), s) -
              out.columns.starts.begin() - 1);
          out.spikes.push_back({r.rank, w.steps[s], col, step[s], step[s] / median});
        }
      }
      if (w.facts[i][StepMetric::InputWait])
        r.input_ms =
            bucket_mean(analysis::rank_step_series(w, i, StepMetric::InputWait), out.columns);
      out.ranks.push_back(std::move(r));
    }
  }
  std::sort(out.spikes.begin(), out.spikes.end(), [](const Spike& a, const Spike& b) {
    return a.ms != b.ms ? a.ms > b.ms : std::tie(a.rank, a.step) < std::tie(b.rank, b.step);
  });

  auto index_of = [&out](std::optional<long long> rank) -> std::optional<std::size_t> {
    for (std::size_t i = 0; rank && i < out.ranks.size(); ++i)
      if (out.ranks[i].rank == *rank) return i;
    return std::nullopt;
  };
  if (out.ranks.size() == 1) {
    out.shown = 0;
  } else {
    const auto key = representative_key(run);
    out.shown = index_of(row_rank(group_row(run.step_time, key), key));
  }
  out.culprit = index_of(straggler_rank(run));
  if (out.shown) {
    for (std::size_t p = 0; p < kPhaseCount; ++p) {
      // Facts index = ranks index: both are the window's ranks in order.
      out.phases[p] =
          bucket_mean(analysis::rank_step_series(w, *out.shown, kPhaseMetrics[p]), out.columns);
    }
  }
  out.memory = memory_series(t, ids);
  sample_series(t, ids, out);
  recorded_stalls(run, out);
  profiled_marks(run, out);
  return out;
}

}  // namespace traceml::report
