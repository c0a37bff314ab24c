#include "report/text/text_step_timing.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/diagnosis_kind.hpp"

#include "analysis/h2d_advice.hpp"
#include "analysis/number_format.hpp"
#include "analysis/summary_keys.hpp"
#include "report/text/text_format.hpp"

namespace traceml::report {

namespace {

using analysis::fixed;
namespace key = analysis::summary_keys;
using namespace json_read;

/// Tree row: glyph+label field, then the value right-aligned.
constexpr std::size_t kTreeLabelWidth = 19;
constexpr std::size_t kTreeValueWidth = 7;
constexpr std::size_t kTreeShareWidth = 4;
// Presentation thresholds (spec §5.8), not diagnoses: a rank's phase is
// called out beside the median only when it differs by at least 1 ms and
// 20 %: smaller gaps are sampling noise, not a slow rank.
constexpr double kMaterialSkewMs = 1.0;
constexpr double kMaterialSkewFraction = 0.20;

struct TreeRow {
  const char* label;
  const char* metric;
};

}  // namespace

std::vector<std::string> step_timing_block(const SummaryView& run, const Verdict& verdict,
                                           const Painter& p) {
  const Json* st = run.step_time;
  // Where the values come from (see the notes atop text_report.cpp).
  const Json* values = nullptr;  // an object of metric -> number
  bool median_points = false;    // multi-rank without its representative row
  std::string scope = "Average";
  if (run.multi) {
    const auto rep = representative_key(run);
    const Json* row = group_row(st, rep);
    const Json* metrics = object_child(row, "metrics");
    if (metrics != nullptr) {
      values = metrics;
      const auto label = rank_label(row, rep);
      scope = label ? "Median " + *label : "Median";
    } else {
      median_points = true;
      scope = "Median";
    }
  } else {
    values = path(st, {"global", "average"});
    const Json* rows = path(st, {"groups", "rows"});
    if (rows != nullptr && rows->is_object() && rows->size() == 1) {
      const auto label = rank_label(&rows->begin().value(), rows->begin().key());
      if (label) scope = *label;
    }
  }
  auto value = [&](const char* m) -> std::optional<double> {
    if (median_points) return point(st, "median", m).value;
    return number(child(values, m));
  };

  std::string caption = "STEP TIMING (" + scope + ")";
  const std::string clock = text_or(path(st, {key::kGlobal, key::kWindow, key::kDiagnosisClock}));
  if (clock == "gpu") caption += ", GPU Clock";
  if (clock == "cpu") caption += ", CPU Clock";

  struct Line {
    std::string base;
    std::optional<std::string> cell;
    std::string marker;
  };
  std::vector<Line> lines;
  const auto step = value(key::kStepTimeMs);
  if (!step || *step <= 0) {
    lines.push_back({pad_right("Step Time", kTreeLabelWidth) + pad_left("n/a", kTreeValueWidth),
                     std::nullopt, ""});
  } else {
    auto share = [&](double v) {
      std::string s = fixed(100.0 * v / *step, 0) + "%";
      if (s == "0%" && v > 0) s = "<1%";
      return s;
    };
    auto base = [&](const std::string& label, double v) {
      return pad_right(label, kTreeLabelWidth) + pad_left(fixed(v, 1), kTreeValueWidth) + " ms  " +
             pad_left(share(v), kTreeShareWidth);
    };
    const bool straggler = analysis::is_straggler(run.kind);
    auto worst_cell = [&](const char* m, double shown, bool always) -> std::optional<std::string> {
      if (!run.multi) return std::nullopt;
      const auto w = point(st, key::kWorst, m);
      if (!w.value) return std::nullopt;
      const double gap = std::fabs(*w.value - shown);
      const bool material =
          shown > 0 && gap >= kMaterialSkewMs && gap >= kMaterialSkewFraction * shown;
      if (!always && !material) return std::nullopt;
      std::string cell = pad_left(fixed(*w.value, 1), 6) + " ms";
      if (const auto r = row_rank(group_row(st, w.idx), w.idx))
        cell += " (R" + std::to_string(*r) + ")";
      return cell;
    };
    auto is_culprit = [&](const char* m) {
      return verdict.culprit_metric && *verdict.culprit_metric == m;
    };

    lines.push_back({base("Step Time", *step), std::nullopt, ""});
    const TreeRow depth1[] = {{"Input Wait", key::kInputWaitMs},
                              {"Compute", key::kComputeMs},
                              {"H2D", key::kH2dMs},
                              {"Residual", key::kResidualMs}};
    const TreeRow depth2[] = {{"Forward", key::kForwardMs},
                              {"Backward", key::kBackwardMs},
                              {"Optimizer", key::kOptimizerMs}};
    std::vector<std::pair<TreeRow, double>> present1, present2;
    for (const auto& r : depth1) {
      if (const auto v = value(r.metric)) present1.emplace_back(r, *v);
    }
    for (const auto& r : depth2) {
      if (const auto v = value(r.metric)) present2.emplace_back(r, *v);
    }
    bool any_cell = false;
    auto add = [&](const std::string& glyph, const TreeRow& r, double v) {
      Line l{base(glyph + r.label, v), worst_cell(r.metric, v, straggler && is_culprit(r.metric)),
             is_culprit(r.metric) ? verdict.marker : ""};
      any_cell = any_cell || l.cell.has_value();
      lines.push_back(l);
    };
    for (std::size_t i = 0; i < present1.size(); ++i) {
      const bool last = i + 1 == present1.size();
      add(last ? "└─ " : "├─ ", present1[i].first, present1[i].second);
      if (std::string(present1[i].first.metric) != key::kComputeMs) continue;
      for (std::size_t j = 0; j < present2.size(); ++j) {
        const bool last_child = j + 1 == present2.size();
        add(std::string(last ? "   " : "│  ") + (last_child ? "└─ " : "├─ "), present2[j].first,
            present2[j].second);
      }
    }
    if (any_cell) lines.front().cell = worst_cell(key::kStepTimeMs, *step, true);
  }

  // Assemble: worst-rank cells in one column, markers after them.
  bool any_cell = false;
  std::size_t base_w = 0, cell_w = 0;
  for (const auto& l : lines) {
    base_w = std::max(base_w, display_width(l.base));
    if (l.cell) {
      any_cell = true;
      cell_w = std::max(cell_w, display_width(*l.cell));
    }
  }
  const std::size_t cell_col = std::max(base_w + 4, display_width(caption) + 2);
  std::vector<std::string> out;
  out.push_back(any_cell ? pad_right(caption, cell_col) + "worst rank" : caption);
  for (const auto& l : lines) {
    std::string s = l.base;
    if (any_cell) {
      if (l.cell) s = pad_right(s, cell_col) + *l.cell;
      if (!l.marker.empty()) s = pad_right(s, cell_col + cell_w);
    }
    if (!l.marker.empty()) s += "  " + p.by_severity(l.marker, severity_of(run.severity));
    out.push_back(s);
  }
  if (cpu_only(run)) out.emplace_back("H2D and step memory not measured (no GPU).");
  if (const auto fetch = value(key::kDataloaderFetchCpuMs))
    out.push_back("DataLoader fetch: " + fmt_ms(*fetch) + " (CPU, supplemental)");
  // Issue 5: what the GPU activity records say, for the same rank as the tree.
  if (const auto coll = value("collective_ms"))
    out.push_back("Collective (NCCL): " + fmt_ms(*coll) + " per step");
  if (const auto copies = value("h2d_copies_per_step")) {
    std::string line = "H2D copies: " + analysis::count_text(*copies) + " per step";
    if (const auto bytes = value("h2d_bytes_per_step"))
      line += ", " + analysis::decimal_bytes(*bytes, *bytes);  // as the pin-memory advice says it
    if (const auto share = value("h2d_pageable_share"))
      line += ", " + fmt_pct(*share * 100.0) + " pageable";
    out.push_back(line);
  }
  if (const auto idle = value("gpu_idle_fraction"))
    out.push_back("GPU idle in steps: " + fmt_pct(*idle * 100.0));
  return out;
}

}  // namespace traceml::report
