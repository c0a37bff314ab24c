#include "report/text/text_metric_tables.hpp"

#include <algorithm>
#include <optional>
#include <string>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/number_format.hpp"
#include "report/text/text_format.hpp"

namespace traceml::report {

namespace {

using analysis::fixed;
using namespace json_read;

/// Table columns of the guide: (label, median) widths.
constexpr std::size_t kSystemLabelWidth = 18, kSystemMedianWidth = 17;
constexpr std::size_t kProcessLabelWidth = 15, kProcessMedianWidth = 17;
constexpr std::size_t kMemoryLabelWidth = 20, kMemoryMedianWidth = 18;

enum class Unit { Percent, Fraction, Bytes, Celsius, Watts };

struct MetricRow {
  const char* label;
  const char* metric;
  Unit unit;
  const char* percent_metric;  ///< shown in parentheses after bytes, or nullptr
};

enum class Where { Node, Rank };

std::string format_value(double v, Unit unit) {
  switch (unit) {
    case Unit::Percent:
      return fmt_pct(v);
    case Unit::Fraction:
      return fmt_pct(v * 100.0);
    case Unit::Bytes:
      return fmt_bytes(v);
    case Unit::Celsius:
      return fixed(v, 0) + "C";
    case Unit::Watts:
      return fixed(v, 0) + "W";
  }
  return fixed(v, 1);
}

/// One cell: the point's value (+ the percent of the same group row), and for
/// "worst" where it was.
std::optional<std::string> metric_cell(const Json* section, const char* stat, const MetricRow& m,
                                       Where where) {
  Point p = point(section, stat, m.metric);
  std::string cell;
  if (p.value) {
    cell = format_value(*p.value, m.unit);
    if (m.percent_metric != nullptr) {
      auto pct = number(path(group_row(section, p.idx), {"metrics", m.percent_metric}));
      if (!pct) {
        const Point pp = point(section, stat, m.percent_metric);
        if (pp.idx == p.idx) pct = pp.value;
      }
      if (pct) cell += " (" + fmt_pct(*pct) + ")";
    }
  } else if (m.percent_metric != nullptr) {
    p = point(section, stat, m.percent_metric);
    if (!p.value) return std::nullopt;
    cell = fmt_pct(*p.value);
  } else {
    return std::nullopt;
  }
  if (std::string(stat) == "worst") {
    const Json* row = group_row(section, p.idx);
    const auto loc = where == Where::Node ? node_label(row, p.idx) : rank_label(row, p.idx);
    if (loc) cell += ", " + *loc;
  }
  return cell;
}

/// Header + rows; empty when every row is null.
std::vector<std::string> metric_table(const Json* section, const std::vector<MetricRow>& spec,
                                      Where where, const std::string& first_header,
                                      const std::string& median_header,
                                      const std::string& worst_header, std::size_t label_w,
                                      std::size_t median_w) {
  struct Cells {
    std::string label, median, worst;
  };
  std::vector<Cells> rows;
  for (const auto& m : spec) {
    const auto med = metric_cell(section, "median", m, where);
    const auto worst = metric_cell(section, "worst", m, where);
    if (!med && !worst) continue;
    rows.push_back({m.label, med.value_or("n/a"), worst.value_or("n/a")});
  }
  if (rows.empty()) return {};
  label_w = std::max(label_w, display_width(first_header) + 1);
  median_w = std::max(median_w, display_width(median_header) + 1);
  for (const auto& r : rows) {
    label_w = std::max(label_w, display_width(r.label) + 1);
    median_w = std::max(median_w, display_width(r.median) + 1);
  }
  std::vector<std::string> out;
  out.push_back(
      rstrip(pad_right(first_header, label_w) + pad_right(median_header, median_w) + worst_header));
  for (const auto& r : rows)
    out.push_back(pad_right(r.label, label_w) + pad_right(r.median, median_w) + r.worst);
  return out;
}

/// "SYSTEM METRICS: NORMAL · 2/2 nodes": the title, the section's status in
/// its severity's colour, and its coverage (left out when a count is missing).
std::string title_line(const char* title, const Json* section, const Painter& p, Where counted) {
  std::string status = status_label(diagnosis_field(section, "status"));
  if (status.empty()) status = status_label(diagnosis_field(section, "kind"));
  status = status.empty()
               ? "n/a"
               : p.by_severity(status, severity_of(diagnosis_field(section, "severity")));
  const bool nodes = counted == Where::Node;
  const auto o =
      integer(path(section, {"metadata", nodes ? "nodes_observed" : "global_ranks_used"}));
  const auto e =
      integer(path(section, {"metadata", nodes ? "nodes_expected" : "global_ranks_seen"}));
  std::string line = std::string(title) + ": " + status;
  if (o && e)
    line += " · " + std::to_string(*o) + "/" + std::to_string(*e) + (nodes ? " nodes" : " ranks");
  return line;
}

}  // namespace

/// `wrap_width`: the summary's width (narrow beside STEP TIMING, full alone).
std::vector<std::string> step_memory_block(const SummaryView& run, const Painter& p,
                                           std::size_t wrap_width) {
  const Json* sm = run.step_memory;
  std::vector<std::string> out;
  out.push_back(title_line("STEP MEMORY", sm, p, Where::Rank));
  const auto kind = analysis::kind_from_name(diagnosis_field(sm, "kind"));
  std::vector<std::string> table;
  if (kind != analysis::DiagnosisKind::NoGpu && kind != analysis::DiagnosisKind::NoData) {
    table = metric_table(sm,
                         {{"Allocated", "peak_allocated_bytes", Unit::Bytes, nullptr},
                          {"Reserved", "peak_reserved_bytes", Unit::Bytes, nullptr}},
                         Where::Rank, "per-step peak", "median rank", "worst rank",
                         kMemoryLabelWidth, kMemoryMedianWidth);
  }
  out.emplace_back();
  if (!table.empty()) {
    append(out, table);
  } else if (kind == analysis::DiagnosisKind::NoGpu) {
    // TraceML's summary ("Step memory uses torch-based GPU memory
    // telemetry.") tells a CPU user nothing; the JSON keeps it.
    append(out, wrap("",
                     "No GPU: step memory is the GPU allocator's per-step peaks. On the CPU, "
                     "the process's RSS is under PROCESS METRICS.",
                     wrap_width, 0));
  } else {
    append(out, wrap("", diagnosis_field(sm, "summary"), wrap_width, 0));
  }
  return out;
}

/// `wrap_width`: the Evidence line's width (narrow beside PROCESS, full alone).
Block system_block(const SummaryView& run, const Painter& p, std::size_t wrap_width) {
  const Json* sys = run.system;
  Block b;
  b.head.push_back(title_line("SYSTEM METRICS", sys, p, Where::Node));
  const auto kind = analysis::kind_from_name(diagnosis_field(sys, "kind"));
  std::string evidence = issue_summary(object_child(sys, "diagnosis"));
  if (kind && analysis::is_gpu_utilization(*kind)) {
    auto u = number(path(sys, {"diagnosis", "evidence", "gpu_util_avg_percent"}));
    if (!u) u = number(path(sys, {"global", "average", "gpu_util_percent"}));
    if (u) evidence = "GPU utilization averaged " + fixed(*u, 0) + "%.";
  }
  append(b.head, wrap("Evidence: ", evidence, wrap_width, 10));
  b.head.emplace_back();
  b.table = metric_table(sys,
                         {{"CPU", "cpu_percent", Unit::Percent, nullptr},
                          {"RAM used", "ram_bytes", Unit::Bytes, "ram_percent"},
                          {"GPU util", "gpu_util_percent", Unit::Percent, nullptr},
                          {"GPU idle in steps", "gpu_idle_fraction", Unit::Fraction, nullptr},
                          {"GPU memory/device", "gpu_mem_bytes", Unit::Bytes, "gpu_mem_percent"},
                          {"GPU temperature", "gpu_temp_c", Unit::Celsius, nullptr},
                          {"GPU power", "gpu_power_w", Unit::Watts, nullptr}},
                         Where::Node, "", "median node avg", "worst node avg", kSystemLabelWidth,
                         kSystemMedianWidth);
  return b;
}

Block process_block(const SummaryView& run, const Painter& p, std::size_t wrap_width) {
  const Json* proc = run.process;
  Block b;
  b.head.push_back(title_line("PROCESS METRICS", proc, p, Where::Rank));
  if (severity_of(diagnosis_field(proc, "severity")) != Severity::Info) {
    append(b.head, wrap("Evidence: ", diagnosis_field(proc, "summary"), wrap_width, 10));
  }
  b.head.emplace_back();
  b.table = metric_table(
      proc,
      {{"CPU capacity", "cpu_capacity_percent", Unit::Percent, nullptr},
       {"RSS used", "ram_bytes", Unit::Bytes, "ram_percent"},
       {"CUDA allocated", "gpu_mem_used_bytes", Unit::Bytes, nullptr},
       {"CUDA reserved", "gpu_mem_reserved_bytes", Unit::Bytes, "gpu_mem_reserved_percent"}},
      Where::Rank, "", "median rank avg", "worst rank avg", kProcessLabelWidth,
      kProcessMedianWidth);
  return b;
}

std::vector<std::string> flatten(const Block& b) {
  std::vector<std::string> out = b.head;
  append(out, b.table);
  return out;
}

}  // namespace traceml::report
