// traceml compare (spec §6) as a pure function: every verdict rule and its
// boundary, the common clock and its fallbacks, legacy schema-1 input,
// missing sections, the text layout, the noise note and the CI gates.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <sstream>

#include "analysis/distribution.hpp"
#include "report/compare/compare.hpp"
#include "report/compare/compare_gate.hpp"

#include "../support/compare_fixtures.hpp"

namespace {

using namespace traceml::testing;
using traceml::report::compare_labels;
using traceml::report::compare_summaries;
using traceml::report::CompareInputs;
using traceml::report::evaluate_gates;
using traceml::report::gate_line;
using traceml::report::GateOptions;
using traceml::report::Json;
using traceml::report::junit_xml;
using traceml::report::render_compare_text;
using traceml::report::sanitize_label;
using traceml::report::xml_escape;

std::vector<int> priorities(const Json& c) {
  std::vector<int> p;
  for (const Json& f : c["verdict"]["findings"])
    p.push_back(f["priority"].get<int>());
  return p;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string l; std::getline(in, l);)
    out.push_back(l);
  return out;
}

// ---- step time: ±3.0 % inclusive ------------------------------------------

TEST(CompareVerdict, StepTimeRegressionBoundary) {
  // 100 -> 103: delta 3, pct = 100*3/100 = 3.0 exactly: a regression.
  EXPECT_EQ(status(summary(100, 1000), summary(103, 1000)), "REGRESSION");
  EXPECT_EQ(why(summary(100, 1000), summary(103, 1000)), "CPU Step Time increased by 3.0%.");
  // 100 -> 102.97: pct 2.97 (just below): equivalent.
  EXPECT_EQ(status(summary(100, 1000), summary(102.97, 1000)), "EQUIVALENT");
  // 100 -> 110: well above.
  EXPECT_EQ(why(summary(100, 1000), summary(110, 1000)), "CPU Step Time increased by 10.0%.");
}

TEST(CompareVerdict, StepTimeImprovementBoundary) {
  EXPECT_EQ(status(summary(100, 1000), summary(97, 1000)), "IMPROVEMENT");
  EXPECT_EQ(why(summary(100, 1000), summary(97, 1000)), "CPU Step Time decreased by 3.0%.");
  EXPECT_EQ(status(summary(100, 1000), summary(97.03, 1000)), "EQUIVALENT");
  const Json c = compare(summary(100, 1000), summary(97, 1000));
  EXPECT_EQ(c["verdict"]["outcome"], "improvement");
  EXPECT_EQ(c["verdict"]["severity"], "info");
  EXPECT_EQ(c["verdict"]["summary"], "Improvement");
  EXPECT_EQ(c["verdict"]["action"], "No immediate action is required from this comparison.");
  EXPECT_EQ(c["verdict"]["primary_domain"], "step_time");
  EXPECT_EQ(c["verdict"]["primary_metric"], "step_time_ms");
  // Findings: IMPROVEMENT (6) then EQUIVALENT (11); top_changes drops EQUIVALENT.
  EXPECT_EQ(priorities(c), (std::vector<int>{6, 11}));
  ASSERT_EQ(c["verdict"]["top_changes"].size(), 1u);
  EXPECT_EQ(c["verdict"]["top_changes"][0]["significance"], "material");
}

// ---- step memory: ±10.0 % inclusive ---------------------------------------

TEST(CompareVerdict, MemoryBoundaries) {
  // 1000 -> 1100: pct = 100*100/1000 = 10.0 exactly.
  EXPECT_EQ(status(summary(100, 1000), summary(100, 1100)), "REGRESSION");
  EXPECT_EQ(why(summary(100, 1000), summary(100, 1100)), "Step memory increased by 10.0%.");
  EXPECT_EQ(status(summary(100, 1000), summary(100, 1099)), "EQUIVALENT");  // 9.9 %
  EXPECT_EQ(status(summary(100, 1000), summary(100, 900)), "IMPROVEMENT");
  EXPECT_EQ(why(summary(100, 1000), summary(100, 900)), "Step memory decreased by 10.0%.");
  EXPECT_EQ(status(summary(100, 1000), summary(100, 901)), "EQUIVALENT");  // -9.9 %
}

TEST(CompareVerdict, MixedBothWays) {
  const Json faster_bigger = compare(summary(100, 1000), summary(97, 1100));
  EXPECT_EQ(faster_bigger["verdict"]["status"], "MIXED");
  EXPECT_EQ(faster_bigger["verdict"]["why"], "CPU Step Time improved, but step memory worsened.");
  EXPECT_EQ(faster_bigger["verdict"]["outcome"], "mixed");
  EXPECT_EQ(faster_bigger["verdict"]["severity"], "warning");
  EXPECT_EQ(faster_bigger["verdict"]["action"],
            "Inspect the changed section before drawing strong conclusions.");
  // Every rule is evaluated: MIXED 4, IMPROVEMENT 6, REGRESSION 7, EQUIVALENT 11.
  EXPECT_EQ(priorities(faster_bigger), (std::vector<int>{4, 6, 7, 11}));
  EXPECT_EQ(faster_bigger["verdict"]["top_changes"].size(), 3u);
  EXPECT_EQ(why(summary(100, 1000), summary(103, 900)),
            "Step memory improved, but CPU Step Time worsened.");
  // Step just inside the band: no MIXED, only the memory regression.
  EXPECT_EQ(status(summary(100, 1000), summary(97.03, 1100)), "REGRESSION");
}

TEST(CompareVerdict, DiagnosisWorsened) {
  // Equal numbers, worse step diagnosis (BALANCED 1 -> INPUT STRAGGLER 3).
  const Json c =
      compare(summary(100, 1000), summary(100, 1000, "INPUT STRAGGLER", "HIGH PRESSURE"));
  EXPECT_EQ(c["verdict"]["why"], "Step time diagnosis worsened from BALANCED to INPUT STRAGGLER.");
  EXPECT_EQ(c["verdict"]["primary_metric"], "diagnosis");
  // Rule 10 is skipped when rule 9 fired.
  EXPECT_EQ(priorities(c), (std::vector<int>{9, 11}));
  EXPECT_EQ(why(summary(100, 1000), summary(100, 1000, "BALANCED", "MEMORY CREEP")),
            "Step memory diagnosis worsened from BALANCED to MEMORY CREEP.");
  // Same rank (INPUT-BOUND 2 -> H2D-BOUND 2) and better ones are not regressions.
  EXPECT_EQ(status(summary(100, 1000, "INPUT-BOUND"), summary(100, 1000, "H2D-BOUND")),
            "EQUIVALENT");
  EXPECT_EQ(status(summary(100, 1000, "STRAGGLER"), summary(100, 1000)), "EQUIVALENT");
}

TEST(CompareVerdict, DiagnosisChangedWithPartialSupport) {
  Json b = summary(100, 1000, "RESIDUAL-HEAVY");
  b["step_time"]["global"]["average"]["residual_ms"] = nullptr;
  const Json c = compare(summary(100, 1000), b);
  EXPECT_EQ(c["verdict"]["status"], "INCONCLUSIVE");
  EXPECT_EQ(c["verdict"]["why"],
            "Step time diagnosis changed, but supporting metrics are partial.");
  EXPECT_EQ(c["verdict"]["summary"], "Partially comparable");
  EXPECT_EQ(c["verdict"]["comparability"]["overall"]["state"], "partial");
  EXPECT_EQ(c["verdict"]["comparability"]["overall"]["reason"], c["verdict"]["why"]);
  EXPECT_EQ(c["verdict"]["comparability"]["step_time"]["state"], "partial");
  EXPECT_EQ(c["verdict"]["comparability"]["step_memory"]["state"], "comparable");
}

TEST(CompareVerdict, PartialAndInsufficient) {
  Json b = summary(110, 1000);
  b["step_memory"] = Json::object();  // a section without numbers
  const Json partial = compare(summary(100, 1000), b);
  EXPECT_EQ(partial["verdict"]["status"], "INCONCLUSIVE");
  EXPECT_EQ(partial["verdict"]["why"], "Primary compare sections are only partially comparable.");
  EXPECT_EQ(partial["verdict"]["summary"], "Partially comparable");
  EXPECT_EQ(partial["verdict"]["comparability"]["step_memory"]["state"], "missing_one_side");
  // No EQUIVALENT 11: step time changed and the memory diagnosis went from
  // BALANCED to n/a, so nothing stayed stable (TraceML lists it anyway).
  EXPECT_EQ(priorities(partial), (std::vector<int>{2, 5}));

  // Both primary sections missing on both sides (a summary without them).
  Json bare = summary(100, 1000);
  bare.erase("step_time");
  bare.erase("step_memory");
  const Json none = compare(bare, bare);
  EXPECT_EQ(none["verdict"]["status"], "INCONCLUSIVE");
  EXPECT_EQ(none["verdict"]["why"], "Primary compare sections are not comparable.");
  EXPECT_EQ(none["verdict"]["summary"], "Inconclusive");
  EXPECT_EQ(none["verdict"]["outcome"], "unclear");
  EXPECT_EQ(none["verdict"]["action"],
            "Re-run or compare with matching TraceML summary coverage before drawing strong "
            "conclusions.");
  EXPECT_EQ(none["availability"]["step_time"], false);
  EXPECT_EQ(none["availability"]["system"], true);
  EXPECT_EQ(none["verdict"]["comparability"]["overall"]["state"], "insufficient");
  EXPECT_EQ(priorities(none), (std::vector<int>{1}));

  // Missing on one side only: the why names it.
  EXPECT_EQ(why(bare, summary(100, 1000)),
            "Primary compare sections are not comparable; signals are missing on run A or run B.");
}

// ---- clocks ---------------------------------------------------------------

TEST(CompareClock, GpuWhenBothMeasureItElseCpuWithANote) {
  Json a = summary(100, 1000);
  Json b = summary(100, 1000);
  a["step_time"]["global"]["average"]["step_time_gpu_ms"] = 90.0;
  b["step_time"]["global"]["average"]["step_time_gpu_ms"] = 99.0;
  const Json gpu = compare(a, b);
  EXPECT_EQ(gpu["sections"]["step_time"]["comparison_clock"], "gpu");
  EXPECT_EQ(gpu["sections"]["step_time"]["metrics"]["step_time_ms"]["label"], "GPU Step Time");
  EXPECT_EQ(gpu["verdict"]["why"], "GPU Step Time increased by 10.0%.");  // 100*9/90

  b["step_time"]["global"]["average"]["step_time_gpu_ms"] = nullptr;
  const Json cpu = compare(a, b);
  EXPECT_EQ(cpu["sections"]["step_time"]["comparison_clock"], "cpu");
  EXPECT_EQ(cpu["sections"]["step_time"]["notes"][0],
            "Step Time is compared on the CPU clock because run B has no measured GPU step time.");
  EXPECT_EQ(cpu["verdict"]["status"], "EQUIVALENT");

  b["step_time"]["global"]["average"]["step_time_cpu_ms"] = nullptr;
  const Json none = compare(a, b);
  EXPECT_TRUE(none["sections"]["step_time"]["comparison_clock"].is_null());
  EXPECT_EQ(none["sections"]["step_time"]["metrics"]["step_time_ms"]["label"], "Step Time");
  EXPECT_EQ(none["sections"]["step_time"]["notes"][0],
            "Step Time metrics are unavailable because the summaries have no common measured GPU "
            "or CPU clock.");
  EXPECT_EQ(none["verdict"]["why"], "Primary compare sections are only partially comparable.");
}

TEST(CompareClock, PhasesNeedTheSameDiagnosisClock) {
  Json b = summary(100, 1000);
  b["step_time"]["global"]["window"]["diagnosis_clock"] = "gpu";
  const Json c = compare(summary(100, 1000), b);
  const Json& m = c["sections"]["step_time"]["metrics"];
  EXPECT_TRUE(m["input_ms"]["lhs"].is_null());
  EXPECT_TRUE(m["h2d_ms"]["rhs"].is_null());
  EXPECT_TRUE(m["dominant_phase"]["lhs"].is_null());
  EXPECT_EQ(c["sections"]["step_time"]["notes"].back(),
            "Selected-clock phase metrics are unavailable because their clocks differ or are "
            "missing (A: cpu, B: gpu).");
  const Json same = compare(summary(100, 1000), summary(100, 1000));
  EXPECT_EQ(same["sections"]["step_time"]["metrics"]["input_ms"]["lhs"], 1.0);
  // backward 20 is the largest of input/h2d/forward/backward/optimizer.
  EXPECT_EQ(same["sections"]["step_time"]["metrics"]["dominant_phase"]["lhs"], "backward");
  EXPECT_TRUE(same["sections"]["step_time"]["notes"].empty());
}

TEST(CompareMetrics, KeyOrderDeltaAndPct) {
  const Json c = compare(summary(100, 1000), summary(110, 1000));
  std::vector<std::string> keys;
  for (const auto& [k, v] : c.items())
    keys.push_back(k);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"schema_version", "generated_at", "lhs", "rhs", "warnings",
                                      "sections", "availability", "overview", "text", "verdict"}));
  const Json& m = c["sections"]["step_time"]["metrics"]["step_time_ms"];
  EXPECT_EQ(m.dump(), R"({"label":"CPU Step Time","unit":"ms","lhs":100.0,"rhs":110.0,)"
                      R"("delta":10.0,"pct_change":10.0,"delta_unit":"ms",)"
                      R"("direction":"higher_is_worse"})");
  // A zero baseline has a delta but no pct_change.
  const Json z = compare(summary(0, 1000), summary(1, 1000));
  EXPECT_EQ(z["sections"]["step_time"]["metrics"]["step_time_ms"]["delta"], 1.0);
  EXPECT_TRUE(z["sections"]["step_time"]["metrics"]["step_time_ms"]["pct_change"].is_null());
  EXPECT_EQ(c["lhs"]["label"], "run_a");
  EXPECT_EQ(c["lhs"]["file_name"], "final_summary.json");
  EXPECT_EQ(c["lhs"]["parent_name"], "run_a");
}

TEST(CompareMetrics, GeneratedAtIsTheNewerInput) {
  Json a = summary(100, 1000);
  Json b = summary(100, 1000);
  a["generated_at"] = "2026-08-06T01:00:00.000000+00:00";
  EXPECT_EQ(compare(a, b)["generated_at"], "2026-08-06T01:00:00.000000+00:00");
  EXPECT_EQ(compare(b, a)["generated_at"], "2026-08-06T01:00:00.000000+00:00");
  a.erase("generated_at");
  EXPECT_EQ(compare(a, b)["generated_at"], "2026-08-05T12:00:00.000000+00:00");
}

// ---- legacy schema 1 and the spec §6.4 example ------------------------------

/// The legacy inputs of the spec's example: total_step_ms, dataloader_ms.
Json legacy(double total, double fetch, double h2d, double compute, double residual,
            double peak_gib, double skew_pct, const std::string& mem_status) {
  Json s;
  s["schema_version"] = 1;
  s["system"] = Json{{"global", Json{{"average", Json{{"cpu_percent", 25.0},
                                                      {"ram_bytes", 4 * kGiB},
                                                      {"gpu_util_percent", 50.0},
                                                      {"gpu_mem_percent", 20.0}}}}}};
  s["process"] =
      Json{{"global", Json{{"average", Json{{"cpu_percent", 80.0}, {"ram_bytes", 2 * kGiB}}}}}};
  s["step_time"] = Json{{"diagnosis", Json{{"status", "COMPUTE-BOUND"}}},
                        {"global", Json{{"window", Json{{"diagnosis_clock", "cpu"}}},
                                        {"average", Json{{"total_step_ms", total},
                                                         {"dataloader_ms", fetch},
                                                         {"h2d_ms", h2d},
                                                         {"compute_ms", compute},
                                                         {"residual_ms", residual}}}}}};
  const double worst = peak_gib * kGiB;
  const double median = worst / (1.0 + skew_pct / 100.0);
  s["step_memory"] =
      Json{{"diagnosis", Json{{"status", mem_status}}},
           {"global", Json{{"median", Json{{"peak_reserved_bytes", Json{{"value", median}}}}},
                           {"worst", Json{{"peak_reserved_bytes", Json{{"value", worst}}}}}}}};
  return s;
}

TEST(CompareText, ReproducesTheSpecExample) {
  const Json a = legacy(621.1, 1.3, 2.0, 610.8, 7.0, 6.2, 4.0, "NORMAL");
  const Json b = legacy(735.2, 1.9, 2.4, 720.0, 10.9, 8.9, 12.0, "HIGH MEMORY");
  const Json c = compare(a, b);
  EXPECT_EQ(c["sections"]["step_time"]["comparison_clock"], "cpu");
  EXPECT_EQ(c["sections"]["step_time"]["metrics"]["dataloader_fetch_cpu_ms"]["lhs"], 1.3);
  EXPECT_TRUE(c["warnings"].empty());  // both schema 1
  // REGRESSION 5 (+18.4 %) and the memory REGRESSION 7 (+43.5 %). TraceML
  // lists EQUIVALENT 11 ("Primary training signals stayed stable.") too; we
  // leave it out when nothing stayed stable (issue 30: a Why never hides a
  // change; here step time, memory and the memory diagnosis all changed).
  EXPECT_EQ(priorities(c), (std::vector<int>{5, 7}));
  const std::vector<std::string> expected = {
      "+--------------------------------------------------------------------------------------+",
      "|  TraceML Compare                                                                     |",
      "+--------------------------------------------------------------------------------------+",
      "|                                                                                      |",
      "|  A: run_a                                                                            |",
      "|  B: run_b                                                                            |",
      "|  Delta: B - A                                                                        |",
      "|                                                                                      |",
      "|  Verdict: REGRESSION                                                                 |",
      "|  Why: CPU Step Time increased by 18.4%.                                              |",
      "|                                                                                      |",
      "|  Step Time (CPU comparison clock)                                                    |",
      "|  Metric                       A                 B                 Delta              |",
      "|  Step time diagnosis          COMPUTE-BOUND     COMPUTE-BOUND     same               |",
      // Ours (issue 47): the rows say they are means (a few stalls move a mean,
      // not the median step, which a summary with a spread adds as a row).
      "|  CPU Step Time, mean          621.1 ms          735.2 ms          +114.1 ms (+18.4%) |",
      "|  DataLoader Fetch (CPU), mean 1.3 ms            1.9 ms            +0.6 ms (+46.2%)   |",
      "|  H2D, mean                    2.0 ms            2.4 ms            +0.4 ms (+20.0%)   |",
      "|  Compute, mean                610.8 ms          720.0 ms          +109.2 ms (+17.9%) |",
      "|  Residual, mean               7.0 ms            10.9 ms           +3.9 ms (+55.7%)   |",
      "|                                                                                      |",
      "|  Step Memory                                                                         |",
      "|  Metric                       A                 B                 Delta              |",
      "|  Step memory diagnosis        NORMAL            HIGH MEMORY       changed            |",
      "|  Peak reserved                6.20 GB           8.90 GB           +2.70 GB (+43.5%)  |",
      "|  Memory skew                  4.0%              12.0%             +8.0 pp            |",
      "|                                                                                      |",
      "|  Process                                                                             |",
      "|  Metric                       A                 B                 Delta              |",
      "|  Process diagnosis            n/a               n/a               same               |",
      // Our label: TraceML's "Process CPU avg" does not say that 100% is one core.
      "|  Process CPU (1 core = 100%)  80.0%             80.0%             +0.0 pp            |",
      "|  Process RSS avg              2.0 GB            2.0 GB            +0.0 GB (+0.0%)    |",
      "|                                                                                      |",
      "|  System                                                                              |",
      "|  Metric                       A                 B                 Delta              |",
      "|  System diagnosis             n/a               n/a               same               |",
      "|  System CPU avg               25.0%             25.0%             +0.0 pp            |",
      "|  System RAM avg               4.0 GB            4.0 GB            +0.0 GB (+0.0%)    |",
      "|  GPU util avg                 50.0%             50.0%             +0.0 pp            |",
      "|  GPU memory avg               20.0%             20.0%             +0.0 pp            |",
  };
  const std::vector<std::string> got = lines_of(c["text"].get<std::string>());
  ASSERT_GE(got.size(), expected.size() + 4);
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(got[i], expected[i]) << "line " << i;
  // Our addition: the legacy fallback is said in the Notes block.
  EXPECT_EQ(got[expected.size()], "|" + std::string(86, ' ') + "|");
  EXPECT_EQ(got[expected.size() + 1].substr(0, 10), "|  Notes  ");
  EXPECT_NE(c["text"].get<std::string>().find(
                "- Run A uses schema 1: its step time is the legacy CPU total_step_ms."),
            std::string::npos);
  EXPECT_EQ(got.back(), expected.front());
}

TEST(CompareText, SchemaWarningAndNegativeBytesWithUnits) {
  Json a = legacy(100, 1, 1, 90, 5, 8.0, 0.0, "BALANCED");
  Json b = summary(100, 6.0 * kGiB);
  const Json c = compare(a, b);
  ASSERT_EQ(c["warnings"].size(), 1u);
  EXPECT_EQ(c["warnings"][0].get<std::string>().substr(0, 58),
            "Summary schema versions differ: A uses 1, B uses 1.7. Step");
  const std::string text = c["text"].get<std::string>();
  // Quirk 12 fixed: -2 GiB prints as "-2.00 GB", not "-2147483648 B".
  EXPECT_NE(text.find("8.00 GB           6.00 GB           -2.00 GB (-25.0%)"), std::string::npos)
      << text;
  // Every line is 88 columns.
  for (const std::string& l : lines_of(text))
    EXPECT_EQ(l.size(), 88u) << l;
}

TEST(CompareText, PrimaryDiagnosisLineAndWrapping) {
  Json b = summary(100, 1000, "INPUT STRAGGLER");
  const std::string text = compare(summary(100, 1000), b)["text"].get<std::string>();
  EXPECT_NE(text.find("|  Primary diagnosis: BALANCED -> INPUT STRAGGLER (changed)"),
            std::string::npos);
  // The schema warning is longer than 84 columns and wraps with a 2-space indent.
  Json a = summary(100, 1000);
  a["schema_version"] = 1.6;
  const std::vector<std::string> lines = lines_of(compare(a, b)["text"].get<std::string>());
  bool wrapped = false;
  for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i].rfind("|  - Summary schema versions differ", 0) == 0) {
      wrapped = lines[i + 1].rfind("|    ", 0) == 0;
      EXPECT_EQ(lines[i].size(), 88u);
    }
  }
  EXPECT_TRUE(wrapped);
}

TEST(CompareText, BoxIsAlignedWithNonAsciiStatuses) {
  // The box pads by display columns, as the report does: before, it padded
  // by bytes and each "É" pulled the right border one column in.
  const Json c = compare(summary(100, 1000, "ÉQUILIBRÉ"), summary(100, 1000));
  const std::string text = c["text"].get<std::string>();
  ASSERT_NE(text.find("ÉQUILIBRÉ -> BALANCED"), std::string::npos);
  for (const std::string& l : lines_of(text)) {
    std::size_t columns = 0;
    for (const char ch : l)
      columns += (static_cast<unsigned char>(ch) & 0xC0) != 0x80 ? 1 : 0;
    EXPECT_EQ(columns, 88u) << l;
  }
}

// ---- noise ----------------------------------------------------------------

TEST(CompareNoise, BeyondOrWithinTheLargerIqr) {
  // Delta 10 ms; IQRs 4 and 12 ms: 10 <= 12 is within noise.
  const Json within =
      compare(with_spread(summary(100, 1000), 98, 102), with_spread(summary(110, 1000), 104, 116));
  const Json& n = within["sections"]["step_time"]["noise"];
  // No medians, no sketches: the mean delta against the band alone.
  EXPECT_EQ(n.dump(), R"({"available":true,"basis":"iqr","delta_ms":10.0,"threshold_ms":12.0,)"
                      R"("beyond_noise":false,"method":"iqr_band","median_delta_ms":null,)"
                      R"("beyond_band":false,"rank_test":null,"rank_test_unavailable":"run A's )"
                      R"x(summary has no per-step distribution (TraceML's or an older one)",)x"
                      R"("direction":"none"})");
  EXPECT_NE(within["text"].get<std::string>().find(
                "|  Noise: the mean's +10.0 ms is within run-to-run noise (mean shift +10.0 ms is"),
            std::string::npos)
      << within["text"].get<std::string>();
  // +10 % inside the noise band: not a regression (DECISIONS 12) ...
  EXPECT_EQ(within["verdict"]["status"], "EQUIVALENT");
  EXPECT_EQ(within["verdict"]["primary_metric"], "step_time_ms");
  EXPECT_EQ(within["verdict"]["why"].get<std::string>().rfind(
                "CPU Step Time mean changed by +10.0%, within run-to-run noise (mean shift", 0),
            0u);
  // ... unless the verdict is strict, TraceML's raw rule.
  traceml::report::CompareOptions strict;
  strict.strict = true;
  const Json raw = compare_summaries(with_spread(summary(100, 1000), 98, 102),
                                     with_spread(summary(110, 1000), 104, 116), inputs(), strict)
                       .json;
  EXPECT_EQ(raw["verdict"]["status"], "REGRESSION");
  EXPECT_EQ(raw["verdict"]["noise_aware"], false);
  EXPECT_NE(raw["text"].get<std::string>().find("The verdict ignores noise (--strict)."),
            std::string::npos);
  // IQRs 4 and 6: 10 > 6 is beyond.
  const Json beyond =
      compare(with_spread(summary(100, 1000), 98, 102), with_spread(summary(110, 1000), 107, 113));
  EXPECT_EQ(beyond["sections"]["step_time"]["noise"]["beyond_noise"], true);
  EXPECT_EQ(beyond["sections"]["step_time"]["noise"]["direction"], "slower");
  EXPECT_EQ(beyond["verdict"]["status"], "REGRESSION");
  EXPECT_EQ(beyond["verdict"]["noise_aware"], true);
  // Delta exactly the band is still within (strictly greater is beyond).
  const Json edge =
      compare(with_spread(summary(100, 1000), 95, 105), with_spread(summary(110, 1000), 108, 112));
  EXPECT_EQ(edge["sections"]["step_time"]["noise"]["beyond_noise"], false);
}

TEST(CompareNoise, StdBasisAndUnavailableCases) {
  Json a = summary(100, 1000);
  Json b = summary(103, 1000);
  a["step_time"]["global"]["spread"] = Json{{"step_time_ms", Json{{"std_ms", 2.0}}}};
  b["step_time"]["global"]["spread"] = Json{{"step_time_ms", Json{{"std_ms", 1.0}}}};
  const Json c = compare(a, b);
  const Json& n = c["sections"]["step_time"]["noise"];
  EXPECT_EQ(n["basis"], "std");
  EXPECT_DOUBLE_EQ(n["threshold_ms"].get<double>(), 2.698);  // 1.349 * 2
  EXPECT_EQ(n["beyond_noise"], true);                        // 3 > 2.698
  // Only one side has a spread: no noise verdict and no note.
  const Json one = compare(with_spread(summary(100, 1000), 98, 102), summary(110, 1000));
  EXPECT_EQ(one["sections"]["step_time"]["noise"].dump(), R"({"available":false})");
  EXPECT_EQ(one["text"].get<std::string>().find("Noise:"), std::string::npos);
  // A selected-clock spread of a GPU-clock run does not describe the CPU clock.
  Json g = with_spread(summary(110, 1000), 104, 116);
  g["step_time"]["global"]["window"]["diagnosis_clock"] = "gpu";
  EXPECT_EQ(compare(with_spread(summary(100, 1000), 98, 102),
                    g)["sections"]["step_time"]["noise"]["available"],
            false);
}

// ---- CPU runs: no step memory on either side (DECISIONS 11) ---------------

TEST(CompareCpuRuns, DecideOnStepTimeAndDiagnoses) {
  EXPECT_EQ(status(cpu_summary(8.7), cpu_summary(49.1)), "REGRESSION");
  EXPECT_EQ(why(cpu_summary(8.7), cpu_summary(49.1)), "CPU Step Time increased by 464.4%.");
  EXPECT_EQ(status(cpu_summary(49.1), cpu_summary(8.7)), "IMPROVEMENT");
  const Json same = compare(cpu_summary(8.7), cpu_summary(8.7));
  EXPECT_EQ(same["verdict"]["status"], "EQUIVALENT");
  EXPECT_EQ(same["verdict"]["why"],
            "Step time and diagnoses stayed stable; step memory was not measured in either run.");
  EXPECT_EQ(same["verdict"]["comparability"]["overall"]["state"], "comparable");
  EXPECT_EQ(same["verdict"]["comparability"]["step_memory"]["state"], "missing_both");
  EXPECT_EQ(same["verdict"]["comparability"]["step_memory"]["measured"], false);
  EXPECT_NE(same["text"].get<std::string>().find(
                "- Step memory was not measured in either run (no GPU step memory, as on every"),
            std::string::npos);
  // A worse step-time diagnosis is still a regression without memory.
  EXPECT_EQ(status(cpu_summary(8.7, "BALANCED"), cpu_summary(8.7, "INPUT-BOUND")), "REGRESSION");
  // One side with memory, the other without: still only partially comparable.
  EXPECT_EQ(compare(summary(8.7, 1000), cpu_summary(8.7))["verdict"]["summary"],
            "Partially comparable");
}

// ---- an EQUIVALENT Why never hides what changed (issue 30, 2.3) ------------

TEST(CompareEquivalentWhy, NamesAChangedDiagnosisOnCpuRuns) {
  // What a new user saw: the primary diagnosis changed, the verdict said
  // "Step time and diagnoses stayed stable".
  const Json c = compare(cpu_summary(8.7, "INPUT-BOUND"), cpu_summary(8.7, "COMPUTE-BOUND"));
  EXPECT_EQ(c["verdict"]["status"], "EQUIVALENT");
  EXPECT_EQ(c["verdict"]["why"],
            "Step time stayed stable, but the primary and step time diagnoses changed from "
            "INPUT-BOUND to COMPUTE-BOUND; step memory was not measured in either run.");
  const std::string text = c["text"].get<std::string>();
  EXPECT_EQ(text.find("diagnoses stayed stable"), std::string::npos) << text;
  EXPECT_NE(text.find("Why: Step time stayed stable, but the primary and step time diagnoses"),
            std::string::npos)
      << text;
  // Only the primary diagnosis changed (the step time one did not).
  Json b = cpu_summary(8.7, "INPUT-BOUND");
  b["primary_diagnosis"]["status"] = "COMPUTE-BOUND";
  EXPECT_EQ(why(cpu_summary(8.7, "INPUT-BOUND"), b),
            "Step time stayed stable, but the primary diagnosis changed from INPUT-BOUND to "
            "COMPUTE-BOUND; step memory was not measured in either run.");
}

TEST(CompareEquivalentWhy, NamesAChangedDiagnosisWithMemory) {
  // Memory measured: TraceML's sentence only while it is true.
  EXPECT_EQ(why(summary(100, 1000), summary(100, 1000)), "Primary training signals stayed stable.");
  // Diagnoses that changed without getting worse (same rank, or better).
  EXPECT_EQ(why(summary(100, 1000, "INPUT-BOUND", "IMBALANCE"),
                summary(100, 1000, "H2D-BOUND", "BALANCED")),
            "Step time and step memory stayed stable, but the primary and step time diagnoses "
            "changed from INPUT-BOUND to H2D-BOUND and the step memory diagnosis changed from "
            "IMBALANCE to BALANCED.");
}

TEST(CompareEquivalentWhy, WithinNoiseNamesAChangedDiagnosis) {
  const Json c = compare(with_spread(summary(100, 1000, "INPUT-BOUND"), 98, 102),
                         with_spread(summary(110, 1000, "COMPUTE-BOUND"), 104, 116));
  EXPECT_EQ(c["verdict"]["status"], "EQUIVALENT");
  const std::string w = c["verdict"]["why"].get<std::string>();
  EXPECT_EQ(w.rfind("CPU Step Time mean changed by +10.0%, within run-to-run noise (", 0), 0u) << w;
  EXPECT_NE(w.find("), but the primary and step time diagnoses changed from INPUT-BOUND to "
                   "COMPUTE-BOUND."),
            std::string::npos)
      << w;
}

TEST(CompareEquivalentWhy, BesideAChangeSaysOnlyWhatStayedStable) {
  // Every rule is evaluated (spec §6.3), so an EQUIVALENT finding sits
  // beside a regression; it must not call the changed signal stable.
  const Json slower = compare(summary(100, 1000), summary(110, 1000));
  ASSERT_EQ(slower["verdict"]["findings"].size(), 2u);
  EXPECT_EQ(slower["verdict"]["findings"][1]["why"], "Step memory and diagnoses stayed stable.");
  const Json mixed = compare(summary(100, 1000), summary(97, 1100));
  EXPECT_EQ(mixed["verdict"]["findings"].back()["why"], "Diagnoses stayed stable.");
  // Nothing stayed stable: no EQUIVALENT finding at all.
  const Json all = compare(summary(100, 1000), summary(110, 1100, "STRAGGLER", "IMBALANCE"));
  for (const Json& f : all["verdict"]["findings"])
    EXPECT_NE(f["status"], "EQUIVALENT") << f.dump();
}

// ---- the rank test on per-step distributions (DECISIONS 12) ----------------

/// Adds the per-clock distribution sketch of `series` (ms per step), as a
/// traceml summary carries it, with the series' quartiles.
Json with_series(Json s, const std::vector<double>& series) {
  const auto k = traceml::analysis::sketch_of(series);
  Json e = Json{{"basis", "per_step"},
                {"steps", k->count},
                {"p25", k->quantiles[5]},
                {"median", k->quantiles[10]},
                {"p75", k->quantiles[15]},
                {"quantiles", k->quantiles},
                {"lag1_autocorrelation", k->lag1 ? Json(*k->lag1) : Json(nullptr)}};
  s["step_time"]["global"]["spread"] = Json{{"step_time_cpu_ms", e}};
  return s;
}

/// `n` steps spread evenly over [mean - half, mean + half], in a shuffled
/// (deterministic) order so that consecutive steps are not positively
/// correlated: stride ~0.38 n, coprime with n.
std::vector<double> steps_around(double mean, double half, int n) {
  int stride = std::max(1, int(std::lround(0.38 * n)));
  while (std::gcd(stride, n) != 1)
    ++stride;
  std::vector<double> v;
  for (int i = 0; i < n; ++i) {
    const int j = (i * stride) % n;
    v.push_back(mean - half + 2.0 * half * (double(j) + 0.5) / double(n));
  }
  return v;
}

TEST(CompareNoise, RankTestAndBandBothDecide) {
  // 100 steps each, spread over +-1 ms (IQR 1 ms); B is 5 % slower and
  // shifted by 5 ms: far beyond the band, p tiny.
  const Json slower = compare(with_series(cpu_summary(100), steps_around(100, 1, 100)),
                              with_series(cpu_summary(105), steps_around(105, 1, 100)));
  const Json& n = slower["sections"]["step_time"]["noise"];
  EXPECT_EQ(n["method"], "rank_test_and_iqr_band");
  EXPECT_EQ(n["rank_test"]["n_lhs"], 100);
  EXPECT_EQ(n["rank_test"]["significant"], true);
  EXPECT_LT(n["rank_test"]["p_value"].get<double>(), 1e-6);
  EXPECT_DOUBLE_EQ(n["rank_test"]["prob_b_slower"].get<double>(), 1.0);
  EXPECT_EQ(n["direction"], "slower");
  EXPECT_EQ(slower["verdict"]["status"], "REGRESSION");

  // +5 % but each run spreads over +-20 ms (IQR 20 ms): the rank test finds
  // the shift (p ~ 0.004, A = 0.62), but the 5 ms median shift is inside the
  // band, which is what two runs of one configuration differ by on a shared
  // machine: within noise.
  const Json wide = compare(with_series(cpu_summary(100), steps_around(100, 20, 100)),
                            with_series(cpu_summary(105), steps_around(105, 20, 100)));
  const Json& w = wide["sections"]["step_time"]["noise"];
  EXPECT_EQ(w["beyond_band"], false);
  EXPECT_EQ(w["rank_test"]["significant"], true);
  EXPECT_NEAR(w["rank_test"]["prob_b_slower"].get<double>(), 1.0 - 0.875 * 0.875 / 2.0, 0.002);
  EXPECT_EQ(w["direction"], "none");
  EXPECT_EQ(wide["verdict"]["status"], "EQUIVALENT");

  // A 1 ms shift (+3.3 %) over +-20 ms: the rank test does not see it.
  const Json faint = compare(with_series(cpu_summary(30), steps_around(30, 20, 100)),
                             with_series(cpu_summary(31), steps_around(31, 20, 100)));
  const Json& fn = faint["sections"]["step_time"]["noise"];
  EXPECT_GT(fn["rank_test"]["p_value"].get<double>(), 0.05);
  EXPECT_EQ(fn["rank_test"]["significant"], false);
  EXPECT_EQ(faint["verdict"]["status"], "EQUIVALENT");

  // Too few steps for the rank test (5 a side, fewer than 8): the band
  // alone decides, and says so.
  const Json few = compare(with_series(cpu_summary(100), steps_around(100, 1, 5)),
                           with_series(cpu_summary(105), steps_around(105, 1, 5)));
  const Json& f = few["sections"]["step_time"]["noise"];
  EXPECT_EQ(f["method"], "iqr_band");
  EXPECT_EQ(f["rank_test"], nullptr);
  EXPECT_EQ(f["beyond_noise"], true);
  EXPECT_EQ(few["verdict"]["status"], "REGRESSION");
  EXPECT_NE(few["text"].get<std::string>().find("no rank test: too few independent steps"),
            std::string::npos)
      << few["text"].get<std::string>();

  // Strongly autocorrelated steps (a slow drift) count as far fewer: the
  // same shift over a drifting series is not significant.
  std::vector<double> drift_a;
  std::vector<double> drift_b;
  for (int i = 0; i < 40; ++i) {
    drift_a.push_back(100.0 + 0.1 * i);
    drift_b.push_back(101.0 + 0.1 * i);
  }
  const Json drift =
      compare(with_series(cpu_summary(102), drift_a), with_series(cpu_summary(103), drift_b));
  const Json& d = drift["sections"]["step_time"]["noise"];
  EXPECT_EQ(d["rank_test"], nullptr);
  EXPECT_NE(d["rank_test_unavailable"].get<std::string>().find("too few independent steps"),
            std::string::npos);
}

TEST(CompareNoise, MixedNeedsTheStepChangeBeyondNoise) {
  // Step -10 % inside a wide band, memory +20 %: a memory regression, not MIXED.
  Json a = with_series(summary(100, 1000), steps_around(100, 40, 100));
  Json b = with_series(summary(90, 1200), steps_around(90, 40, 100));
  EXPECT_EQ(status(a, b), "REGRESSION");
  EXPECT_EQ(why(a, b), "Step memory increased by 20.0%.");
  traceml::report::CompareOptions strict;
  strict.strict = true;
  EXPECT_EQ(compare_summaries(a, b, inputs(), strict).status, "MIXED");
}

// ---- gates ----------------------------------------------------------------

/// The typed result the gates read.
traceml::report::CompareReport report(const Json& a, const Json& b) {
  return compare_summaries(a, b, inputs()).report;
}

TEST(CompareGate, EachGatePassesAndFails) {
  const auto regress = report(summary(100, 1000), summary(105, 1000));  // +5 %
  GateOptions o;
  o.fail_on_regression = true;
  auto checks = evaluate_gates(regress, o);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_FALSE(checks[0].passed);
  EXPECT_EQ(gate_line(checks), "gate: FAIL (verdict REGRESSION: CPU Step Time increased by 5.0%.)");
  EXPECT_EQ(gate_line(evaluate_gates(report(summary(100, 1000), summary(97, 1100)), o)),
            "gate: FAIL (verdict MIXED: CPU Step Time improved, but step memory worsened.)");
  EXPECT_EQ(gate_line(evaluate_gates(report(summary(100, 1000), summary(97, 1000)), o)),
            "gate: PASS");

  GateOptions step;
  step.max_step_time_regression_pct = 5.0;  // +5.0 % is not "more than 5 %"
  EXPECT_EQ(gate_line(evaluate_gates(regress, step)), "gate: PASS");
  step.max_step_time_regression_pct = 4.9;
  EXPECT_EQ(gate_line(evaluate_gates(regress, step)),
            "gate: FAIL (step time changed by +5.0% (limit +4.9%))");

  GateOptions mem;
  mem.max_memory_regression_pct = 10.0;
  EXPECT_EQ(gate_line(evaluate_gates(report(summary(100, 1000), summary(100, 1100)), mem)),
            "gate: PASS");
  EXPECT_EQ(gate_line(evaluate_gates(report(summary(100, 1000), summary(100, 1101)), mem)),
            "gate: FAIL (peak reserved memory changed by +10.1% (limit +10.0%))");

  GateOptions diag;
  diag.fail_on_diagnosis_change = true;
  EXPECT_EQ(gate_line(evaluate_gates(regress, diag)), "gate: PASS");
  EXPECT_EQ(gate_line(evaluate_gates(
                report(summary(100, 1000), summary(100, 1000, "BALANCED", "IMBALANCE")), diag)),
            "gate: FAIL (step memory diagnosis BALANCED -> IMBALANCE changed)");
}

TEST(CompareGate, StepLimitPassesAChangeWithinNoiseUnlessStrict) {
  const auto wide = report(with_series(cpu_summary(100), steps_around(100, 20, 100)),
                           with_series(cpu_summary(108), steps_around(108, 20, 100)));
  GateOptions o;
  o.max_step_time_regression_pct = 5.0;
  const auto checks = evaluate_gates(wide, o);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_TRUE(checks[0].passed);
  EXPECT_EQ(checks[0].message,
            "step time changed by +8.0% (limit +5.0%) but within run-to-run noise (median shift "
            "+8.0 ms is inside the IQR band 19.8 ms; Mann-Whitney U p<0.001 < alpha 0.05, "
            "n=100/100 steps)");
  EXPECT_EQ(checks[0].statistics["noise"]["rank_test"]["n_rhs"], 100);
  // The summary line says what the pass rests on.
  EXPECT_EQ(gate_line(checks),
            "gate: PASS (max-step-time-regression passed: +8.0% is within run-to-run noise "
            "(median shift +8.0 ms is inside the IQR band 19.8 ms; Mann-Whitney U p<0.001 < "
            "alpha 0.05, n=100/100 steps))");
  // --strict: the raw threshold.
  o.strict = true;
  const auto strict = evaluate_gates(wide, o);
  EXPECT_FALSE(strict[0].passed);
  EXPECT_NE(strict[0].message.find("--strict: noise not considered"), std::string::npos);
  // A change beyond noise fails and says why.
  o.strict = false;
  const auto clear = report(with_series(cpu_summary(100), steps_around(100, 1, 100)),
                            with_series(cpu_summary(108), steps_around(108, 1, 100)));
  const auto fail = evaluate_gates(clear, o);
  EXPECT_FALSE(fail[0].passed);
  EXPECT_NE(fail[0].message.find(", beyond run-to-run noise (median shift +8.0 ms exceeds"),
            std::string::npos)
      << fail[0].message;
}

TEST(CompareGate, MemoryLimitIsSkippedWhenNeitherRunMeasuredMemory) {
  const auto c = report(cpu_summary(100), cpu_summary(100));
  GateOptions o;
  o.max_memory_regression_pct = 5.0;
  auto checks = evaluate_gates(c, o);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_TRUE(checks[0].passed);
  EXPECT_TRUE(checks[0].skipped);
  EXPECT_EQ(traceml::report::gate_check_lines(checks)[0],
            "gate check max-memory-regression: SKIPPED: neither run measured step memory (CPU "
            "runs have none; --require-memory fails instead)");
  EXPECT_EQ(gate_line(checks),
            "gate: PASS (max-memory-regression skipped: neither run measured step memory (CPU "
            "runs have none; --require-memory fails instead))");
  const std::string x = junit_xml(checks, "s");
  EXPECT_NE(x.find(R"(tests="1" failures="0" errors="0" skipped="1")"), std::string::npos) << x;
  EXPECT_NE(x.find(R"(<skipped message="neither run measured step memory)"), std::string::npos);
  const Json j = traceml::report::gate_json(checks);
  EXPECT_EQ(j["status"], "PASS");
  EXPECT_EQ(j["checks"][0]["status"], "SKIPPED");
  // --require-memory turns the skip into a failure.
  o.require_memory = true;
  checks = evaluate_gates(c, o);
  EXPECT_FALSE(checks[0].passed);
  EXPECT_FALSE(checks[0].skipped);
  EXPECT_EQ(gate_line(checks),
            "gate: FAIL (neither run measured step memory, and --require-memory asks for it)");
  // One side with memory and the other without is not a skip: it fails.
  o.require_memory = false;
  EXPECT_FALSE(evaluate_gates(report(summary(100, 1000), cpu_summary(100)), o)[0].passed);
}

TEST(CompareGate, UncomparableMetricFailsAndReasonsJoin) {
  Json b = summary(100, 1000);
  b["step_time"]["global"]["average"]["step_time_cpu_ms"] = nullptr;
  b["step_memory"] = Json::object();
  GateOptions o;
  o.max_step_time_regression_pct = 5.0;
  o.max_memory_regression_pct = 10.0;
  const auto checks = evaluate_gates(report(summary(100, 1000), b), o);
  ASSERT_EQ(checks.size(), 2u);
  EXPECT_EQ(checks[0].name, "max-step-time-regression");
  EXPECT_EQ(gate_line(checks),
            "gate: FAIL (step time is not comparable between A and B, so the 5.0% limit cannot "
            "be checked; peak reserved memory is not comparable between A and B, so the 10.0% "
            "limit cannot be checked)");
}

// Drift found when the report was split: the gate read a number as "any
// JSON number" while compare and the text read it as a finite one, and wrote
// its own sign ("+-0.0%").
TEST(CompareGate, AnOverflowingChangeReadsAsTheFileHoldsIt) {
  // 1e-6 ms -> 1e306 ms: the delta is finite, its percentage is not.
  const Json c = compare(summary(1e-6, 1000), summary(1e306, 1000));
  EXPECT_TRUE(c["sections"]["step_time"]["metrics"]["step_time_ms"]["pct_change"].is_null());
  GateOptions o;
  o.max_step_time_regression_pct = 5.0;
  EXPECT_EQ(gate_line(evaluate_gates(report(summary(1e-6, 1000), summary(1e306, 1000)), o)),
            "gate: FAIL (step time is not comparable between A and B, so the 5.0% limit cannot "
            "be checked)");
}

TEST(CompareGate, NegativeZeroChangeIsSignedOnce) {
  traceml::report::CompareReport c;
  traceml::report::MetricDelta step;
  step.key = "step_time_ms";
  step.pct_change = -0.0;
  c.step_time.metrics.push_back(step);
  GateOptions o;
  o.max_step_time_regression_pct = 5.0;
  const auto checks = evaluate_gates(c, o);
  ASSERT_EQ(checks.size(), 1u);
  EXPECT_EQ(checks[0].message, "step time changed by -0.0% (limit +5.0%)");
}

TEST(CompareGate, JunitEscapesAndCounts) {
  EXPECT_EQ(xml_escape(R"(a<b>&"c'd)"), "a&lt;b&gt;&amp;&quot;c&apos;d");
  std::vector<traceml::report::GateCheck> checks = {
      {"fail-on-regression", true, "ok"}, {"max-step-time-regression", false, "x<5 & \"y\""}};
  const std::string x = junit_xml(checks, "traceml compare a vs b");
  EXPECT_NE(x.find(R"(<testsuite name="traceml compare a vs b" tests="2" failures="1")"),
            std::string::npos);
  EXPECT_NE(x.find(R"(<failure type="gate" message="x&lt;5 &amp; &quot;y&quot;">)"),
            std::string::npos);
  EXPECT_EQ(x.find("x<5"), std::string::npos);
}

// ---- labels ---------------------------------------------------------------

// Issue 31: compare is computed once as a typed result, then written as JSON
// and as text; the gate decides from the typed result, not from the JSON.
TEST(CompareResult, WrittenFromTheTypedResultAndGatedOnIt) {
  using traceml::report::VerdictStatus;
  const Json a = summary(100, 1000);
  const Json b = summary(105, 1000);
  traceml::report::CompareReport r = traceml::report::compute_compare(a, b, inputs());
  EXPECT_EQ(r.verdict.status, VerdictStatus::Regression);
  EXPECT_EQ(r.step_time.metric("step_time_ms").pct_change, 5.0);
  EXPECT_EQ(r.step_time.comparison_clock, "cpu");
  const std::string text = render_compare_text(r);
  EXPECT_EQ(traceml::report::compare_json(r, text), compare(a, b));

  GateOptions o;
  o.fail_on_regression = true;
  EXPECT_FALSE(evaluate_gates(r, o)[0].passed);
  // What the gate and both writers read is the typed verdict.
  r.verdict.status = VerdictStatus::Equivalent;
  EXPECT_TRUE(evaluate_gates(r, o)[0].passed);
  EXPECT_EQ(traceml::report::compare_json(r, text)["verdict"]["status"], "EQUIVALENT");
  EXPECT_NE(render_compare_text(r).find("Verdict: EQUIVALENT"), std::string::npos);
}

TEST(CompareLabels, SanitizeAndGenericStems) {
  EXPECT_EQ(sanitize_label("  my run (v2)!  "), "my_run_v2");
  EXPECT_EQ(sanitize_label("__.-x-._"), "x");
  EXPECT_EQ(sanitize_label("$$$"), "run");
  EXPECT_EQ(compare_labels("/logs/run_a/final_summary.json", "/logs/run_b/final_summary.json"),
            (std::pair<std::string, std::string>{"run_a", "run_b"}));
  EXPECT_EQ(compare_labels("/x/base.json", "/y/cand.json"),
            (std::pair<std::string, std::string>{"base", "cand"}));
  EXPECT_EQ(compare_labels("/x/a.json", "/y/a.json"),
            (std::pair<std::string, std::string>{"x_a", "y_a"}));
  EXPECT_EQ(compare_labels("/x/a.json", "/x/a.json"),
            (std::pair<std::string, std::string>{"lhs_a", "rhs_a"}));
}

}  // namespace
