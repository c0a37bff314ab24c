// Summaries as compare reads them, for the compare tests: a minimal
// schema-1.7 summary, its CPU-run variant, a noise spread, and compare as a
// pure function of two summaries.
#pragma once

#include <string>

#include "report/compare/compare.hpp"

namespace traceml::testing {

using report::compare_summaries;
using report::CompareInputs;
using report::Json;

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

/// A minimal schema-1.7 summary: CPU step time `step_ms`, peak reserved
/// `peak` bytes (median = worst, so skew 0), the given diagnoses.
inline Json summary(double step_ms, double peak, const std::string& step_status = "BALANCED",
                    const std::string& mem_status = "BALANCED") {
  Json s;
  s["schema_version"] = 1.7;
  s["generated_at"] = "2026-08-05T12:00:00.000000+00:00";
  s["duration_s"] = 60.0;
  s["primary_diagnosis"] = Json{{"status", step_status}};
  s["system"] = Json{{"diagnosis", Json{{"status", "NORMAL"}}},
                     {"global", Json{{"average", Json{{"cpu_percent", 25.0}}}}}};
  s["process"] = Json{{"diagnosis", Json{{"status", "NORMAL"}}},
                      {"global", Json{{"average", Json{{"cpu_percent", 80.0}}}}}};
  s["step_time"] = Json{{"diagnosis", Json{{"status", step_status}}},
                        {"global", Json{{"window", Json{{"diagnosis_clock", "cpu"}}},
                                        {"average", Json{{"input_wait_ms", 1.0},
                                                         {"step_time_ms", step_ms},
                                                         {"step_time_cpu_ms", step_ms},
                                                         {"step_time_gpu_ms", nullptr},
                                                         {"h2d_ms", 0.5},
                                                         {"compute_ms", step_ms - 2.5},
                                                         {"residual_ms", 1.0},
                                                         {"forward_ms", 10.0},
                                                         {"backward_ms", 20.0},
                                                         {"optimizer_ms", 5.0}}}}}};
  const Json point = Json{{"value", peak}, {"idx", "0"}};
  s["step_memory"] = Json{{"diagnosis", Json{{"status", mem_status}}},
                          {"global", Json{{"median", Json{{"peak_reserved_bytes", point}}},
                                          {"worst", Json{{"peak_reserved_bytes", point}}}}}};
  return s;
}

inline CompareInputs inputs() {
  return CompareInputs{report::compare_side("/runs/run_a/final_summary.json", "run_a"),
                       report::compare_side("/runs/run_b/final_summary.json", "run_b")};
}

inline Json compare(const Json& a, const Json& b) {
  return compare_summaries(a, b, inputs()).json;
}

inline std::string status(const Json& a, const Json& b) {
  return compare(a, b)["verdict"]["status"].get<std::string>();
}

inline std::string why(const Json& a, const Json& b) {
  return compare(a, b)["verdict"]["why"].get<std::string>();
}

inline Json with_spread(Json s, double p25, double p75) {
  s["step_time"]["global"]["spread"] = Json{{"step_time_ms", Json{{"p25", p25}, {"p75", p75}}}};
  return s;
}

/// A summary of a CPU run: no step memory numbers, as every CPU run has.
inline Json cpu_summary(double step_ms, const std::string& step_status = "INPUT-BOUND") {
  Json s = summary(step_ms, 0, step_status);
  s["step_memory"] = Json{{"diagnosis", Json{{"status", "NO GPU"}}}};
  return s;
}

}  // namespace traceml::testing
