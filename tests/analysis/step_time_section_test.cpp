// Step Time section (spec §4.1): every rule, threshold boundary, tie, cap,
// gate and the missing-signal logic, on telemetry built in memory.
#include <gtest/gtest.h>

#include "analysis/step_window.hpp"
#include "analysis/summary.hpp"
#include "step_time_test_support.hpp"

namespace traceml::analysis {
namespace {

using testing::add_steps;
using testing::Phases;

Section analyze(const model::Telemetry& t, std::int64_t window = 10000) {
  Options o;
  o.window = window;
  return analyze_step_time(t, o);
}

std::vector<std::string> kinds(const Section& s) {
  std::vector<std::string> k;
  for (const auto& i : s.issues)
    k.push_back(i.kind);
  return k;
}

std::optional<double> avg(const Section& s, const std::string& metric) {
  return s.average.at(*s.metric_index(metric));
}

model::Telemetry one_rank(std::int64_t steps, const Phases& p) {
  model::Telemetry t;
  add_steps(t, 0, 1, steps, p);
  return t;
}

// ---- Spec §7 worked examples --------------------------------------------

TEST(StepTimeRules, E1InputBoundAtTheWarnThreshold) {
  // step = 10 + 90 = 100; input share = 10/100 = 0.10 exactly: fires (>=).
  const Section s = analyze(one_rank(30, {10, 0, 30, 50, 10, 90}));
  ASSERT_EQ(kinds(s), std::vector<std::string>{"INPUT_BOUND"});
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.status, "INPUT-BOUND");
  EXPECT_EQ(i.severity, Severity::Warn);
  EXPECT_DOUBLE_EQ(*i.score, 0.1);
  EXPECT_DOUBLE_EQ(*i.share_pct, 0.1);
  EXPECT_FALSE(i.skew_pct.has_value());  // one rank: no skew
  EXPECT_EQ(i.summary, "Input wait is 10.0% of the typical CPU Step Time.");
  EXPECT_EQ(i.action, "Increase workers, prefetch, or storage throughput.");
  EXPECT_EQ(i.metric, "input_wait");
  EXPECT_EQ(i.phase, "input");
  EXPECT_EQ(i.ranks, std::vector<int>{0});
  EXPECT_EQ(i.evidence.dump(),
            R"({"input_wait_ms":10.0,"traced_step_time_ms":90.0,"step_time_ms":100.0,)"
            R"("input_bound_share":0.1,"diagnosis_clock":"cpu"})");
}

TEST(StepTimeRules, InputJustBelowWarnIsComputeBound) {
  // input 9.99 of 99.99: 0.0999 < 0.10. Compute 90/99.99 = 0.90009 >= 0.90.
  const Section s = analyze(one_rank(30, {9.99, 0, 30, 50, 10, 90}));
  ASSERT_EQ(kinds(s), std::vector<std::string>{"COMPUTE_BOUND"});
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.severity, Severity::Info);
  EXPECT_FALSE(i.score.has_value());  // COMPUTE_BOUND never has a score
  EXPECT_NEAR(*i.share_pct, 90.0 / 99.99, 1e-12);
  EXPECT_EQ(i.summary, "Compute-bound; backward is the largest phase.");  // spec §4.1.11
  EXPECT_EQ(i.phase, "backward");
  EXPECT_EQ(i.metric, "compute");
  EXPECT_EQ(i.ranks, std::vector<int>{0});  // the rule names the overall worst rank
}

TEST(StepTimeRules, E2InputBoundCritAndTheConfidenceGate) {
  const Phases p{20, 0, 30, 40, 10, 80};  // input 20 of 100
  const Section crit = analyze(one_rank(20, p));
  EXPECT_EQ(crit.diagnosis().kind, "INPUT_BOUND");
  EXPECT_EQ(crit.diagnosis().severity, Severity::Crit);
  EXPECT_DOUBLE_EQ(*crit.diagnosis().score, 0.2);
  // 19 steps < min_steps_for_confident_diag: capped at warn.
  const Section capped = analyze(one_rank(19, p));
  EXPECT_EQ(capped.diagnosis().severity, Severity::Warn);
}

TEST(StepTimeRules, InputJustBelowCritIsWarn) {
  const Section s = analyze(one_rank(30, {19.99, 0, 30, 40, 10, 80}));
  EXPECT_EQ(s.diagnosis().kind, "INPUT_BOUND");
  EXPECT_EQ(s.diagnosis().severity, Severity::Warn);
}

TEST(StepTimeRules, E3InputStragglerThenInputBound) {
  model::Telemetry t;
  add_steps(t, 0, 1, 24, {100, 0, 20, 20, 0, 40});
  add_steps(t, 1, 1, 24, {0, 0, 20, 120, 0, 140});
  const Section s = analyze(t);
  ASSERT_EQ(kinds(s), (std::vector<std::string>{"INPUT_STRAGGLER", "INPUT_BOUND"}));
  const Issue& st = s.issues[0];
  EXPECT_EQ(st.status, "INPUT STRAGGLER");
  EXPECT_EQ(st.severity, Severity::Crit);
  // visible backward: r0 20, r1 120 -> cost 100 over victim step 140.
  EXPECT_NEAR(*st.score, 100.0 / 140.0, 1e-12);
  EXPECT_DOUBLE_EQ(*st.skew_pct, *st.score);
  EXPECT_FALSE(st.share_pct.has_value());
  EXPECT_EQ(st.ranks, std::vector<int>{0});
  EXPECT_EQ(st.summary,
            "r0 has excess input wait burden relative to victim r1 (~71.4% impact; ~100.0% of "
            "visible wait cost).");
  EXPECT_EQ(st.action, "Inspect input wait on r0.");
  EXPECT_EQ(st.evidence.dump(),
            R"({"component":"input","culprit_rank":0,"victim_rank":1,"visible_metric":"backward",)"
            R"("visible_culprit_ms":20.0,"visible_victim_ms":120.0,"visible_cost_ms":100.0,)"
            R"("step_time_ms":140.0,"component_excesses_ms":{"input":100.0,"h2d":0.0,)"
            R"("compute":0.0},"component_coverage":{"input":1.0,"h2d":0.0,"compute":0.0}})");
  const Issue& ib = s.issues[1];
  EXPECT_EQ(ib.severity, Severity::Crit);
  EXPECT_NEAR(*ib.score, (100.0 / 140.0) / 2.0, 1e-12);  // median of 0.714 and 0.0
  EXPECT_EQ(ib.ranks, std::vector<int>{0});
  // input skew: median 50, worst 100 -> 1.0
  EXPECT_DOUBLE_EQ(*ib.skew_pct, 1.0);
}

TEST(StepTimeRules, E4OneStepIsWarmup) {
  const Section s = analyze(one_rank(1, {1, 0, 1, 1, 1, 3}));
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "WARMUP");
  EXPECT_EQ(i.summary, "Only 1 step per rank available; diagnosis requires 2.");
  EXPECT_EQ(i.action, "Use a longer run for a stable timing diagnosis.");
  EXPECT_EQ(i.evidence.dump(), R"({"steps_used":1,"worst_rank":0})");
  EXPECT_EQ(i.ranks, std::vector<int>{0});
}

TEST(StepTimeRules, TwoStepsAreEnoughForADiagnosis) {
  const Section s = analyze(one_rank(2, {50, 0, 10, 10, 0, 50}));
  EXPECT_EQ(s.diagnosis().kind, "INPUT_BOUND");
  EXPECT_EQ(s.diagnosis().severity, Severity::Warn);  // capped below 20 steps
}

TEST(StepTimeRules, E5MissingForwardIsIncompleteData) {
  const Section s = analyze(one_rank(30, {2, std::nullopt, std::nullopt, 60, 10, 90}));
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "INCOMPLETE_DATA");
  EXPECT_EQ(i.status, "INCOMPLETE DATA");
  EXPECT_EQ(i.summary, "Missing timing signals prevent a reliable diagnosis: forward.");
  EXPECT_EQ(i.evidence.dump(),
            R"({"missing_signals":["forward"],"signal_coverage":{"forward":"0/1"}})");
  EXPECT_TRUE(i.ranks.empty());
}

TEST(StepTimeRules, E6H2DBoundOnTheGpuClock) {
  const Phases p{0, 12, 20, 30, 10, 60};
  model::Telemetry t;
  add_steps(t, 0, 1, 60, p, p);
  const Section s = analyze(t);
  EXPECT_EQ(*s.window.diagnosis_clock, "gpu");
  ASSERT_EQ(kinds(s), std::vector<std::string>{"H2D_BOUND"});
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.severity, Severity::Crit);
  EXPECT_DOUBLE_EQ(*i.score, 0.2);
  EXPECT_EQ(i.summary, "H2D transfer is 20.0% of the typical GPU Step Time.");
  EXPECT_EQ(i.ranks, std::vector<int>{0});
  EXPECT_FALSE(i.skew_pct.has_value());
  EXPECT_EQ(i.evidence.dump(), R"({"h2d_ms":12.0,"h2d_share":0.2,"diagnosis_clock":"gpu"})");
}

TEST(StepTimeRules, H2DIsNeverJudgedOnTheCpuClock) {
  // The same numbers on CPU only: H2D share 0.2 is ignored; compute share 1.0
  // is then blocked by nothing (h2d does not count on CPU) -> COMPUTE_BOUND.
  const Section s = analyze(one_rank(60, {0, 12, 20, 30, 10, 60}));
  EXPECT_EQ(kinds(s), std::vector<std::string>{"COMPUTE_BOUND"});
}

TEST(StepTimeRules, ResidualHeavyAtTheCritThreshold) {
  // traced 100, compute 80 -> residual 20 of step 100.
  const Section s = analyze(one_rank(30, {0, 0, 30, 40, 10, 100}));
  ASSERT_EQ(kinds(s), std::vector<std::string>{"RESIDUAL_HEAVY"});
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.severity, Severity::Crit);
  EXPECT_EQ(i.summary, "Residual time is 20.0% of the typical CPU Step Time.");
  EXPECT_EQ(i.metric, "residual_proxy");
  EXPECT_EQ(i.phase, "residual");
  EXPECT_EQ(i.evidence.dump(), "{}");
  EXPECT_FALSE(i.skew_pct.has_value());
}

TEST(StepTimeRules, ResidualJustBelowWarnIsBalanced) {
  // input 5, compute 86, residual 9 of 100: nothing reaches its threshold.
  const Section s = analyze(one_rank(30, {5, 0, 40, 40, 6, 95}));
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "BALANCED");
  EXPECT_EQ(i.summary, "No dominant bottleneck is visible in this window.");
  EXPECT_EQ(i.action, "Focus on throughput only if overall speed is still low.");
  EXPECT_EQ(i.evidence.dump(), "{}");
  EXPECT_TRUE(i.ranks.empty());
}

TEST(StepTimeRules, BalancedMultiRankNamesTheWorstRank) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {5, 0, 40, 40, 6, 95});
  add_steps(t, 1, 1, 30, {5, 0, 40, 40, 6, 95});
  const Section s = analyze(t);
  EXPECT_EQ(s.diagnosis().kind, "BALANCED");
  EXPECT_EQ(s.diagnosis().ranks, std::vector<int>{0});  // tie -> lowest rank
}

// ---- Expected ranks that sent no step (spec §4.1.13) --------------------

/// Rank 0 balanced on its own: input 5 %, compute 86 %, residual 9 % of 100 ms.
model::Telemetry balanced_rank0() {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {5, 0, 40, 40, 6, 95});
  return t;
}

void expect_every_signal_missing_of_two(const Section& s) {
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "INCOMPLETE_DATA");
  EXPECT_EQ(i.status, "INCOMPLETE DATA");
  EXPECT_EQ(i.severity, Severity::Info);
  EXPECT_EQ(i.summary,
            "Missing timing signals prevent a reliable diagnosis: input_wait, forward, backward, "
            "optimizer_step, traced_step_time.");
  EXPECT_TRUE(i.ranks.empty());  // one rank reported: single_rank, no worst rank
  EXPECT_EQ(i.evidence.dump(),
            R"({"missing_signals":["input_wait","forward","backward","optimizer_step",)"
            R"("traced_step_time"],"signal_coverage":{"input_wait":"1/2","forward":"1/2",)"
            R"("backward":"1/2","optimizer_step":"1/2","traced_step_time":"1/2"}})");
  EXPECT_EQ(s.metadata.global_ranks_seen, 2);
  EXPECT_EQ(s.metadata.global_ranks_used, 1);
}

TEST(StepTimeExpectedRanks, ControlOneRankAloneIsBalanced) {
  EXPECT_EQ(analyze(balanced_rank0()).diagnosis().kind, "BALANCED");
}

TEST(StepTimeExpectedRanks, DeclaredRankWithoutStepsIsIncompleteData) {
  model::Telemetry t = balanced_rank0();
  t.ranks.push_back({0, 0, 0, "n0", 2, std::nullopt});
  t.ranks.push_back({1, 1, 0, "n0", 2, std::nullopt});  // connected, never stepped
  expect_every_signal_missing_of_two(analyze(t));
}

TEST(StepTimeExpectedRanks, WorldSizeRankWithoutStepsIsIncompleteData) {
  model::Telemetry t = balanced_rank0();
  t.run.world_size = 2;  // rank 1 never even connected
  expect_every_signal_missing_of_two(analyze(t));
}

TEST(StepTimeExpectedRanks, EveryDeclaredRankReportingStaysBalanced) {
  model::Telemetry t = balanced_rank0();
  add_steps(t, 1, 1, 30, {5, 0, 40, 40, 6, 95});
  t.run.world_size = 2;
  t.ranks.push_back({1, 1, 0, "n0", 2, 2});
  EXPECT_EQ(analyze(t).diagnosis().kind, "BALANCED");
}

TEST(StepTimeExpectedRanks, ARuleFindingStillWins) {
  // Spec §4.1.13: missing signals matter only when no rule fires.
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {20, 0, 30, 40, 10, 80});
  t.run.world_size = 2;
  EXPECT_EQ(analyze(t).diagnosis().kind, "INPUT_BOUND");
}

TEST(StepTimeExpectedRanks, NoStepAtAllStaysNoData) {
  model::Telemetry t;
  t.run.world_size = 2;
  t.ranks.push_back({0, 0, 0, "n0", 2, 2});
  const Section s = analyze(t);
  EXPECT_EQ(s.diagnosis().kind, "NO_DATA");
  EXPECT_EQ(s.diagnosis().summary, "Step Time metric is missing.");
}

TEST(StepTimeRules, ComputeBoundJustBelowShareIsBalanced) {
  // compute 89 of 100, residual 6, input 5.
  const Section s = analyze(one_rank(30, {5, 0, 40, 40, 9, 95}));
  EXPECT_EQ(s.diagnosis().kind, "BALANCED");
  const Section at = analyze(one_rank(30, {5, 0, 40, 40, 10, 95}));  // 90 of 100
  EXPECT_EQ(at.diagnosis().kind, "COMPUTE_BOUND");
}

TEST(StepTimeRules, ComputeBoundLargestPhaseTieGoesToTheFirst) {
  const Section s = analyze(one_rank(30, {0, 0, 45, 45, 10, 100}));
  EXPECT_EQ(s.diagnosis().summary, "Compute-bound; forward is the largest phase.");
}

TEST(StepTimeRules, FsdpCapsSeverityAndUsesForwardPlusBackward) {
  model::Telemetry t;
  t.run.strategy = model::Strategy::Fsdp;
  add_steps(t, 0, 1, 24, {100, 0, 20, 20, 0, 40});
  add_steps(t, 1, 1, 24, {0, 0, 20, 120, 0, 140});
  const Section s = analyze(t);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "INPUT_STRAGGLER");
  EXPECT_EQ(i.severity, Severity::Warn);  // FSDP: every issue capped at warn
  EXPECT_EQ(i.evidence["visible_metric"], "forward_backward");
  EXPECT_DOUBLE_EQ(i.evidence["visible_culprit_ms"].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(i.evidence["component_excesses_ms"]["compute"].get<double>(), 0.0);
}

TEST(StepTimeRules, UnattributedStragglerIsAPlainStraggler) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {0, 0, 20, 20, 0, 140});  // 100 ms of residual on r0
  add_steps(t, 1, 1, 30, {0, 0, 20, 120, 0, 140});
  const Section s = analyze(t);
  ASSERT_EQ(kinds(s), (std::vector<std::string>{"STRAGGLER", "RESIDUAL_HEAVY"}));
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.status, "STRAGGLER");
  EXPECT_EQ(i.metric, "backward");
  EXPECT_EQ(i.phase, "sync");
  EXPECT_EQ(i.evidence["component"], "sync_or_unattributed");
  EXPECT_EQ(i.summary,
            "r0 is slower than victim r1 (~71.4% impact); no measured component explains 80.0% "
            "of visible wait cost.");
  EXPECT_EQ(i.action, "Inspect synchronization, collectives, and unattributed work around r0.");
}

TEST(StepTimeRules, CoverageOfExactlyEightyPercentIsAttributed) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {80, 0, 20, 20, 0, 60});  // input excess 80 of cost 100
  add_steps(t, 1, 1, 30, {0, 0, 20, 120, 0, 140});
  EXPECT_EQ(analyze(t).diagnosis().kind, "INPUT_STRAGGLER");
  model::Telemetry below;
  add_steps(below, 0, 1, 30, {79.9, 0, 20, 20, 0, 60});
  add_steps(below, 1, 1, 30, {0, 0, 20, 120, 0, 140});
  EXPECT_EQ(analyze(below).diagnosis().kind, "STRAGGLER");
}

TEST(StepTimeRules, ComputeStragglerFromExcessForward) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {0, 0, 120, 20, 0, 140});
  add_steps(t, 1, 1, 30, {0, 0, 20, 120, 0, 140});
  const Issue i = analyze(t).diagnosis();
  EXPECT_EQ(i.kind, "COMPUTE_STRAGGLER");
  EXPECT_EQ(i.metric, "forward");
  EXPECT_EQ(i.summary,
            "r0 has excess forward compute burden relative to victim r1 (~71.4% impact; ~100.0% "
            "of visible wait cost).");
}

TEST(StepTimeRules, H2DStragglerNeedsBothRanksToMeasureH2D) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {0, 100, 20, 20, 0, 140});
  add_steps(t, 1, 1, 30, {0, 0, 20, 120, 0, 140});
  EXPECT_EQ(analyze(t).diagnosis().kind, "H2D_STRAGGLER");
  model::Telemetry one_sided;  // r1 never measured H2D: the component is absent
  add_steps(one_sided, 0, 1, 30, {0, 100, 20, 20, 0, 140});
  add_steps(one_sided, 1, 1, 30, {0, std::nullopt, 20, 120, 0, 140});
  const Issue i = analyze(one_sided).diagnosis();
  EXPECT_EQ(i.kind, "STRAGGLER");
  EXPECT_FALSE(i.evidence["component_excesses_ms"].contains("h2d"));
}

TEST(StepTimeRules, StragglerScoreBoundaries) {
  // cost 10 over victim step 100 = 0.10 -> warn; cost 9 -> no straggler.
  auto build = [](double r0_backward) {
    model::Telemetry t;
    add_steps(t, 0, 1, 30, {100 - r0_backward, std::nullopt, 0, r0_backward, 0, r0_backward});
    add_steps(t, 1, 1, 30, {0, std::nullopt, 0, 100, 0, 100});
    return analyze(t);
  };
  const Section warn = build(90);
  EXPECT_EQ(warn.issues[0].kind, "INPUT_STRAGGLER");
  EXPECT_EQ(warn.issues[0].severity, Severity::Warn);
  EXPECT_DOUBLE_EQ(*warn.issues[0].score, 0.1);
  // No h2d measured: only input and compute are candidate components.
  EXPECT_EQ(warn.issues[0].evidence["component_coverage"].dump(), R"({"input":1.0,"compute":0.0})");
  EXPECT_EQ(build(91).issues[0].kind, "COMPUTE_BOUND");  // 0.09: no straggler
  const Section crit = build(80);                        // 0.20
  EXPECT_EQ(crit.issues[0].severity, Severity::Crit);
}

TEST(StepTimeRules, SortsBySeverityThenScoreThenStragglerKind) {
  // Input share 0.5 (crit, score 0.5) beats a warn straggler.
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {60, 0, 0, 40, 0, 40});  // visible 40
  add_steps(t, 1, 1, 30, {45, 0, 0, 55, 0, 55});  // visible 55: cost 15 of 100
  const Section s = analyze(t);
  ASSERT_EQ(kinds(s), (std::vector<std::string>{"INPUT_BOUND", "INPUT_STRAGGLER"}));
  EXPECT_EQ(s.issues[1].severity, Severity::Warn);
}

// ---- Window: alignment, clock, availability, averages -------------------

TEST(StepTimeWindow, AlignsOnCommonStepsAndKeepsTheLatestWindow) {
  model::Telemetry t;
  add_steps(t, 0, 1, 10, {1, 0, 1, 1, 1, 3});
  add_steps(t, 1, 6, 10, {1, 0, 1, 1, 1, 3});
  const Section s = analyze(t, 3);
  EXPECT_EQ(*s.window.steps_analyzed, 3);
  EXPECT_EQ(*s.window.start_step, 8);
  EXPECT_EQ(*s.window.end_step, 10);
  EXPECT_EQ(*s.window.completed_step, 10);
  EXPECT_EQ(*s.window.window_size, 3);
  EXPECT_EQ(*s.metadata.training_latest_step, 15);
  EXPECT_EQ(*s.metadata.training_total_steps, 15);  // steps seen (DECISIONS quirk 4)
  EXPECT_EQ(*s.metadata.global_ranks_seen, 2);
  EXPECT_EQ(*s.metadata.global_ranks_used, 2);
}

TEST(StepTimeWindow, NoCommonStepMeansNoFacts) {
  model::Telemetry t;
  add_steps(t, 0, 1, 5, {1, 0, 1, 1, 1, 3});
  add_steps(t, 1, 6, 5, {1, 0, 1, 1, 1, 3});
  const Section s = analyze(t);
  EXPECT_EQ(*s.window.steps_analyzed, 0);
  EXPECT_FALSE(s.window.start_step.has_value());
  EXPECT_TRUE(s.rows.empty());
  // Expected ranks without facts: every signal is missing on both ranks.
  EXPECT_EQ(s.diagnosis().kind, "INCOMPLETE_DATA");
  EXPECT_EQ(s.diagnosis().evidence["signal_coverage"]["input_wait"], "0/2");
}

TEST(StepTimeWindow, LaterDuplicateReplacesEarlierRecord) {
  model::Telemetry t;
  add_steps(t, 0, 1, 10, {0, 0, 10, 10, 0, 20});
  t.steps.push_back(testing::step_record(0, 5, {50, 0, 10, 10, 0, 20}));
  const Section s = analyze(t);
  EXPECT_DOUBLE_EQ(*avg(s, "input_wait_ms"), 5.0);  // 50 on one step of ten
  EXPECT_EQ(*s.window.steps_analyzed, 10);
}

TEST(StepTimeWindow, StepsArrivingOutOfOrderAreSorted) {
  model::Telemetry t;
  for (std::int64_t step : {3, 1, 2}) {
    t.steps.push_back(testing::step_record(0, step, {double(step), 0, 1, 1, 0, 2}));
  }
  const Section s = analyze(t, 2);
  EXPECT_EQ(*s.window.start_step, 2);
  EXPECT_DOUBLE_EQ(*avg(s, "input_wait_ms"), 2.5);
}

TEST(StepTimeWindow, RecordWithoutEventsIsIgnored) {
  model::Telemetry t;
  add_steps(t, 0, 1, 10, {1, 0, 1, 1, 1, 3});
  model::StepRecord empty;
  empty.global_rank = 1;
  empty.step = 3;
  t.steps.push_back(empty);
  const Section s = analyze(t);
  EXPECT_EQ(*s.metadata.global_ranks_seen, 1);
  EXPECT_EQ(*s.window.steps_analyzed, 10);
}

TEST(StepTimeWindow, OneGpuLessRankForcesTheCpuClock) {
  const Phases p{1, 0, 1, 1, 1, 3};
  model::Telemetry t;
  add_steps(t, 0, 1, 10, p, p);
  add_steps(t, 1, 1, 10, p);
  EXPECT_EQ(*analyze(t).window.diagnosis_clock, "cpu");
  model::Telemetry both;
  add_steps(both, 0, 1, 10, p, p);
  add_steps(both, 1, 1, 10, p, p);
  EXPECT_EQ(*analyze(both).window.diagnosis_clock, "gpu");
}

TEST(StepTimeWindow, PresentEventWithoutGpuValueForcesTheCpuClock) {
  Phases gpu{1, std::nullopt, 1, 1, 1, 3};  // h2d recorded on CPU only
  model::Telemetry t;
  add_steps(t, 0, 1, 10, {1, 0.5, 1, 1, 1, 3}, gpu);
  EXPECT_EQ(*analyze(t).window.diagnosis_clock, "cpu");
}

TEST(StepTimeWindow, OccurrenceMetricsCountAbsentStepsAsZero) {
  model::Telemetry t;
  for (std::int64_t s = 1; s <= 10; ++s) {
    const std::optional<double> h2d = s % 2 ? std::optional<double>(2.0) : std::nullopt;
    t.steps.push_back(testing::step_record(0, s, {1, h2d, 1, 1, std::nullopt, 3}));
  }
  const Section s = analyze(t);
  EXPECT_DOUBLE_EQ(*avg(s, "h2d_ms"), 1.0);
  EXPECT_FALSE(avg(s, "optimizer_ms").has_value());  // never measured: null, not 0
  EXPECT_FALSE(avg(s, "compute_ms").has_value());
}

TEST(StepTimeWindow, EveryStepMetricOnSomeStepsOnlyIsUnmeasured) {
  model::Telemetry t;
  for (std::int64_t s = 1; s <= 10; ++s) {
    const std::optional<double> input = s % 2 ? std::optional<double>(2.0) : std::nullopt;
    t.steps.push_back(testing::step_record(0, s, {input, 0, 1, 1, 1, 3}));
  }
  const Section s = analyze(t);
  EXPECT_FALSE(avg(s, "input_wait_ms").has_value());
  EXPECT_FALSE(avg(s, "step_time_ms").has_value());
  EXPECT_FALSE(avg(s, "dataloader_fetch_cpu_ms").has_value());  // the CPU input wait too
  EXPECT_EQ(s.diagnosis().kind, "INCOMPLETE_DATA");
  EXPECT_EQ(s.diagnosis().evidence.dump(),
            R"({"missing_signals":["input_wait"],"signal_coverage":{"input_wait":"0/1"}})");
}

TEST(StepTimeWindow, ResidualIsTheMeanOfClampedPerStepResiduals) {
  // Alternating: compute 50 / traced 100, then compute 100 / traced 50.
  model::Telemetry t;
  for (std::int64_t s = 1; s <= 30; ++s) {
    const bool odd = s % 2 == 1;
    t.steps.push_back(testing::step_record(0, s, {0, 0, odd ? 50 : 100, 0, 0, odd ? 100 : 50}));
  }
  const Section s = analyze(t);
  EXPECT_DOUBLE_EQ(*avg(s, "traced_step_time_ms"), 75.0);
  EXPECT_DOUBLE_EQ(*avg(s, "compute_ms"), 75.0);
  EXPECT_DOUBLE_EQ(*avg(s, "residual_ms"), 25.0);
  EXPECT_EQ(s.diagnosis().kind, "RESIDUAL_HEAVY");
  EXPECT_NEAR(*s.diagnosis().share_pct, 1.0 / 3.0, 1e-12);
}

TEST(StepTimeWindow, NoStepsIsNoData) {
  const Section s = analyze(model::Telemetry{});
  EXPECT_EQ(s.diagnosis().kind, "NO_DATA");
  EXPECT_EQ(s.diagnosis().summary, "Step Time metric is missing.");
  EXPECT_EQ(s.diagnosis().action, "Wait for the first complete window.");
  EXPECT_EQ(s.diagnosis().evidence.dump(), R"({"steps_used":0})");
  EXPECT_EQ(s.metadata.mode, "no_data");
  EXPECT_EQ(*s.metadata.training_total_steps, 0);
  EXPECT_EQ(*s.window.diagnosis_clock, "cpu");
}

TEST(StepTimeWindow, ZeroStepTimeIsNoUsableData) {
  const Section s = analyze(one_rank(10, {0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(s.diagnosis().kind, "NO_DATA");
  EXPECT_EQ(s.diagnosis().summary, "No usable step-time data yet.");
  EXPECT_EQ(s.diagnosis().evidence.dump(), R"({"steps_used":10,"worst_rank":0})");
}

// ---- Statistics and payload ---------------------------------------------

TEST(StepTimePayload, RepresentativeRankTiesGoToTheLowerValue) {
  model::Telemetry t;
  const double steps[] = {100, 110, 120, 130};  // median 115: 110 and 120 both 5 away
  for (int r = 0; r < 4; ++r)
    add_steps(t, r, 1, 30, {0, 0, steps[r], 0, 0, steps[r]});
  const Section s = analyze(t);
  const auto i = *s.metric_index("step_time_ms");
  EXPECT_EQ(*s.median[i].idx, "1");
  EXPECT_DOUBLE_EQ(*s.median[i].value, 110.0);
  EXPECT_EQ(*s.worst[i].idx, "3");
  EXPECT_DOUBLE_EQ(*s.average[i], 115.0);
}

TEST(StepTimePayload, WorstTieGoesToTheLowestRank) {
  model::Telemetry t;
  for (int r : {2, 10, 1})
    add_steps(t, r, 1, 30, {0, 0, 50, 50, 0, 100});
  const Section s = analyze(t);
  const auto i = *s.metric_index("step_time_ms");
  EXPECT_EQ(*s.worst[i].idx, "1");
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.rows[0].key, "1");
  EXPECT_EQ(s.rows[2].key, "10");
}

TEST(StepTimePayload, MetricNamesAndClockAggregates) {
  const Phases cpu{2, 1, 10, 20, 3, 40};
  const Phases gpu{4, 2, 11, 21, 4, 44};
  model::Telemetry t;
  add_steps(t, 0, 1, 30, cpu, gpu);
  const Section s = analyze(t);
  EXPECT_EQ(s.metric_names,
            (std::vector<std::string>{"input_wait_ms", "step_time_ms", "traced_step_time_ms",
                                      "step_time_cpu_ms", "step_time_gpu_ms",
                                      "traced_step_time_cpu_ms", "traced_step_time_gpu_ms",
                                      "dataloader_fetch_cpu_ms", "h2d_ms", "compute_ms",
                                      "residual_ms", "forward_ms", "backward_ms", "optimizer_ms"}));
  EXPECT_DOUBLE_EQ(*avg(s, "input_wait_ms"), 4.0);  // GPU clock selected
  EXPECT_DOUBLE_EQ(*avg(s, "step_time_ms"), 48.0);
  EXPECT_DOUBLE_EQ(*avg(s, "step_time_cpu_ms"), 42.0);
  EXPECT_DOUBLE_EQ(*avg(s, "step_time_gpu_ms"), 48.0);
  EXPECT_DOUBLE_EQ(*avg(s, "traced_step_time_cpu_ms"), 40.0);
  EXPECT_DOUBLE_EQ(*avg(s, "dataloader_fetch_cpu_ms"), 2.0);  // always the CPU input wait
  EXPECT_DOUBLE_EQ(*avg(s, "compute_ms"), 36.0);
  EXPECT_DOUBLE_EQ(*avg(s, "residual_ms"), 44.0 - 2.0 - 36.0);
  EXPECT_DOUBLE_EQ(*avg(s, "optimizer_ms"), 4.0);
}

TEST(StepTimePayload, IdentityAndModeComeFromRankDeclarations) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {1, 0, 1, 1, 1, 3});
  add_steps(t, 1, 1, 30, {1, 0, 1, 1, 1, 3});
  t.ranks.push_back({0, 0, 0, "n0", 1, 2});
  t.ranks.push_back({1, 0, 1, "n1", 1, 2});
  const Section s = analyze(t);
  EXPECT_EQ(s.metadata.mode, "multi_node");
  EXPECT_EQ(*s.rows[1].identity.hostname, "n1");
  EXPECT_EQ(*s.rows[1].identity.node_rank, 1);
}

TEST(StepTimePayload, SingleRankCard) {
  const Section s = analyze(one_rank(30, {10, 0, 30, 50, 10, 90}));
  EXPECT_EQ(s.card,
            "TraceML Step Timing Summary | steps 30 | global ranks 1\n"
            "Step Time\n"
            "- Diagnosis: INPUT-BOUND\n"
            "- Scope: last 30 aligned steps on global rank r0\n"
            "- Stats: Step Time 100.0ms | input 10.0ms | H2D 0.0ms | compute 90.0ms\n"
            "- Residual: 0.0ms\n"
            "- Why: Input wait is 10.0% of the typical CPU Step Time.");
}

TEST(StepTimePayload, MultiRankCard) {
  model::Telemetry t;
  add_steps(t, 0, 1, 24, {100, 0, 20, 20, 0, 40});
  add_steps(t, 1, 1, 24, {0, 0, 20, 120, 0, 140});
  const Section s = analyze(t);
  EXPECT_EQ(s.card,
            "TraceML Step Timing Summary | steps 24 | global ranks 2\n"
            "Step Time\n"
            "- Diagnosis: INPUT STRAGGLER\n"
            "- Scope: compared over last 24 aligned steps across 2 global ranks\n"
            "- Stats: median/worst | Step Time 140.0/140.0ms | input 50.0/100.0ms | H2D "
            "0.0/0.0ms | compute 90.0/140.0ms\n"
            "- Residual: median/worst 0.0/0.0ms\n"
            // input: 100 and 0 are equally far from the median 50; the lower value (r1) wins.
            "- Ranks: median/worst | Step Time r0/r0 | input r1/r0 | H2D r0/r0 | compute r0/r1\n"
            "- Residual ranks: median/worst r0/r0\n"
            "- Why: r0 has excess input wait burden relative to victim r1 (~71.4% impact; "
            "~100.0% of visible wait cost).");
}

// ---- Trend (DECISIONS: written into the primary issue as evidence.trend) --

TEST(StepTimeTrend, RisingInputWaitIsReported) {
  model::Telemetry t;
  for (std::int64_t s = 1; s <= 300; ++s) {
    t.steps.push_back(testing::step_record(0, s, {10 + 0.1 * double(s), 0, 30, 50, 10, 90}));
  }
  const Section s = analyze(t);
  ASSERT_EQ(s.diagnosis().kind, "INPUT_BOUND");
  // After dropping 30 warmup points: baseline s=71..98 avg 18.45, recent
  // s=274..300 avg 38.7 -> +109.8%.
  EXPECT_EQ(s.diagnosis().evidence["trend"], "Trend: input wait is worsening (↑ +109.8%).");
}

TEST(StepTimeTrend, FlatOrShortSeriesHasNoTrend) {
  EXPECT_FALSE(
      analyze(one_rank(300, {10, 0, 30, 50, 10, 90})).diagnosis().evidence.contains("trend"));
  // Rising but only 221 steps: fewer than 200 points remain after warmup.
  model::Telemetry t;
  for (std::int64_t s = 1; s <= 221; ++s) {
    t.steps.push_back(testing::step_record(0, s, {10 + 0.1 * double(s), 0, 30, 50, 10, 90}));
  }
  EXPECT_FALSE(analyze(t).diagnosis().evidence.contains("trend"));
}

}  // namespace
}  // namespace traceml::analysis

namespace traceml::analysis {
namespace {

TEST(StepTimePayload, SpreadIsTheQuartilesOfPerStepStepTime) {
  model::Telemetry t;
  const double traced[] = {30, 10, 40, 20};  // step time = input 0 + traced
  for (std::int64_t s = 1; s <= 4; ++s) {
    t.steps.push_back(testing::step_record(0, s, {0, 0, traced[s - 1], 0, 0, traced[s - 1]}));
  }
  const Section s = analyze_step_time(t, Options{});
  // Sorted 10, 20, 30, 40: p25 at position 0.75 -> 17.5; median 25; p75 32.5.
  const Json& spread = s.global_extra.at("spread");
  EXPECT_EQ(spread["step_time_ms"].dump(),
            R"({"basis":"per_step","steps":4,"p25":17.5,"median":25.0,"p75":32.5})");
  // The CPU clock's sketch for compare's rank test (DECISIONS 12): the same
  // quartiles, 21 quantiles (every 1.5 positions of 3: 10, 11.5, ...), and the
  // lag-1 autocorrelation of 30, 10, 40, 20 (deviations 5, -15, 15, -5:
  // (-75 - 225 - 75) / 500 = -0.75). No GPU clock, no GPU entry.
  const Json& cpu = spread["step_time_cpu_ms"];
  EXPECT_EQ(cpu["steps"], 4);
  EXPECT_EQ(cpu["p25"], 17.5);
  ASSERT_EQ(cpu["quantiles"].size(), 21u);
  EXPECT_DOUBLE_EQ(cpu["quantiles"][0].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(cpu["quantiles"][1].get<double>(), 11.5);
  EXPECT_DOUBLE_EQ(cpu["quantiles"][10].get<double>(), 25.0);
  EXPECT_DOUBLE_EQ(cpu["quantiles"][20].get<double>(), 40.0);
  EXPECT_DOUBLE_EQ(cpu["lag1_autocorrelation"].get<double>(), -0.75);
  EXPECT_FALSE(spread.contains("step_time_gpu_ms"));
  EXPECT_TRUE(analyze_step_time(model::Telemetry{}, Options{}).global_extra.empty());
}

TEST(StepTimePayload, SpreadSketchesEveryMeasuredClockAcrossRanks) {
  // Two ranks with both clocks, step times growing by step at different
  // rates; each step's value is the median (here the mean) of the two ranks.
  model::Telemetry t;
  for (std::int64_t s = 1; s <= 5; ++s) {
    const double d = double(s);
    t.steps.push_back(
        testing::step_record(0, s, {1, 0, 4, 4, 1, 10 + d}, Phases{0.5, 0, 4, 4, 1, 9 + d}));
    t.steps.push_back(testing::step_record(1, s, {1, 0, 4, 4, 1, 20 + 3 * d},
                                           Phases{0.5, 0, 4, 4, 1, 19 + 3 * d}));
  }
  const Section section = analyze_step_time(t, Options{});
  const Json& spread = section.global_extra.at("spread");
  // CPU: medians of (11 + d, 21 + 3d) = 16 + 2d: 18, 20, ..., 26.
  const Json& cpu = spread.at("step_time_cpu_ms");
  EXPECT_EQ(cpu["basis"], "per_step_median_across_ranks");
  EXPECT_EQ(cpu["steps"], 5);
  EXPECT_DOUBLE_EQ(cpu["quantiles"][0].get<double>(), 18.0);
  EXPECT_DOUBLE_EQ(cpu["quantiles"][20].get<double>(), 26.0);
  EXPECT_DOUBLE_EQ(cpu["median"].get<double>(), 22.0);
  // GPU: medians of (9.5 + d, 19.5 + 3d) = 14.5 + 2d: 16.5 ... 24.5.
  const Json& gpu = spread.at("step_time_gpu_ms");
  EXPECT_DOUBLE_EQ(gpu["quantiles"][0].get<double>(), 16.5);
  EXPECT_DOUBLE_EQ(gpu["median"].get<double>(), 20.5);
  // A steadily rising series is positively autocorrelated.
  EXPECT_GT(gpu["lag1_autocorrelation"].get<double>(), 0.0);
}

}  // namespace
}  // namespace traceml::analysis
