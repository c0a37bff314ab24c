// Step Memory (spec §4.4, §5.3, §5.4, §5.6): per-step allocator peaks of every
// rank, aligned on the steps all ranks reported, diagnosed for device
// pressure, cross-rank imbalance and creep. The alignment, the signals and the
// rules have their own files (step_memory_alignment, step_memory_signals,
// step_memory_rules); this one assembles the section: GPU presence, the
// payload rows and their statistics, the metadata and the card.
#include "analysis/step_memory_section.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "analysis/number_format.hpp"
#include "analysis/order_statistics.hpp"
#include "analysis/rank_identity.hpp"
#include "analysis/step_memory_alignment.hpp"
#include "analysis/step_memory_rules.hpp"
#include "analysis/step_memory_signals.hpp"

namespace traceml::analysis {

namespace {

using step_memory::AlignedWindow;
using step_memory::choose_primary;
using step_memory::find_metric;
using step_memory::Inputs;
using step_memory::issue_from_primary;
using step_memory::kAllocated;
using step_memory::kReserved;
using step_memory::label_of;
using step_memory::load_inputs;
using step_memory::metric_signals;
using step_memory::MetricSignals;
using step_memory::run_rules;

std::string build_card(const Inputs& in, const std::vector<MetricSignals>& metrics,
                       const Issue& diagnosis) {
  std::vector<std::string> lines;
  lines.push_back("TraceML Step Memory Summary | steps " + std::to_string(in.steps_seen) +
                  " | global ranks " + std::to_string(in.ranks_seen));
  lines.emplace_back("Step Memory");
  lines.push_back("- Diagnosis: " + diagnosis.status);
  if (metrics.empty()) {
    lines.push_back("- Scope: latest step " +
                    (in.latest_step ? std::to_string(*in.latest_step) : std::string("n/a")));
    lines.emplace_back("- Stats: n/a");
  } else {
    const MetricSignals* m = diagnosis.metric ? find_metric(metrics, *diagnosis.metric) : nullptr;
    if (!m) m = find_metric(metrics, kReserved);
    if (!m) m = find_metric(metrics, kAllocated);
    if (!m) m = &metrics.front();
    const std::string label = label_of(m->name);
    lines.push_back("- Scope: last " + std::to_string(m->steps_used) + " aligned steps");
    if (in.window.ranks.size() == 1) {
      lines.push_back("- Stats: " + label + " peak " + format_bytes_binary(m->worst_peak));
    } else {
      lines.push_back("- Stats: " + label + " worst " + format_bytes_binary(m->worst_peak) +
                      " on r" + std::to_string(m->worst_rank) + " | skew " +
                      fixed(m->skew * 100.0, 1) + "%");
    }
  }
  lines.push_back("- Why: " + diagnosis.summary);
  std::string card;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i) card += '\n';
    card += lines[i];
  }
  return card;
}

struct GpuPresence {
  /// MAX(process gpu total) when positive: a zero total means "not reported".
  std::optional<double> total_bytes;
  /// True only when GPU presence was observed somewhere and never seen: a run
  /// without process or system samples is not known to lack a GPU.
  bool none = false;
};

GpuPresence gpu_presence(const model::Telemetry& t) {
  std::optional<double> total;
  bool gpu = false;
  for (const auto& p : t.process) {
    if (!p.gpu) continue;
    gpu = true;
    if (p.gpu->total_bytes && (!total || *p.gpu->total_bytes > *total)) {
      total = *p.gpu->total_bytes;
    }
  }
  for (const auto& s : t.system) {
    if (gpu) break;
    gpu = !s.gpus.empty();
  }
  GpuPresence out;
  if (total && *total > 0.0) out.total_bytes = total;
  out.none = (!t.process.empty() || !t.system.empty()) && !gpu;
  return out;
}

/// average / median / worst over the rank rows (spec §5.4): median is the row
/// nearest the statistical median (ties: lower value, then lower rank); worst
/// is the maximum (ties: lower rank). Rows are in ascending rank order, so
/// keeping the first of equals is the lower rank.
void fill_statistics(Section& s) {
  for (std::size_t m = 0; m < s.metric_names.size(); ++m) {
    std::vector<std::pair<double, const std::string*>> values;
    for (const auto& row : s.rows) {
      if (row.metrics[m]) values.emplace_back(*row.metrics[m], &row.key);
    }
    if (values.empty()) {
      s.average.emplace_back(std::nullopt);
      s.median.push_back(Point{});
      s.worst.push_back(Point{});
      continue;
    }
    double sum = 0.0;
    std::vector<double> plain;
    for (const auto& v : values) {
      sum += v.first;
      plain.push_back(v.first);
    }
    s.average.emplace_back(sum / static_cast<double>(values.size()));
    const double target = median_of(plain);
    const auto* med = &values.front();
    const auto* worst = &values.front();
    for (const auto& v : values) {
      const double d = std::fabs(v.first - target);
      const double best = std::fabs(med->first - target);
      if (d < best || (d == best && v.first < med->first)) med = &v;
      if (v.first > worst->first) worst = &v;
    }
    s.median.push_back(Point{med->first, *med->second});
    s.worst.push_back(Point{worst->first, *worst->second});
  }
}

}  // namespace

StepMemoryAnalysis step_memory_analysis(const model::Telemetry& t, const Options& o) {
  const std::int64_t window = std::max<std::int64_t>(1, o.window);
  const Inputs in = load_inputs(t, window);
  const AlignedWindow& w = in.window;
  const GpuPresence gpu = gpu_presence(t);
  const auto& gpu_total = gpu.total_bytes;
  const bool no_gpu = gpu.none;

  const std::vector<MetricSignals> metrics = metric_signals(t, w, gpu_total);

  // Without a GPU the peaks are not device memory, so no rule may read them.
  std::vector<Issue> issues;
  if (!no_gpu) issues = run_rules(metrics);

  StepMemoryAnalysis out;
  out.primary = choose_primary(no_gpu, metrics, issues);
  if (issues.empty()) issues.push_back(issue_from_primary(out.primary));

  out.section = section_of("step_memory", "global_rank",
                           {"peak_allocated_bytes", "peak_reserved_bytes"}, {{"memory", "bytes"}});
  Section& s = out.section;

  // JSON rows carry each rank's maximum per-step peak over the window
  // (DECISIONS.md quirk 9; TraceML publishes the mean), the same number the
  // rules read, so that the JSON and the diagnosis agree.
  for (std::size_t r = 0; r < w.ranks.size(); ++r) {
    GroupRow row;
    row.key = std::to_string(w.ranks[r]);
    row.identity = identity_of(t, w.ranks[r]);
    row.metrics = {metrics[0].rank_peaks[r], metrics[1].rank_peaks[r]};
    s.rows.push_back(std::move(row));
  }
  fill_statistics(s);

  Metadata& md = s.metadata;
  std::vector<Identity> identities;
  for (const auto& row : s.rows) {
    identities.push_back(row.identity);
  }
  md.mode = metrics.empty() ? "no_data" : mode_of(identities);
  md.global_ranks_seen = in.ranks_seen;
  md.global_ranks_used = static_cast<std::int64_t>(w.ranks.size());
  md.training_total_steps = in.steps_seen;
  md.training_latest_step = in.latest_step;

  s.window.kind = "step_window";
  s.window.alignment = "common_steps";
  s.window.steps_analyzed = static_cast<std::int64_t>(w.steps.size());
  if (!w.steps.empty()) {
    s.window.end_step = w.steps.back();
    s.window.completed_step = w.steps.back();
    s.window.window_size = window;
  }

  s.issues = std::move(issues);
  s.card = build_card(in, metrics, s.issues.front());
  return out;
}

Section analyze_step_memory(const model::Telemetry& t, const Options& o) {
  return step_memory_analysis(t, o).section;
}

}  // namespace traceml::analysis
