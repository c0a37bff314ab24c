// The System section (spec §4.2, §5.4, §5.6): every rule at its boundaries,
// node/GPU scoping, ordering, the neutral issues, metadata, payload statistics
// and their tie rules, and the card.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "analysis/summary.hpp"

namespace traceml::analysis {
namespace {

using model::GpuSample;
using model::RankIdentity;
using model::SystemSample;
using model::Telemetry;

GpuSample gpu(int index, std::optional<double> util, std::optional<double> mem_used = std::nullopt,
              std::optional<double> mem_total = std::nullopt,
              std::optional<double> temp = std::nullopt, std::optional<double> power = std::nullopt,
              std::optional<double> power_limit = std::nullopt) {
  GpuSample g;
  g.index = index;
  g.util_percent = util;
  g.mem_used_bytes = mem_used;
  g.mem_total_bytes = mem_total;
  g.temperature_c = temp;
  g.power_w = power;
  g.power_limit_w = power_limit;
  return g;
}

SystemSample sample(int node, double ts, std::optional<double> cpu, std::optional<double> ram_used,
                    std::optional<double> ram_total, std::vector<GpuSample> gpus = {}) {
  SystemSample s;
  s.node_rank = node;
  s.ts = ts;
  s.cpu_percent = cpu;
  s.ram_used_bytes = ram_used;
  s.ram_total_bytes = ram_total;
  s.gpus = std::move(gpus);
  return s;
}

/// A quiet host (CPU 10 %, RAM 10 %) with one GPU described by `g`.
Telemetry one_sample(GpuSample g) {
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0, {g}));
  return t;
}

/// A healthy GPU (util 90 %, memory 10 %, 50 C, 50 % power) with one field changed by the caller.
GpuSample healthy_gpu(int index = 0) {
  return gpu(index, 90.0, 10.0, 100.0, 50.0, 100.0, 200.0);
}

RankIdentity identity(int global, int local, int node, int local_world, int world,
                      std::string host = "") {
  RankIdentity r;
  r.global_rank = global;
  r.local_rank = local;
  r.node_rank = node;
  r.local_world_size = local_world;
  r.world_size = world;
  if (!host.empty()) r.hostname = host;
  return r;
}

std::vector<std::string> kinds(const Section& s) {
  std::vector<std::string> out;
  for (const auto& i : s.issues)
    out.push_back(i.kind);
  return out;
}

std::optional<double> metric(const Section& s, const std::string& row, const std::string& name) {
  const auto m = s.metric_index(name);
  EXPECT_TRUE(m.has_value()) << name;
  for (const auto& r : s.rows) {
    if (r.key == row) return r.metrics.at(*m);
  }
  ADD_FAILURE() << "no row " << row;
  return std::nullopt;
}

const Point& worst(const Section& s, const std::string& name) {
  return s.worst.at(*s.metric_index(name));
}
const Point& median(const Section& s, const std::string& name) {
  return s.median.at(*s.metric_index(name));
}

// ---- neutral issues -------------------------------------------------------

TEST(SystemSection, NoSamplesIsNoDataWithClusterScope) {
  const Section s = analyze_system(Telemetry{}, Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "NO_DATA");
  EXPECT_EQ(i.status, "NO DATA");
  EXPECT_EQ(i.severity, Severity::Info);
  EXPECT_EQ(i.summary, "No system telemetry was recorded.");
  EXPECT_EQ(i.action, "Collect system telemetry for host-level context.");
  EXPECT_FALSE(i.metric.has_value());
  EXPECT_FALSE(i.phase.has_value());
  EXPECT_FALSE(i.score.has_value());
  EXPECT_FALSE(i.share_pct.has_value());
  EXPECT_FALSE(i.skew_pct.has_value());
  EXPECT_TRUE(i.ranks.empty());
  // samples_used = 0 is a value, not null, so it stays; keys sorted.
  EXPECT_EQ(i.evidence.dump(), R"({"samples_used":0,"scope":{"level":"cluster"}})");

  EXPECT_EQ(s.name, "system");
  EXPECT_EQ(s.index_by, "node_rank");
  EXPECT_EQ(s.metadata.mode, "no_data");
  EXPECT_FALSE(s.metadata.duration_s.has_value());
  EXPECT_EQ(s.metadata.samples, 0);
  EXPECT_EQ(s.metadata.nodes_expected, 1);
  EXPECT_EQ(s.metadata.nodes_observed, 0);
  EXPECT_EQ(s.metadata.nodes_coverage, "0/1");
  EXPECT_EQ(s.metadata.nodes_partial, true);
  EXPECT_EQ(s.metadata.gpus_observed, 0);
  EXPECT_FALSE(s.metadata.global_ranks_seen.has_value());
  EXPECT_FALSE(s.metadata.global_ranks_used.has_value());
  EXPECT_FALSE(s.metadata.training_total_steps.has_value());
  EXPECT_FALSE(s.metadata.training_latest_step.has_value());
  EXPECT_TRUE(s.rows.empty());
  ASSERT_EQ(s.average.size(), 9u);
  for (std::size_t m = 0; m < 9; ++m) {
    EXPECT_FALSE(s.average[m].has_value());
    EXPECT_FALSE(s.median[m].value.has_value());
    EXPECT_FALSE(s.median[m].idx.has_value());
    EXPECT_FALSE(s.worst[m].value.has_value());
    EXPECT_FALSE(s.worst[m].idx.has_value());
  }
  EXPECT_EQ(s.card,
            "TraceML System Summary | duration n/a | nodes 0/1 | samples 0\n"
            "System\n"
            "- Diagnosis: NO DATA\n"
            "- Scope: nodes 0/1 | samples 0\n"
            "- Stats: unavailable\n"
            "- Why: No system telemetry was recorded.");
}

TEST(SystemSection, QuietCpuOnlyHostIsNormalWithoutGpuWording) {
  Telemetry t;
  for (int k = 0; k < 10; ++k)
    t.system.push_back(sample(0, 100.0 + k, 50.0, 40.0, 100.0));
  const Section s = analyze_system(t, Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "NORMAL");
  EXPECT_EQ(i.status, "NORMAL");
  EXPECT_EQ(i.severity, Severity::Info);
  EXPECT_EQ(i.summary, "CPU and RAM showed no system pressure.");
  EXPECT_EQ(i.action, "Use training diagnostics for model-level bottlenecks.");
  EXPECT_FALSE(i.score.has_value());
  EXPECT_EQ(i.evidence.dump(), R"({"samples_used":10,"scope":{"level":"cluster"}})");
  // No GPU: the stats line has no GPU part, every GPU metric is null (not 0).
  EXPECT_EQ(s.card,
            "TraceML System Summary | duration 9.0s | nodes 1/1 | samples 10\n"
            "System\n"
            "- Diagnosis: NORMAL\n"
            "- Scope: nodes 1/1 | samples 10\n"
            "- Stats: CPU 50% | RAM 40%\n"
            "- Why: CPU and RAM showed no system pressure.");
  for (const char* m : {"gpu_util_percent", "gpu_mem_bytes", "gpu_mem_percent", "gpu_temp_c",
                        "gpu_power_w", "gpu_headroom_bytes"}) {
    EXPECT_FALSE(metric(s, "0", m).has_value()) << m;
  }
  EXPECT_EQ(s.metadata.gpus_observed, 0);
}

TEST(SystemSection, HealthyGpuIsNormalWithGpuWording) {
  const Section s = analyze_system(one_sample(healthy_gpu()), Options{});
  EXPECT_EQ(kinds(s), std::vector<std::string>{"NORMAL"});
  EXPECT_EQ(s.diagnosis().summary, "CPU, RAM, and GPU showed no system pressure.");
}

TEST(SystemSection, NormalWordingIgnoresGpuMemoryAndPowerAtClusterLevel) {
  // Spec §8.2 quirk 10: only utilisation or temperature make the text mention the GPU.
  const Section s = analyze_system(
      one_sample(gpu(0, std::nullopt, 10.0, 100.0, std::nullopt, 10.0, 100.0)), Options{});
  EXPECT_EQ(kinds(s), std::vector<std::string>{"NORMAL"});
  EXPECT_EQ(s.diagnosis().summary, "CPU and RAM showed no system pressure.");

  const Section temp_only =
      analyze_system(one_sample(gpu(0, std::nullopt, std::nullopt, std::nullopt, 40.0)), Options{});
  EXPECT_EQ(temp_only.diagnosis().summary, "CPU, RAM, and GPU showed no system pressure.");
}

// ---- GPU utilisation ------------------------------------------------------

TEST(SystemSection, E7LowGpuUtilizationOverTenSamples) {
  // Spec §7 E7: one node, GPU utilisation averaging 10 % over 10 samples.
  Telemetry t;
  for (int k = 0; k < 10; ++k) {
    t.system.push_back(sample(0, 1.0 + k, 20.0, 10.0, 100.0, {gpu(0, 10.0)}));
  }
  const Section s = analyze_system(t, Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "LOW_GPU_UTILIZATION");
  EXPECT_EQ(i.status, "LOW GPU UTIL");
  EXPECT_EQ(i.severity, Severity::Info);
  EXPECT_DOUBLE_EQ(*i.score, 90.0);  // 100 - 10
  EXPECT_EQ(i.summary, "GPU utilization was low, averaging 10.0% on 0.");
  EXPECT_EQ(i.action, "Use training diagnostics to identify why the GPU was not fully utilized.");
  EXPECT_EQ(i.metric, "gpu_util_avg_percent");
  EXPECT_EQ(i.phase, "gpu_utilization");
  EXPECT_TRUE(i.ranks.empty());  // node-level finding: no GPU in ranks
  EXPECT_EQ(i.evidence.dump(),
            R"({"gpu_util_avg_percent":10.0,"gpu_utilization_band":"low",)"
            R"("lowest_util_gpu_idx":0,"scope":{"level":"node","node":"0","node_rank":0},)"
            R"("samples_used":10})");
}

struct UtilCase {
  double util;
  const char* kind;  // nullptr: no utilisation finding
  const char* band;
};

TEST(SystemSection, GpuUtilizationBandBoundaries) {
  const UtilCase cases[] = {{29.999, "LOW_GPU_UTILIZATION", "low"},
                            {30.0, "MODERATE_GPU_UTILIZATION", "moderate"},
                            {70.0, "MODERATE_GPU_UTILIZATION", "moderate"},
                            {70.001, nullptr, nullptr}};
  for (const auto& c : cases) {
    GpuSample g = healthy_gpu();
    g.util_percent = c.util;
    const Section s = analyze_system(one_sample(g), Options{});
    if (!c.kind) {
      EXPECT_EQ(s.diagnosis().kind, "NORMAL") << c.util;
      continue;
    }
    ASSERT_EQ(s.issues.size(), 1u) << c.util;
    const Issue& i = s.diagnosis();
    EXPECT_EQ(i.kind, c.kind) << c.util;
    EXPECT_EQ(i.evidence["gpu_utilization_band"], c.band);
    EXPECT_DOUBLE_EQ(*i.score, 100.0 - c.util);
  }
  GpuSample g = healthy_gpu();
  g.util_percent = 30.0;
  const Issue i = analyze_system(one_sample(g), Options{}).diagnosis();
  EXPECT_EQ(i.status, "MODERATE GPU UTIL");
  EXPECT_EQ(i.summary, "GPU utilization was moderate, averaging 30.0% on 0.");
  EXPECT_DOUBLE_EQ(*i.score, 70.0);
}

TEST(SystemSection, UtilizationAveragesPerSampleMeansAndNamesTheLowestGpu) {
  // Sample 1: gpu0 70, gpu1 40 -> 55. Sample 2: gpu0 90, gpu1 20 -> 55. Node: 55.
  // Per GPU: gpu0 80, gpu1 30 -> the lowest is gpu1.
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0, {gpu(0, 70.0), gpu(1, 40.0)}));
  t.system.push_back(sample(0, 2.0, 10.0, 10.0, 100.0, {gpu(0, 90.0), gpu(1, 20.0)}));
  const Issue i = analyze_system(t, Options{}).diagnosis();
  EXPECT_EQ(i.kind, "MODERATE_GPU_UTILIZATION");
  EXPECT_EQ(i.summary, "GPU utilization was moderate, averaging 55.0% on 0.");
  EXPECT_EQ(i.evidence["lowest_util_gpu_idx"], 1);
  EXPECT_DOUBLE_EQ(*i.score, 45.0);
}

TEST(SystemSection, LowestUtilizationTieGoesToTheFirstGpu) {
  const Issue i =
      analyze_system(one_sample(gpu(3, 10.0)), Options{}).diagnosis();  // single GPU index 3
  EXPECT_EQ(i.evidence["lowest_util_gpu_idx"], 3);
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0, {gpu(2, 10.0), gpu(1, 10.0)}));
  EXPECT_EQ(analyze_system(t, Options{}).diagnosis().evidence["lowest_util_gpu_idx"], 1);
}

// ---- GPU memory -----------------------------------------------------------

struct PctCase {
  double value;
  const char* kind;  // nullptr: nothing fires
};

TEST(SystemSection, GpuMemoryBoundaries) {
  const PctCase cases[] = {{79.9, nullptr},
                           {80.0, "HIGH_GPU_MEMORY"},
                           {89.9, "HIGH_GPU_MEMORY"},
                           {90.0, "VERY_HIGH_GPU_MEMORY"}};
  for (const auto& c : cases) {
    GpuSample g = healthy_gpu();
    g.mem_used_bytes = c.value;  // of a 100-byte device
    const Section s = analyze_system(one_sample(g), Options{});
    if (!c.kind) {
      EXPECT_EQ(s.diagnosis().kind, "NORMAL") << c.value;
      continue;
    }
    ASSERT_EQ(s.issues.size(), 1u) << c.value;
    EXPECT_EQ(s.diagnosis().kind, c.kind) << c.value;
    EXPECT_DOUBLE_EQ(*s.diagnosis().score, c.value);
  }
}

TEST(SystemSection, HighGpuMemoryIsScopedToNodeAndGpu) {
  // Peak of the window (50 then 85 of 100) -> 85.0 %.
  Telemetry t;
  GpuSample a = healthy_gpu(), b = healthy_gpu();
  a.mem_used_bytes = 50.0;
  b.mem_used_bytes = 85.0;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0, {a}));
  t.system.push_back(sample(0, 2.0, 10.0, 10.0, 100.0, {b}));
  const Section s = analyze_system(t, Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "HIGH_GPU_MEMORY");
  EXPECT_EQ(i.status, "HIGH GPU MEM");
  EXPECT_EQ(i.severity, Severity::Warn);
  EXPECT_EQ(i.summary, "GPU memory was high, peaking at 85.0% on 0 gpu0.");
  EXPECT_EQ(i.action, "Watch GPU memory headroom for larger batches or models.");
  EXPECT_EQ(i.metric, "gpu_mem_peak_percent");
  EXPECT_EQ(i.phase, "gpu_memory");
  EXPECT_EQ(i.ranks, std::vector<int>{0});
  EXPECT_EQ(i.evidence.dump(),
            R"({"gpu_mem_peak_percent":85.0,"gpu_idx":0,)"
            R"("scope":{"level":"gpu","node":"0","node_rank":0,"gpu_idx":0},"samples_used":2})");
}

TEST(SystemSection, VeryHighGpuMemoryNamesTheFullestGpu) {
  // gpu0 at 50 %, gpu1 at 95 % of its own (smaller) device.
  GpuSample g0 = healthy_gpu(0), g1 = healthy_gpu(1);
  g0.mem_used_bytes = 100.0;
  g0.mem_total_bytes = 200.0;
  g1.mem_used_bytes = 95.0;
  const Issue i = analyze_system(one_sample(g0), Options{}).diagnosis();
  EXPECT_EQ(i.kind, "NORMAL");
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0, {g0, g1}));
  const Issue v = analyze_system(t, Options{}).diagnosis();
  EXPECT_EQ(v.kind, "VERY_HIGH_GPU_MEMORY");
  EXPECT_EQ(v.status, "VERY HIGH GPU MEM");
  EXPECT_EQ(v.severity, Severity::Crit);
  EXPECT_EQ(v.summary, "GPU memory was very high, peaking at 95.0% on 0 gpu1.");
  EXPECT_EQ(v.action, "Reduce GPU memory pressure before scaling this run.");
  EXPECT_EQ(v.ranks, std::vector<int>{1});
  EXPECT_EQ(v.evidence["scope"].dump(), R"({"level":"gpu","node":"0","node_rank":0,"gpu_idx":1})");
}

TEST(SystemSection, GpuMemoryTieGoesToTheFirstGpu) {
  GpuSample g0 = healthy_gpu(0), g1 = healthy_gpu(1);
  g0.mem_used_bytes = 85.0;
  g1.mem_used_bytes = 85.0;
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0, {g0, g1}));
  EXPECT_EQ(analyze_system(t, Options{}).diagnosis().ranks, std::vector<int>{0});
}

// ---- temperature, power, RAM, CPU -----------------------------------------

TEST(SystemSection, GpuTemperatureBoundary) {
  GpuSample g = healthy_gpu();
  g.temperature_c = 84.9;
  EXPECT_EQ(analyze_system(one_sample(g), Options{}).diagnosis().kind, "NORMAL");

  GpuSample g0 = healthy_gpu(0), g1 = healthy_gpu(1);
  g1.temperature_c = 85.0;
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0, {g0, g1}));
  const Issue i = analyze_system(t, Options{}).diagnosis();
  EXPECT_EQ(i.kind, "HIGH_GPU_TEMPERATURE");
  EXPECT_EQ(i.status, "HIGH GPU TEMP");
  EXPECT_EQ(i.severity, Severity::Crit);
  EXPECT_EQ(i.summary, "GPU temperature was high, peaking at 85.0 C on 0 gpu1.");
  EXPECT_EQ(i.action, "Check cooling and thermal throttling risk.");
  EXPECT_EQ(i.metric, "gpu_temp_peak_c");
  EXPECT_EQ(i.phase, "gpu_temperature");
  EXPECT_DOUBLE_EQ(*i.score, 85.0);
  EXPECT_EQ(i.ranks, std::vector<int>{1});
  EXPECT_EQ(i.evidence.dump(),
            R"({"gpu_temp_peak_c":85.0,"gpu_idx":1,)"
            R"("scope":{"level":"gpu","node":"0","node_rank":0,"gpu_idx":1},"samples_used":1})");
}

TEST(SystemSection, GpuPowerBoundaryUsesAveragePowerOverLimit) {
  GpuSample g = healthy_gpu();
  g.power_w = 239.7;  // 79.9 % of 300
  g.power_limit_w = 300.0;
  EXPECT_EQ(analyze_system(one_sample(g), Options{}).diagnosis().kind, "NORMAL");

  // Average (200 + 280) / 2 = 240 W of a 300 W limit = 80.0 %; the 280 W peak alone would be 93 %.
  GpuSample a = healthy_gpu(), b = healthy_gpu();
  a.power_w = 200.0;
  b.power_w = 280.0;
  a.power_limit_w = b.power_limit_w = 300.0;
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0, {a}));
  t.system.push_back(sample(0, 2.0, 10.0, 10.0, 100.0, {b}));
  const Issue i = analyze_system(t, Options{}).diagnosis();
  EXPECT_EQ(i.kind, "HIGH_GPU_POWER");
  EXPECT_EQ(i.status, "HIGH GPU PWR");
  EXPECT_EQ(i.severity, Severity::Warn);
  EXPECT_EQ(i.summary, "GPU power was high, averaging 80.0% of limit on 0 gpu0.");
  EXPECT_EQ(i.action, "Review power headroom if this run is unstable.");
  EXPECT_EQ(i.metric, "gpu_power_avg_limit_percent");
  EXPECT_EQ(i.phase, "gpu_power");
  EXPECT_DOUBLE_EQ(*i.score, 80.0);
  EXPECT_EQ(i.ranks, std::vector<int>{0});
}

TEST(SystemSection, HostRamBoundaryUsesPeakOverTotal) {
  Telemetry below;
  below.system.push_back(sample(0, 1.0, 10.0, 79.9, 100.0));
  EXPECT_EQ(analyze_system(below, Options{}).diagnosis().kind, "NORMAL");

  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 40.0, 100.0));
  t.system.push_back(sample(0, 2.0, 10.0, 80.0, 100.0));
  const Issue i = analyze_system(t, Options{}).diagnosis();
  EXPECT_EQ(i.kind, "HIGH_HOST_MEMORY");
  EXPECT_EQ(i.status, "HIGH RAM");
  EXPECT_EQ(i.severity, Severity::Warn);
  EXPECT_EQ(i.summary, "Host RAM usage was high, peaking at 80.0% of total on 0.");
  EXPECT_EQ(i.action, "Reduce host memory pressure or inspect data workers.");
  EXPECT_EQ(i.metric, "ram_peak_percent");
  EXPECT_EQ(i.phase, "ram");
  EXPECT_TRUE(i.ranks.empty());
  EXPECT_EQ(i.evidence.dump(),
            R"({"ram_peak_percent":80.0,"scope":{"level":"node","node":"0","node_rank":0},)"
            R"("samples_used":2})");
}

TEST(SystemSection, RamWithoutTotalNeverFires) {
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 99.0, std::nullopt));
  t.system.push_back(sample(0, 2.0, 10.0, 99.0, 0.0));
  EXPECT_EQ(analyze_system(t, Options{}).diagnosis().kind, "NORMAL");
}

TEST(SystemSection, CpuBoundaryUsesTheAverage) {
  Telemetry below;
  below.system.push_back(sample(0, 1.0, 79.9, 10.0, 100.0));
  EXPECT_EQ(analyze_system(below, Options{}).diagnosis().kind, "NORMAL");

  Telemetry at;
  at.system.push_back(sample(0, 1.0, 70.0, 10.0, 100.0));
  at.system.push_back(sample(0, 2.0, 90.0, 10.0, 100.0));  // average 80
  const Issue i = analyze_system(at, Options{}).diagnosis();
  EXPECT_EQ(i.kind, "HIGH_CPU");
  EXPECT_EQ(i.status, "HIGH CPU");
  EXPECT_EQ(i.severity, Severity::Warn);
  EXPECT_EQ(i.summary, "CPU usage was high, averaging 80.0% on 0.");
  EXPECT_EQ(i.action, "Inspect CPU-side preprocessing or host contention.");
  EXPECT_EQ(i.metric, "cpu_avg_percent");
  EXPECT_EQ(i.phase, "cpu");
  EXPECT_DOUBLE_EQ(*i.score, 80.0);

  Telemetry high;
  high.system.push_back(sample(0, 1.0, 95.0, 10.0, 100.0));
  EXPECT_EQ(analyze_system(high, Options{}).diagnosis().summary,
            "CPU usage was high, averaging 95.0% on 0.");
}

// ---- ordering -------------------------------------------------------------

TEST(SystemSection, IssuesFollowRulePriorityWithinANode) {
  // One node firing every rule but power: memory 95 %, temp 90 C, RAM 85 %, CPU 85 %, util 10 %.
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 85.0, 85.0, 100.0, {gpu(0, 10.0, 95.0, 100.0, 90.0)}));
  const Section s = analyze_system(t, Options{});
  EXPECT_EQ(kinds(s),
            (std::vector<std::string>{"VERY_HIGH_GPU_MEMORY", "HIGH_GPU_TEMPERATURE",
                                      "HIGH_HOST_MEMORY", "HIGH_CPU", "LOW_GPU_UTILIZATION"}));
}

TEST(SystemSection, HighGpuMemoryAndPowerOrderAfterTemperature) {
  Telemetry t;
  t.system.push_back(
      sample(0, 1.0, 10.0, 10.0, 100.0, {gpu(0, 90.0, 85.0, 100.0, 85.0, 190.0, 200.0)}));
  EXPECT_EQ(
      kinds(analyze_system(t, Options{})),
      (std::vector<std::string>{"HIGH_GPU_TEMPERATURE", "HIGH_GPU_MEMORY", "HIGH_GPU_POWER"}));
}

TEST(SystemSection, SameRuleOnSeveralNodesOrdersByScoreThenLowestNode) {
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 85.0, 10.0, 100.0));
  t.system.push_back(sample(1, 1.0, 88.0, 10.0, 100.0));
  const Section s = analyze_system(t, Options{});
  ASSERT_EQ(s.issues.size(), 2u);
  EXPECT_EQ(s.issues[0].summary, "CPU usage was high, averaging 88.0% on 1.");
  EXPECT_EQ(s.issues[1].summary, "CPU usage was high, averaging 85.0% on 0.");

  // Equal scores on nodes 10 and 2: the lower node number wins (as a string "10" < "2").
  Telemetry tie;
  tie.system.push_back(sample(10, 1.0, 90.0, 10.0, 100.0));
  tie.system.push_back(sample(2, 1.0, 90.0, 10.0, 100.0));
  const Section ts = analyze_system(tie, Options{});
  ASSERT_EQ(ts.issues.size(), 2u);
  EXPECT_EQ(ts.issues[0].evidence["scope"]["node"], "2");
  EXPECT_EQ(ts.issues[1].evidence["scope"]["node"], "10");
}

TEST(SystemSection, MultiNodePrimaryIsTheHotGpuOfTheOtherNode) {
  Telemetry t;
  t.ranks = {identity(0, 0, 0, 1, 2, "worker-0"), identity(1, 0, 1, 1, 2, "worker-1")};
  t.system.push_back(sample(0, 10.0, 40.0, 8.0, 16.0,
                            {gpu(0, 70.0, 5.0, 10.0, 68.0), gpu(1, 40.0, 5.0, 10.0, 52.0)}));
  t.system.push_back(sample(1, 11.0, 41.0, 8.0, 16.0, {gpu(0, 45.0, 5.0, 10.0, 95.0)}));
  const Section s = analyze_system(t, Options{});
  // Temperature (priority 1) beats both nodes' moderate utilisation (priority 7).
  EXPECT_EQ(kinds(s), (std::vector<std::string>{"HIGH_GPU_TEMPERATURE", "MODERATE_GPU_UTILIZATION",
                                                "MODERATE_GPU_UTILIZATION"}));
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.summary, "GPU temperature was high, peaking at 95.0 C on 1 gpu0.");
  EXPECT_EQ(i.evidence["scope"].dump(), R"({"level":"gpu","node":"1","node_rank":1,"gpu_idx":0})");
  // Moderate util: node 1 at 45 % scores 55, node 0 at 55 % scores 45.
  EXPECT_EQ(s.issues[1].summary, "GPU utilization was moderate, averaging 45.0% on 1.");
  EXPECT_EQ(s.issues[2].summary, "GPU utilization was moderate, averaging 55.0% on 0.");
  EXPECT_EQ(worst(s, "gpu_temp_c").idx, "1");
  EXPECT_EQ(s.metadata.nodes_coverage, "2/2");
  EXPECT_EQ(s.metadata.mode, "multi_node");
  EXPECT_EQ(s.metadata.gpus_observed, 3);  // two on node 0, one on node 1
}

// ---- window, metadata, identity ------------------------------------------

TEST(SystemSection, KeepsOnlyTheLatestWindowPerNode) {
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 100.0, 10.0, 100.0));  // dropped by a window of 2
  t.system.push_back(sample(0, 5.0, 10.0, 10.0, 100.0));
  t.system.push_back(sample(1, 6.0, 100.0, 10.0, 100.0));  // node 1 keeps its only sample
  t.system.push_back(sample(0, 7.0, 20.0, 10.0, 100.0));
  Options o;
  o.window = 2;
  const Section s = analyze_system(t, o);
  EXPECT_EQ(s.metadata.samples, 3);
  EXPECT_EQ(s.window.samples, 3);
  EXPECT_DOUBLE_EQ(*s.metadata.duration_s, 2.0);  // 7 - 5
  EXPECT_DOUBLE_EQ(*metric(s, "0", "cpu_percent"), 15.0);
  ASSERT_EQ(s.issues.size(), 1u);  // only node 1 is hot
  EXPECT_EQ(s.diagnosis().summary, "CPU usage was high, averaging 100.0% on 1.");
  EXPECT_EQ(s.diagnosis().evidence["samples_used"], 1);
}

TEST(SystemSection, WindowAndEnvelope) {
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0));
  const Section s = analyze_system(t, Options{});
  EXPECT_EQ(s.window.kind, "sample_window");
  EXPECT_EQ(s.window.alignment, "none");
  EXPECT_EQ(s.window.samples, 1);
  EXPECT_FALSE(s.window.steps_analyzed.has_value());
  EXPECT_FALSE(s.window.start_step.has_value());
  EXPECT_FALSE(s.window.end_step.has_value());
  EXPECT_FALSE(s.window.completed_step.has_value());
  EXPECT_FALSE(s.window.window_size.has_value());
  EXPECT_FALSE(s.window.diagnosis_clock.has_value());
  EXPECT_EQ(s.metric_names,
            (std::vector<std::string>{"cpu_percent", "ram_bytes", "ram_percent", "gpu_util_percent",
                                      "gpu_mem_bytes", "gpu_mem_percent", "gpu_temp_c",
                                      "gpu_power_w", "gpu_headroom_bytes"}));
  EXPECT_EQ(s.units,
            (std::vector<std::pair<std::string, std::string>>{
                {"memory", "bytes"}, {"temperature", "C"}, {"power", "W"}, {"util", "%"}}));
  EXPECT_EQ(s.metadata.mode, "single_node");
  EXPECT_DOUBLE_EQ(*s.metadata.duration_s, 0.0);
}

TEST(SystemSection, ExpectedNodesFromAgreeingIdentities) {
  // world 4 over 2 per node -> 2 nodes expected; only node 0 reported.
  Telemetry t;
  t.ranks = {identity(0, 0, 0, 2, 4), identity(1, 1, 0, 2, 4), identity(2, 0, 1, 2, 4)};
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0, {healthy_gpu(0), healthy_gpu(1)}));
  const Section s = analyze_system(t, Options{});
  EXPECT_EQ(s.metadata.nodes_expected, 2);
  EXPECT_EQ(s.metadata.nodes_observed, 1);
  EXPECT_EQ(s.metadata.nodes_coverage, "1/2");
  EXPECT_EQ(s.metadata.nodes_partial, true);
  EXPECT_EQ(s.metadata.mode, "multi_node");  // expected > 1
  EXPECT_EQ(s.metadata.gpus_observed, 2);

  // ceil(5 / 2) = 3.
  Telemetry odd;
  odd.ranks = {identity(0, 0, 0, 2, 5)};
  odd.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0));
  EXPECT_EQ(analyze_system(odd, Options{}).metadata.nodes_expected, 3);
}

TEST(SystemSection, ExpectedNodesFallBackToObservedWhenIdentitiesDisagreeOrAreMissing) {
  Telemetry t;
  t.ranks = {identity(0, 0, 0, 2, 4), identity(1, 0, 1, 1, 4)};  // 2 vs 4 expected
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0));
  const Section s = analyze_system(t, Options{});
  EXPECT_EQ(s.metadata.nodes_expected, 1);
  EXPECT_EQ(s.metadata.nodes_partial, false);
  EXPECT_EQ(s.metadata.mode, "single_node");

  Telemetry none;
  none.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0));
  none.system.push_back(sample(3, 1.0, 10.0, 10.0, 100.0));
  const Section n = analyze_system(none, Options{});
  EXPECT_EQ(n.metadata.nodes_expected, 2);
  EXPECT_EQ(n.metadata.nodes_coverage, "2/2");
  EXPECT_EQ(n.metadata.mode, "multi_node");
}

TEST(SystemSection, RowIdentityIsLocalRankZeroOfTheNode) {
  Telemetry t;
  t.ranks = {identity(1, 1, 0, 2, 4, "host-a"), identity(0, 0, 0, 2, 4, "host-a"),
             identity(3, 1, 1, 2, 4, "host-b")};
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0));
  t.system.push_back(sample(1, 1.0, 10.0, 10.0, 100.0));
  const Section s = analyze_system(t, Options{});
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].key, "0");
  EXPECT_EQ(s.rows[0].identity.global_rank, 0);
  EXPECT_EQ(s.rows[0].identity.local_rank, 0);
  EXPECT_EQ(s.rows[0].identity.node_rank, 0);
  EXPECT_EQ(s.rows[0].identity.hostname, "host-a");
  EXPECT_EQ(s.rows[0].identity.local_world_size, 2);
  EXPECT_EQ(s.rows[0].identity.world_size, 4);
  // Node 1's local rank 0 never reported: only the node is known.
  EXPECT_EQ(s.rows[1].key, "1");
  EXPECT_EQ(s.rows[1].identity.node_rank, 1);
  EXPECT_FALSE(s.rows[1].identity.global_rank.has_value());
  EXPECT_FALSE(s.rows[1].identity.local_rank.has_value());
  EXPECT_FALSE(s.rows[1].identity.hostname.has_value());
  EXPECT_FALSE(s.rows[1].identity.world_size.has_value());
}

TEST(SystemSection, RowsAreInNumericNodeOrder) {
  Telemetry t;
  for (int node : {10, 2, 0})
    t.system.push_back(sample(node, 1.0, 10.0, 10.0, 100.0));
  const Section s = analyze_system(t, Options{});
  ASSERT_EQ(s.rows.size(), 3u);
  EXPECT_EQ(s.rows[0].key, "0");
  EXPECT_EQ(s.rows[1].key, "2");
  EXPECT_EQ(s.rows[2].key, "10");
}

// ---- payload metrics and statistics ---------------------------------------

TEST(SystemSection, NodeMetricsFollowTheirDefinitions) {
  // Sample 1: CPU 40, RAM 8 of 16 GB; gpu0 70 % 5/10 GB 68 C 120 W; gpu1 40 % 5/10 GB 52 C 80 W.
  // Sample 2: CPU 60, RAM 12 of 16 GB; gpu0 90 % 7/10 GB 70 C 160 W; gpu1 20 % 3/10 GB 50 C 100 W.
  const double gb = 1e9;
  Telemetry t;
  t.system.push_back(sample(0, 10.0, 40.0, 8 * gb, 16 * gb,
                            {gpu(0, 70.0, 5 * gb, 10 * gb, 68.0, 120.0, 200.0),
                             gpu(1, 40.0, 5 * gb, 10 * gb, 52.0, 80.0, 200.0)}));
  t.system.push_back(sample(0, 12.0, 60.0, 12 * gb, 16 * gb,
                            {gpu(0, 90.0, 7 * gb, 10 * gb, 70.0, 160.0, 200.0),
                             gpu(1, 20.0, 3 * gb, 10 * gb, 50.0, 100.0, 200.0)}));
  const Section s = analyze_system(t, Options{});
  EXPECT_DOUBLE_EQ(*metric(s, "0", "cpu_percent"), 50.0);
  EXPECT_DOUBLE_EQ(*metric(s, "0", "ram_bytes"), 10 * gb);
  EXPECT_DOUBLE_EQ(*metric(s, "0", "ram_percent"), 62.5);           // mean 10 / max total 16
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_util_percent"), 55.0);      // samples 55, 55
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_mem_bytes"), 5 * gb);       // gpu0 6, gpu1 4
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_mem_percent"), 50.0);       // (6 + 4) / (10 + 10)
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_temp_c"), 60.0);            // samples 60, 60
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_power_w"), 115.0);          // samples 100, 130
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_headroom_bytes"), 3 * gb);  // min(10-7, 10-5)

  // Diagnosis: util 55 % is moderate; memory peak 70 %, power avg 140/200 = 70 %, RAM peak 75 %.
  EXPECT_EQ(s.diagnosis().kind, "MODERATE_GPU_UTILIZATION");
  EXPECT_EQ(s.diagnosis().evidence["lowest_util_gpu_idx"], 1);
  EXPECT_EQ(s.card,
            "TraceML System Summary | duration 2.0s | nodes 1/1 | samples 2\n"
            "System\n"
            "- Diagnosis: MODERATE GPU UTIL\n"
            "- Scope: nodes 1/1 | samples 2\n"
            "- Stats: CPU 50% | RAM 75% | GPU util 55% | GPU memory 70% | GPU temp 70.0C\n"
            "- Why: GPU utilization was moderate, averaging 55.0% on 0.");
  // One node: average, median and worst are that node.
  EXPECT_DOUBLE_EQ(*s.average[0], 50.0);
  EXPECT_EQ(median(s, "cpu_percent").idx, "0");
  EXPECT_EQ(worst(s, "gpu_headroom_bytes").idx, "0");
}

TEST(SystemSection, AbsentReadingsStayNull) {
  Telemetry t;
  t.system.push_back(sample(0, 1.0, std::nullopt, std::nullopt, std::nullopt,
                            {gpu(0, std::nullopt, 5.0, std::nullopt)}));
  const Section s = analyze_system(t, Options{});
  EXPECT_FALSE(metric(s, "0", "cpu_percent").has_value());
  EXPECT_FALSE(metric(s, "0", "ram_bytes").has_value());
  EXPECT_FALSE(metric(s, "0", "ram_percent").has_value());
  EXPECT_FALSE(metric(s, "0", "gpu_util_percent").has_value());
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_mem_bytes"), 5.0);
  EXPECT_FALSE(metric(s, "0", "gpu_mem_percent").has_value());  // no total
  EXPECT_FALSE(metric(s, "0", "gpu_headroom_bytes").has_value());
  EXPECT_EQ(s.card.substr(s.card.find("- Stats:")),
            "- Stats: CPU n/a | RAM n/a | GPU util n/a | GPU memory n/a | GPU temp n/a\n"
            "- Why: CPU and RAM showed no system pressure.");
}

TEST(SystemSection, AverageMedianWorstAcrossNodes) {
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0));
  t.system.push_back(sample(1, 1.0, 50.0, 30.0, 100.0));
  t.system.push_back(sample(2, 1.0, 30.0, 20.0, 100.0));
  const Section s = analyze_system(t, Options{});
  EXPECT_DOUBLE_EQ(*s.average[*s.metric_index("cpu_percent")], 30.0);
  EXPECT_EQ(median(s, "cpu_percent").value, 30.0);
  EXPECT_EQ(median(s, "cpu_percent").idx, "2");
  EXPECT_EQ(worst(s, "cpu_percent").value, 50.0);
  EXPECT_EQ(worst(s, "cpu_percent").idx, "1");
  EXPECT_EQ(worst(s, "ram_percent").idx, "1");
}

TEST(SystemSection, MedianOfAnEvenCountTakesTheLowerNeighbour) {
  // 10, 20, 30, 40 -> median 25; 20 and 30 are equally near: the lower value wins.
  Telemetry t;
  for (int node = 0; node < 4; ++node) {
    t.system.push_back(sample(node, 1.0, 10.0 * (4 - node), 10.0, 100.0));
  }
  const Section s = analyze_system(t, Options{});
  EXPECT_EQ(median(s, "cpu_percent").value, 20.0);
  EXPECT_EQ(median(s, "cpu_percent").idx, "2");
}

TEST(SystemSection, MedianTieOnEqualValuesGoesToTheLowerLabelString) {
  // Nodes 9 and 10 both at the median value: TraceML's rule keeps the lower
  // label *string*, "10".
  Telemetry t;
  t.system.push_back(sample(9, 1.0, 30.0, 10.0, 100.0));
  t.system.push_back(sample(10, 1.0, 30.0, 10.0, 100.0));
  t.system.push_back(sample(1, 1.0, 10.0, 10.0, 100.0));
  t.system.push_back(sample(2, 1.0, 50.0, 10.0, 100.0));
  const Section s = analyze_system(t, Options{});
  EXPECT_EQ(median(s, "cpu_percent").value, 30.0);
  EXPECT_EQ(median(s, "cpu_percent").idx, "10");
}

TEST(SystemSection, WorstTiesGoToTheLowestNodeAsANumber) {
  // Higher-is-worse tie between nodes 3 and 5: 3 (TraceML would take "5").
  // Lower-is-worse (GPU util) tie between nodes 9 and 10: 9 (TraceML would take "10").
  Telemetry t;
  t.system.push_back(sample(5, 1.0, 60.0, 10.0, 100.0, {gpu(0, 80.0)}));
  t.system.push_back(sample(3, 1.0, 60.0, 10.0, 100.0, {gpu(0, 90.0)}));
  t.system.push_back(sample(10, 1.0, 20.0, 10.0, 100.0, {gpu(0, 75.0)}));
  t.system.push_back(sample(9, 1.0, 20.0, 10.0, 100.0, {gpu(0, 75.0)}));
  const Section s = analyze_system(t, Options{});
  EXPECT_EQ(worst(s, "cpu_percent").value, 60.0);
  EXPECT_EQ(worst(s, "cpu_percent").idx, "3");
  EXPECT_EQ(worst(s, "gpu_util_percent").value, 75.0);
  EXPECT_EQ(worst(s, "gpu_util_percent").idx, "9");
}

TEST(SystemSection, HeadroomWorstIsTheSmallest) {
  const double gb = 1e9;
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 10.0, 10.0, 100.0, {gpu(0, 90.0, 2 * gb, 10 * gb)}));
  t.system.push_back(sample(1, 1.0, 10.0, 10.0, 100.0, {gpu(0, 90.0, 7 * gb, 10 * gb)}));
  const Section s = analyze_system(t, Options{});
  EXPECT_EQ(worst(s, "gpu_headroom_bytes").value, 3 * gb);
  EXPECT_EQ(worst(s, "gpu_headroom_bytes").idx, "1");
  EXPECT_EQ(worst(s, "gpu_mem_percent").value, 70.0);
  EXPECT_EQ(worst(s, "gpu_mem_percent").idx, "1");
  EXPECT_DOUBLE_EQ(*s.average[*s.metric_index("gpu_headroom_bytes")], 5.5 * gb);
}

TEST(SystemSection, MultiNodeCardShowsMedianAndWorst) {
  // Two nodes: the median of two values lies between them, the lower one is nearest.
  Telemetry t;
  t.system.push_back(sample(0, 1.0, 40.0, 50.0, 100.0, {gpu(0, 90.0, 1.0, 10.0, 60.0)}));
  t.system.push_back(sample(1, 3.5, 60.0, 70.0, 100.0, {gpu(0, 75.0, 1.0, 10.0, 65.5)}));
  const Section s = analyze_system(t, Options{});
  EXPECT_EQ(s.card,
            "TraceML System Summary | duration 2.5s | nodes 2/2 | samples 2\n"
            "System\n"
            "- Diagnosis: NORMAL\n"
            "- Scope: nodes 2/2 | samples 2\n"
            "- Stats: CPU med/worst 40%/60% n1 | RAM med/worst 50%/70% n1 | "
            "GPU util med/worst 75%/75% n1 | GPU temp med/worst 60.0C/65.5C n1\n"
            "- Why: CPU, RAM, and GPU showed no system pressure.");

  Telemetry cpu_only;
  cpu_only.system.push_back(sample(0, 1.0, 40.0, 50.0, 100.0));
  cpu_only.system.push_back(sample(1, 1.0, 60.0, 70.0, 100.0));
  const Section c = analyze_system(cpu_only, Options{});
  EXPECT_NE(c.card.find("- Stats: CPU med/worst 40%/60% n1 | RAM med/worst 50%/70% n1\n"),
            std::string::npos)
      << c.card;
}

}  // namespace
}  // namespace traceml::analysis
