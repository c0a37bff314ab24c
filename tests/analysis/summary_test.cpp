// The run-level verdict (spec §4.5) and the meta block (spec §5.2).
#include <gtest/gtest.h>

#include "analysis/summary.hpp"
#include "step_time_test_support.hpp"

namespace traceml::analysis {
namespace {

using testing::add_steps;
using testing::Phases;

model::SystemSample system_sample(double ts, std::vector<double> gpu_utils) {
  model::SystemSample s;
  s.node_rank = 0;
  s.ts = ts;
  s.cpu_percent = 20.0;
  s.ram_used_bytes = 8e9;
  s.ram_total_bytes = 64e9;
  for (std::size_t i = 0; i < gpu_utils.size(); ++i) {
    s.gpus.push_back({int(i), gpu_utils[i], 1e9, 80e9, 50.0, 100.0, 700.0});
  }
  return s;
}

TEST(PrimaryDiagnosis, PromotesAPhaseShareFindingWithRoundedEvidence) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {10, 0, 30, 50, 10, 90});
  for (int i = 0; i < 5; ++i)
    t.system.push_back(system_sample(100.0 + i, {24.04}));
  const Summary s = summarize(t);
  const Primary& p = s.primary;
  EXPECT_EQ(p.kind, "INPUT_BOUND");
  EXPECT_EQ(p.status, "INPUT-BOUND");
  EXPECT_EQ(p.severity, Severity::Warn);
  EXPECT_EQ(p.section, "step_time");
  EXPECT_EQ(p.summary, "Input wait is 10.0% of the typical CPU Step Time.");
  EXPECT_EQ(p.evidence.dump(),
            R"({"type":"phase_share","basis":"average","steps_analyzed":30,"step_time_ms":100.0,)"
            R"("traced_step_time_ms":90.0,"diagnosis_clock":"cpu","dataloader_fetch_cpu_ms":10.0,)"
            R"("input_wait_ms":10.0,"h2d_ms":0.0,"compute_ms":90.0,"residual_ms":0.0,)"
            R"("gpu_util_avg_percent":24.04,"score":0.1,)"
            R"("score_basis":"median_per_rank_step_time_share",)"
            R"("score_denominator":"selected-clock Step Time per rank"})");
}

TEST(PrimaryDiagnosis, ComputeBoundHasNoScoreKeys) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {0, 0, 45, 45, 10, 100});
  const Summary s = summarize(t);
  EXPECT_EQ(s.primary.kind, "COMPUTE_BOUND");
  EXPECT_FALSE(s.primary.evidence.contains("score"));
  EXPECT_TRUE(s.primary.evidence["gpu_util_avg_percent"].is_null());  // no system samples
}

TEST(PrimaryDiagnosis, StragglerComparesMedianAndWorstRank) {
  model::Telemetry t;
  add_steps(t, 0, 1, 24, {100, 0, 20, 20, 0, 40});
  add_steps(t, 1, 1, 24, {0, 0, 20, 120, 0, 140});
  add_steps(t, 2, 1, 24, {0, 0, 20, 120, 0, 140});
  const Primary p = summarize(t).primary;
  EXPECT_EQ(p.kind, "INPUT_STRAGGLER");
  // input: r0 100, r1 0, r2 0 -> median 0 (r1, the lower rank), worst 100 (r0).
  // Then the score and its parts (spec §4.5): visible backward r0 20 against
  // the victim r1's 120 is a cost of 100 ms over the victim's 140 ms step.
  EXPECT_EQ(p.evidence.dump(),
            R"({"type":"rank_comparison","steps_analyzed":24,"gpu_util_avg_percent":null,)"
            R"("metric":"input_wait_ms","phase":"input","median":{"rank":1,"value_ms":0.0},)"
            R"("worst":{"rank":0,"value_ms":100.0},"delta_ms":100.0,"ratio":null,)"
            R"("score":)" +
                Json(100.0 / 140.0).dump() +
                R"(,"score_basis":"visible_cost_ms / victim_step_time_ms",)"
                R"("score_numerator_ms":100.0,"score_denominator_ms":140.0})");
}

TEST(PrimaryDiagnosis, ComputeStragglerCarriesTheScoreAndItsParts) {
  model::Telemetry t;
  // r0's forward is 100 ms longer: it reaches backward's all-reduce last, so
  // the others wait there (visible backward 20 vs 120 -> cost 100 of 240).
  add_steps(t, 0, 1, 30, {0, 0, 120, 20, 0, 140});
  add_steps(t, 1, 1, 30, {0, 0, 20, 120, 0, 140});
  const Primary p = summarize(t).primary;
  ASSERT_EQ(p.kind, "COMPUTE_STRAGGLER");
  const auto& e = p.evidence;
  EXPECT_EQ(e["metric"], "forward_ms");
  EXPECT_EQ(e["score_basis"], "visible_cost_ms / victim_step_time_ms");
  EXPECT_DOUBLE_EQ(e["score_numerator_ms"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(e["score_denominator_ms"].get<double>(), 140.0);
  EXPECT_NEAR(e["score"].get<double>(), 100.0 / 140.0, 1e-15);  // unrounded
}

TEST(PrimaryDiagnosis, PlainStragglerListsComparisonsAndScoreParts) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {0, 0, 20, 20, 0, 140});
  add_steps(t, 1, 1, 30, {0, 0, 20, 120, 0, 140});
  const Primary p = summarize(t).primary;
  ASSERT_EQ(p.kind, "STRAGGLER");
  const auto& e = p.evidence;
  ASSERT_EQ(e["comparisons"].size(), 4u);
  EXPECT_EQ(e["comparisons"][0]["metric"], "input_wait_ms");
  EXPECT_EQ(e["comparisons"][1]["metric"], "compute_ms");
  EXPECT_EQ(e["comparisons"][2]["metric"], "h2d_ms");
  EXPECT_EQ(e["comparisons"][3]["metric"], "residual_ms");
  EXPECT_EQ(e["score_basis"], "visible_cost_ms / victim_step_time_ms");
  EXPECT_DOUBLE_EQ(e["score_numerator_ms"].get<double>(), 100.0);
  EXPECT_DOUBLE_EQ(e["score_denominator_ms"].get<double>(), 140.0);
  EXPECT_NEAR(e["score"].get<double>(), 100.0 / 140.0, 1e-15);  // unrounded
}

TEST(PrimaryDiagnosis, TooFewStepsIsInsufficientData) {
  model::Telemetry t;
  add_steps(t, 0, 1, 1, {1, 0, 1, 1, 1, 3});
  const Primary p = summarize(t).primary;
  EXPECT_EQ(p.kind, "INSUFFICIENT_STEP_TIME_DATA");
  EXPECT_EQ(p.status, "INSUFFICIENT STEP-TIME DATA");
  EXPECT_EQ(p.summary,
            "Not enough completed step-time samples were available for a stable performance "
            "diagnosis.");
  EXPECT_EQ(p.evidence.dump(),
            R"({"type":"insufficient_data","step_time_status":"WARMUP","steps_analyzed":1,)"
            R"("gpu_util_avg_percent":null})");
}

TEST(PrimaryDiagnosis, MissingSignalsAreInsufficientDataWithTheirOwnWording) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {2, std::nullopt, std::nullopt, 60, 10, 90});
  const Primary p = summarize(t).primary;
  EXPECT_EQ(p.kind, "INSUFFICIENT_STEP_TIME_DATA");
  EXPECT_EQ(p.action,
            "Instrument the missing phases; the Step Time section lists the missing signal names.");
  EXPECT_EQ(p.evidence["step_time_status"], "INCOMPLETE DATA");
}

TEST(PrimaryDiagnosis, BalancedWithLowGpuUtilisationIsUnexplained) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {5, 0, 40, 40, 6, 95});
  for (int i = 0; i < 5; ++i)
    t.system.push_back(system_sample(100.0 + i, {20.0}));
  const Primary p = summarize(t).primary;
  EXPECT_EQ(p.kind, "LOW_GPU_UTILIZATION_UNEXPLAINED");
  EXPECT_EQ(p.section, "system");
  EXPECT_EQ(p.evidence.dump(), R"({"type":"utilization_fallback","gpu_util_avg_percent":20.0,)"
                               R"("step_time_status":"BALANCED","steps_analyzed":30})");
}

TEST(PrimaryDiagnosis, BalancedWithHealthyGpuIsNoClearBottleneck) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {5, 0, 40, 40, 6, 95});
  for (int i = 0; i < 5; ++i)
    t.system.push_back(system_sample(100.0 + i, {90.0}));
  const Primary p = summarize(t).primary;
  EXPECT_EQ(p.kind, "NO_CLEAR_PERFORMANCE_BOTTLENECK");
  EXPECT_EQ(p.evidence["type"], "no_clear_bottleneck");
  EXPECT_EQ(p.evidence.begin().key(), "type");  // same key position as phase_share
  EXPECT_EQ(p.evidence["step_time_status"], "BALANCED");
  EXPECT_FALSE(p.evidence.contains("score"));
}

TEST(SummaryMeta, GpusComeFromSystemSamplesFirst) {
  model::Telemetry t;
  t.run.run_name = "  r1 ";
  add_steps(t, 0, 1, 30, {5, 0, 40, 40, 6, 95});
  for (int i = 0; i < 3; ++i)
    t.system.push_back(system_sample(100.0 + i, {90.0, 90.0}));
  const Summary s = summarize(t);
  EXPECT_EQ(*s.meta.run_name, "r1");
  EXPECT_EQ(*s.meta.gpus_observed, 2);
  EXPECT_EQ(*s.meta.nodes_observed, 1);
  EXPECT_EQ(s.meta.mode, "single_node");
  EXPECT_EQ(*s.meta.world_size, 1);
  EXPECT_DOUBLE_EQ(*s.duration_s, 2.0);  // system samples 100..102
}

// DECISIONS 16: the run's duration, not the span of its 1 Hz samples
// (TraceML's duration_s read 1.8 s for 2.8 s of steps).
TEST(SummaryMeta, TheRunsDurationSpansItsStepsAndSamples) {
  model::Telemetry t;
  for (std::int64_t i = 1; i <= 28; ++i) {  // 100 ms steps: 10 ms input wait + 90 ms traced
    model::StepRecord r;
    r.step = i;
    r.ts = 1000.0 + 0.1 * double(i);
    r.events.set(model::Event::InputWait, {10.0, std::nullopt});
    r.events.set(model::Event::TracedStepTime, {90.0, std::nullopt});
    t.steps.push_back(r);
  }
  for (const double ts : {1000.5, 1001.5, 1002.3})
    t.system.push_back(system_sample(ts, {}));
  Summary s = summarize(t);
  EXPECT_NEAR(s.duration_s.value_or(0.0), 1.8, 1e-9);  // TraceML's, kept
  // From step 1's begin (1000.0) to step 28's end (1002.8).
  EXPECT_NEAR(s.run_duration_s.value_or(0.0), 2.8, 1e-9);
  // Work after the last step (an evaluation pass) is the run's too.
  model::ProcessSample p;
  p.ts = 1005.0;
  t.process.push_back(p);
  EXPECT_NEAR(summarize(t).run_duration_s.value_or(0.0), 5.0, 1e-9);
  // A bounded store (collector::RunState) holds the ends in its totals.
  t.totals = model::RunTotals{28, 0, 1006.0, 999.0};
  EXPECT_NEAR(summarize(t).run_duration_s.value_or(0.0), 7.0, 1e-9);
  EXPECT_FALSE(summarize(model::Telemetry{}).run_duration_s.has_value());
}

TEST(SummaryMeta, WithoutSystemSamplesGpusComeFromProcessSamples) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {5, 0, 40, 40, 6, 95});
  add_steps(t, 1, 1, 30, {5, 0, 40, 40, 6, 95});
  for (int r = 0; r < 2; ++r) {
    model::ProcessSample p;
    p.global_rank = r;
    p.ts = 10.0;
    p.gpu = model::ProcessGpu{r, 1e9, 2e9, 80e9};
    t.process.push_back(p);
  }
  EXPECT_EQ(*summarize(t).meta.gpus_observed, 2);
}

TEST(SummaryMeta, WithoutSamplesGpusAreUnknownOnTheCpuClock) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {5, 0, 40, 40, 6, 95});
  const Summary s = summarize(t);
  EXPECT_FALSE(s.meta.gpus_observed.has_value());  // never claim "0 GPUs" unobserved
  EXPECT_FALSE(s.duration_s.has_value());
  model::Telemetry gpu;
  const Phases p{5, 0, 40, 40, 6, 95};
  add_steps(gpu, 0, 1, 30, p, p);
  EXPECT_EQ(*summarize(gpu).meta.gpus_observed, 1);
}

TEST(SummaryMeta, EmptyTelemetryStillGivesFourSections) {
  const Summary s = summarize(model::Telemetry{});
  EXPECT_EQ(s.meta.mode, "no_data");
  EXPECT_FALSE(s.meta.world_size.has_value());
  EXPECT_EQ(s.system.diagnosis().kind, "NO_DATA");
  EXPECT_EQ(s.process.diagnosis().kind, "NO_DATA");
  EXPECT_EQ(s.step_time.diagnosis().kind, "NO_DATA");
  EXPECT_EQ(s.step_memory.diagnosis().kind, "NO_DATA");
  EXPECT_EQ(s.primary.kind, "INSUFFICIENT_STEP_TIME_DATA");
}

TEST(SectionFallback, IsTheSpecPayload) {
  const Section f = fallback_section("step_memory");
  EXPECT_EQ(f.diagnosis().summary, "Section summary unavailable.");
  EXPECT_EQ(f.index_by, "global_rank");
  EXPECT_EQ(f.card, "TraceML Step Memory Summary\n- Status: unavailable");
  EXPECT_EQ(fallback_section("system").index_by, "node_rank");
}

}  // namespace
}  // namespace traceml::analysis
