// Step Memory (spec §4.4, §5.4, §5.6 with DECISIONS.md quirks 4, 7 and 9):
// every rule at its thresholds, the gates, ordering, the primary's confidence
// and note, the neutral states, and the payload and card values.
#include "analysis/step_memory_section.hpp"

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "analysis/summary.hpp"

namespace traceml::analysis {
namespace {

using model::Telemetry;

constexpr double kGiB = 1073741824.0;

struct Peaks {
  double allocated;
  double reserved;
};

/// Rows of one rank for steps first..last, peaks from f(step).
void add_steps(Telemetry& t, int rank, std::int64_t first, std::int64_t last,
               const std::function<Peaks(std::int64_t)>& f) {
  for (std::int64_t s = first; s <= last; ++s) {
    model::StepMemoryRecord r;
    r.global_rank = rank;
    r.step = s;
    r.device = "cuda:" + std::to_string(rank);
    const Peaks p = f(s);
    r.peak_allocated_bytes = p.allocated;
    r.peak_reserved_bytes = p.reserved;
    t.step_memory.push_back(r);
  }
}

void add_constant(Telemetry& t, int rank, std::int64_t steps, double allocated, double reserved) {
  add_steps(t, rank, 1, steps, [&](std::int64_t) { return Peaks{allocated, reserved}; });
}

/// A process sample of a GPU process reporting the device total (or none).
void add_gpu_total(Telemetry& t, std::optional<double> total) {
  model::ProcessSample p;
  p.gpu = model::ProcessGpu{};
  p.gpu->total_bytes = total;
  t.process.push_back(p);
}

StepMemoryAnalysis analyze(const Telemetry& t, std::int64_t window = 10000) {
  Options o;
  o.window = window;
  return step_memory_analysis(t, o);
}

std::vector<std::string> kinds_of(const Section& s) {
  std::vector<std::string> out;
  for (const auto& i : s.issues)
    out.push_back(i.kind + "/" + *i.metric);
  return out;
}

/// Creep shape over 50 steps (index = step - 1): base for 0..19, base + half
/// a GiB for 20..39, base + top for 40..49. With 50 points and no warmup the
/// bands are baseline [7, 13), mid [22, 28), recent [45, 50), so the band
/// averages are exactly base, base + 0.5 GiB and base + top.
double creep_value(std::int64_t step, double base, double top) {
  const std::int64_t i = step - 1;
  if (i < 20) return base;
  if (i < 40) return base + 0.5 * kGiB;
  return base + top;
}

// ---- neutral states ---------------------------------------------------------

TEST(StepMemorySectionTest, NoRowsIsNoDataWithAnEmptyPayload) {
  const auto a = analyze(Telemetry{});
  const Section& s = a.section;
  EXPECT_EQ(s.name, "step_memory");
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "NO_DATA");
  EXPECT_EQ(i.status, "NO DATA");
  EXPECT_EQ(i.severity, Severity::Info);
  EXPECT_EQ(i.summary, "No step-memory data yet.");
  EXPECT_EQ(i.action, "Wait for more completed steps.");
  EXPECT_EQ(i.metric, std::optional<std::string>("peak_reserved"));
  EXPECT_FALSE(i.phase);
  EXPECT_FALSE(i.score);
  EXPECT_FALSE(i.share_pct);
  EXPECT_FALSE(i.skew_pct);
  EXPECT_TRUE(i.ranks.empty());
  EXPECT_EQ(i.evidence.dump(), R"({"confidence":0.0,"steps_used":0})");
  EXPECT_DOUBLE_EQ(a.primary.confidence, 0.0);

  EXPECT_EQ(s.metadata.mode, "no_data");
  EXPECT_FALSE(s.metadata.duration_s);
  EXPECT_FALSE(s.metadata.samples);
  EXPECT_FALSE(s.metadata.nodes_observed);
  EXPECT_EQ(s.metadata.global_ranks_seen, 0);
  EXPECT_EQ(s.metadata.global_ranks_used, 0);
  EXPECT_EQ(s.metadata.training_total_steps, 0);
  EXPECT_FALSE(s.metadata.training_latest_step);

  EXPECT_EQ(s.index_by, "global_rank");
  EXPECT_EQ(s.window.kind, "step_window");
  EXPECT_EQ(s.window.alignment, "common_steps");
  EXPECT_FALSE(s.window.samples);
  EXPECT_EQ(s.window.steps_analyzed, 0);
  EXPECT_FALSE(s.window.start_step);
  EXPECT_FALSE(s.window.end_step);
  EXPECT_FALSE(s.window.completed_step);
  EXPECT_FALSE(s.window.window_size);
  EXPECT_FALSE(s.window.diagnosis_clock);

  EXPECT_EQ(s.metric_names,
            (std::vector<std::string>{"peak_allocated_bytes", "peak_reserved_bytes"}));
  ASSERT_EQ(s.average.size(), 2u);
  ASSERT_EQ(s.median.size(), 2u);
  ASSERT_EQ(s.worst.size(), 2u);
  for (std::size_t m = 0; m < 2; ++m) {
    EXPECT_FALSE(s.average[m]);
    EXPECT_FALSE(s.median[m].value);
    EXPECT_FALSE(s.median[m].idx);
    EXPECT_FALSE(s.worst[m].value);
    EXPECT_FALSE(s.worst[m].idx);
  }
  EXPECT_TRUE(s.rows.empty());
  EXPECT_EQ(s.units, (std::vector<std::pair<std::string, std::string>>{{"memory", "bytes"}}));
  EXPECT_EQ(s.card,
            "TraceML Step Memory Summary | steps 0 | global ranks 0\n"
            "Step Memory\n"
            "- Diagnosis: NO DATA\n"
            "- Scope: latest step n/a\n"
            "- Stats: n/a\n"
            "- Why: No step-memory data yet.");
}

TEST(StepMemorySectionTest, NoGpuWhenEveryObservationSaysSo) {
  Telemetry t;
  t.process.push_back(model::ProcessSample{});  // gpu absent
  t.system.push_back(model::SystemSample{});    // no GPUs on the node
  const auto a = analyze(t);
  const Issue& i = a.section.diagnosis();
  ASSERT_EQ(a.section.issues.size(), 1u);
  EXPECT_EQ(i.kind, "NO_GPU");
  EXPECT_EQ(i.status, "NO GPU");
  EXPECT_EQ(i.severity, Severity::Info);
  EXPECT_EQ(i.summary, "No GPU detected. Step memory uses torch-based GPU memory telemetry.");
  EXPECT_EQ(i.action, "Step memory is not applicable for this run.");
  EXPECT_EQ(i.metric, std::optional<std::string>("peak_reserved"));
  EXPECT_TRUE(i.ranks.empty());
  EXPECT_EQ(i.evidence.dump(), R"({"confidence":1.0,"steps_used":0})");
  EXPECT_DOUBLE_EQ(a.primary.confidence, 1.0);
  EXPECT_EQ(a.section.card,
            "TraceML Step Memory Summary | steps 0 | global ranks 0\n"
            "Step Memory\n"
            "- Diagnosis: NO GPU\n"
            "- Scope: latest step n/a\n"
            "- Stats: n/a\n"
            "- Why: No GPU detected. Step memory uses torch-based GPU memory telemetry.");

  // System samples alone are observations too.
  Telemetry only_system;
  only_system.system.push_back(model::SystemSample{});
  EXPECT_EQ(analyze(only_system).section.diagnosis().kind, "NO_GPU");
}

TEST(StepMemorySectionTest, AnyGpuObservationOrNoneAtAllIsNotNoGpu) {
  Telemetry t;
  t.process.push_back(model::ProcessSample{});  // this process had no GPU...
  model::SystemSample node;
  node.gpus.push_back(model::GpuSample{});  // ...but the node has one
  t.system.push_back(node);
  EXPECT_EQ(analyze(t).section.diagnosis().kind, "NO_DATA");

  Telemetry gpu_process;
  gpu_process.system.push_back(model::SystemSample{});
  add_gpu_total(gpu_process, std::nullopt);
  EXPECT_EQ(analyze(gpu_process).section.diagnosis().kind, "NO_DATA");

  // Nothing observed: not known to lack a GPU.
  EXPECT_EQ(analyze(Telemetry{}).section.diagnosis().kind, "NO_DATA");
}

TEST(StepMemorySectionTest, NoGpuSilencesTheRulesButKeepsTheStatistics) {
  Telemetry t;
  add_steps(t, 0, 1, 50, [](std::int64_t s) {
    const double v = creep_value(s, 4 * kGiB, kGiB);
    return Peaks{v, v};
  });
  t.process.push_back(model::ProcessSample{});  // no GPU
  const auto a = analyze(t);
  const Section& s = a.section;
  ASSERT_EQ(s.issues.size(), 1u);  // the confirmed creep is not reported
  EXPECT_EQ(s.diagnosis().kind, "NO_GPU");
  EXPECT_EQ(s.diagnosis().evidence.dump(), R"({"confidence":1.0,"steps_used":0})");
  EXPECT_EQ(s.window.steps_analyzed, 50);
  EXPECT_EQ(s.worst[1].value, std::optional<double>(5 * kGiB));
  EXPECT_EQ(s.card,
            "TraceML Step Memory Summary | steps 50 | global ranks 1\n"
            "Step Memory\n"
            "- Diagnosis: NO GPU\n"
            "- Scope: last 50 aligned steps\n"
            "- Stats: peak reserved peak 5.00 GB\n"
            "- Why: No GPU detected. Step memory uses torch-based GPU memory telemetry.");
}

/// Two ranks; rank 1 holds 99 % of a 100 GiB device in reserved memory.
Telemetry pressured_run(std::int64_t steps) {
  Telemetry t;
  add_constant(t, 0, steps, 4 * kGiB, 5 * kGiB);
  add_constant(t, 1, steps, 6 * kGiB, 99 * kGiB);
  add_gpu_total(t, 100 * kGiB);
  return t;
}

TEST(StepMemorySectionTest, FortyNineStepsAreNotEnoughForAnyRule) {
  const auto a = analyze(pressured_run(49));
  const Section& s = a.section;
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "NO_DATA");
  EXPECT_EQ(i.summary, "Need at least 50 completed steps.");
  EXPECT_EQ(i.action, "Keep monitoring.");
  // Both metrics have 49 steps: the tie goes to the first, peak_allocated,
  // whose worst rank is 1 (6 GiB against 4 GiB).
  EXPECT_EQ(i.metric, std::optional<std::string>("peak_allocated"));
  EXPECT_EQ(i.ranks, std::vector<int>{1});
  EXPECT_EQ(i.evidence.dump(), R"({"confidence":0.0,"steps_used":49,"worst_rank":1})");
  EXPECT_EQ(a.primary.steps_used, 49);
  // allocated: median of {4, 6} GiB = 5 GiB, skew (6 - 5) / 5 = 20 %.
  EXPECT_EQ(s.card,
            "TraceML Step Memory Summary | steps 49 | global ranks 2\n"
            "Step Memory\n"
            "- Diagnosis: NO DATA\n"
            "- Scope: last 49 aligned steps\n"
            "- Stats: peak allocated worst 6.00 GB on r1 | skew 20.0%\n"
            "- Why: Need at least 50 completed steps.");
}

TEST(StepMemorySectionTest, FiftyStepsDiagnose) {
  const Section s = analyze(pressured_run(50)).section;
  // reserved: pressure 99 / 100 = 0.99 (crit); skew vs median 52 GiB =
  // 47 / 52 = 0.904 at pressure 0.99 (crit). allocated: pressure 0.06, nothing.
  EXPECT_EQ(kinds_of(s),
            (std::vector<std::string>{"HIGH_PRESSURE/peak_reserved", "IMBALANCE/peak_reserved"}));
  EXPECT_EQ(s.issues[0].severity, Severity::Crit);
  EXPECT_EQ(s.issues[1].severity, Severity::Crit);
  EXPECT_DOUBLE_EQ(*s.issues[1].score, 47.0 / 52.0);
}

TEST(StepMemorySectionTest, BalancedWhenNothingFires) {
  Telemetry t;
  add_constant(t, 0, 60, 100.0, 200.0);
  add_constant(t, 1, 60, 100.0, 210.0);
  add_gpu_total(t, 10000.0);
  const auto a = analyze(t);
  const Issue& i = a.section.diagnosis();
  ASSERT_EQ(a.section.issues.size(), 1u);
  EXPECT_EQ(i.kind, "BALANCED");
  EXPECT_EQ(i.status, "BALANCED");
  EXPECT_EQ(i.summary, "No clear pressure, imbalance, or creep signal.");
  EXPECT_EQ(i.action, "Keep monitoring.");
  EXPECT_EQ(i.metric, std::optional<std::string>("peak_reserved"));
  EXPECT_FALSE(i.phase);
  EXPECT_FALSE(i.score);
  EXPECT_FALSE(i.skew_pct);
  EXPECT_EQ(i.ranks, std::vector<int>{1});
  // The spec's own example shape.
  EXPECT_EQ(i.evidence.dump(), R"({"confidence":0.75,"steps_used":60,"worst_rank":1})");
  EXPECT_DOUBLE_EQ(a.primary.confidence, 0.75);
  EXPECT_FALSE(a.primary.note);
}

// ---- HIGH_PRESSURE ------------------------------------------------------------

struct PressureCase {
  double reserved;  // bytes of a 10000-byte device
  const char* kind;
  Severity severity;
  double confidence;
};

class PressureBoundary : public ::testing::TestWithParam<PressureCase> {};

TEST_P(PressureBoundary, SeverityFollowsTheFraction) {
  const PressureCase c = GetParam();
  Telemetry t;
  add_constant(t, 0, 50, 1000.0, c.reserved);
  add_gpu_total(t, 10000.0);
  const auto a = analyze(t);
  EXPECT_EQ(a.section.diagnosis().kind, c.kind);
  EXPECT_EQ(a.section.diagnosis().severity, c.severity);
  EXPECT_DOUBLE_EQ(a.primary.confidence, c.confidence);
}

INSTANTIATE_TEST_SUITE_P(
    StepMemorySectionTest, PressureBoundary,
    ::testing::Values(PressureCase{9199.0, "BALANCED", Severity::Info, 0.75},       // 0.9199
                      PressureCase{9200.0, "HIGH_PRESSURE", Severity::Warn, 0.80},  // 0.92
                      PressureCase{9699.0, "HIGH_PRESSURE", Severity::Warn, 0.80},  // 0.9699
                      PressureCase{9700.0, "HIGH_PRESSURE", Severity::Crit, 0.90},  // 0.97
                      PressureCase{10000.0, "HIGH_PRESSURE", Severity::Crit, 0.90}));

TEST(StepMemorySectionTest, HighPressureIssueFields) {
  Telemetry t;
  add_constant(t, 0, 50, 1000.0, 9200.0);
  add_gpu_total(t, 10000.0);
  const Issue i = analyze(t).section.diagnosis();
  EXPECT_EQ(i.kind, "HIGH_PRESSURE");
  EXPECT_EQ(i.status, "HIGH PRESSURE");
  EXPECT_EQ(i.summary, "peak reserved is near device capacity (~92%).");
  EXPECT_EQ(i.action, "Reduce memory load.");
  EXPECT_EQ(i.metric, std::optional<std::string>("peak_reserved"));
  EXPECT_EQ(i.phase, std::optional<std::string>("memory"));
  EXPECT_EQ(i.score, std::optional<double>(0.92));
  EXPECT_FALSE(i.share_pct);
  EXPECT_EQ(i.skew_pct, std::optional<double>(0.0));  // one rank: no skew
  EXPECT_EQ(i.ranks, std::vector<int>{0});
  EXPECT_EQ(i.evidence.dump(), R"({"pressure_frac":0.92})");
}

TEST(StepMemorySectionTest, PressureUsesTheLargestReportedDeviceTotal) {
  Telemetry t;
  add_constant(t, 0, 50, 10.0, 95.0);
  add_gpu_total(t, 100.0);  // 0.95 against this one ...
  add_gpu_total(t, 200.0);  // ... but MAX(total) = 200: 0.475, no pressure
  add_gpu_total(t, std::nullopt);
  EXPECT_EQ(analyze(t).section.diagnosis().kind, "BALANCED");

  // A zero total is "not reported": no pressure can be computed.
  Telemetry zero;
  add_constant(zero, 0, 50, 10.0, 95.0);
  add_gpu_total(zero, 0.0);
  EXPECT_EQ(analyze(zero).section.diagnosis().kind, "BALANCED");
}

TEST(StepMemorySectionTest, AllocatedPressureIsReportedOnItsOwnMetric) {
  Telemetry t;
  add_constant(t, 0, 50, 9300.0, 9300.0);
  add_gpu_total(t, 10000.0);
  const Section s = analyze(t).section;
  // Equal scores and severities: the metric name decides.
  EXPECT_EQ(kinds_of(s), (std::vector<std::string>{"HIGH_PRESSURE/peak_allocated",
                                                   "HIGH_PRESSURE/peak_reserved"}));
  EXPECT_EQ(s.issues[0].summary, "peak allocated is near device capacity (~93%).");
}

// ---- IMBALANCE ----------------------------------------------------------------

struct ImbalanceCase {
  double worst;  // rank 2's reserved bytes; ranks 0 and 1 hold 1000 (the median)
  double total;  // device bytes
  std::optional<Severity> severity;
};

class ImbalanceBoundary : public ::testing::TestWithParam<ImbalanceCase> {};

TEST_P(ImbalanceBoundary, NeedsBothSkewAndPressure) {
  const ImbalanceCase c = GetParam();
  Telemetry t;
  add_constant(t, 0, 50, 100.0, 1000.0);
  add_constant(t, 1, 50, 100.0, 1000.0);
  add_constant(t, 2, 50, 100.0, c.worst);
  add_gpu_total(t, c.total);
  const auto a = analyze(t);
  const Issue& i = a.section.diagnosis();
  if (!c.severity) {
    EXPECT_EQ(i.kind, "BALANCED");
    return;
  }
  EXPECT_EQ(i.kind, "IMBALANCE");
  EXPECT_EQ(i.severity, *c.severity);
  EXPECT_DOUBLE_EQ(a.primary.confidence, *c.severity == Severity::Crit ? 0.85 : 0.75);
  ASSERT_EQ(a.section.issues.size(), 1u);
}

INSTANTIATE_TEST_SUITE_P(
    StepMemorySectionTest, ImbalanceBoundary,
    ::testing::Values(
        // skew = (worst - 1000) / 1000, pressure = worst / total
        ImbalanceCase{1200.0, 4000.0, Severity::Warn},  // 0.20 at 0.30: warn pair met
        ImbalanceCase{1199.0, 4000.0, std::nullopt},    // 0.199 at 0.29975
        ImbalanceCase{1200.0, 4001.0, std::nullopt},    // 0.20 at 0.29993
        ImbalanceCase{1300.0, 2600.0, Severity::Crit},  // 0.30 at 0.50: crit pair met
        ImbalanceCase{1300.0, 2601.0, Severity::Warn},  // 0.30 at 0.4998: warn only
        ImbalanceCase{1299.0, 2598.0, Severity::Warn},  // 0.299 at 0.50: warn only
        ImbalanceCase{5000.0, 20000.0, std::nullopt},   // 4.0 at 0.25: no pressure
        ImbalanceCase{1100.0, 1200.0, std::nullopt}));  // 0.10 at 0.917: no skew

TEST(StepMemorySectionTest, ImbalanceIssueFields) {
  Telemetry t;
  add_constant(t, 0, 50, 100.0, 1000.0);
  add_constant(t, 1, 50, 100.0, 1000.0);
  add_constant(t, 2, 50, 100.0, 1200.0);
  add_gpu_total(t, 4000.0);
  const Section s = analyze(t).section;
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.status, "IMBALANCE");
  EXPECT_EQ(i.summary, "peak reserved shows +20.0% cross-rank skew at ~30% of device capacity.");
  EXPECT_EQ(i.action, "Inspect per-rank workload.");
  EXPECT_EQ(i.metric, std::optional<std::string>("peak_reserved"));
  EXPECT_EQ(i.phase, std::optional<std::string>("memory"));
  EXPECT_EQ(i.score, std::optional<double>(0.2));
  EXPECT_EQ(i.skew_pct, std::optional<double>(0.2));
  EXPECT_EQ(i.ranks, std::vector<int>{2});
  EXPECT_EQ(i.evidence.dump(), R"({"skew_pct":0.2,"pressure_frac":0.3})");
  // 1200 B = 1.171875 KB.
  EXPECT_EQ(s.card,
            "TraceML Step Memory Summary | steps 50 | global ranks 3\n"
            "Step Memory\n"
            "- Diagnosis: IMBALANCE\n"
            "- Scope: last 50 aligned steps\n"
            "- Stats: peak reserved worst 1.17 KB on r2 | skew 20.0%\n"
            "- Why: peak reserved shows +20.0% cross-rank skew at ~30% of device capacity.");
}

TEST(StepMemorySectionTest, ImbalanceNeedsADeviceTotal) {
  Telemetry t;
  add_constant(t, 0, 50, 100.0, 1000.0);
  add_constant(t, 1, 50, 100.0, 3000.0);  // skew (3000 - 2000) / 2000 = 0.5
  add_gpu_total(t, std::nullopt);
  const Issue i = analyze(t).section.diagnosis();
  EXPECT_EQ(i.kind, "BALANCED");
  EXPECT_EQ(i.evidence.dump(), R"({"confidence":0.75,"steps_used":50,"worst_rank":1})");
}

// ---- creep --------------------------------------------------------------------

/// One rank whose allocated peak follows creep_value(base 4 GiB, top); the
/// reserved peak stays at 8 GiB.
Telemetry allocated_creep(double top, std::int64_t steps = 50) {
  Telemetry t;
  add_steps(t, 0, 1, steps, [top](std::int64_t s) {
    return Peaks{creep_value(s, 4 * kGiB, top), 8 * kGiB};
  });
  return t;
}

TEST(StepMemorySectionTest, CreepConfirmedAtExactlyOneGiB) {
  const auto a = analyze(allocated_creep(kGiB));
  const Section& s = a.section;
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "CREEP_CONFIRMED");
  EXPECT_EQ(i.status, "MEMORY CREEP");
  EXPECT_EQ(i.severity, Severity::Warn);
  EXPECT_EQ(i.summary, "peak allocated is rising across the window.");
  EXPECT_EQ(i.action, "Check retained tensors or caches.");
  EXPECT_EQ(i.metric, std::optional<std::string>("peak_allocated"));
  EXPECT_EQ(i.phase, std::optional<std::string>("memory"));
  // delta 1 GiB / 100 MiB = 10.24; growth 1/4 on both series:
  // 10.24 + 10 * 0.25 + 6 * 0.25 = 14.24.
  ASSERT_TRUE(i.score);
  EXPECT_DOUBLE_EQ(*i.score, 14.24);
  EXPECT_EQ(i.skew_pct, std::optional<double>(0.0));
  EXPECT_EQ(i.ranks, std::vector<int>{0});
  const char* note = "baseline 4294967296 B -> recent 5368709120 B, +1073741824 B, (~25%)";
  EXPECT_EQ(i.evidence.dump(), std::string(R"({"overall_abs_delta_bytes":1073741824.0,)") +
                                   R"("overall_worst_growth_pct":0.25,)" +
                                   R"("overall_median_growth_pct":0.25,"note":")" + note + R"("})");
  EXPECT_EQ(a.primary.kind, DiagnosisKind::CreepConfirmed);
  EXPECT_DOUBLE_EQ(a.primary.confidence, 0.88);
  EXPECT_EQ(a.primary.note, std::optional<std::string>(note));
  EXPECT_EQ(a.primary.steps_used, 50);
  EXPECT_EQ(a.primary.worst_rank, std::optional<int>(0));
}

TEST(StepMemorySectionTest, CreepEarlyOneByteBelowOneGiB) {
  const auto a = analyze(allocated_creep(kGiB - 1.0));
  const Issue& i = a.section.diagnosis();
  ASSERT_EQ(a.section.issues.size(), 1u);
  EXPECT_EQ(i.kind, "CREEP_EARLY");
  EXPECT_EQ(i.status, "MEMORY RISING");
  EXPECT_EQ(i.severity, Severity::Info);
  EXPECT_EQ(i.summary, "peak allocated is rising from early to recent steps.");
  EXPECT_EQ(i.action, "Watch the next window.");
  // growth g = (2^30 - 1) / 2^32 on both series.
  const double g = (kGiB - 1.0) / (4 * kGiB);
  EXPECT_DOUBLE_EQ(*i.score, (kGiB - 1.0) / 104857600.0 + g * 10.0 + g * 6.0);
  const char* note = "baseline 4294967296 B -> recent 5368709119 B, +1073741823 B, (~25%)";
  EXPECT_EQ(i.evidence["note"], note);
  EXPECT_EQ(i.evidence["overall_abs_delta_bytes"], 1073741823.0);
  EXPECT_DOUBLE_EQ(a.primary.confidence, 0.60);
  EXPECT_EQ(a.primary.note, std::optional<std::string>(note));
}

TEST(StepMemorySectionTest, CreepFromAZeroBaselineHasNoGrowth) {
  Telemetry t;
  add_steps(t, 0, 1, 50, [](std::int64_t s) { return Peaks{creep_value(s, 0.0, kGiB), 0.0}; });
  const Issue i = analyze(t).section.diagnosis();
  EXPECT_EQ(i.kind, "CREEP_CONFIRMED");
  EXPECT_DOUBLE_EQ(*i.score, 10.24);  // the growth terms count as 0
  EXPECT_EQ(i.evidence.dump(),
            R"({"overall_abs_delta_bytes":1073741824.0,"overall_worst_growth_pct":null,)"
            R"("overall_median_growth_pct":null,)"
            R"("note":"baseline 0 B -> recent 1073741824 B, +1073741824 B"})");
}

TEST(StepMemorySectionTest, CreepNeedsEveryBandAboveThePrevious) {
  // mid == baseline: a single late jump is not creep.
  Telemetry jump;
  add_steps(jump, 0, 1, 50, [](std::int64_t s) {
    return Peaks{s > 40 ? 6 * kGiB : 4 * kGiB, 8 * kGiB};
  });
  EXPECT_EQ(analyze(jump).section.diagnosis().kind, "BALANCED");

  // recent == mid: growth that stopped.
  Telemetry plateau;
  add_steps(plateau, 0, 1, 50, [](std::int64_t s) {
    return Peaks{s > 20 ? 6 * kGiB : 4 * kGiB, 8 * kGiB};
  });
  EXPECT_EQ(analyze(plateau).section.diagnosis().kind, "BALANCED");

  // Falling memory.
  Telemetry falling;
  add_steps(falling, 0, 1, 50, [](std::int64_t s) {
    return Peaks{10 * kGiB - creep_value(s, 0.0, kGiB), 10 * kGiB};
  });
  EXPECT_EQ(analyze(falling).section.diagnosis().kind, "BALANCED");
}

TEST(StepMemorySectionTest, CreepNeedsTheMedianRankToRiseToo) {
  // Rank 2 creeps, ranks 0 and 1 stay flat: the worst series rises but the
  // per-step median (a flat rank) does not.
  Telemetry t;
  add_constant(t, 0, 50, 4 * kGiB, 8 * kGiB);
  add_constant(t, 1, 50, 4 * kGiB, 8 * kGiB);
  add_steps(t, 2, 1, 50, [](std::int64_t s) {
    return Peaks{creep_value(s, 4 * kGiB, 2 * kGiB), 8 * kGiB};
  });
  EXPECT_EQ(analyze(t).section.diagnosis().kind, "BALANCED");

  // With rank 1 creeping as well the median rises: confirmed.
  Telemetry two;
  add_constant(two, 0, 50, 4 * kGiB, 8 * kGiB);
  for (int r = 1; r <= 2; ++r) {
    add_steps(two, r, 1, 50, [](std::int64_t s) {
      return Peaks{creep_value(s, 4 * kGiB, 2 * kGiB), 8 * kGiB};
    });
  }
  EXPECT_EQ(analyze(two).section.diagnosis().kind, "CREEP_CONFIRMED");
}

TEST(StepMemorySectionTest, CreepIsGatedAtFiftySteps) {
  // The same rise over 49 steps: no trend is computed at all.
  Telemetry t;
  add_steps(t, 0, 1, 49, [](std::int64_t s) {
    return Peaks{4 * kGiB + static_cast<double>(s) * 0.1 * kGiB, 8 * kGiB};
  });
  EXPECT_EQ(analyze(t).section.diagnosis().kind, "NO_DATA");
  add_steps(t, 0, 50, 50, [](std::int64_t) { return Peaks{9 * kGiB, 8 * kGiB}; });
  EXPECT_EQ(analyze(t).section.diagnosis().kind, "CREEP_CONFIRMED");
}

// ---- ordering -------------------------------------------------------------------

TEST(StepMemorySectionTest, OrderingBySeverityThenScoreThenName) {
  auto kinds = [](double allocated, double reserved) {
    Telemetry t;
    add_constant(t, 0, 50, allocated, reserved);
    add_gpu_total(t, 100.0);
    const Section s = analyze(t).section;
    std::vector<std::string> out;
    for (const auto& i : s.issues)
      out.push_back(*i.metric + ":" + severity_name(i.severity));
    return out;
  };
  // Crit reserved before warn allocated.
  EXPECT_EQ(kinds(93.0, 98.0),
            (std::vector<std::string>{"peak_reserved:crit", "peak_allocated:warn"}));
  // Same severity: the higher pressure first.
  EXPECT_EQ(kinds(93.0, 95.0),
            (std::vector<std::string>{"peak_reserved:warn", "peak_allocated:warn"}));
  // Same score: metric name.
  EXPECT_EQ(kinds(95.0, 95.0),
            (std::vector<std::string>{"peak_allocated:warn", "peak_reserved:warn"}));
}

TEST(StepMemorySectionTest, RulePriorityBeatsSeverity) {
  // reserved {30, 30, 93} of 100: pressure 0.93 (warn) and skew 63/30 = 2.1
  // at 0.93 (crit). The warn pressure still comes first.
  Telemetry t;
  add_constant(t, 0, 50, 10.0, 30.0);
  add_constant(t, 1, 50, 10.0, 30.0);
  add_constant(t, 2, 50, 10.0, 93.0);
  add_gpu_total(t, 100.0);
  const auto a = analyze(t);
  EXPECT_EQ(kinds_of(a.section),
            (std::vector<std::string>{"HIGH_PRESSURE/peak_reserved", "IMBALANCE/peak_reserved"}));
  EXPECT_EQ(a.section.issues[1].severity, Severity::Crit);
  EXPECT_EQ(a.primary.kind, DiagnosisKind::HighPressure);
  EXPECT_EQ(a.primary.severity, Severity::Warn);
  EXPECT_DOUBLE_EQ(a.primary.confidence, 0.80);
  EXPECT_FALSE(a.primary.note);
}

TEST(StepMemorySectionTest, ImbalanceBeforeCreepWhateverTheScore) {
  // Rank 0: 4 -> 5 GiB, rank 1: 8 -> 9 GiB (same creep shape) on a 10 GiB
  // device, both metrics alike. Rank peaks 5 and 9 GiB: median 7, skew 2/7 =
  // 0.286 at pressure 0.9 -> IMBALANCE warn (score 0.286). Worst series 8 -> 9
  // GiB, median series 6 -> 7 GiB: creep score 10.24 + 10/8 + 6/6 = 12.49.
  Telemetry t;
  for (int r = 0; r < 2; ++r) {
    const double base = r == 0 ? 4 * kGiB : 8 * kGiB;
    add_steps(t, r, 1, 50, [base](std::int64_t s) {
      const double v = creep_value(s, base, kGiB);
      return Peaks{v, v};
    });
  }
  add_gpu_total(t, 10 * kGiB);
  const auto a = analyze(t);
  EXPECT_EQ(kinds_of(a.section),
            (std::vector<std::string>{"IMBALANCE/peak_allocated", "IMBALANCE/peak_reserved",
                                      "CREEP_CONFIRMED/peak_allocated",
                                      "CREEP_CONFIRMED/peak_reserved"}));
  EXPECT_EQ(a.section.issues[0].severity, Severity::Warn);
  EXPECT_DOUBLE_EQ(*a.section.issues[0].score, 2.0 / 7.0);
  EXPECT_DOUBLE_EQ(*a.section.issues[2].score, 12.49);
  EXPECT_EQ(a.section.issues[2].ranks, std::vector<int>{1});
  EXPECT_DOUBLE_EQ(a.primary.confidence, 0.75);
}

// ---- payload ------------------------------------------------------------------------

TEST(StepMemorySectionTest, RowsAreWindowMaximaWithLowRankTies) {
  // reserved: rank 0 alternates 100/300 (mean 200, max 300), rank 1 200,
  // rank 2 300. allocated: 50, 70, 60.
  Telemetry t;
  add_steps(t, 0, 1, 50, [](std::int64_t s) { return Peaks{50.0, s % 2 ? 100.0 : 300.0}; });
  add_constant(t, 1, 50, 70.0, 200.0);
  add_constant(t, 2, 50, 60.0, 300.0);
  const auto a = analyze(t);
  const Section& s = a.section;
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.rows[0].key, "0");
  EXPECT_EQ(s.rows[1].key, "1");
  EXPECT_EQ(s.rows[2].key, "2");
  // DECISIONS.md quirk 9: the maximum per-step peak, not the 200 mean.
  EXPECT_EQ(s.rows[0].metrics, (std::vector<std::optional<double>>{50.0, 300.0}));
  EXPECT_EQ(s.rows[1].metrics, (std::vector<std::optional<double>>{70.0, 200.0}));
  EXPECT_EQ(s.rows[2].metrics, (std::vector<std::optional<double>>{60.0, 300.0}));

  EXPECT_DOUBLE_EQ(*s.average[0], 60.0);         // (50 + 70 + 60) / 3
  EXPECT_DOUBLE_EQ(*s.average[1], 800.0 / 3.0);  // (300 + 200 + 300) / 3
  EXPECT_EQ(s.median[0].value, std::optional<double>(60.0));
  EXPECT_EQ(s.median[0].idx, std::optional<std::string>("2"));
  EXPECT_EQ(s.worst[0].value, std::optional<double>(70.0));
  EXPECT_EQ(s.worst[0].idx, std::optional<std::string>("1"));
  // reserved: median 300 held by ranks 0 and 2, worst 300 likewise: rank 0.
  EXPECT_EQ(s.median[1].idx, std::optional<std::string>("0"));
  EXPECT_EQ(s.worst[1].value, std::optional<double>(300.0));
  EXPECT_EQ(s.worst[1].idx, std::optional<std::string>("0"));

  // The diagnosis reads the same maxima: worst rank 0 by the low-rank tie,
  // skew (300 - 300) / 300 = 0.
  EXPECT_EQ(s.diagnosis().kind, "BALANCED");
  EXPECT_EQ(s.diagnosis().ranks, std::vector<int>{0});
  EXPECT_EQ(s.card,
            "TraceML Step Memory Summary | steps 50 | global ranks 3\n"
            "Step Memory\n"
            "- Diagnosis: BALANCED\n"
            "- Scope: last 50 aligned steps\n"
            "- Stats: peak reserved worst 300 B on r0 | skew 0.0%\n"
            "- Why: No clear pressure, imbalance, or creep signal.");
}

TEST(StepMemorySectionTest, MedianTieGoesToTheLowerValue) {
  // Rows 300 (rank 0) and 100 (rank 1): median 200, both 100 away.
  Telemetry t;
  add_constant(t, 0, 5, 300.0, 300.0);
  add_constant(t, 1, 5, 100.0, 100.0);
  const Section s = analyze(t).section;
  EXPECT_EQ(s.median[1].value, std::optional<double>(100.0));
  EXPECT_EQ(s.median[1].idx, std::optional<std::string>("1"));
  EXPECT_EQ(s.worst[1].idx, std::optional<std::string>("0"));
  EXPECT_DOUBLE_EQ(*s.average[1], 200.0);
}

TEST(StepMemorySectionTest, RanksCompareAsNumbers) {
  // Ranks 9 and 10 tie on the worst value: rank 9 wins (9 < 10), and rows
  // are in numeric order although "10" < "9" as strings.
  Telemetry t;
  add_constant(t, 10, 5, 500.0, 500.0);
  add_constant(t, 9, 5, 500.0, 500.0);
  const Section s = analyze(t).section;
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].key, "9");
  EXPECT_EQ(s.rows[1].key, "10");
  EXPECT_EQ(s.worst[1].idx, std::optional<std::string>("9"));
  EXPECT_EQ(s.median[1].idx, std::optional<std::string>("9"));
  EXPECT_EQ(s.diagnosis().ranks, std::vector<int>{9});
}

TEST(StepMemorySectionTest, LaterDuplicateRowsWinAndPartialRowsAreIgnored) {
  Telemetry t;
  add_steps(t, 0, 1, 5, [](std::int64_t s) { return Peaks{100.0, s == 3 ? 1e12 : 100.0}; });
  add_steps(t, 0, 3, 3, [](std::int64_t) { return Peaks{100.0, 150.0}; });  // replaces 1e12
  // Rows missing a peak: rank 7 only has such rows, rank 0 has one at step 9.
  model::StepMemoryRecord partial;
  partial.global_rank = 7;
  partial.step = 2;
  partial.peak_allocated_bytes = 5e9;
  t.step_memory.push_back(partial);
  partial.global_rank = 0;
  partial.step = 9;
  partial.peak_allocated_bytes = std::nullopt;
  partial.peak_reserved_bytes = 5e9;
  t.step_memory.push_back(partial);

  const Section s = analyze(t).section;
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].metrics[1], std::optional<double>(150.0));
  EXPECT_EQ(s.metadata.global_ranks_seen, 1);
  EXPECT_EQ(s.metadata.training_total_steps, 5);
  EXPECT_EQ(s.metadata.training_latest_step, std::optional<std::int64_t>(5));
  EXPECT_EQ(s.window.steps_analyzed, 5);
}

TEST(StepMemorySectionTest, WindowKeepsTheLatestCommonSteps) {
  // Values fall with the step, so only the window decides the maximum.
  Telemetry t;
  add_steps(t, 0, 1, 30, [](std::int64_t s) {
    const double v = 1000.0 - static_cast<double>(s);
    return Peaks{v, v};
  });
  const Section s = analyze(t, 10).section;
  EXPECT_EQ(s.window.steps_analyzed, 10);
  EXPECT_FALSE(s.window.start_step);  // TraceML leaves it null
  EXPECT_EQ(s.window.end_step, std::optional<std::int64_t>(30));
  EXPECT_EQ(s.window.completed_step, std::optional<std::int64_t>(30));
  EXPECT_EQ(s.window.window_size, std::optional<std::int64_t>(10));
  EXPECT_FALSE(s.window.samples);
  EXPECT_EQ(s.rows[0].metrics[0], std::optional<double>(979.0));  // step 21
  EXPECT_EQ(s.metadata.training_total_steps, 30);
  EXPECT_EQ(s.card.substr(s.card.find("- Scope")),
            std::string("- Scope: last 10 aligned steps\n"
                        "- Stats: peak allocated peak 979 B\n"
                        "- Why: Need at least 50 completed steps."));
}

TEST(StepMemorySectionTest, OnlyStepsEveryRankReportedAreAligned) {
  Telemetry t;
  add_constant(t, 0, 60, 100.0, 100.0);
  add_steps(t, 1, 5, 55, [](std::int64_t) { return Peaks{100.0, 100.0}; });
  const Section s = analyze(t).section;
  EXPECT_EQ(s.window.steps_analyzed, 51);  // 5..55
  EXPECT_EQ(s.window.end_step, std::optional<std::int64_t>(55));
  EXPECT_EQ(s.metadata.global_ranks_seen, 2);
  EXPECT_EQ(s.metadata.global_ranks_used, 2);
  EXPECT_EQ(s.metadata.training_total_steps, 60);  // distinct steps seen (quirk 4)
  EXPECT_EQ(s.metadata.training_latest_step, std::optional<std::int64_t>(60));
  EXPECT_EQ(s.diagnosis().kind, "BALANCED");
}

TEST(StepMemorySectionTest, DisjointRanksHaveNoAlignedWindow) {
  Telemetry t;
  add_constant(t, 0, 10, 100.0, 100.0);
  add_steps(t, 1, 11, 20, [](std::int64_t) { return Peaks{100.0, 100.0}; });
  const auto a = analyze(t);
  const Section& s = a.section;
  EXPECT_EQ(s.diagnosis().kind, "NO_DATA");
  EXPECT_EQ(s.diagnosis().summary, "No step-memory data yet.");
  EXPECT_EQ(s.metadata.mode, "no_data");
  EXPECT_EQ(s.metadata.global_ranks_seen, 2);
  EXPECT_EQ(s.metadata.global_ranks_used, 0);
  EXPECT_EQ(s.metadata.training_total_steps, 20);
  EXPECT_TRUE(s.rows.empty());
  EXPECT_EQ(s.window.steps_analyzed, 0);
  EXPECT_EQ(s.card,
            "TraceML Step Memory Summary | steps 20 | global ranks 2\n"
            "Step Memory\n"
            "- Diagnosis: NO DATA\n"
            "- Scope: latest step 20\n"
            "- Stats: n/a\n"
            "- Why: No step-memory data yet.");
}

TEST(StepMemorySectionTest, EachRankKeepsTwentyWindowsOfHistory) {
  // W = 1: each rank keeps max(20, 2) = 20 latest steps: rank 0 81..100,
  // rank 1 31..50 -> nothing in common although step 50 is in both.
  Telemetry t;
  add_constant(t, 0, 100, 100.0, 100.0);
  add_constant(t, 1, 50, 100.0, 100.0);
  EXPECT_EQ(analyze(t, 1).section.window.steps_analyzed, 0);
  // W = 3: 60 steps kept: rank 0 41..100, rank 1 1..50 -> common 41..50,
  // latest 3 = 48..50.
  const Section s = analyze(t, 3).section;
  EXPECT_EQ(s.window.steps_analyzed, 3);
  EXPECT_EQ(s.window.end_step, std::optional<std::int64_t>(50));
}

TEST(StepMemorySectionTest, IdentitiesAndMode) {
  Telemetry t;
  add_constant(t, 0, 5, 100.0, 100.0);
  add_constant(t, 1, 5, 100.0, 100.0);
  model::RankIdentity id0;
  id0.global_rank = 0;
  id0.local_rank = 0;
  id0.node_rank = 0;
  id0.hostname = "a";
  id0.local_world_size = 2;
  id0.world_size = 2;
  model::RankIdentity id1 = id0;
  id1.global_rank = 1;
  id1.local_rank = 1;
  t.ranks = {id0, id1};
  Section s = analyze(t).section;
  EXPECT_EQ(s.metadata.mode, "single_node");
  EXPECT_EQ(s.rows[1].identity.global_rank, std::optional<int>(1));
  EXPECT_EQ(s.rows[1].identity.local_rank, std::optional<int>(1));
  EXPECT_EQ(s.rows[1].identity.node_rank, std::optional<int>(0));
  EXPECT_EQ(s.rows[1].identity.hostname, std::optional<std::string>("a"));
  EXPECT_EQ(s.rows[1].identity.local_world_size, std::optional<int>(2));
  EXPECT_EQ(s.rows[1].identity.world_size, std::optional<int>(2));

  // A world wider than the node: multi_node.
  t.ranks[1].world_size = 4;
  EXPECT_EQ(analyze(t).section.metadata.mode, "multi_node");
  // Two node ranks: multi_node.
  t.ranks[1].world_size = 2;
  t.ranks[1].node_rank = 1;
  EXPECT_EQ(analyze(t).section.metadata.mode, "multi_node");

  // An undeclared rank has only its global rank.
  t.ranks.clear();
  s = analyze(t).section;
  EXPECT_EQ(s.metadata.mode, "single_node");
  EXPECT_EQ(s.rows[0].identity.global_rank, std::optional<int>(0));
  EXPECT_FALSE(s.rows[0].identity.node_rank);
  EXPECT_FALSE(s.rows[0].identity.hostname);
}

// ---- card -------------------------------------------------------------------------

TEST(StepMemorySectionTest, SingleRankCard) {
  Telemetry t;
  add_constant(t, 0, 50, 10 * kGiB, 93 * kGiB);
  add_gpu_total(t, 100 * kGiB);
  EXPECT_EQ(analyze(t).section.card,
            "TraceML Step Memory Summary | steps 50 | global ranks 1\n"
            "Step Memory\n"
            "- Diagnosis: HIGH PRESSURE\n"
            "- Scope: last 50 aligned steps\n"
            "- Stats: peak reserved peak 93.0 GB\n"
            "- Why: peak reserved is near device capacity (~93%).");
}

struct MemCase {
  double bytes;
  const char* text;
};

class CardMemoryFormat : public ::testing::TestWithParam<MemCase> {};

TEST_P(CardMemoryFormat, BinaryUnits) {
  Telemetry t;
  add_constant(t, 0, 1, GetParam().bytes, GetParam().bytes);
  const std::string card = analyze(t).section.card;
  EXPECT_EQ(card.substr(card.find("- Stats")), std::string("- Stats: peak allocated peak ") +
                                                   GetParam().text +
                                                   "\n- Why: Need at least 50 completed steps.");
}

INSTANTIATE_TEST_SUITE_P(StepMemorySectionTest, CardMemoryFormat,
                         ::testing::Values(MemCase{0.0, "0 B"}, MemCase{1023.0, "1023 B"},
                                           MemCase{1024.0, "1.00 KB"}, MemCase{10240.0, "10.0 KB"},
                                           MemCase{102389.0, "100.0 KB"},  // 99.989 KB
                                           MemCase{102400.0, "100 KB"},
                                           MemCase{1.5 * kGiB, "1.50 GB"},
                                           MemCase{2000.0 * kGiB * 1024.0, "2000 TB"},
                                           MemCase{kGiB * 1024.0 * 1024.0, "1024 TB"}));

}  // namespace
}  // namespace traceml::analysis
