// The text report (final_summary.txt) rendered from summary JSON objects built
// here by hand. The fixtures are the reference inputs of spec §5.8 (bert_finetune
// INPUT-BOUND, the 4-rank / 2-node INPUT STRAGGLER of the guide, the CPU-only
// quickstart, NOT ENOUGH STEP DATA) written as schema-1.7 payloads.
#include "report/text/text_report.hpp"

#include <cmath>
#include <cstddef>
#include <fstream>
#include <iostream>
#include <limits>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include <gtest/gtest.h>

namespace {

using Json = nlohmann::ordered_json;
using traceml::report::render_text;
using traceml::report::summary_text;
using traceml::report::TextOptions;

// ---- Fixture builders --------------------------------------------------------

Json pt(std::optional<double> value, std::optional<std::string> idx) {
  Json p = Json::object();
  p["value"] = value ? Json(*value) : Json(nullptr);
  p["idx"] = idx ? Json(*idx) : Json(nullptr);
  return p;
}

Json issue(const std::string& kind, const std::string& status, const std::string& severity,
           const std::string& summary, Json evidence = Json::object()) {
  return Json{{"kind", kind},        {"status", status},       {"severity", severity},
              {"summary", summary},  {"action", "act"},        {"metric", nullptr},
              {"phase", nullptr},    {"score", nullptr},       {"share_pct", nullptr},
              {"skew_pct", nullptr}, {"ranks", Json::array()}, {"evidence", std::move(evidence)}};
}

Json identity(int rank, int node) {
  return Json{{"global_rank", rank},   {"local_rank", rank % 2},
              {"node_rank", node},     {"hostname", "host" + std::to_string(node)},
              {"local_world_size", 2}, {"world_size", 4}};
}

Json section(Json metadata, Json diagnosis, Json global, Json rows, const std::string& by) {
  Json s;
  s["metadata"] = std::move(metadata);
  s["diagnosis"] = diagnosis;
  s["issues"] = Json::array({diagnosis});
  s["global"] = std::move(global);
  s["groups"] = Json{{"by", by}, {"rows", std::move(rows)}};
  s["units"] = Json::object();
  s["card"] = "";
  return s;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line))
    out.push_back(line);
  return out;
}

bool has_line(const std::string& text, const std::string& line) {
  for (const auto& l : lines_of(text)) {
    if (l == line) return true;
  }
  return false;
}

/// Visible columns of a line: UTF-8 code points (the glyphs are single-width).
std::size_t columns(const std::string& s) {
  std::size_t w = 0;
  for (const char c : s) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++w;
  }
  return w;
}

/// Column of the first "||" of a line, or npos.
std::size_t bar_column(const std::string& line) {
  const auto pos = line.find("||");
  return pos == std::string::npos ? pos : columns(line.substr(0, pos));
}

std::string strip_ansi(const std::string& s) {
  std::string out;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\x1b' && i + 1 < s.size() && s[i + 1] == '[') {
      i += 2;
      while (i < s.size() && !(s[i] >= '@' && s[i] <= '~'))
        ++i;
      continue;
    }
    out += s[i];
  }
  return out;
}

// ---- Case 1: bert_finetune, 1 GPU, INPUT-BOUND crit (spec §5.8) ----------------
// averages step 200.4 / input 128.0 / traced 72.0 / compute 68.0 / h2d 0.4 /
// residual 3.6 / fetch 120.0; forward/backward/optimizer 20/40/8 (sum 68);
// system LOW GPU UTIL 24 %; step memory 2.9e9 / 3.2e9.
Json bert_summary() {
  Json summary;
  summary["schema_version"] = 1.7;
  summary["generated_at"] = "2026-08-05T12:46:00.123456+00:00";
  summary["duration_s"] = 52.4;
  summary["meta"] = Json{{"run_name", "bert_finetune"},
                         {"mode", "single_node"},
                         {"world_size", 1},
                         {"nodes_observed", 1},
                         {"gpus_observed", 1}};
  summary["primary_diagnosis"] =
      Json{{"kind", "INPUT_BOUND"},
           {"status", "INPUT-BOUND"},
           {"severity", "crit"},
           {"section", "step_time"},
           {"scope", "performance"},
           {"summary", "Input wait is 64.0% of the typical GPU Step Time."},
           {"action", "Increase workers, prefetch, or storage throughput."},
           {"evidence",
            {{"type", "phase_share"},
             {"basis", "average"},
             {"steps_analyzed", 256},
             {"step_time_ms", 200.4},
             {"traced_step_time_ms", 72.0},
             {"diagnosis_clock", "gpu"},
             {"dataloader_fetch_cpu_ms", 120.0},
             {"input_wait_ms", 128.0},
             {"h2d_ms", 0.4},
             {"compute_ms", 68.0},
             {"residual_ms", 3.6},
             {"gpu_util_avg_percent", 24.0},
             {"score", 0.64},
             {"score_basis", "median_per_rank_step_time_share"},
             {"score_denominator", "selected-clock Step Time per rank"}}}};

  const Json node0{{"global_rank", 0}, {"local_rank", 0},       {"node_rank", 0},
                   {"hostname", "h0"}, {"local_world_size", 1}, {"world_size", 1}};
  summary["system"] = section(
      Json{{"mode", "single_node"}, {"samples", 52}, {"nodes_expected", 1}, {"nodes_observed", 1}},
      issue("LOW_GPU_UTILIZATION", "LOW GPU UTIL", "info",
            "GPU utilization was low, averaging 24.0% on 0.",
            Json{{"gpu_util_avg_percent", 24.0}, {"gpu_utilization_band", "low"}}),
      Json{{"index_by", "node_rank"},
           {"average", {{"cpu_percent", 18.4}, {"gpu_util_percent", 24.0}}},
           {"median",
            {{"cpu_percent", pt(18.4, "0")},
             {"ram_bytes", pt(6.2e9, "0")},
             {"ram_percent", pt(19.375, "0")},
             {"gpu_util_percent", pt(24.0, "0")},
             {"gpu_mem_bytes", pt(3.33e9, "0")},
             {"gpu_mem_percent", pt(20.8125, "0")},
             {"gpu_temp_c", pt(42.0, "0")},
             {"gpu_power_w", pt(95.5, "0")}}},
           {"worst",
            {{"cpu_percent", pt(18.4, "0")},
             {"ram_bytes", pt(6.2e9, "0")},
             {"ram_percent", pt(19.375, "0")},
             {"gpu_util_percent", pt(24.0, "0")},
             {"gpu_mem_bytes", pt(3.33e9, "0")},
             {"gpu_mem_percent", pt(20.8125, "0")},
             {"gpu_temp_c", pt(42.0, "0")},
             {"gpu_power_w", pt(95.5, "0")}}}},
      Json{{"0",
            {{"identity", node0},
             {"metrics", {{"ram_percent", 19.375}, {"gpu_mem_percent", 20.8125}}}}}},
      "node_rank");
  summary["process"] = section(
      Json{{"mode", "single_node"}, {"global_ranks_seen", 1}, {"global_ranks_used", 1}},
      issue("NORMAL", "NORMAL", "info", "Process CPU, RSS, and GPU memory showed no pressure."),
      Json{{"index_by", "global_rank"},
           {"median",
            {{"cpu_capacity_percent", pt(6.25, "0")},
             {"ram_bytes", pt(3.1e9, "0")},
             {"ram_percent", pt(9.6875, "0")},
             {"gpu_mem_used_bytes", pt(2.9e9, "0")},
             {"gpu_mem_reserved_bytes", pt(3.2e9, "0")},
             {"gpu_mem_reserved_percent", pt(20.0, "0")}}},
           {"worst",
            {{"cpu_capacity_percent", pt(6.25, "0")},
             {"ram_bytes", pt(3.1e9, "0")},
             {"ram_percent", pt(9.6875, "0")},
             {"gpu_mem_used_bytes", pt(2.9e9, "0")},
             {"gpu_mem_reserved_bytes", pt(3.2e9, "0")},
             {"gpu_mem_reserved_percent", pt(20.0, "0")}}}},
      Json{{"0",
            {{"identity", node0},
             {"metrics", {{"ram_percent", 9.6875}, {"gpu_mem_reserved_percent", 20.0}}}}}},
      "global_rank");
  const Json averages{{"input_wait_ms", 128.0},
                      {"step_time_ms", 200.4},
                      {"traced_step_time_ms", 72.0},
                      {"dataloader_fetch_cpu_ms", 120.0},
                      {"h2d_ms", 0.4},
                      {"compute_ms", 68.0},
                      {"residual_ms", 3.6},
                      {"forward_ms", 20.0},
                      {"backward_ms", 40.0},
                      {"optimizer_ms", 8.0}};
  Json st_issue = issue("INPUT_BOUND", "INPUT-BOUND", "crit",
                        "Input wait is 64.0% of the typical GPU Step Time.");
  summary["step_time"] = section(
      Json{{"mode", "single_node"}, {"global_ranks_seen", 1}, {"global_ranks_used", 1}}, st_issue,
      Json{{"index_by", "global_rank"},
           {"window",
            {{"kind", "step_window"}, {"steps_analyzed", 256}, {"diagnosis_clock", "gpu"}}},
           {"average", averages}},
      Json{{"0", {{"identity", node0}, {"metrics", averages}}}}, "global_rank");
  summary["step_memory"] = section(
      Json{{"mode", "single_node"}, {"global_ranks_seen", 1}, {"global_ranks_used", 1}},
      issue("BALANCED", "BALANCED", "info", "No clear pressure, imbalance, or creep signal."),
      Json{{"index_by", "global_rank"},
           {"median",
            {{"peak_allocated_bytes", pt(2.9e9, "0")}, {"peak_reserved_bytes", pt(3.2e9, "0")}}},
           {"worst",
            {{"peak_allocated_bytes", pt(2.9e9, "0")}, {"peak_reserved_bytes", pt(3.2e9, "0")}}}},
      Json{{"0", {{"identity", node0}, {"metrics", Json::object()}}}}, "global_rank");
  return summary;
}

// ---- Case 2: the guide's 4 ranks on 2 nodes, INPUT STRAGGLER crit ---------------
// Ranks 0,1 on node 0; ranks 2,3 on node 1. Rank 1 is the representative (median)
// rank of step time; rank 0 the input worst (254.5 ms vs the median 3.8 ms).
Json straggler_summary() {
  Json summary;
  summary["schema_version"] = 1.7;
  summary["generated_at"] = "2026-08-05T12:46:00.123456+00:00";
  summary["duration_s"] = 40.1;
  summary["meta"] = Json{{"run_name", "ddp_pretrain"},
                         {"mode", "multi_node"},
                         {"world_size", 4},
                         {"nodes_observed", 2},
                         {"gpus_observed", 4}};
  summary["primary_diagnosis"] =
      Json{{"kind", "INPUT_STRAGGLER"},
           {"status", "INPUT STRAGGLER"},
           {"severity", "crit"},
           {"section", "step_time"},
           {"scope", "performance"},
           {"summary",
            "r0 has excess input wait burden relative to victim r1 (~83.8% impact; ~99.0% "
            "of visible wait cost)."},
           {"action", "Inspect input wait on r0."},
           {"evidence",
            {{"type", "rank_comparison"},
             {"steps_analyzed", 250},
             {"gpu_util_avg_percent", 14.0},
             {"metric", "input_wait_ms"},
             {"phase", "input"},
             {"median", {{"rank", 1}, {"value_ms", 3.8}}},
             {"worst", {{"rank", 0}, {"value_ms", 254.5}}},
             {"delta_ms", 250.7},
             {"ratio", 66.974},  // R(254.5 / 3.8)
             {"score", 0.838}}}};

  std::vector<Json> ids;
  for (int r = 0; r < 4; ++r)
    ids.push_back(identity(r, r / 2));
  Json nodes = Json::object();
  nodes["0"] = Json{{"identity", identity(1, 0)},
                    {"metrics", {{"ram_percent", 26.666666666666668}, {"gpu_mem_percent", 31.25}}}};
  nodes["1"] = Json{{"identity", identity(3, 1)},
                    {"metrics", {{"ram_percent", 34.666666666666664}, {"gpu_mem_percent", 43.75}}}};
  summary["system"] = section(
      Json{{"mode", "multi_node"}, {"nodes_expected", 2}, {"nodes_observed", 2}},
      issue("LOW_GPU_UTILIZATION", "LOW GPU UTIL", "info",
            "GPU utilization was low, averaging 14.0% on 0.", Json{{"gpu_util_avg_percent", 14.0}}),
      Json{{"index_by", "node_rank"},
           {"average", {{"cpu_percent", 22.0}, {"gpu_util_percent", 9.0}}},
           {"median",
            {{"cpu_percent", pt(18.0, "0")},
             {"ram_bytes", pt(16.0e9, "0")},
             {"ram_percent", pt(26.666666666666668, "0")},
             {"gpu_util_percent", pt(9.0, "0")},
             {"gpu_mem_bytes", pt(5.0e9, "0")},
             {"gpu_mem_percent", pt(31.25, "0")},
             {"gpu_temp_c", pt(58.0, "0")},
             {"gpu_power_w", pt(220.0, "0")},
             {"gpu_headroom_bytes", pt(9.0e9, "0")}}},
           {"worst",
            {{"cpu_percent", pt(26.0, "1")},
             {"ram_bytes", pt(20.8e9, "1")},
             {"ram_percent", pt(34.666666666666664, "1")},
             {"gpu_util_percent", pt(9.0, "1")},
             {"gpu_mem_bytes", pt(7.0e9, "1")},
             {"gpu_mem_percent", pt(43.75, "1")},
             {"gpu_temp_c", pt(70.0, "1")},
             {"gpu_power_w", pt(280.0, "1")},
             {"gpu_headroom_bytes", pt(8.0e9, "1")}}}},
      nodes, "node_rank");

  Json prows = Json::object();
  prows["1"] = Json{{"identity", ids[1]},
                    {"metrics", {{"ram_percent", 10.3}, {"gpu_mem_reserved_percent", 20.0}}}};
  prows["2"] = Json{{"identity", ids[2]}, {"metrics", Json::object()}};
  prows["3"] = Json{{"identity", ids[3]},
                    {"metrics", {{"ram_percent", 17.4}, {"gpu_mem_reserved_percent", 42.5}}}};
  summary["process"] = section(
      Json{{"mode", "multi_node"}, {"global_ranks_seen", 4}, {"global_ranks_used", 4}},
      issue("NORMAL", "NORMAL", "info", "Process CPU, RSS, and GPU memory showed no pressure."),
      Json{{"index_by", "global_rank"},
           {"median",
            {{"cpu_capacity_percent", pt(12.0, "1")},
             {"ram_bytes", pt(3.1e9, "1")},
             {"ram_percent", pt(10.3, "1")},
             {"gpu_mem_used_bytes", pt(2.9e9, "1")},
             {"gpu_mem_reserved_bytes", pt(3.2e9, "1")},
             {"gpu_mem_reserved_percent", pt(20.0, "1")}}},
           {"worst",
            {{"cpu_capacity_percent", pt(81.0, "2")},
             // RSS worst on rank 3 whose row says 17.4 %: the percent printed is
             // that row's, not the ram_percent worst point (rank 2, 99 %).
             {"ram_bytes", pt(5.4e9, "3")},
             {"ram_percent", pt(99.0, "2")},
             {"gpu_mem_used_bytes", pt(4.6e9, "3")},
             {"gpu_mem_reserved_bytes", pt(6.8e9, "3")},
             {"gpu_mem_reserved_percent", pt(42.5, "3")}}}},
      prows, "global_rank");

  // Per-rank averages. Rank 1: the guide's tree (fetch 3.7). Rank 0: input 254.5.
  auto ms = [](double input, double step, double traced, double compute, double fwd, double bwd,
               double opt, double h2d, double resid, double fetch) {
    return Json{{"input_wait_ms", input},
                {"step_time_ms", step},
                {"traced_step_time_ms", traced},
                {"dataloader_fetch_cpu_ms", fetch},
                {"h2d_ms", h2d},
                {"compute_ms", compute},
                {"residual_ms", resid},
                {"forward_ms", fwd},
                {"backward_ms", bwd},
                {"optimizer_ms", opt}};
  };
  Json srows = Json::object();
  srows["0"] = Json{{"identity", ids[0]},
                    {"metrics", ms(254.5, 304.1, 49.6, 40.0, 12.0, 24.0, 4.0, 1.2, 8.4, 254.0)}};
  srows["1"] = Json{{"identity", ids[1]},
                    {"metrics", ms(3.8, 303.7, 299.9, 259.5, 80.0, 169.5, 10.0, 1.1, 39.3, 3.7)}};
  srows["2"] = Json{{"identity", ids[2]},
                    {"metrics", ms(3.9, 303.9, 300.0, 261.0, 80.5, 170.5, 10.0, 1.1, 37.9, 3.8)}};
  srows["3"] = Json{{"identity", ids[3]},
                    {"metrics", ms(3.7, 303.6, 299.9, 259.0, 79.5, 169.5, 10.0, 1.0, 39.9, 3.6)}};
  summary["step_time"] = section(
      Json{{"mode", "multi_node"}, {"global_ranks_seen", 4}, {"global_ranks_used", 4}},
      issue("INPUT_STRAGGLER", "INPUT STRAGGLER", "crit", "r0 has excess input wait burden."),
      Json{{"index_by", "global_rank"},
           {"window",
            {{"kind", "step_window"}, {"steps_analyzed", 250}, {"diagnosis_clock", "gpu"}}},
           {"average", {{"step_time_ms", 303.825}}},
           // Global medians deliberately differ from rank 1's row: the tree must
           // show the representative rank's own values.
           {"median",
            {{"step_time_ms", pt(303.7, "1")},
             {"input_wait_ms", pt(3.86, "1")},
             {"compute_ms", pt(259.25, "1")}}},
           {"worst",
            {{"step_time_ms", pt(304.1, "0")},
             {"input_wait_ms", pt(254.5, "0")},
             {"compute_ms", pt(261.0, "2")},
             {"forward_ms", pt(80.5, "2")},
             {"backward_ms", pt(170.5, "2")},
             {"optimizer_ms", pt(10.0, "1")},
             {"h2d_ms", pt(1.2, "0")},
             {"residual_ms", pt(39.9, "3")}}}},
      srows, "global_rank");

  Json mrows = Json::object();
  mrows["1"] = Json{{"identity", ids[1]}, {"metrics", Json::object()}};
  mrows["2"] = Json{{"identity", ids[2]}, {"metrics", Json::object()}};
  summary["step_memory"] = section(
      Json{{"mode", "multi_node"}, {"global_ranks_seen", 4}, {"global_ranks_used", 4}},
      issue("BALANCED", "BALANCED", "info", "No clear pressure, imbalance, or creep signal."),
      Json{{"index_by", "global_rank"},
           {"median",
            {{"peak_allocated_bytes", pt(8.5e9, "1")}, {"peak_reserved_bytes", pt(8.9e9, "1")}}},
           {"worst",
            {{"peak_allocated_bytes", pt(9.4e9, "2")}, {"peak_reserved_bytes", pt(9.8e9, "2")}}}},
      mrows, "global_rank");
  return summary;
}

// ---- Case 3: CPU-only quickstart, INPUT-BOUND warn (spec §5.8) -------------------
// averages step 1.36, input 0.19, traced 1.17, compute 1.02, h2d null, residual
// 0.149, fetch 0.19; score 0.14 warn; gpus_observed 0; step memory NO_GPU.
Json cpu_summary() {
  Json summary;
  summary["schema_version"] = 1.7;
  summary["duration_s"] = 2.0;
  summary["meta"] = Json{{"run_name", "quickstart"},
                         {"mode", "single_node"},
                         {"world_size", 1},
                         {"nodes_observed", 1},
                         {"gpus_observed", 0}};
  summary["primary_diagnosis"] =
      Json{{"kind", "INPUT_BOUND"},
           {"status", "INPUT-BOUND"},
           {"severity", "warn"},
           {"section", "step_time"},
           {"summary", "Input wait is 14.0% of the typical CPU Step Time."},
           {"action", "Increase workers, prefetch, or storage throughput."},
           {"evidence",
            {{"type", "phase_share"},
             {"steps_analyzed", 100},
             {"diagnosis_clock", "cpu"},
             {"gpu_util_avg_percent", nullptr},
             {"score", 0.14}}}};
  const Json id0{{"global_rank", 0}, {"local_rank", 0},       {"node_rank", 0},
                 {"hostname", "h0"}, {"local_world_size", 1}, {"world_size", 1}};
  Json nulls_median = Json::object(), nulls_worst = Json::object();
  for (const char* m :
       {"gpu_util_percent", "gpu_mem_bytes", "gpu_mem_percent", "gpu_temp_c", "gpu_power_w"}) {
    nulls_median[m] = pt(std::nullopt, std::nullopt);
    nulls_worst[m] = pt(std::nullopt, std::nullopt);
  }
  nulls_median["cpu_percent"] = pt(35.2, "0");
  nulls_median["ram_bytes"] = pt(4.1e9, "0");
  nulls_worst["cpu_percent"] = pt(35.2, "0");
  nulls_worst["ram_bytes"] = pt(4.1e9, "0");
  summary["system"] = section(
      Json{{"mode", "single_node"}, {"nodes_expected", 1}, {"nodes_observed", 1}},
      issue("NORMAL", "NORMAL", "info", "CPU and RAM showed no system pressure."),
      Json{{"index_by", "node_rank"}, {"median", nulls_median}, {"worst", nulls_worst}},
      Json{{"0", {{"identity", id0}, {"metrics", {{"ram_percent", 12.8125}}}}}}, "node_rank");
  summary["process"] = section(
      Json{{"mode", "single_node"}, {"global_ranks_seen", 1}, {"global_ranks_used", 1}},
      issue("HIGH_PROCESS_CPU", "HIGH PROCESS CPU", "warn",
            "Process CPU averaged 85.0% of capacity."),
      Json{{"index_by", "global_rank"},
           {"median",
            {{"cpu_capacity_percent", pt(85.0, "0")},
             {"ram_bytes", pt(0.5e9, "0")},
             {"gpu_mem_used_bytes", pt(std::nullopt, std::nullopt)}}},
           {"worst",
            {{"cpu_capacity_percent", pt(85.0, "0")},
             {"ram_bytes", pt(0.5e9, "0")},
             {"gpu_mem_used_bytes", pt(std::nullopt, std::nullopt)}}}},
      Json{{"0", {{"identity", id0}, {"metrics", {{"ram_percent", 1.5625}}}}}}, "global_rank");
  const Json averages{{"input_wait_ms", 0.19},       {"step_time_ms", 1.36},
                      {"traced_step_time_ms", 1.17}, {"dataloader_fetch_cpu_ms", 0.19},
                      {"h2d_ms", nullptr},           {"compute_ms", 1.02},
                      {"residual_ms", 0.149},        {"forward_ms", 0.3},
                      {"backward_ms", 0.6},          {"optimizer_ms", 0.12}};
  summary["step_time"] =
      section(Json{{"mode", "single_node"}, {"global_ranks_seen", 1}, {"global_ranks_used", 1}},
              issue("INPUT_BOUND", "INPUT-BOUND", "warn", "x"),
              Json{{"index_by", "global_rank"},
                   {"window",
                    {{"kind", "step_window"}, {"steps_analyzed", 100}, {"diagnosis_clock", "cpu"}}},
                   {"average", averages}},
              Json{{"0", {{"identity", id0}, {"metrics", averages}}}}, "global_rank");
  Json nogpu = issue("NO_GPU", "NO GPU", "info",
                     "No GPU detected. Step memory uses torch-based GPU memory telemetry.");
  summary["step_memory"] =
      section(Json{{"mode", "no_data"}}, nogpu, Json{{"index_by", "global_rank"}}, Json::object(),
              "global_rank");
  return summary;
}

// ---- Case 4: NOT ENOUGH STEP DATA (spec §5.8) -------------------------------------
Json warmup_summary() {
  Json summary;
  summary["schema_version"] = 1.7;
  summary["duration_s"] = 4.0;
  summary["meta"] = Json{{"run_name", "quickstart"},
                         {"mode", "single_node"},
                         {"world_size", 1},
                         {"nodes_observed", 1},
                         {"gpus_observed", 1}};
  summary["primary_diagnosis"] =
      Json{{"kind", "INSUFFICIENT_STEP_TIME_DATA"},
           {"status", "INSUFFICIENT STEP-TIME DATA"},
           {"severity", "info"},
           {"section", "step_time"},
           {"summary",
            "Not enough completed step-time samples were available for a stable performance "
            "diagnosis."},
           {"action", "Run for more steps or ensure step timing is recorded."},
           {"evidence",
            {{"type", "insufficient_data"},
             {"step_time_status", "WARMUP"},
             {"steps_analyzed", 12},
             {"gpu_util_avg_percent", 31.0}}}};
  summary["system"] =
      section(Json{{"nodes_expected", 1}, {"nodes_observed", 1}},
              issue("HIGH_GPU_TEMPERATURE", "HIGH GPU TEMP", "crit",
                    "GPU temperature was high, peaking at 88.0 C on 0 gpu0."),
              Json{{"index_by", "node_rank"},
                   {"average", {{"cpu_percent", 17.0}, {"gpu_util_percent", 31.0}}},
                   {"median", {{"cpu_percent", pt(17.0, "0")}, {"gpu_temp_c", pt(80.0, "0")}}},
                   {"worst", {{"cpu_percent", pt(17.0, "0")}, {"gpu_temp_c", pt(80.0, "0")}}}},
              Json::object(), "node_rank");
  summary["step_time"] = section(
      Json{{"global_ranks_seen", 1}, {"global_ranks_used", 1}},
      issue("WARMUP", "WARMUP", "info", "Only 1 step per rank available; diagnosis requires 2."),
      Json{{"index_by", "global_rank"},
           {"window", {{"steps_analyzed", 12}, {"diagnosis_clock", "gpu"}}},
           {"average", {{"step_time_ms", 10.0}}}},
      Json::object(), "global_rank");
  summary["step_memory"] =
      section(Json{{"global_ranks_seen", 1}, {"global_ranks_used", 1}},
              issue("NO_DATA", "NO DATA", "info", "Need at least 50 completed steps."),
              Json{{"index_by", "global_rank"}}, Json::object(), "global_rank");
  return summary;
}

// ---- Helpers over rendered text ------------------------------------------------

std::string plain(const Json& summary, const std::string& hint = "") {
  return render_text(summary, TextOptions{hint, false, {}, {}});
}

/// The first line that starts with `prefix` ("" when none).
std::string line_starting(const std::string& text, const std::string& prefix) {
  for (const auto& l : lines_of(text)) {
    if (l.compare(0, prefix.size(), prefix) == 0) return l;
  }
  return "";
}

/// A wrapped paragraph read back as one line: the line starting with `prefix`
/// plus its indented continuation lines, joined with single spaces.
std::string paragraph(const std::string& text, const std::string& prefix) {
  const auto lines = lines_of(text);
  std::string out;
  bool in = false;
  for (const auto& l : lines) {
    if (!in && l.compare(0, prefix.size(), prefix) == 0) {
      out = l;
      in = true;
    } else if (in && !l.empty() && l[0] == ' ' && l.find("||") == std::string::npos) {
      out += " " + l.substr(l.find_first_not_of(' '));
    } else if (in) {
      break;
    }
  }
  return out;
}

/// The left side of a side-by-side line (the whole line when it has no "||").
std::string left_of(const std::string& line) {
  const auto pos = line.find(" ||");
  std::string l = pos == std::string::npos ? line : line.substr(0, pos);
  while (!l.empty() && l.back() == ' ')
    l.pop_back();
  return l;
}

std::string tree_row(const std::string& text, const std::string& label) {
  return left_of(line_starting(text, label));
}

/// Every run of consecutive lines holding "||" has it in one column.
void expect_aligned(const std::string& text) {
  std::size_t column = std::string::npos;
  for (const auto& l : lines_of(text)) {
    const std::size_t c = bar_column(l);
    if (c == std::string::npos) {
      column = std::string::npos;
      continue;
    }
    if (column == std::string::npos) column = c;
    EXPECT_EQ(c, column) << "misaligned: " << l << "\n" << text;
  }
}

void expect_within_width(const std::string& text) {
  for (const auto& l : lines_of(text))
    EXPECT_LE(columns(l), 120U) << l;
}

Json with_primary(Json summary, const std::string& kind, const std::string& status,
                  const std::string& severity, Json evidence,
                  const std::string& summary_text_ = "section summary",
                  const std::string& action = "section action") {
  summary["primary_diagnosis"] = Json{{"kind", kind},           {"status", status},
                                      {"severity", severity},   {"section", "step_time"},
                                      {"scope", "performance"}, {"summary", summary_text_},
                                      {"action", action},       {"evidence", std::move(evidence)}};
  return summary;
}

// ---- Whole reports (spec §5.8 reference inputs in the guide's layout) -------------

TEST(TextReportGolden, BertFinetuneInputBound) {
  // Shares of 200.4 ms: 128.0 -> 63.9 -> "64%", 68.0 -> 33.9 -> "34%",
  // 20/40/8 -> 10.0/20.0/4.0 %, 0.4 -> 0.2 % prints "0%" -> "<1%", 3.6 -> 1.8 -> "2%".
  // GPU power 95.5 W prints "96W" (printf rounds the exact half to even);
  // 20.8125 % -> "21%", 9.6875 % -> "10%", CPU capacity 6.25 % -> "6%".
  const std::string expected =
      R"(TraceML Run Summary
bert_finetune · 1 GPU · 256 steps analyzed · 52.4s

Verdict: INPUT-BOUND  (CRITICAL)
Why: input wait is 64% of the typical step; the GPU sits idle while batches arrive.
Next: add loader workers (DataLoaderOptions().workers(N)), pin batches (tensor.pin_memory()), or check storage reads.
Supporting: GPU util 24% avg -- consistent with input starvation.
Scope: N = node · R = global rank · G = GPU index

STEP TIMING (R0/N0), GPU Clock                     || STEP MEMORY: BALANCED · 1/1 ranks
Step Time            200.4 ms  100%                ||
├─ Input Wait        128.0 ms   64%  ◀ cause       || per-step peak       median rank       worst rank
├─ Compute            68.0 ms   34%                || Allocated           2.9 GB            2.9 GB, R0/N0
│  ├─ Forward         20.0 ms   10%                || Reserved            3.2 GB            3.2 GB, R0/N0
│  ├─ Backward        40.0 ms   20%                ||
│  └─ Optimizer        8.0 ms    4%                ||
├─ H2D                 0.4 ms   <1%                ||
└─ Residual            3.6 ms    2%                ||
DataLoader fetch: 120.0 ms (CPU, supplemental)     ||

SYSTEM METRICS: LOW GPU UTIL · 1/1 nodes             ||  PROCESS METRICS: NORMAL · 1/1 ranks
Evidence: GPU utilization averaged 24%.              ||
                                                     ||
                  median node avg  worst node avg    ||                 median rank avg  worst rank avg
CPU               18%              18%, N0           ||  CPU capacity   6%               6%, R0/N0
RAM used          6.2 GB (19%)     6.2 GB (19%), N0  ||  RSS used       3.1 GB (10%)     3.1 GB (10%), R0/N0
GPU util          24%              24%, N0           ||  CUDA allocated 2.9 GB           2.9 GB, R0/N0
GPU memory/device 3.3 GB (21%)     3.3 GB (21%), N0  ||  CUDA reserved  3.2 GB (20%)     3.2 GB (20%), R0/N0
GPU temperature   42C              42C, N0           ||
GPU power         96W              96W, N0           ||

Full evidence: logs/bert_finetune/final_summary.json)";
  EXPECT_EQ(plain(bert_summary(), "logs/bert_finetune/final_summary.json"), expected);
}

TEST(TextReportGolden, FourRankInputStraggler) {
  // The tree is rank 1's own row (not the global medians 3.86 / 259.25).
  // Shares of 303.7: 3.8 -> 1.3 -> "1%", 259.5 -> 85.4, 80 -> 26.3, 169.5 -> 55.8,
  // 10 -> 3.3, 1.1 -> 0.36 -> "<1%", 39.3 -> 12.9. Ratio 66.974 -> "67x".
  // Worst-rank cells: Input Wait is the straggler's metric (and 254.5 vs 3.8 is
  // material); Compute 261.0 vs 259.5 differs by 1.5 ms but only 0.6 % -> none;
  // so Step Time gets one too. CUDA reserved 42.5 % prints "42%" (half to even).
  const std::string expected =
      R"(TraceML Run Summary
ddp_pretrain · 4 GPUs · 2 nodes · 250 steps analyzed · 40.1s

Verdict: INPUT STRAGGLER  (CRITICAL)
Why: R0/N0 waits 254.5 ms per step for input; the median rank waits 3.8 ms. All 4 ranks then advance at R0's pace.
Next: inspect the data loader's workers, the dataset's get() and transforms, and storage on R0/N0.
Supporting: GPU util median 14% -- ranks idle at the step barrier.
Scope: N = node · R = global rank · G = GPU index

STEP TIMING (Median R1/N0), GPU Clock  worst rank            || STEP MEMORY: BALANCED · 4/4 ranks
Step Time            303.7 ms  100%     304.1 ms (R0)        ||
├─ Input Wait          3.8 ms    1%     254.5 ms (R0)  ◀ 67x || per-step peak       median rank       worst rank
├─ Compute           259.5 ms   85%                          || Allocated           8.5 GB            9.4 GB, R2/N1
│  ├─ Forward         80.0 ms   26%                          || Reserved            8.9 GB            9.8 GB, R2/N1
│  ├─ Backward       169.5 ms   56%                          ||
│  └─ Optimizer       10.0 ms    3%                          ||
├─ H2D                 1.1 ms   <1%                          ||
└─ Residual           39.3 ms   13%                          ||
DataLoader fetch: 3.7 ms (CPU, supplemental)                 ||

SYSTEM METRICS: LOW GPU UTIL · 2/2 nodes             ||  PROCESS METRICS: NORMAL · 4/4 ranks
Evidence: GPU utilization averaged 14%.              ||
                                                     ||
                  median node avg  worst node avg    ||                 median rank avg  worst rank avg
CPU               18%              26%, N1           ||  CPU capacity   12%              81%, R2/N1
RAM used          16.0 GB (27%)    20.8 GB (35%), N1 ||  RSS used       3.1 GB (10%)     5.4 GB (17%), R3/N1
GPU util          9%               9%, N1            ||  CUDA allocated 2.9 GB           4.6 GB, R3/N1
GPU memory/device 5.0 GB (31%)     7.0 GB (44%), N1  ||  CUDA reserved  3.2 GB (20%)     6.8 GB (42%), R3/N1
GPU temperature   58C              70C, N1           ||
GPU power         220W             280W, N1          ||

Full evidence: logs/ddp_pretrain/final_summary.json)";
  EXPECT_EQ(plain(straggler_summary(), "logs/ddp_pretrain/final_summary.json"), expected);
}

TEST(TextReportGolden, CpuOnlyQuickstart) {
  // Shares of 1.36: 0.19 -> 14.0 -> "14%", 1.02 -> 75.0, 0.3 -> 22.1, 0.6 -> 44.1,
  // 0.12 -> 8.8 -> "9%", 0.149 -> 11.0. H2D is null: no row, and Residual is the
  // last depth-1 row. The GPU rows of SYSTEM and the CUDA rows of PROCESS are
  // all null and left out. Process HIGH PROCESS CPU (warn) is its Evidence and
  // the Also block.
  const std::string expected =
      R"(TraceML Run Summary
quickstart · CPU only (no GPU detected) · 100 steps analyzed · 2.0s

Verdict: INPUT-BOUND  (WARNING)
Why: input wait is 14% of the typical step (CPU clock).
Next: add loader workers (DataLoaderOptions().workers(N)) or prefetch (max_jobs), or check storage read throughput.
Scope: N = node · R = global rank · G = GPU index

STEP TIMING (R0/N0), CPU Clock                     || STEP MEMORY: NO GPU
Step Time              1.4 ms  100%                ||
├─ Input Wait          0.2 ms   14%  ◀ cause       || No GPU: step memory is the GPU allocator's per-step
├─ Compute             1.0 ms   75%                || peaks. On the CPU, the process's RSS is under
│  ├─ Forward          0.3 ms   22%                || PROCESS METRICS.
│  ├─ Backward         0.6 ms   44%                ||
│  └─ Optimizer        0.1 ms    9%                ||
└─ Residual            0.1 ms   11%                ||
H2D and step memory not measured (no GPU).         ||
DataLoader fetch: 0.2 ms (CPU, supplemental)       ||

SYSTEM METRICS: NORMAL · 1/1 nodes                   ||  PROCESS METRICS: HIGH PROCESS CPU · 1/1 ranks
Evidence: CPU and RAM showed no system pressure.     ||  Evidence: Process CPU averaged 85.0% of capacity.
                                                     ||
                  median node avg  worst node avg    ||                 median rank avg  worst rank avg
CPU               35%              35%, N0           ||  CPU capacity   85%              85%, R0/N0
RAM used          4.1 GB (13%)     4.1 GB (13%), N0  ||  RSS used       0.5 GB (2%)      0.5 GB (2%), R0/N0

Also, not the cause of slow steps:
! Process CPU averaged 85.0% of capacity.  (WARNING)

Full evidence: logs/session_20260806_090618/final_summary.json)";
  EXPECT_EQ(plain(cpu_summary(), "logs/session_20260806_090618/final_summary.json"), expected);
}

TEST(TextReportGolden, NotEnoughStepData) {
  // Degraded: no tree; "Observed anyway" from the system averages (31 %, 17 %);
  // STEP MEMORY and SYSTEM print alone (no partner section); no Also block
  // although the system has a crit finding; default evidence hint.
  const std::string expected =
      R"(TraceML Run Summary
quickstart · 1 GPU · 12 steps analyzed · 4.0s

Verdict: NOT ENOUGH STEP DATA
Why: only 12 completed steps were captured; a stable diagnosis needs a larger sample.
Next: run more steps, or check that traceml::StepScope marks each step of the training loop.
Scope: N = node · R = global rank · G = GPU index

Observed anyway: GPU util 31% avg · CPU util 17% avg

STEP MEMORY: NO DATA · 1/1 ranks

Need at least 50 completed steps.

SYSTEM METRICS: HIGH GPU TEMP · 1/1 nodes
Evidence: GPU temperature was high, peaking at 88.0 C on 0 gpu0.

                  median node avg  worst node avg
CPU               17%              17%, N0
GPU temperature   80C              80C, N0

Full evidence: final_summary.json)";
  EXPECT_EQ(plain(warmup_summary()), expected);
}

TEST(TextReportGolden, EveryReferenceReportIsAlignedAndWithinWidth) {
  for (const Json& s : {bert_summary(), straggler_summary(), cpu_summary(), warmup_summary()}) {
    const std::string text = plain(s);
    expect_aligned(text);
    expect_within_width(text);
  }
}

// ---- Header -----------------------------------------------------------------------

TEST(TextReportHeader, GpuCountIsCappedByWorldSize) {
  Json s = bert_summary();
  s["meta"]["gpus_observed"] = 4;  // one process on a 4-GPU host
  EXPECT_EQ(lines_of(plain(s))[1], "bert_finetune · 1 GPU · 256 steps analyzed · 52.4s");
  s["meta"]["world_size"] = nullptr;  // no world size: the observed count
  EXPECT_EQ(lines_of(plain(s))[1], "bert_finetune · 4 GPUs · 256 steps analyzed · 52.4s");
  s["meta"]["gpus_observed"] = nullptr;
  EXPECT_EQ(lines_of(plain(s))[1], "bert_finetune · 256 steps analyzed · 52.4s");
}

TEST(TextReportHeader, NodesOnlyOnMultiRankRuns) {
  Json single = bert_summary();
  single["meta"]["nodes_observed"] = 2;
  EXPECT_EQ(lines_of(plain(single))[1], "bert_finetune · 1 GPU · 256 steps analyzed · 52.4s");
  Json multi = straggler_summary();
  multi["meta"]["nodes_observed"] = 1;
  EXPECT_EQ(lines_of(plain(multi))[1],
            "ddp_pretrain · 4 GPUs · 1 node · 250 steps analyzed · 40.1s");
}

TEST(TextReportHeader, DurationFormat) {
  // < 60 s: one decimal; else whole seconds rounded half to even.
  const std::vector<std::pair<double, std::string>> cases = {
      {59.94, "59.9s"},  {61.2, "1m 1s"},     {62.5, "1m 2s"},
      {63.5, "1m 4s"},   {3599.4, "59m 59s"}, {3600.0, "1h 0m"},
      {3725.5, "1h 2m"}, {0.0, "0.0s"},       {3.6e18, "1000000000000000h"}};
  for (const auto& [seconds, want] : cases) {
    Json s = bert_summary();
    s["duration_s"] = seconds;
    EXPECT_EQ(lines_of(plain(s))[1], "bert_finetune · 1 GPU · 256 steps analyzed · " + want)
        << seconds;
  }
  Json s = bert_summary();
  s["duration_s"] = nullptr;
  EXPECT_EQ(lines_of(plain(s))[1], "bert_finetune · 1 GPU · 256 steps analyzed");
}

TEST(TextReportHeader, TheRunsOwnDurationNotTheSpanOfItsSamples) {
  // DECISIONS 16: 2.77 s of steps whose 1 Hz samples span 1.8 s read "1.8s".
  Json s = bert_summary();
  s["duration_s"] = 1.8;
  s["run_duration_s"] = 2.77;
  EXPECT_EQ(lines_of(plain(s))[1], "bert_finetune · 1 GPU · 256 steps analyzed · 2.8s");
  // A file from before the run's duration: TraceML's.
  s.erase("run_duration_s");
  EXPECT_EQ(lines_of(plain(s))[1], "bert_finetune · 1 GPU · 256 steps analyzed · 1.8s");
}

TEST(TextReportHeader, LongRunNameWraps) {
  // 100 + " · 1 GPU · 256 steps" = 120 columns fit; " analyzed" would not.
  Json s = bert_summary();
  s["meta"]["run_name"] = std::string(100, 'x');
  const auto lines = lines_of(plain(s));
  EXPECT_EQ(lines[1], std::string(100, 'x') + " · 1 GPU · 256 steps");
  EXPECT_EQ(columns(lines[1]), 120U);
  EXPECT_EQ(lines[2], "analyzed · 52.4s");
}

TEST(TextReportHeader, SingleStepIsSingular) {
  Json s = bert_summary();
  s["step_time"]["global"]["window"]["steps_analyzed"] = 1;
  EXPECT_EQ(lines_of(plain(s))[1], "bert_finetune · 1 GPU · 1 step analyzed · 52.4s");
}

// ---- Verdict, Why, Next --------------------------------------------------------------

TEST(TextReportVerdict, SeverityWords) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"crit", "Verdict: INPUT-BOUND  (CRITICAL)"},
      {"critical", "Verdict: INPUT-BOUND  (CRITICAL)"},
      {"warn", "Verdict: INPUT-BOUND  (WARNING)"},
      {"warning", "Verdict: INPUT-BOUND  (WARNING)"},
      {"info", "Verdict: INPUT-BOUND"},
      {"", "Verdict: INPUT-BOUND"},
      {"odd", "Verdict: INPUT-BOUND  (ODD)"}};
  for (const auto& [severity, want] : cases) {
    Json s = bert_summary();
    s["primary_diagnosis"]["severity"] = severity;
    EXPECT_EQ(line_starting(plain(s), "Verdict:"), want) << severity;
  }
}

struct WordingCase {
  const char* name;
  std::string kind;
  std::string status;
  Json evidence;
  bool multi;
  std::string verdict, why, next;
};

TEST(TextReportVerdict, WhyAndNextFollowTheCardTable) {
  const std::vector<WordingCase> cases = {
      {"h2d_bound", "H2D_BOUND", "H2D-BOUND", Json{{"score", 0.25}}, false,
       "Verdict: H2D-BOUND  (WARNING)", "Why: host-to-device copies take 25% of the typical step.",
       "Next: pin host batches (tensor.pin_memory()), copy with .to(device, "
       "/*non_blocking=*/true), or batch transfers."},
      // 0.125 * 100 = 12.5 exactly; "%.0f" rounds half to even -> 12.
      {"residual", "RESIDUAL_HEAVY", "RESIDUAL-HEAVY", Json{{"score", 0.125}}, false,
       "Verdict: RESIDUAL-HEAVY  (WARNING)",
       "Why: 12% of the typical step is time outside the traced phases.",
       "Next: look for untraced work between steps -- validation, checkpointing, logging."},
      {"compute_bound_has_no_score", "COMPUTE_BOUND", "COMPUTE-BOUND", Json::object(), false,
       "Verdict: COMPUTE-BOUND  (WARNING)", "Why: section summary", "Next: section action"},
      {"input_bound_without_score", "INPUT_BOUND", "INPUT-BOUND", Json::object(), false,
       "Verdict: INPUT-BOUND  (WARNING)", "Why: section summary", "Next: section action"},
      {"low_util_single", "LOW_GPU_UTILIZATION_UNEXPLAINED", "LOW GPU UTILIZATION",
       Json{{"gpu_util_avg_percent", 37.6}}, false,
       "Verdict: LOW GPU UTILIZATION -- cause unclear  (WARNING)",
       "Why: step timing is balanced, but GPU util averaged 38%. The idle time is not explained by "
       "input or transfer.",
       "Next: look for untraced work between steps -- validation, checkpointing, logging -- or "
       "inefficient kernels (torch.profiler)."},
      {"low_util_multi", "LOW_GPU_UTILIZATION_UNEXPLAINED", "LOW GPU UTILIZATION",
       Json{{"gpu_util_avg_percent", 37.6}}, true,
       "Verdict: LOW GPU UTILIZATION -- cause unclear  (WARNING)",
       "Why: step timing is balanced, but GPU util averaged 38%. The idle time is not explained by "
       "input, transfer, or timing skew.",
       "Next: look for untraced work between steps -- validation, checkpointing, logging -- or "
       "inefficient kernels (torch.profiler)."},
      {"low_util_without_util", "LOW_GPU_UTILIZATION_UNEXPLAINED", "LOW GPU UTILIZATION",
       Json::object(), false, "Verdict: LOW GPU UTILIZATION -- cause unclear  (WARNING)",
       "Why: section summary", "Next: section action"},
      {"no_clear_single", "NO_CLEAR_PERFORMANCE_BOTTLENECK", "NO CLEAR PERFORMANCE BOTTLENECK",
       Json::object(), false, "Verdict: NO CLEAR BOTTLENECK  (WARNING)",
       "Why: step timing is balanced -- no input, transfer, or residual issue.",
       "Next: training is compute-dominated; for more speed profile kernels (torch.profiler / "
       "Nsight)."},
      // Global step time median 303.7, worst 304.1: 100 * 0.4 / 303.7 = 0.13 -> "+0.1%".
      {"no_clear_multi", "NO_CLEAR_PERFORMANCE_BOTTLENECK", "NO CLEAR PERFORMANCE BOTTLENECK",
       Json::object(), true, "Verdict: NO CLEAR BOTTLENECK  (WARNING)",
       "Why: step timing is balanced and ranks are even (worst step time +0.1% vs median).",
       "Next: training is compute-dominated; for more speed profile kernels (torch.profiler / "
       "Nsight)."},
      {"incomplete_without_names", "INSUFFICIENT_STEP_TIME_DATA", "INSUFFICIENT STEP-TIME DATA",
       Json{{"step_time_status", "INCOMPLETE DATA"}}, false,
       "Verdict: STEP TIMING INCOMPLETE  (WARNING)",
       "Why: some timing signals were never measured, so phases don't add up to a reliable step "
       "time.",
       "Next: check the integration wiring for the missing phases; per-signal coverage is listed "
       "in the JSON step_time section."},
      {"no_steps", "INSUFFICIENT_STEP_TIME_DATA", "INSUFFICIENT STEP-TIME DATA",
       Json{{"step_time_status", "NO DATA"}, {"steps_analyzed", 0}}, false,
       "Verdict: NOT ENOUGH STEP DATA  (WARNING)", "Why: no completed steps were captured.",
       "Next: run more steps, or check that traceml::StepScope marks each step of the training "
       "loop."},
      {"unknown_kind", "FUTURE_KIND", "future_kind  thing", Json::object(), false,
       "Verdict: FUTURE KIND THING  (WARNING)", "Why: section summary", "Next: section action"},
  };
  for (const auto& c : cases) {
    Json s = with_primary(c.multi ? straggler_summary() : bert_summary(), c.kind, c.status, "warn",
                          c.evidence);
    if (c.kind == "INSUFFICIENT_STEP_TIME_DATA")
      s["step_time"]["global"]["window"].erase("steps_analyzed");
    const std::string text = plain(s);
    EXPECT_EQ(line_starting(text, "Verdict:"), c.verdict) << c.name;
    EXPECT_EQ(paragraph(text, "Why:"), c.why) << c.name;
    EXPECT_EQ(paragraph(text, "Next:"), c.next) << c.name;
    expect_within_width(text);
  }
}

TEST(TextReportVerdict, NoPrimaryDiagnosis) {
  Json s = bert_summary();
  s.erase("primary_diagnosis");
  const std::string text = plain(s);
  EXPECT_EQ(line_starting(text, "Verdict:"), "Verdict: n/a");
  EXPECT_EQ(line_starting(text, "Why:"), "");
  EXPECT_EQ(line_starting(text, "Next:"), "");
  // The tree is still drawn, without a marker.
  EXPECT_EQ(tree_row(text, "├─ Input Wait"), "├─ Input Wait        128.0 ms   64%");
}

TEST(TextReportVerdict, KindIsReadTrimmedAsCompareReadsIt) {
  // One definition of a text for the report and compare (json_read.hpp):
  // white space around a kind does not make it unknown. Before, the report
  // fell back to the kind's label and the section's own sentence.
  const Json s = with_primary(bert_summary(), " INPUT_BOUND\n", "", "warning",
                              Json{{"score", 0.64}, {"diagnosis_clock", "gpu"}});
  const std::string text = plain(s);
  EXPECT_EQ(line_starting(text, "Verdict:"), "Verdict: INPUT-BOUND  (WARNING)");
  EXPECT_EQ(line_starting(text, "Why:").rfind("Why: input wait is 64% of the typical step", 0), 0u)
      << text;
}

TEST(TextReportVerdict, LongWhyWrapsUnderItsText) {
  // 5 + 115 = 120 columns exactly fit on the first line; " so" would not.
  Json s =
      with_primary(bert_summary(), "INSUFFICIENT_STEP_TIME_DATA", "INSUFFICIENT STEP-TIME DATA",
                   "info", Json{{"step_time_status", "INCOMPLETE DATA"}});
  s["step_time"]["diagnosis"]["evidence"] =
      Json{{"missing_signals",
            {"input_wait", "forward", "backward", "optimizer_step", "traced_step_time"}}};
  const auto lines = lines_of(plain(s));
  std::size_t why = 0;
  while (why < lines.size() && lines[why].rfind("Why:", 0) != 0)
    ++why;
  ASSERT_LT(why + 1, lines.size());
  EXPECT_EQ(lines[why],
            "Why: some timing signals were never measured (missing: input_wait, forward, backward, "
            "optimizer_step, traced_step_time),");
  EXPECT_EQ(columns(lines[why]), 120U);
  EXPECT_EQ(lines[why + 1], "     so phases don't add up to a reliable step time.");
  EXPECT_EQ(lines[why + 2].rfind("Next: check the integration wiring", 0), 0U);
}

TEST(TextReportVerdict, LongNextWrapsWithSixSpaces) {
  Json s = with_primary(bert_summary(), "FUTURE_KIND", "FUTURE", "info", Json::object(), "short",
                        std::string(110, 'a') + " tail words");
  const auto lines = lines_of(plain(s));
  std::size_t next = 0;
  while (next < lines.size() && lines[next].rfind("Next:", 0) != 0)
    ++next;
  ASSERT_LT(next + 1, lines.size());
  EXPECT_EQ(lines[next], "Next: " + std::string(110, 'a'));
  EXPECT_EQ(lines[next + 1], "      tail words");
}

// ---- Stragglers -------------------------------------------------------------------------

Json straggler_with(const std::string& kind, const std::string& status, Json evidence) {
  return with_primary(straggler_summary(), kind, status, "crit", std::move(evidence));
}

TEST(TextReportStraggler, H2DStraggler) {
  const std::string text = plain(straggler_with("H2D_STRAGGLER", "H2D STRAGGLER",
                                                Json{{"metric", "h2d_ms"},
                                                     {"phase", "h2d"},
                                                     {"median", {{"rank", 1}, {"value_ms", 1.1}}},
                                                     {"worst", {{"rank", 0}, {"value_ms", 5.5}}},
                                                     {"ratio", 5.0}}));
  EXPECT_EQ(line_starting(text, "Verdict:"), "Verdict: H2D STRAGGLER  (CRITICAL)");
  EXPECT_EQ(paragraph(text, "Why:"),
            "Why: R0/N0 spends 5.5 ms per step in host-to-device copies; the median rank spends "
            "1.1 ms. All 4 ranks then advance at R0's pace.");
  EXPECT_EQ(line_starting(text, "Next:"), "Next: inspect PCIe topology / transfer path on R0/N0.");
  // The culprit row always gets its worst cell (1.2 ms on R0); Input Wait keeps
  // its material-skew cell but loses the marker.
  EXPECT_EQ(tree_row(text, "├─ H2D"),
            "├─ H2D                 1.1 ms   <1%       1.2 ms (R0)  ◀ 5x");
  EXPECT_EQ(tree_row(text, "├─ Input Wait"),
            "├─ Input Wait          3.8 ms    1%     254.5 ms (R0)");
}

TEST(TextReportStraggler, ComputeStragglerMarksItsPhase) {
  const std::string text = plain(straggler_with("COMPUTE_STRAGGLER", "COMPUTE STRAGGLER",
                                                Json{{"metric", "forward_ms"},
                                                     {"phase", "forward"},
                                                     {"median", {{"rank", 1}, {"value_ms", 80.0}}},
                                                     {"worst", {{"rank", 2}, {"value_ms", 120.0}}},
                                                     {"ratio", 1.5}}));
  EXPECT_EQ(line_starting(text, "Why:"),
            "Why: R2/N1 spends 120.0 ms per step in forward; the median rank spends 80.0 ms. All "
            "4 ranks then advance at R2's pace.");
  EXPECT_EQ(line_starting(text, "Next:"),
            "Next: inspect R2/N1: thermal/clock throttling, imbalanced work, or a slow device.");
  // Ratio 1.5 < 2: "cause". The cell is the global worst point of forward_ms.
  EXPECT_EQ(tree_row(text, "│  ├─ Forward"),
            "│  ├─ Forward         80.0 ms   26%      80.5 ms (R2)  ◀ cause");
}

TEST(TextReportStraggler, UnattributedStragglerReadsItsFirstComparison) {
  const std::string text =
      plain(straggler_with("STRAGGLER", "STRAGGLER",
                           Json{{"type", "rank_comparison"},
                                {"comparisons",
                                 {{{"metric", "input_wait_ms"},
                                   {"phase", "input"},
                                   {"median", {{"rank", 1}, {"value_ms", 3.8}}},
                                   {"worst", {{"rank", 0}, {"value_ms", 254.5}}},
                                   {"ratio", 66.974}},
                                  {{"metric", "compute_ms"},
                                   {"phase", "compute"},
                                   {"median", {{"rank", 1}, {"value_ms", 259.5}}},
                                   {"worst", {{"rank", 2}, {"value_ms", 261.0}}},
                                   {"ratio", 1.006}}}}}));
  EXPECT_EQ(line_starting(text, "Verdict:"), "Verdict: RANK STRAGGLER  (CRITICAL)");
  EXPECT_EQ(line_starting(text, "Why:"),
            "Why: R0/N0 spends 254.5 ms per step in input; the median rank spends 3.8 ms. All 4 "
            "ranks then advance at R0's pace.");
  EXPECT_EQ(line_starting(text, "Next:"),
            "Next: inspect R0/N0 end-to-end; multiple phases are slow on it.");
  EXPECT_EQ(tree_row(text, "├─ Input Wait"),
            "├─ Input Wait          3.8 ms    1%     254.5 ms (R0)  ◀ 67x");
}

TEST(TextReportStraggler, UnattributedStragglerQuotesWhereTheCulpritLosesMostTime) {
  // Input differs by 0.2 ms, residual by 10.2 ms on R1: the text names residual
  // (ours; TraceML quotes the first comparison, input).
  const std::string text =
      plain(straggler_with("STRAGGLER", "STRAGGLER",
                           Json{{"type", "rank_comparison"},
                                {"comparisons",
                                 {{{"metric", "input_wait_ms"},
                                   {"phase", "input"},
                                   {"median", {{"rank", 0}, {"value_ms", 0.2}}},
                                   {"worst", {{"rank", 1}, {"value_ms", 0.4}}},
                                   {"delta_ms", 0.2},
                                   {"ratio", 2.0}},
                                  {{"metric", "residual_ms"},
                                   {"phase", "residual"},
                                   {"median", {{"rank", 0}, {"value_ms", 0.0}}},
                                   {"worst", {{"rank", 1}, {"value_ms", 10.2}}},
                                   {"delta_ms", 10.2},
                                   {"ratio", 3836.0}}}}}));
  EXPECT_EQ(
      paragraph(text, "Why:"),
      "Why: R1/N0 spends 10.2 ms per step outside the traced phases (residual); the median rank "
      "spends 0.0 ms. All 4 ranks then advance at R1's pace.");
  EXPECT_EQ(line_starting(text, "Next:"),
            "Next: inspect untraced work on R1/N0: synchronisation, logging, checkpointing, "
            "validation or "
            "CPU stalls between phases.");
}

TEST(TextReportStraggler, UnknownRankAndValues) {
  Json s = straggler_with("INPUT_STRAGGLER", "INPUT STRAGGLER", Json::object());
  const std::string text = plain(s);
  EXPECT_EQ(line_starting(text, "Why:"),
            "Why: the slow rank waits ? ms per step for input; the median rank waits ? ms.");
  EXPECT_EQ(
      line_starting(text, "Next:"),
      "Next: inspect the data loader's workers, the dataset's get() and transforms, and storage "
      "on the slow rank.");
  EXPECT_EQ(tree_row(text, "├─ Input Wait"),
            "├─ Input Wait          3.8 ms    1%     254.5 ms (R0)  ◀ cause");
}

TEST(TextReportStraggler, RankWithoutGroupRowHasNoNode) {
  Json s = straggler_with("INPUT_STRAGGLER", "INPUT STRAGGLER",
                          Json{{"metric", "input_wait_ms"},
                               {"median", {{"rank", 1}, {"value_ms", 3.8}}},
                               {"worst", {{"rank", 7}, {"value_ms", 254.5}}}});
  s["step_time"]["global"]["worst"]["input_wait_ms"] = pt(254.5, "7");
  s["meta"]["world_size"] = nullptr;  // no pace sentence without a world size
  EXPECT_EQ(line_starting(plain(s), "Why:"),
            "Why: R7 waits 254.5 ms per step for input; the median rank waits 3.8 ms.");
}

TEST(TextReportStraggler, RatioMarkerBoundary) {
  const std::vector<std::pair<Json, std::string>> cases = {{Json(2.0), "◀ 2x"},
                                                           {Json(1.999), "◀ cause"},
                                                           {Json(2.5), "◀ 2x"},
                                                           {Json(3.5), "◀ 4x"},
                                                           {Json(nullptr), "◀ cause"}};
  for (const auto& [ratio, marker] : cases) {
    Json s = straggler_summary();
    s["primary_diagnosis"]["evidence"]["ratio"] = ratio;
    const std::string row = tree_row(plain(s), "├─ Input Wait");
    EXPECT_EQ(row, "├─ Input Wait          3.8 ms    1%     254.5 ms (R0)  " + marker) << ratio;
  }
}

// ---- Supporting / all-normal lines ----------------------------------------------------

TEST(TextReportSupporting, UtilBelowFiftyOnly) {
  Json s = bert_summary();
  s["primary_diagnosis"]["evidence"]["gpu_util_avg_percent"] = 49.9;
  EXPECT_EQ(line_starting(plain(s), "Supporting:"),
            "Supporting: GPU util 50% avg -- consistent with input starvation.");
  s["primary_diagnosis"]["evidence"]["gpu_util_avg_percent"] = 50.0;
  EXPECT_EQ(line_starting(plain(s), "Supporting:"), "");
  s["primary_diagnosis"]["evidence"]["gpu_util_avg_percent"] = nullptr;
  EXPECT_EQ(line_starting(plain(s), "Supporting:"), "");
}

TEST(TextReportSupporting, WordingByKind) {
  Json h2d = with_primary(bert_summary(), "H2D_BOUND", "H2D-BOUND", "warn",
                          Json{{"score", 0.3}, {"gpu_util_avg_percent", 30.0}});
  EXPECT_EQ(line_starting(plain(h2d), "Supporting:"), "Supporting: GPU util 30% avg.");
  // A straggler on a single-rank run cannot be "idle at the barrier".
  Json single = with_primary(bert_summary(), "STRAGGLER", "STRAGGLER", "warn",
                             Json{{"gpu_util_avg_percent", 12.0}});
  EXPECT_EQ(line_starting(plain(single), "Supporting:"), "Supporting: GPU util 12% avg.");
  // Never for the other kinds.
  Json low = with_primary(bert_summary(), "LOW_GPU_UTILIZATION_UNEXPLAINED", "LOW", "info",
                          Json{{"gpu_util_avg_percent", 12.0}});
  EXPECT_EQ(line_starting(plain(low), "Supporting:"), "");
}

TEST(TextReportSupporting, AllNormalLine) {
  Json s =
      with_primary(bert_summary(), "NO_CLEAR_PERFORMANCE_BOTTLENECK",
                   "NO CLEAR PERFORMANCE BOTTLENECK", "info", Json{{"gpu_util_avg_percent", 92.0}});
  s["step_time"]["diagnosis"]["severity"] = "info";
  const std::string text = plain(s);
  EXPECT_EQ(line_starting(text, "System, process"),
            "System, process, and memory: all normal. GPU util 92% avg.");
  // It sits right after Next.
  const auto lines = lines_of(text);
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i].rfind("Next:", 0) == 0) {
      EXPECT_EQ(lines[i + 1].rfind("System, process", 0), 0U);
    }
  }

  Json multi = with_primary(straggler_summary(), "NO_CLEAR_PERFORMANCE_BOTTLENECK", "NO CLEAR",
                            "info", Json::object());
  multi["step_time"]["diagnosis"]["severity"] = "info";
  EXPECT_EQ(line_starting(plain(multi), "System, process"),
            "System, process, and memory: all normal on every rank.");

  s["process"]["diagnosis"]["severity"] = "warn";  // one section is not normal
  EXPECT_EQ(line_starting(plain(s), "System, process"), "");
}

// ---- STEP TIMING tree ---------------------------------------------------------------------

TEST(TextReportTree, ComputeIsLastWhenH2DAndResidualAreNull) {
  Json s = bert_summary();
  s["step_time"]["global"]["average"]["h2d_ms"] = nullptr;
  s["step_time"]["global"]["average"]["residual_ms"] = nullptr;
  s["step_time"]["global"]["average"]["backward_ms"] = nullptr;
  s.erase("step_memory");  // the tree alone, without "||"
  const auto lines = lines_of(plain(s));
  std::size_t at = 0;
  while (at < lines.size() && lines[at].rfind("STEP TIMING", 0) != 0)
    ++at;
  ASSERT_LT(at + 6, lines.size());
  EXPECT_EQ(lines[at + 1], "Step Time            200.4 ms  100%");
  EXPECT_EQ(lines[at + 2], "├─ Input Wait        128.0 ms   64%  ◀ cause");
  EXPECT_EQ(lines[at + 3], "└─ Compute            68.0 ms   34%");
  EXPECT_EQ(lines[at + 4], "   ├─ Forward         20.0 ms   10%");
  EXPECT_EQ(lines[at + 5], "   └─ Optimizer        8.0 ms    4%");
  EXPECT_EQ(lines[at + 6], "DataLoader fetch: 120.0 ms (CPU, supplemental)");
}

TEST(TextReportTree, ChildrenAreSkippedWithoutCompute) {
  Json s = bert_summary();
  s["step_time"]["global"]["average"]["compute_ms"] = nullptr;
  const std::string text = plain(s);
  EXPECT_EQ(line_starting(text, "├─ Compute"), "");
  EXPECT_EQ(line_starting(text, "│  ├─ Forward"), "");
  EXPECT_EQ(tree_row(text, "├─ H2D"), "├─ H2D                 0.4 ms   <1%");
}

TEST(TextReportTree, ZeroAndTinyShares) {
  Json s = bert_summary();
  s["step_time"]["global"]["average"]["h2d_ms"] = 0.0;         // measured zero: "0%"
  s["step_time"]["global"]["average"]["residual_ms"] = 1.0;    // 0.499 % -> "<1%"
  s["step_time"]["global"]["average"]["optimizer_ms"] = 1.01;  // 0.504 % -> "1%"
  const std::string text = plain(s);
  EXPECT_EQ(tree_row(text, "├─ H2D"), "├─ H2D                 0.0 ms    0%");
  EXPECT_EQ(tree_row(text, "└─ Residual"), "└─ Residual            1.0 ms   <1%");
  EXPECT_EQ(tree_row(text, "│  └─ Optimizer"), "│  └─ Optimizer        1.0 ms    1%");
}

TEST(TextReportTree, NoTreeWithoutAPositiveStepTime) {
  for (const Json& step : {Json(nullptr), Json(0.0), Json(-3.0)}) {
    Json s = bert_summary();
    s["step_time"]["global"]["average"]["step_time_ms"] = step;
    const std::string text = plain(s);
    EXPECT_EQ(tree_row(text, "Step Time"), "Step Time              n/a") << step;
    EXPECT_EQ(line_starting(text, "├─ Input Wait"), "") << step;
    EXPECT_EQ(tree_row(text, "DataLoader fetch:"),
              "DataLoader fetch: 120.0 ms (CPU, supplemental)");
  }
}

TEST(TextReportTree, HeaderVariants) {
  Json s = bert_summary();
  s["step_time"]["global"]["window"].erase("diagnosis_clock");
  EXPECT_EQ(tree_row(plain(s), "STEP TIMING"), "STEP TIMING (R0/N0)");
  s["step_time"]["groups"]["rows"]["1"] = Json{{"identity", identity(1, 0)}};
  EXPECT_EQ(tree_row(plain(s), "STEP TIMING"), "STEP TIMING (Average)");
  s["step_time"]["global"]["window"]["diagnosis_clock"] = "cpu";
  EXPECT_EQ(tree_row(plain(s), "STEP TIMING"), "STEP TIMING (Average), CPU Clock");
}

TEST(TextReportTree, MultiRankWithoutRepresentativeRowUsesGlobalMedians) {
  Json s = straggler_summary();
  s["step_time"]["groups"]["rows"].erase("1");
  const std::string text = plain(s);
  EXPECT_EQ(tree_row(text, "STEP TIMING"), "STEP TIMING (Median), GPU Clock        worst rank");
  // 3.86 -> "3.9"; 259.25 is exact in binary and prints "259.2" (half to even).
  EXPECT_EQ(tree_row(text, "├─ Input Wait"),
            "├─ Input Wait          3.9 ms    1%     254.5 ms (R0)  ◀ 67x");
  EXPECT_EQ(tree_row(text, "└─ Compute"), "└─ Compute           259.2 ms   85%");
}

TEST(TextReportTree, MaterialSkewBoundaries) {
  // Cells need |worst - shown| >= 1.0 ms AND >= 20 % of the shown value.
  struct Case {
    const char* metric;
    double shown, worst;
    bool cell;
  };
  const std::vector<Case> cases = {
      {"residual_ms", 10.0, 12.0, true},   // 2.0 ms = 20 %: both at the boundary
      {"residual_ms", 10.0, 11.9, false},  // 19 %
      {"residual_ms", 10.0, 8.0, true},    // a faster worst still differs by 20 %
      {"h2d_ms", 3.0, 4.0, true},          // 1.0 ms and 33 %
      {"h2d_ms", 3.0, 3.9, false},         // 30 % but only 0.9 ms
  };
  for (const auto& c : cases) {
    Json s = with_primary(straggler_summary(), "NO_CLEAR_PERFORMANCE_BOTTLENECK", "NO CLEAR",
                          "info", Json::object());
    s["step_time"]["groups"]["rows"]["1"]["metrics"]["input_wait_ms"] = 3.8;
    s["step_time"]["global"]["worst"]["input_wait_ms"] = pt(4.0, "0");  // no input cell
    s["step_time"]["groups"]["rows"]["1"]["metrics"][c.metric] = c.shown;
    s["step_time"]["global"]["worst"][c.metric] = pt(c.worst, "3");
    const std::string text = plain(s);
    const std::string label = std::string(c.metric) == "h2d_ms" ? "├─ H2D" : "└─ Residual";
    const std::string row = tree_row(text, label);
    EXPECT_EQ(row.find("(R3)") != std::string::npos, c.cell) << c.metric << " " << c.worst << row;
    // With any cell, Step Time gets one and the header names the column.
    EXPECT_EQ(tree_row(text, "Step Time").find("304.1 ms (R0)") != std::string::npos, c.cell);
    EXPECT_EQ(tree_row(text, "STEP TIMING").find("worst rank") != std::string::npos, c.cell);
    expect_aligned(text);
  }
  Json s = with_primary(straggler_summary(), "NO_CLEAR_PERFORMANCE_BOTTLENECK", "NO CLEAR", "info",
                        Json::object());
  s["step_time"]["groups"]["rows"]["1"]["metrics"]["residual_ms"] = 10.0;
  s["step_time"]["global"]["worst"]["residual_ms"] = pt(12.0, "3");
  EXPECT_EQ(tree_row(plain(s), "└─ Residual"),
            "└─ Residual           10.0 ms    3%      12.0 ms (R3)");
}

TEST(TextReportTree, NoWorstCellsOnSingleRankRuns) {
  Json s = bert_summary();
  s["step_time"]["global"]["worst"] = Json{{"input_wait_ms", pt(500.0, "0")}};
  EXPECT_EQ(tree_row(plain(s), "├─ Input Wait"), "├─ Input Wait        128.0 ms   64%  ◀ cause");
}

// ---- STEP MEMORY ---------------------------------------------------------------------------

TEST(TextReportStepMemory, SmallValuesPrintInMegabytes) {
  Json s = bert_summary();
  auto& g = s["step_memory"]["global"];
  g["median"]["peak_allocated_bytes"] = pt(18838528.0, "0");
  g["worst"]["peak_allocated_bytes"] = pt(99999999.0, "0");  // just under 0.1 GB
  g["median"]["peak_reserved_bytes"] = pt(23068672.0, "0");
  g["worst"]["peak_reserved_bytes"] = pt(1e8, "0");  // exactly 0.1 GB
  const std::string text = plain(s);
  EXPECT_NE(text.find("|| Allocated           18.8 MB           100.0 MB, R0/N0"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("|| Reserved            23.1 MB           0.1 GB, R0/N0"), std::string::npos)
      << text;
}

TEST(TextReportStepMemory, NullRowsAreLeftOut) {
  Json s = bert_summary();
  s["step_memory"]["global"]["median"]["peak_reserved_bytes"] = pt(std::nullopt, std::nullopt);
  s["step_memory"]["global"]["worst"]["peak_reserved_bytes"] = pt(std::nullopt, std::nullopt);
  std::string text = plain(s);
  EXPECT_NE(text.find("|| Allocated"), std::string::npos);
  EXPECT_EQ(text.find("|| Reserved"), std::string::npos);
  // One null cell prints n/a.
  s["step_memory"]["global"]["median"]["peak_allocated_bytes"] = pt(std::nullopt, std::nullopt);
  text = plain(s);
  EXPECT_NE(text.find("|| Allocated           n/a               2.9 GB, R0/N0"), std::string::npos)
      << text;
  // Nothing at all: the summary instead of the table.
  s["step_memory"]["global"]["worst"]["peak_allocated_bytes"] = pt(std::nullopt, std::nullopt);
  text = plain(s);
  EXPECT_EQ(text.find("per-step peak"), std::string::npos);
  EXPECT_NE(text.find("|| No clear pressure, imbalance, or creep signal."), std::string::npos);
}

// ---- SYSTEM / PROCESS ------------------------------------------------------------------------

TEST(TextReportMetrics, ModerateUtilEvidence) {
  Json s = bert_summary();
  s["system"]["diagnosis"]["kind"] = "MODERATE_GPU_UTILIZATION";
  s["system"]["diagnosis"]["status"] = "MODERATE GPU UTIL";
  s["system"]["diagnosis"]["evidence"] = Json{{"gpu_util_avg_percent", 55.5}};  // -> "56%"
  EXPECT_EQ(left_of(line_starting(plain(s), "Evidence:")),
            "Evidence: GPU utilization averaged 56%.");
  // Without util in the evidence: the cluster average.
  s["system"]["diagnosis"]["evidence"] = Json::object();
  s["system"]["global"]["average"]["gpu_util_percent"] = 41.2;
  EXPECT_EQ(left_of(line_starting(plain(s), "Evidence:")),
            "Evidence: GPU utilization averaged 41%.");
}

TEST(TextReportMetrics, LongEvidenceWrapsInsideItsColumn) {
  Json s = bert_summary();
  s["system"]["diagnosis"]["kind"] = "HIGH_GPU_MEMORY";
  s["system"]["diagnosis"]["summary"] =
      "GPU memory was high, peaking at 85.0% on 0 gpu0 while the run was busy.";
  const std::string text = plain(s);
  const auto lines = lines_of(text);
  std::size_t at = 0;
  while (at < lines.size() && lines[at].rfind("Evidence:", 0) != 0)
    ++at;
  ASSERT_LT(at + 3, lines.size());
  EXPECT_EQ(left_of(lines[at]), "Evidence: GPU memory was high, peaking at 85.0% on 0");
  EXPECT_EQ(left_of(lines[at + 1]), "          gpu0 while the run was busy.");
  EXPECT_EQ(left_of(lines[at + 2]), "");  // the blank row, then both tables
  EXPECT_EQ(lines[at + 3].rfind("                  median node avg", 0), 0U);
  EXPECT_NE(lines[at + 3].find("||                 median rank avg"), std::string::npos);
  expect_aligned(text);
}

TEST(TextReportMetrics, ANodeAndItsGpuAreNamedAsTheScopeLegendNamesThem) {
  // TraceML's "averaging 100.0% on 0." reads as "zero"; the legend says N0.
  const Json node = Json{{"scope", {{"level", "node"}, {"node", "0"}, {"node_rank", 0}}}};
  const Json gpu =
      Json{{"scope", {{"level", "gpu"}, {"node", "1"}, {"node_rank", 1}, {"gpu_idx", 2}}}};
  Json s = bert_summary();
  s["system"]["diagnosis"] =
      issue("HIGH_CPU", "HIGH CPU", "warn", "CPU usage was high, averaging 100.0% on 0.", node);
  s["system"]["issues"] =
      Json::array({s["system"]["diagnosis"],
                   issue("HIGH_GPU_TEMPERATURE", "HIGH GPU TEMP", "crit",
                         "GPU temperature was high, peaking at 88.8 C on 1 gpu2.", gpu)});
  const std::string text = plain(s);
  // The Evidence line, wrapped in its column: the node is N0, never "0".
  EXPECT_EQ(left_of(line_starting(text, "Evidence:")).rfind("Evidence: CPU usage was high", 0), 0U)
      << text;
  EXPECT_EQ(text.find(" on 0."), std::string::npos) << text;
  EXPECT_EQ(text.find(" on 1 gpu2"), std::string::npos) << text;
  EXPECT_TRUE(has_line(text, "! GPU temperature was high, peaking at 88.8 C on G2/N1.  (CRITICAL)"))
      << text;
  EXPECT_TRUE(has_line(text, "! CPU usage was high, averaging 100.0% on N0.  (WARNING)")) << text;
  // The words are TraceML's elsewhere (a summary without a scope is as it is).
  s["system"]["issues"][0]["evidence"] = Json::object();
  EXPECT_TRUE(has_line(plain(s), "! CPU usage was high, averaging 100.0% on 0.  (WARNING)"));
}

TEST(TextReportMetrics, WideValuesWidenTheBlockNotBreakIt) {
  Json s = straggler_summary();
  s["system"]["global"]["worst"]["ram_bytes"] = pt(1234.5e9, "1");
  s["system"]["groups"]["rows"]["1"]["identity"]["node_rank"] = 12;
  const std::string text = plain(s);
  EXPECT_NE(text.find("RAM used          16.0 GB (27%)    1234.5 GB (35%), N12 ||"),
            std::string::npos)
      << text;
  expect_aligned(text);
}

TEST(TextReportMetrics, ProcessEvidenceOnlyForFindings) {
  Json s = bert_summary();
  s["process"]["diagnosis"]["severity"] = "crit";
  s["process"]["diagnosis"]["summary"] = "Process GPU memory was very high.";
  EXPECT_NE(plain(s).find("||  Evidence: Process GPU memory was very high."), std::string::npos);
  s["process"]["diagnosis"]["severity"] = "info";
  EXPECT_EQ(plain(s).find("Process GPU memory was very high."), std::string::npos);
}

// ---- Also ----------------------------------------------------------------------------------

TEST(TextReportAlso, CritFirstAtMostTwoNeverStepTime) {
  Json s = bert_summary();
  s["system"]["issues"] = Json::array({issue("HIGH_CPU", "HIGH CPU", "warn", "System warn A."),
                                       issue("X", "X", "crit", "System crit B."),
                                       issue("I", "I", "info", "System info.")});
  s["process"]["issues"] = Json::array({issue("Y", "Y", "critical", "Process crit C.")});
  s["step_memory"]["issues"] = Json::array({issue("Z", "Z", "warning", "Memory warn D.")});
  s["step_time"]["issues"] = Json::array({issue("T", "T", "crit", "Step time crit.")});
  const auto lines = lines_of(plain(s));
  std::size_t at = 0;
  while (at < lines.size() && lines[at] != "Also, not the cause of slow steps:")
    ++at;
  ASSERT_LT(at + 4, lines.size());
  EXPECT_EQ(lines[at + 1], "! System crit B.  (CRITICAL)");
  EXPECT_EQ(lines[at + 2], "! Process crit C.  (CRITICAL)");
  EXPECT_EQ(lines[at + 3], "");
  EXPECT_EQ(lines[at + 4].rfind("Full evidence:", 0), 0U);

  // Warnings in section order when no crit is left.
  s["system"]["issues"].erase(1);
  s["process"]["issues"] = Json::array();
  const std::string text = plain(s);
  EXPECT_TRUE(has_line(text, "! System warn A.  (WARNING)"));
  EXPECT_TRUE(has_line(text, "! Memory warn D.  (WARNING)"));
}

TEST(TextReportAlso, AbsentWithoutFindings) {
  EXPECT_EQ(plain(bert_summary()).find("Also, not the cause"), std::string::npos);
}

TEST(TextReportAlso, LongFindingWrapsUnderTheBang) {
  Json s = bert_summary();
  // "! " + 115 + " end" = 121 columns: "end" goes to the next line, and the
  // severity keeps its two spaces.
  s["system"]["issues"] = Json::array({issue("X", "X", "warn", std::string(115, 'b') + " end")});
  const std::string text = plain(s);
  EXPECT_TRUE(has_line(text, "! " + std::string(115, 'b'))) << text;
  EXPECT_TRUE(has_line(text, "  end  (WARNING)")) << text;
}

// ---- Degraded -----------------------------------------------------------------------------

TEST(TextReportDegraded, CpuOnlyObservedAnyway) {
  Json s = warmup_summary();
  s["meta"]["gpus_observed"] = 0;
  const std::string text = plain(s);
  EXPECT_TRUE(has_line(text, "Observed anyway: no GPU detected · CPU util 17% avg"));
  EXPECT_EQ(text.find("STEP TIMING"), std::string::npos);
  s["system"]["global"].erase("average");
  EXPECT_TRUE(has_line(plain(s), "Observed anyway: no GPU detected"));
}

TEST(TextReportDegraded, KeepsSideBySideSystemAndProcess) {
  Json s = warmup_summary();
  s["process"] = bert_summary()["process"];
  const std::string text = plain(s);
  EXPECT_NE(text.find("SYSTEM METRICS: HIGH GPU TEMP · 1/1 nodes            ||  PROCESS METRICS: "
                      "NORMAL · 1/1 ranks"),
            std::string::npos)
      << text;
  expect_aligned(text);
  EXPECT_EQ(text.find("Also, not the cause"), std::string::npos);
}

// ---- Missing sections and robustness ------------------------------------------------------

TEST(TextReportRobust, EmptyObject) {
  EXPECT_EQ(plain(Json::object()),
            "TraceML Run Summary\n\nVerdict: n/a\nScope: N = node · R = global rank · G = GPU "
            "index\n\nFull evidence: final_summary.json");
}

TEST(TextReportRobust, TheLastLineNamesTheHtmlReportWhenOneWasWritten) {
  TextOptions opts;
  opts.evidence_hint = "logs/a/final_summary.json";
  opts.html_hint = "logs/a/final_summary.html";
  const std::string text = render_text(Json::object(), opts);
  EXPECT_EQ(text.substr(text.rfind('\n') + 1),
            "Full evidence: logs/a/final_summary.json · logs/a/final_summary.html");
}

TEST(TextReportRobust, NonObjectInputs) {
  for (const Json& j : {Json(nullptr), Json::array({1, 2}), Json(3), Json("text"), Json(true)}) {
    std::string text;
    EXPECT_NO_THROW(text = plain(j)) << j;
    EXPECT_EQ(line_starting(text, "Verdict:"), "Verdict: n/a") << j;
  }
}

TEST(TextReportRobust, MissingSectionsSkipTheirBlocks) {
  Json s = bert_summary();
  s.erase("step_memory");
  std::string text = plain(s);
  EXPECT_TRUE(has_line(text, "STEP TIMING (R0/N0), GPU Clock"));
  EXPECT_EQ(text.find("STEP MEMORY"), std::string::npos);

  s.erase("process");
  text = plain(s);
  EXPECT_TRUE(has_line(text, "SYSTEM METRICS: LOW GPU UTIL · 1/1 nodes"));
  EXPECT_EQ(text.find("||"), std::string::npos);

  s.erase("system");
  s["step_time"] = 5;  // a wrong type counts as absent
  text = plain(s);
  EXPECT_EQ(text.find("STEP TIMING"), std::string::npos);
  EXPECT_EQ(text.find("SYSTEM METRICS"), std::string::npos);
  EXPECT_EQ(line_starting(text, "Verdict:"), "Verdict: INPUT-BOUND  (CRITICAL)");

  Json only_process = Json::object();
  only_process["process"] = bert_summary()["process"];
  text = plain(only_process);
  EXPECT_TRUE(has_line(text, "PROCESS METRICS: NORMAL · 1/1 ranks"));
  EXPECT_EQ(text.find("||"), std::string::npos);
}

TEST(TextReportRobust, NonFiniteNumbersAreAbsent) {
  Json s = bert_summary();
  const double nan = std::nan("");
  for (auto& [key, value] : s["step_time"]["global"]["average"].items()) {
    (void)key;
    value = nan;
  }
  s["duration_s"] = std::numeric_limits<double>::infinity();
  s["system"]["global"]["median"]["cpu_percent"]["value"] = nan;
  s["system"]["global"]["worst"]["cpu_percent"]["value"] = nan;
  const std::string text = plain(s);
  EXPECT_EQ(text.find("nan"), std::string::npos) << text;
  EXPECT_EQ(text.find("inf"), std::string::npos) << text;
  EXPECT_EQ(tree_row(text, "Step Time"), "Step Time              n/a");
  EXPECT_EQ(lines_of(text)[1], "bert_finetune · 1 GPU · 256 steps analyzed");
  EXPECT_EQ(text.find("\nCPU "), std::string::npos);
}

/// Every node of `j`, replaced in turn by each of `poisons` and then removed:
/// rendering never throws and always prints a Verdict line.
void poison_everywhere(const Json& root) {
  const std::vector<Json> poisons = {
      Json(nullptr), Json("x"),     Json(7),        Json(-1.5),
      Json(true),    Json::array(), Json::object(), Json::array({1, "a"}),
      Json(1e300)};
  const Json flat = root.flatten();
  std::vector<Json::json_pointer> pointers;
  for (const auto& [key, value] : flat.items()) {
    (void)value;
    Json::json_pointer ptr(key);
    // Every ancestor too, so whole objects get replaced as well.
    while (!ptr.empty()) {
      pointers.push_back(ptr);
      ptr = ptr.parent_pointer();
    }
  }
  std::size_t renders = 0;
  for (const auto& ptr : pointers) {
    for (const auto& poison : poisons) {
      Json j = root;
      j[ptr] = poison;
      std::string text;
      ASSERT_NO_THROW(text = render_text(j, {"", true, {}, {}}))
          << ptr.to_string() << " = " << poison;
      ASSERT_EQ(line_starting(strip_ansi(text), "Verdict: ").empty(), false) << ptr.to_string();
      ++renders;
    }
    Json j = root;
    j.at(ptr.parent_pointer()).is_object() ? (void)j.at(ptr.parent_pointer()).erase(ptr.back())
                                           : (void)0;
    ASSERT_NO_THROW((void)render_text(j)) << "erased " << ptr.to_string();
  }
  EXPECT_GT(renders, 100U);
}

// One test a reference: ctest runs them side by side (each takes ~20 s under
// ASan, where one test of the four was the suite's longest).
TEST(TextReportRobust, PoisonEveryNodeOfTheBertReference) {
  poison_everywhere(bert_summary());
}
TEST(TextReportRobust, PoisonEveryNodeOfTheStragglerReference) {
  poison_everywhere(straggler_summary());
}
TEST(TextReportRobust, PoisonEveryNodeOfTheCpuReference) {
  poison_everywhere(cpu_summary());
}
TEST(TextReportRobust, PoisonEveryNodeOfTheWarmupReference) {
  poison_everywhere(warmup_summary());
}

// ---- Colour --------------------------------------------------------------------------------

TEST(TextReportColor, VisibleTextIsIdentical) {
  Json also = bert_summary();
  also["system"]["issues"] = Json::array({issue("X", "X", "crit", std::string(110, 'b') + " end")});
  for (const Json& s : {bert_summary(), straggler_summary(), cpu_summary(), warmup_summary(), also,
                        Json::object()}) {
    const std::string colored = render_text(s, {"logs/x/final_summary.json", true, {}, {}});
    const std::string uncolored = render_text(s, {"logs/x/final_summary.json", false, {}, {}});
    EXPECT_EQ(strip_ansi(colored), uncolored);
    EXPECT_EQ(uncolored.find('\x1b'), std::string::npos);
    EXPECT_NE(colored.find('\x1b'), std::string::npos);
  }
}

TEST(TextReportColor, SeverityColours) {
  const std::string crit = render_text(bert_summary(), {"", true, {}, {}});
  EXPECT_NE(crit.find("Verdict: \x1b[1;31mINPUT-BOUND\x1b[0m  \x1b[1;31m(CRITICAL)\x1b[0m"),
            std::string::npos);
  EXPECT_NE(crit.find("\x1b[1;31m◀ cause\x1b[0m"), std::string::npos);
  const std::string warn = render_text(cpu_summary(), {"", true, {}, {}});
  EXPECT_NE(warn.find("Verdict: \x1b[1;33mINPUT-BOUND\x1b[0m  \x1b[1;33m(WARNING)\x1b[0m"),
            std::string::npos);
  EXPECT_NE(warn.find("STEP MEMORY: \x1b[32mNO GPU\x1b[0m"), std::string::npos);
}

// ---- summary_text ----------------------------------------------------------------------------

TEST(TextReportView, PrefersTheStoredText) {
  Json s = bert_summary();
  s["text"] = "stored report";
  EXPECT_EQ(summary_text(s), "stored report");
  s["text"] = "";
  EXPECT_EQ(summary_text(s), render_text(s));
  s["text"] = 5;
  EXPECT_EQ(summary_text(s), render_text(s));
  s.erase("text");
  EXPECT_EQ(summary_text(s), plain(bert_summary()));
  EXPECT_EQ(summary_text(Json::array()), render_text(Json::array()));
}

}  // namespace

namespace {

// The slow window's Next line says how to see those steps' operators on the
// next run, unless a profile of that rank already covers them.
TEST(TextReportSlowWindow, ItSaysHowToProfileTheStepsUnlessAProfileCoversThem) {
  std::ifstream in(std::string(TRACEML_TEST_DATA_DIR) +
                   "/golden/expected/residual_memory_creep/final_summary.json");
  Json summary = Json::parse(in);
  ASSERT_TRUE(summary.is_object());
  const std::string hint =
      "their operators, on the next run: traceml run --profile-steps "
      "171:190 --profile-ranks 0 ... (docs/profiling.md)";
  EXPECT_NE(plain(summary).find("\n      " + hint + "\n"), std::string::npos) << plain(summary);
  // Another rank's profile, or one of other steps, or one without operators: still said.
  summary["profiles"] = Json::array();
  for (const auto& [rank, first, last, ops] :
       {std::tuple{1, 171, 190, 50}, std::tuple{0, 191, 200, 50}, std::tuple{0, 171, 190, 0}})
    summary["profiles"].push_back(Json{{"rank", rank},
                                       {"first_step", first},
                                       {"last_step", last},
                                       {"path", "profiles/x.json"},
                                       {"ops", ops},
                                       {"ops_cut", 0},
                                       {"error", ops == 0 ? Json("failed") : Json()},
                                       {"reason", nullptr}});
  EXPECT_NE(plain(summary).find(hint), std::string::npos);
  // A profile of rank 0 that meets steps 171 to 190: not said.
  summary["profiles"].push_back(Json{{"rank", 0},
                                     {"first_step", 185},
                                     {"last_step", 194},
                                     {"path", "profiles/rank0_steps185-194.json"},
                                     {"ops", 120},
                                     {"ops_cut", 0},
                                     {"error", nullptr},
                                     {"reason", "its steps turned slow: a median of 9.0 ms"}});
  const std::string text = plain(summary);
  EXPECT_EQ(text.find("their operators, on the next run"), std::string::npos) << text;
  EXPECT_NE(text.find("R0 steps 185-194: RUN_DIR/profiles/rank0_steps185-194.json (120 ops; asked "
                      "by --profile auto: its steps turned slow: a median of 9.0 ms)"),
            std::string::npos)
      << text;
}

}  // namespace
