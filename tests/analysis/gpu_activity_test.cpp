// GPU activity records in the analysis (issue 5): the per-rank metrics added
// to Step Time, GPU idle within steps (Step Time rows and System nodes), the
// pin-memory advice of the H2D findings, the collective evidence of STRAGGLER
// and RESIDUAL_HEAVY, and GPU-only timings (H2D caught with no phase marked).
// Every expected value is worked out by hand in the comments.
#include <gtest/gtest.h>

#include "analysis/h2d_advice.hpp"
#include "analysis/summary.hpp"
#include "step_time_test_support.hpp"

namespace traceml::analysis {
namespace {

using model::Event;
using model::StepGpuActivity;
using testing::add_steps;
using testing::Phases;
using testing::step_record;

Section analyze(const model::Telemetry& t) {
  return analyze_step_time(t, Options{});
}

std::optional<double> avg(const Section& s, const std::string& metric) {
  const auto i = s.metric_index(metric);
  if (!i) return std::nullopt;
  return s.average.at(*i);
}

std::optional<double> row_value(const Section& s, const std::string& key,
                                const std::string& metric) {
  const auto i = s.metric_index(metric);
  for (const auto& r : s.rows) {
    if (r.key == key && i) return r.metrics.at(*i);
  }
  return std::nullopt;
}

const Issue* find_issue(const Section& s, const std::string& kind) {
  for (const auto& i : s.issues) {
    if (i.kind == kind) return &i;
  }
  return nullptr;
}

StepGpuActivity activity(double busy, double collective, double bytes = 0, std::int64_t copies = 0,
                         std::int64_t pageable_copies = 0, double pageable_bytes = 0) {
  StepGpuActivity a;
  a.h2d_bytes = bytes;
  a.h2d_copies = copies;
  a.h2d_pageable_copies = pageable_copies;
  a.h2d_pageable_bytes = pageable_bytes;
  a.collective_ms = collective;
  a.busy_ms = busy;
  return a;
}

/// `count` steps of `rank` from `first`, on both clocks with the same values,
/// each with `a` as its activity record.
void add_active_steps(model::Telemetry& t, int rank, std::int64_t first, std::int64_t count,
                      const Phases& p, const StepGpuActivity& a) {
  for (std::int64_t s = first; s < first + count; ++s) {
    model::StepRecord r = step_record(rank, s, p, p);
    r.gpu_activity = a;
    t.steps.push_back(r);
  }
}

const std::vector<std::string> kSpecMetrics = {"input_wait_ms",
                                               "step_time_ms",
                                               "traced_step_time_ms",
                                               "step_time_cpu_ms",
                                               "step_time_gpu_ms",
                                               "traced_step_time_cpu_ms",
                                               "traced_step_time_gpu_ms",
                                               "dataloader_fetch_cpu_ms",
                                               "h2d_ms",
                                               "compute_ms",
                                               "residual_ms",
                                               "forward_ms",
                                               "backward_ms",
                                               "optimizer_ms"};

// ---- Metrics ------------------------------------------------------------------

TEST(GpuActivityMetrics, AbsentRecordsKeepTheSpecMetricsOnly) {
  model::Telemetry t;
  add_steps(t, 0, 1, 30, {10, 0, 30, 50, 10, 90}, Phases{10, 0, 30, 50, 10, 90});
  const Section s = analyze(t);
  EXPECT_EQ(s.metric_names, kSpecMetrics);
  EXPECT_EQ(s.units, (std::vector<std::pair<std::string, std::string>>{{"time", "ms"}}));
  EXPECT_EQ(s.diagnosis().evidence.dump(),
            R"({"input_wait_ms":10.0,"traced_step_time_ms":90.0,"step_time_ms":100.0,)"
            R"("input_bound_share":0.1,"diagnosis_clock":"gpu"})");
}

TEST(GpuActivityMetrics, PerRankAveragesOverTheWindow) {
  // One rank, 30 steps, GPU step time 10 + 90 = 100 ms. Odd steps: busy 60,
  // 4 copies of 100 MB of which 3 (75 MB) pageable, collective 4; even steps:
  // busy 80, 2 copies of 100 MB of which 1 (25 MB) pageable, collective 6.
  model::Telemetry t;
  const Phases p{10, 0, 30, 50, 10, 90};
  for (std::int64_t s = 1; s <= 30; ++s) {
    model::StepRecord r = step_record(0, s, p, p);
    r.gpu_activity =
        s % 2 == 1 ? activity(60, 4, 100e6, 4, 3, 75e6) : activity(80, 6, 100e6, 2, 1, 25e6);
    t.steps.push_back(r);
  }
  const Section s = analyze(t);
  std::vector<std::string> names = kSpecMetrics;
  for (const char* n :
       {"collective_ms", "gpu_idle_fraction", "h2d_bytes_per_step", "h2d_copies_per_step",
        "h2d_pageable_copies_per_step", "h2d_pageable_share"}) {
    names.emplace_back(n);
  }
  EXPECT_EQ(s.metric_names, names);
  EXPECT_DOUBLE_EQ(*avg(s, "collective_ms"), 5.0);         // (4 + 6) / 2
  EXPECT_NEAR(*avg(s, "gpu_idle_fraction"), 0.3, 1e-12);   // (0.4 + 0.2) / 2
  EXPECT_DOUBLE_EQ(*avg(s, "h2d_bytes_per_step"), 100e6);  // every step
  EXPECT_DOUBLE_EQ(*avg(s, "h2d_copies_per_step"), 3.0);   // (4 + 2) / 2
  EXPECT_DOUBLE_EQ(*avg(s, "h2d_pageable_copies_per_step"), 2.0);
  EXPECT_DOUBLE_EQ(*avg(s, "h2d_pageable_share"), 0.5);  // (15×75 + 15×25) MB / 3000 MB
  const auto idx = *s.metric_index("collective_ms");
  EXPECT_EQ(s.median.at(idx).idx, "0");
  EXPECT_EQ(s.worst.at(idx).value, 5.0);
  EXPECT_EQ(row_value(s, "0", "h2d_copies_per_step"), 3.0);
  EXPECT_EQ(s.units, (std::vector<std::pair<std::string, std::string>>{{"time", "ms"},
                                                                       {"memory", "bytes"}}));
  // The spec's metrics are untouched by the records.
  EXPECT_DOUBLE_EQ(*avg(s, "step_time_ms"), 100.0);
}

TEST(GpuActivityMetrics, StepsWithoutRecordsAreUnknownNotZero) {
  // Rank 0: records on 10 of 30 steps (collective 9, busy 50 of 100); rank 1:
  // none. Rank 0 averages over its 10 steps; rank 1's row is null.
  model::Telemetry t;
  const Phases p{10, 0, 30, 50, 10, 90};
  add_active_steps(t, 0, 1, 10, p, activity(50, 9));
  add_steps(t, 0, 11, 20, p, p);
  add_steps(t, 1, 1, 30, p, p);
  const Section s = analyze(t);
  EXPECT_EQ(row_value(s, "0", "collective_ms"), 9.0);
  EXPECT_EQ(row_value(s, "0", "gpu_idle_fraction"), 0.5);
  EXPECT_EQ(row_value(s, "1", "collective_ms"), std::nullopt);
  EXPECT_EQ(row_value(s, "1", "gpu_idle_fraction"), std::nullopt);
  EXPECT_DOUBLE_EQ(*avg(s, "collective_ms"), 9.0);  // over the ranks that have it
  // No byte moved: the pageable share is unknown, the counts are measured zeros.
  EXPECT_EQ(row_value(s, "0", "h2d_pageable_share"), std::nullopt);
  EXPECT_EQ(row_value(s, "0", "h2d_copies_per_step"), 0.0);
}

TEST(GpuActivityMetrics, IdleIsClampedAndNeedsAGpuStepTime) {
  model::Telemetry t;
  const Phases p{10, 0, 30, 50, 10, 90};
  // Rank 0: busy 150 of a 100 ms step -> idle 0 (not -0.5); busy 0 -> idle 1.
  add_active_steps(t, 0, 1, 1, p, activity(150, 0));
  add_active_steps(t, 0, 2, 1, p, activity(0, 0));
  // Rank 1: CPU timing only: no GPU step time to measure idle against, so the
  // idle fraction is unknown while its collective time is known.
  for (std::int64_t s = 1; s <= 2; ++s) {
    model::StepRecord r = step_record(1, s, p);
    r.gpu_activity = activity(40, 3);
    t.steps.push_back(r);
  }
  const Section s = analyze(t);
  EXPECT_EQ(s.window.diagnosis_clock, "cpu");              // rank 1 forces the CPU clock
  EXPECT_EQ(row_value(s, "0", "gpu_idle_fraction"), 0.5);  // (0 + 1) / 2, GPU time of rank 0
  EXPECT_EQ(row_value(s, "1", "gpu_idle_fraction"), std::nullopt);
  EXPECT_EQ(row_value(s, "1", "collective_ms"), 3.0);
}

// ---- GPU-only timings (H2D caught from CUPTI, no H2D phase marked) --------------

TEST(GpuOnlyTiming, H2DCountsOnTheGpuClock) {
  // CPU phases: input 10, compute 30 + 40 + 10, traced 100. H2D has a GPU value
  // of 20 ms and no CPU value. Every GPU value is present: GPU clock, H2D
  // 20 ms, residual 100 - 20 - 80 = 0, H2D share 20 / 110 = 0.1818: H2D_BOUND.
  model::Telemetry t;
  const Phases cpu{10, std::nullopt, 30, 40, 10, 100};
  const Phases gpu{10, 20, 30, 40, 10, 100};
  add_steps(t, 0, 1, 30, cpu, gpu);
  const Section s = analyze(t);
  EXPECT_EQ(s.window.diagnosis_clock, "gpu");
  EXPECT_DOUBLE_EQ(*avg(s, "h2d_ms"), 20.0);
  EXPECT_DOUBLE_EQ(*avg(s, "residual_ms"), 0.0);
  EXPECT_EQ(s.diagnosis().kind, "H2D_BOUND");
  EXPECT_NEAR(*s.diagnosis().share_pct, 20.0 / 110.0, 1e-12);
  EXPECT_EQ(s.diagnosis().action,
            "Inspect pinned memory, batch transfer, and host-to-device copies.");
}

TEST(GpuOnlyTiming, H2DIsAbsentOnTheCpuClock) {
  // The same steps, but the traced step lacks its GPU value on step 30: the
  // CPU clock is used for the whole window (§4.1.3). There the H2D event has no
  // value on any step, so the occurrence metric is absent (§4.1.4), never 0,
  // and its 20 ms are residual: 100 - 0 - 80 = 20 of 110 (RESIDUAL_HEAVY).
  model::Telemetry t;
  const Phases cpu{10, std::nullopt, 30, 40, 10, 100};
  const Phases gpu{10, 20, 30, 40, 10, 100};
  add_steps(t, 0, 1, 29, cpu, gpu);
  add_steps(t, 0, 30, 1, cpu, Phases{10, 20, 30, 40, 10, std::nullopt});
  const Section s = analyze(t);
  EXPECT_EQ(s.window.diagnosis_clock, "cpu");
  EXPECT_EQ(avg(s, "h2d_ms"), std::nullopt);
  EXPECT_DOUBLE_EQ(*avg(s, "residual_ms"), 20.0);
  EXPECT_EQ(s.diagnosis().kind, "RESIDUAL_HEAVY");
  EXPECT_EQ(find_issue(s, "H2D_BOUND"), nullptr);
}

// ---- H2D findings: pin memory ----------------------------------------------------

/// One rank, 30 steps on the GPU clock: input 5, h2d 25, compute 60, traced 95
/// (residual 10), step 100: H2D share 0.25 (crit). Each step copies `a`.
Section h2d_bound(const StepGpuActivity& a) {
  model::Telemetry t;
  add_active_steps(t, 0, 1, 30, Phases{5, 25, 20, 30, 10, 95}, a);
  return analyze(t);
}

TEST(H2dAdvice, PageableCopiesGetThePinMemoryAction) {
  // 4 copies of 128 MB per step, 3 of them (96 MB, 75 %) pageable.
  const Section s = h2d_bound(activity(90, 0, 128e6, 4, 3, 96e6));
  const Issue& i = s.diagnosis();
  ASSERT_EQ(i.kind, "H2D_BOUND");
  EXPECT_EQ(i.severity, Severity::Crit);
  EXPECT_EQ(i.summary, "H2D transfer is 25.0% of the typical GPU Step Time.");  // unchanged
  EXPECT_EQ(i.action,
            "3 of 4 copies per step (96.0 MB of 128.0 MB) come from pageable memory: pin the batch "
            "(tensor.pin_memory(), in the dataset or a loader worker) and copy with .to(device, "
            "/*non_blocking=*/true).");
  EXPECT_EQ(i.evidence.dump(),
            R"({"h2d_ms":25.0,"h2d_share":0.25,"diagnosis_clock":"gpu",)"
            R"("h2d_copies_per_step":4.0,"h2d_pageable_copies_per_step":3.0,)"
            R"("h2d_bytes_per_step":128000000.0,"h2d_pageable_bytes_per_step":96000000.0,)"
            R"("h2d_pageable_share":0.75})");
}

TEST(H2dAdvice, ThresholdIsHalfOfTheBytes) {
  // Exactly 50 % of the bytes: advice (>=). Just below: the spec's action,
  // with the numbers still in the evidence.
  EXPECT_EQ(h2d_bound(activity(90, 0, 128e6, 2, 1, 64e6)).diagnosis().action,
            "1 of 2 copies per step (64.0 MB of 128.0 MB) come from pageable memory: pin the batch "
            "(tensor.pin_memory(), in the dataset or a loader worker) and copy with .to(device, "
            "/*non_blocking=*/true).");
  const Section below = h2d_bound(activity(90, 0, 128e6, 2, 1, 63.9e6));
  EXPECT_EQ(below.diagnosis().action,
            "Inspect pinned memory, batch transfer, and host-to-device copies.");
  EXPECT_DOUBLE_EQ(below.diagnosis().evidence["h2d_pageable_share"].get<double>(), 63.9 / 128.0);
  // No copy recorded: nothing to advise on.
  EXPECT_EQ(h2d_bound(activity(90, 0)).diagnosis().action,
            "Inspect pinned memory, batch transfer, and host-to-device copies.");
  EXPECT_TRUE(h2d_bound(activity(90, 0)).diagnosis().evidence["h2d_pageable_share"].is_null());
}

TEST(H2dAdvice, NumbersAndUnits) {
  EXPECT_EQ(pageable_advice({2.5, 1.5, 3e9, 2.4e9}).value_or(""),
            "1.5 of 2.5 copies per step (2.4 GB of 3.0 GB) come from pageable memory: pin the "
            "batch (tensor.pin_memory(), in the dataset or a loader worker) and copy with "
            ".to(device, /*non_blocking=*/true).");
  EXPECT_EQ(decimal_bytes(4096, 8192), "4.1 KB");
  EXPECT_EQ(decimal_bytes(96e6, 128e6), "96.0 MB");
  EXPECT_EQ(decimal_bytes(5e8, 1.5e9), "0.5 GB");
  EXPECT_EQ(count_text(3.0), "3");
  EXPECT_EQ(count_text(2.0 / 3.0), "0.7");
  EXPECT_FALSE(pageable_advice({0, 0, 0, 0}));
  EXPECT_FALSE(pageable_advice({4, 1, 100, 49}));
}

/// Two DDP ranks. Rank 1 copies 40 ms more per step (h2d 43 vs 3) and so
/// reaches the all-reduce late: backward 60 vs 100, step 147 on both. Cost
/// 40, score 40 / 147 = 0.272 (crit); H2D covers 40 / 40: H2D_STRAGGLER on r1.
model::Telemetry h2d_straggler(const StepGpuActivity& r0, const StepGpuActivity& r1) {
  model::Telemetry t;
  add_active_steps(t, 0, 1, 30, Phases{2, 3, 30, 100, 10, 145}, r0);
  add_active_steps(t, 1, 1, 30, Phases{2, 43, 30, 60, 10, 145}, r1);
  return t;
}

TEST(H2dAdvice, H2DStragglerAdvisesOnTheCulprit) {
  const Section s =
      analyze(h2d_straggler(activity(140, 45, 50e6, 2, 0, 0), activity(140, 5, 50e6, 2, 2, 50e6)));
  const Issue& i = s.diagnosis();
  ASSERT_EQ(i.kind, "H2D_STRAGGLER");
  EXPECT_EQ(i.ranks, std::vector<int>{1});
  EXPECT_EQ(i.summary,
            "r1 has excess H2D burden relative to victim r0 (~27.2% impact; ~100.0% of visible "
            "wait cost).");
  EXPECT_EQ(i.action,
            "Inspect H2D on r1. 2 of 2 copies per step (50.0 MB of 50.0 MB) come from pageable "
            "memory: pin the batch (tensor.pin_memory(), in the dataset or a loader worker) and "
            "copy with .to(device, /*non_blocking=*/true).");
  // Collective evidence (victim 45 - culprit 5 = 40 of the 40 ms cost), then
  // the culprit's copies.
  EXPECT_EQ(i.evidence["collective_culprit_ms"], 5.0);
  EXPECT_EQ(i.evidence["collective_victim_ms"], 45.0);
  EXPECT_EQ(i.evidence["collective_wait_ms"], 40.0);
  EXPECT_EQ(i.evidence["collective_share_of_wait"], 1.0);
  EXPECT_EQ(i.evidence["h2d_pageable_copies_per_step"], 2.0);
  EXPECT_EQ(i.evidence["h2d_pageable_share"], 1.0);
  // The H2D_BOUND finding names the H2D worst rank, r1, and advises on it too.
  const Issue* bound = find_issue(s, "H2D_BOUND");
  ASSERT_NE(bound, nullptr);
  EXPECT_EQ(bound->ranks, std::vector<int>{1});
  EXPECT_EQ(bound->evidence["h2d_pageable_copies_per_step"], 2.0);
}

TEST(H2dAdvice, PinnedCopiesKeepTheSpecActions) {
  const Section s =
      analyze(h2d_straggler(activity(140, 45, 50e6, 2, 0, 0), activity(140, 5, 50e6, 2, 0, 0)));
  EXPECT_EQ(s.diagnosis().action, "Inspect H2D on r1.");
  EXPECT_EQ(find_issue(s, "H2D_BOUND")->action,
            "Inspect pinned memory, batch transfer, and host-to-device copies.");
}

// ---- STRAGGLER: collective share of the wait ------------------------------------

/// Four DDP ranks (docs/diagnosis.md, section 3): r2 waits 25 ms more for
/// input and does 15 ms of untraced work, so it reaches the all-reduce 40 ms
/// late. Culprit r2 (backward 60), victim r1; cost 40, score 40 / 147 =
/// 0.272; input covers 25 / 40 = 0.625 < 0.80: plain STRAGGLER.
model::Telemetry straggler(double victim_collective, double culprit_collective) {
  model::Telemetry t;
  const Phases typical{2, 3, 30, 100, 10, 145};
  const Phases slow{27, 3, 30, 60, 10, 120};
  for (int r : {0, 1, 3}) {
    add_active_steps(t, r, 1, 30, typical, activity(140, victim_collective));
  }
  add_active_steps(t, 2, 1, 30, slow, activity(110, culprit_collective));
  return t;
}

TEST(CollectiveEvidence, StragglerSaysWhenCollectivesExplainTheWait) {
  // Victim r1 spends 42 ms in collectives, culprit r2 6: 36 of the 40 ms cost.
  const Section s = analyze(straggler(42, 6));
  const Issue& i = s.diagnosis();
  ASSERT_EQ(i.kind, "STRAGGLER");
  EXPECT_EQ(i.summary,
            "r2 is slower than victim r1 (~27.2% impact); no measured component explains 80.0% of "
            "visible wait cost. Collective (NCCL) time explains ~90.0% of that cost: r1 spends "
            "36.0 ms more per step in collectives than r2.");
  EXPECT_EQ(i.action, "Inspect synchronization, collectives, and unattributed work around r2.");
  EXPECT_EQ(i.evidence.dump(),
            R"({"component":"sync_or_unattributed","culprit_rank":2,"victim_rank":1,)"
            R"("visible_metric":"backward","visible_culprit_ms":60.0,"visible_victim_ms":100.0,)"
            R"("visible_cost_ms":40.0,"step_time_ms":147.0,)"
            R"("component_excesses_ms":{"input":25.0,"h2d":0.0,"compute":0.0},)"
            R"("component_coverage":{"input":0.625,"h2d":0.0,"compute":0.0},)"
            R"("collective_culprit_ms":6.0,"collective_victim_ms":42.0,)"
            R"("collective_wait_ms":36.0,"collective_share_of_wait":0.9})");
}

TEST(CollectiveEvidence, StragglerBelowHalfKeepsTheSpecSummary) {
  // 19 ms of 40 (0.475): evidence only. At exactly 20 of 40: the sentence.
  const Section below = analyze(straggler(25, 6));
  EXPECT_EQ(below.diagnosis().summary,
            "r2 is slower than victim r1 (~27.2% impact); no measured component explains 80.0% of "
            "visible wait cost.");
  EXPECT_DOUBLE_EQ(below.diagnosis().evidence["collective_share_of_wait"].get<double>(), 0.475);
  const Section half = analyze(straggler(26, 6));
  EXPECT_NE(half.diagnosis().summary.find("explains ~50.0% of that cost"), std::string::npos);
  // The culprit spending more in collectives than the victim: no wait measured.
  const Section none = analyze(straggler(6, 10));
  EXPECT_EQ(none.diagnosis().evidence["collective_wait_ms"], 0.0);
  EXPECT_EQ(none.diagnosis().evidence["collective_share_of_wait"], 0.0);
}

TEST(CollectiveEvidence, StragglerNeedsRecordsOnBothRanks) {
  model::Telemetry t = straggler(42, 6);
  t.steps.edit([](model::StepRecord& r) {
    if (r.global_rank == 2) r.gpu_activity.reset();
  });
  const Section section = analyze(t);
  const Issue& i = section.diagnosis();
  ASSERT_EQ(i.kind, "STRAGGLER");
  EXPECT_FALSE(i.evidence.contains("collective_share_of_wait"));
  EXPECT_EQ(i.summary,
            "r2 is slower than victim r1 (~27.2% impact); no measured component explains 80.0% of "
            "visible wait cost.");
}

// ---- RESIDUAL_HEAVY: collective share of the residual ---------------------------

/// One rank per entry of `collective`, 30 steps on the CPU clock: input 5,
/// compute 30 + 40 + 5, traced 95: residual 20 of a 100 ms step (crit).
model::Telemetry residual_heavy(const std::vector<double>& collective) {
  model::Telemetry t;
  for (std::size_t r = 0; r < collective.size(); ++r) {
    for (std::int64_t s = 1; s <= 30; ++s) {
      model::StepRecord rec = step_record(int(r), s, Phases{5, std::nullopt, 30, 40, 5, 95});
      rec.gpu_activity = activity(50, collective[r]);
      t.steps.push_back(rec);
    }
  }
  return t;
}

TEST(CollectiveEvidence, ResidualHeavySaysWhenCollectivesCouldBeIt) {
  const Section s = analyze(residual_heavy({15}));
  const Issue& i = s.diagnosis();
  ASSERT_EQ(i.kind, "RESIDUAL_HEAVY");
  EXPECT_EQ(i.summary,
            "Residual time is 20.0% of the typical CPU Step Time. Collective (NCCL) kernels ran "
            "15.0 ms per step, up to ~75.0% of the residual.");
  EXPECT_EQ(i.action,
            "Inspect collectives outside the traced phases (metric or loss all-reduces, barriers), "
            "then logging, checkpointing, validation, or unobserved transfers.");
  EXPECT_EQ(i.evidence.dump(), R"({"collective_ms":15.0,"collective_share_of_residual":0.75})");
}

TEST(CollectiveEvidence, ResidualHeavyBelowHalfKeepsTheSpecText) {
  const Section section = analyze(residual_heavy({4}));
  const Issue& i = section.diagnosis();
  EXPECT_EQ(i.summary, "Residual time is 20.0% of the typical CPU Step Time.");
  EXPECT_EQ(i.action,
            "Inspect work outside traced phases, CPU stalls, logging, checkpointing, validation, "
            "or unobserved transfers.");
  EXPECT_EQ(i.evidence.dump(), R"({"collective_ms":4.0,"collective_share_of_residual":0.2})");
  // More collective time than residual: the share is capped at 1.
  EXPECT_EQ(analyze(residual_heavy({30})).diagnosis().evidence["collective_share_of_residual"],
            1.0);
}

TEST(CollectiveEvidence, ResidualHeavyTypicalRankIsTheMedian) {
  // Shares 2/20, 12/20, 18/20 -> median 0.6; collective median 12.
  const Section section = analyze(residual_heavy({2, 12, 18}));
  const Issue& i = section.diagnosis();
  ASSERT_EQ(i.kind, "RESIDUAL_HEAVY");
  EXPECT_EQ(i.evidence.dump(), R"({"collective_ms":12.0,"collective_share_of_residual":0.6})");
  EXPECT_NE(i.summary.find("ran 12.0 ms per step, up to ~60.0% of the residual."),
            std::string::npos);
}

TEST(CollectiveEvidence, ResidualHeavyWithoutRecordsKeepsEmptyEvidence) {
  model::Telemetry t = residual_heavy({15});
  t.steps.edit([](model::StepRecord& r) { r.gpu_activity.reset(); });
  const Section section = analyze(t);
  const Issue& i = section.diagnosis();
  EXPECT_EQ(i.evidence.dump(), "{}");
  EXPECT_EQ(i.summary, "Residual time is 20.0% of the typical CPU Step Time.");
}

// ---- GPU idle beside GPU utilisation (System) -------------------------------------

model::SystemSample system_sample(int node, double util) {
  model::SystemSample s;
  s.node_rank = node;
  s.ts = 1764662400.0 + node;
  s.cpu_percent = 10.0;
  model::GpuSample g;
  g.index = 0;
  g.util_percent = util;
  s.gpus.push_back(g);
  return s;
}

/// Ranks 0, 1 on node 0 and rank 2 on node 1; GPU step time 100 ms; busy
/// 75, 25, 75: idle 0.25, 0.75, 0.25 (exact in binary). Node 0: (0.25 +
/// 0.75) / 2 = 0.5; node 1: 0.25.
model::Telemetry two_nodes(bool with_activity) {
  model::Telemetry t;
  const Phases p{10, 0, 30, 50, 10, 90};
  const double busy[] = {75, 25, 75};
  for (int r = 0; r < 3; ++r) {
    model::RankIdentity id;
    id.global_rank = r;
    id.node_rank = r < 2 ? 0 : 1;
    t.ranks.push_back(id);
    for (std::int64_t s = 1; s <= 30; ++s) {
      model::StepRecord rec = step_record(r, s, p, p);
      if (with_activity) rec.gpu_activity = activity(busy[r], 1);
      t.steps.push_back(rec);
    }
  }
  t.system = {system_sample(0, 60), system_sample(1, 90)};
  return t;
}

TEST(GpuIdle, SystemNodesShowTheirRanksIdleBesideUtilisation) {
  const Summary s = summarize(two_nodes(true));
  EXPECT_EQ(s.system.metric_names,
            (std::vector<std::string>{"cpu_percent", "ram_bytes", "ram_percent", "gpu_util_percent",
                                      "gpu_idle_fraction", "gpu_mem_bytes", "gpu_mem_percent",
                                      "gpu_temp_c", "gpu_power_w", "gpu_headroom_bytes"}));
  EXPECT_EQ(row_value(s.system, "0", "gpu_idle_fraction"), 0.5);
  EXPECT_EQ(row_value(s.system, "1", "gpu_idle_fraction"), 0.25);
  const std::size_t i = *s.system.metric_index("gpu_idle_fraction");
  EXPECT_EQ(s.system.average[i], 0.375);  // (0.5 + 0.25) / 2
  EXPECT_EQ(s.system.worst[i].value, 0.5);
  EXPECT_EQ(s.system.worst[i].idx, "0");   // more idle is worse
  EXPECT_EQ(s.system.median[i].idx, "1");  // a tie at the median: the lower value
  // The neighbours keep their values and positions.
  EXPECT_EQ(*s.system.average[*s.system.metric_index("gpu_util_percent")], 75.0);
  EXPECT_EQ(s.system.rows[0].metrics.size(), s.system.metric_names.size());
  // Per rank, in Step Time.
  EXPECT_EQ(row_value(s.step_time, "1", "gpu_idle_fraction"), 0.75);
}

TEST(GpuIdle, WithoutRecordsTheSystemKeepsTheSpecMetrics) {
  const Summary s = summarize(two_nodes(false));
  EXPECT_FALSE(s.system.metric_index("gpu_idle_fraction").has_value());
  EXPECT_EQ(s.system.metric_names.size(), 9u);
  EXPECT_EQ(s.step_time.metric_names, kSpecMetrics);
}

TEST(GpuIdle, RankOfUnknownNodeCountsTowardTheOnlyNode) {
  model::Telemetry t = two_nodes(true);
  t.ranks.clear();  // no identities: node unknown
  t.system = {system_sample(0, 60)};
  const Summary s = summarize(t);
  // (0.25 + 0.75 + 0.25) / 3
  EXPECT_NEAR(*row_value(s.system, "0", "gpu_idle_fraction"), 1.25 / 3.0, 1e-12);
}

}  // namespace
}  // namespace traceml::analysis
