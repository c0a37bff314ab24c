// The Process section (spec §4.3, §5.4, §5.6): every rule at its boundaries,
// ordering by severity then score (DECISIONS.md quirk 8), the neutral issues,
// metadata, payload statistics and their tie rules, and the card.
#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "analysis/summary.hpp"

namespace traceml::analysis {
namespace {

using model::ProcessGpu;
using model::ProcessSample;
using model::RankIdentity;
using model::Telemetry;

ProcessGpu gpu(std::optional<double> allocated, std::optional<double> reserved,
               std::optional<double> total) {
  ProcessGpu g;
  g.device = 0;
  g.allocated_bytes = allocated;
  g.reserved_bytes = reserved;
  g.total_bytes = total;
  return g;
}

ProcessSample sample(int rank, double ts, std::optional<double> cpu, std::optional<int> cores,
                     std::optional<double> rss, std::optional<double> ram_total,
                     std::optional<ProcessGpu> g = std::nullopt) {
  ProcessSample p;
  p.global_rank = rank;
  p.ts = ts;
  p.cpu_percent = cpu;
  p.cpu_cores = cores;
  p.rss_bytes = rss;
  p.ram_total_bytes = ram_total;
  p.gpu = g;
  return p;
}

/// A quiet rank (CPU 10 % of one core of 8, RSS 10 %) with the given GPU memory.
ProcessSample quiet(int rank, std::optional<ProcessGpu> g, double ts = 1.0) {
  return sample(rank, ts, 10.0, 8, 10.0, 100.0, g);
}

Telemetry of(std::vector<ProcessSample> samples) {
  Telemetry t;
  t.process = std::move(samples);
  return t;
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
std::optional<double> average(const Section& s, const std::string& name) {
  return s.average.at(*s.metric_index(name));
}

std::string stats_line(const Section& s) {
  const auto from = s.card.find("- Stats: ");
  const auto to = s.card.find('\n', from);
  return s.card.substr(from, to - from);
}

// ---- neutral issues -------------------------------------------------------

TEST(ProcessSection, NoSamplesIsNoData) {
  const Section s = analyze_process(Telemetry{}, Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "NO_DATA");
  EXPECT_EQ(i.status, "NO DATA");
  EXPECT_EQ(i.severity, Severity::Info);
  EXPECT_EQ(i.summary, "No traced process telemetry was recorded.");
  EXPECT_EQ(i.action, "Collect process telemetry for workload-local context.");
  EXPECT_FALSE(i.metric.has_value());
  EXPECT_FALSE(i.phase.has_value());
  EXPECT_FALSE(i.score.has_value());
  EXPECT_TRUE(i.ranks.empty());
  EXPECT_EQ(i.evidence.dump(), R"({"samples_used":0})");

  EXPECT_EQ(s.name, "process");
  EXPECT_EQ(s.index_by, "global_rank");
  EXPECT_EQ(s.metadata.mode, "no_data");
  EXPECT_FALSE(s.metadata.duration_s.has_value());
  EXPECT_EQ(s.metadata.samples, 0);
  EXPECT_EQ(s.metadata.global_ranks_seen, 0);
  EXPECT_EQ(s.metadata.global_ranks_used, 0);
  EXPECT_FALSE(s.metadata.nodes_expected.has_value());
  EXPECT_FALSE(s.metadata.nodes_observed.has_value());
  EXPECT_FALSE(s.metadata.nodes_coverage.has_value());
  EXPECT_FALSE(s.metadata.nodes_partial.has_value());
  EXPECT_FALSE(s.metadata.gpus_observed.has_value());
  EXPECT_FALSE(s.metadata.training_total_steps.has_value());
  EXPECT_TRUE(s.rows.empty());
  ASSERT_EQ(s.average.size(), 8u);
  for (std::size_t m = 0; m < 8; ++m) {
    EXPECT_FALSE(s.average[m].has_value());
    EXPECT_FALSE(s.worst[m].value.has_value());
    EXPECT_FALSE(s.worst[m].idx.has_value());
    EXPECT_FALSE(s.median[m].idx.has_value());
  }
  EXPECT_EQ(s.card,
            "TraceML Process Summary | duration n/a | samples 0\n"
            "Process\n"
            "- Diagnosis: NO DATA\n"
            "- Stats: global ranks 0\n"
            "- Why: No traced process telemetry was recorded.");
}

TEST(ProcessSection, QuietGpuRankIsNormal) {
  // Two samples of rank 0: CPU 80 then 40 on 8 cores, RSS 4 then 2 of 16 GB,
  // allocated 5 then 3, reserved 6 then 4 of a 10 GB device.
  const double gb = 1e9;
  const Section s =
      analyze_process(of({sample(0, 10.0, 80.0, 8, 4 * gb, 16 * gb, gpu(5 * gb, 6 * gb, 10 * gb)),
                          sample(0, 11.0, 40.0, 8, 2 * gb, 16 * gb, gpu(3 * gb, 4 * gb, 10 * gb))}),
                      Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "NORMAL");
  EXPECT_EQ(i.status, "NORMAL");
  EXPECT_EQ(i.summary, "Process CPU, RSS, and GPU memory showed no pressure.");
  EXPECT_EQ(i.action, "Use training diagnostics for model-level bottlenecks.");
  EXPECT_EQ(i.evidence.dump(), R"({"samples_used":2})");
  EXPECT_EQ(s.card,
            "TraceML Process Summary | duration 1.0s | samples 2\n"
            "Process\n"
            "- Diagnosis: NORMAL\n"
            "- Stats: global ranks 1 | CPU avg 60% | RSS peak 4.0 / 16.0 GB | GPU reserved peak "
            "60%\n"
            "- Why: Process CPU, RSS, and GPU memory showed no pressure.");
  // Payload: capacity 60 / (100 × 8) × 100; RSS 3 of 16; reserved 5 of 10; headroom 10 - 5.
  EXPECT_DOUBLE_EQ(*average(s, "cpu_percent"), 60.0);
  EXPECT_DOUBLE_EQ(*average(s, "cpu_capacity_percent"), 7.5);
  EXPECT_DOUBLE_EQ(*average(s, "ram_bytes"), 3 * gb);
  EXPECT_DOUBLE_EQ(*average(s, "ram_percent"), 18.75);
  EXPECT_DOUBLE_EQ(*average(s, "gpu_mem_used_bytes"), 4 * gb);
  EXPECT_DOUBLE_EQ(*average(s, "gpu_mem_reserved_bytes"), 5 * gb);
  EXPECT_DOUBLE_EQ(*average(s, "gpu_mem_reserved_percent"), 50.0);
  EXPECT_DOUBLE_EQ(*average(s, "gpu_mem_headroom_bytes"), 5 * gb);
  EXPECT_EQ(worst(s, "gpu_mem_reserved_bytes").idx, "0");
}

TEST(ProcessSection, CpuOnlyRankIsNormalWithoutGpuWording) {
  const Section s = analyze_process(
      of({sample(0, 1.0, 10.0, 4, 1e9, 16e9), sample(0, 3.0, 10.0, 4, 1e9, 16e9)}), Options{});
  EXPECT_EQ(kinds(s), std::vector<std::string>{"NORMAL"});
  EXPECT_EQ(s.diagnosis().summary, "Process CPU and RSS showed no pressure.");
  EXPECT_EQ(stats_line(s), "- Stats: global ranks 1 | CPU avg 10% | RSS peak 1.0 / 16.0 GB");
  for (const char* m : {"gpu_mem_used_bytes", "gpu_mem_reserved_bytes", "gpu_mem_reserved_percent",
                        "gpu_mem_headroom_bytes"}) {
    EXPECT_FALSE(metric(s, "0", m).has_value()) << m;
  }
}

// ---- GPU memory -----------------------------------------------------------

struct PctCase {
  double value;
  const char* kind;  // nullptr: nothing fires
};

TEST(ProcessSection, GpuMemoryBoundariesOnReservedShare) {
  const PctCase cases[] = {{79.9, nullptr},
                           {80.0, "HIGH_PROCESS_GPU_MEMORY"},
                           {89.9, "HIGH_PROCESS_GPU_MEMORY"},
                           {90.0, "VERY_HIGH_PROCESS_GPU_MEMORY"}};
  for (const auto& c : cases) {
    // allocated = reserved: no allocator overhang.
    const Section s = analyze_process(of({quiet(0, gpu(c.value, c.value, 100.0))}), Options{});
    if (!c.kind) {
      EXPECT_EQ(s.diagnosis().kind, "NORMAL") << c.value;
      continue;
    }
    ASSERT_EQ(s.issues.size(), 1u) << c.value;
    EXPECT_EQ(s.diagnosis().kind, c.kind) << c.value;
    EXPECT_DOUBLE_EQ(*s.diagnosis().score, c.value);
  }
}

TEST(ProcessSection, HighProcessGpuMemoryNamesTheHighestReservedRank) {
  const Section s = analyze_process(
      of({quiet(0, gpu(50.0, 80.0, 100.0)), quiet(1, gpu(60.0, 85.0, 100.0))}), Options{});
  // Reserved 80 vs 85: 5.9 % apart, no imbalance finding.
  ASSERT_EQ(kinds(s), std::vector<std::string>{"HIGH_PROCESS_GPU_MEMORY"});
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.status, "HIGH PROCESS GPU MEMORY");
  EXPECT_EQ(i.severity, Severity::Warn);
  EXPECT_EQ(i.summary, "Process GPU memory was high, peaking at 85.0% on rank 1.");
  EXPECT_EQ(i.action, "Watch traced process GPU memory headroom.");
  EXPECT_EQ(i.metric, "gpu_mem_reserved_peak_percent");
  EXPECT_EQ(i.phase, "gpu_memory");
  EXPECT_EQ(i.ranks, std::vector<int>{1});
  EXPECT_EQ(i.evidence.dump(),
            R"({"gpu_mem_used_peak_percent":60.0,"gpu_mem_reserved_peak_percent":85.0,"rank":1})");
}

TEST(ProcessSection, VeryHighProcessGpuMemoryFallsBackToAllocated) {
  // No reserved reading at all: P is the allocated share, the rank the highest allocated.
  const Section s = analyze_process(
      of({quiet(0, gpu(95.0, std::nullopt, 100.0)), quiet(1, gpu(91.0, std::nullopt, 100.0))}),
      Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "VERY_HIGH_PROCESS_GPU_MEMORY");
  EXPECT_EQ(i.status, "VERY HIGH PROCESS GPU MEMORY");
  EXPECT_EQ(i.severity, Severity::Crit);
  EXPECT_EQ(i.summary, "Process GPU memory was very high, peaking at 95.0% on rank 0.");
  EXPECT_EQ(i.action, "Reduce traced process GPU memory pressure.");
  EXPECT_EQ(i.metric, "gpu_mem_used_peak_percent");
  EXPECT_EQ(i.ranks, std::vector<int>{0});
  EXPECT_EQ(i.evidence.dump(),
            R"({"gpu_mem_used_peak_percent":95.0,"gpu_mem_reserved_peak_percent":null,"rank":0})");
}

TEST(ProcessSection, HighestReservedTieGoesToTheLowestRank) {
  const Section s = analyze_process(
      of({quiet(3, gpu(85.0, 85.0, 100.0)), quiet(2, gpu(85.0, 85.0, 100.0))}), Options{});
  EXPECT_EQ(s.diagnosis().ranks, std::vector<int>{2});
}

// ---- allocator overhang ---------------------------------------------------

TEST(ProcessSection, OverhangFiresAtRatioTwoWithReservedThirtyPercent) {
  const Section s = analyze_process(of({quiet(0, gpu(15.0, 30.0, 100.0))}), Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "GPU_MEMORY_RESERVED_OVERHANG");
  EXPECT_EQ(i.status, "HIGH CUDA ALLOCATOR RESERVED/ALLOCATED RATIO");
  EXPECT_EQ(i.severity, Severity::Warn);
  EXPECT_EQ(i.summary, "PyTorch CUDA allocator reserved memory was 2.00x allocated tensor memory.");
  EXPECT_EQ(i.action,
            "Inspect CUDA allocator caching, fragmentation, variable tensor shapes, or retained "
            "tensors.");
  EXPECT_EQ(i.metric, "gpu_mem_reserved_peak_bytes");
  EXPECT_EQ(i.phase, "gpu_memory");
  EXPECT_DOUBLE_EQ(*i.score, 2.0);
  EXPECT_EQ(i.ranks, std::vector<int>{0});
  EXPECT_EQ(i.evidence.dump(),
            R"({"gpu_mem_reserved_overhang_ratio":2.0,"gpu_mem_reserved_peak_percent":30.0,)"
            R"("highest_overhang_rank":0})");
}

TEST(ProcessSection, OverhangNeedsBothRatioAndReservedShare) {
  // Ratio 2 but reserved only 29.9 % of the device.
  EXPECT_EQ(analyze_process(of({quiet(0, gpu(14.95, 29.9, 100.0))}), Options{}).diagnosis().kind,
            "NORMAL");
  // Reserved 50 % but ratio 1.99.
  EXPECT_EQ(analyze_process(of({quiet(0, gpu(25.0, 49.75, 100.0))}), Options{}).diagnosis().kind,
            "NORMAL");
}

TEST(ProcessSection, OverhangIsTheWorstSampleOfTheWorstRank) {
  // Rank 0: samples 20/50 (2.5) and 40/50 (1.25). Rank 1: 12/48 (4.0) -> rank 1.
  // (Reserved peaks 50 vs 48 are 4 % apart: no imbalance finding.)
  const Section s = analyze_process(
      of({quiet(0, gpu(20.0, 50.0, 100.0), 1.0), quiet(0, gpu(40.0, 50.0, 100.0), 2.0),
          quiet(1, gpu(12.0, 48.0, 100.0), 1.0)}),
      Options{});
  ASSERT_EQ(s.diagnosis().kind, "GPU_MEMORY_RESERVED_OVERHANG");
  EXPECT_DOUBLE_EQ(*s.diagnosis().score, 4.0);
  EXPECT_EQ(s.diagnosis().ranks, std::vector<int>{1});
}

TEST(ProcessSection, OverhangFallsBackToPeakRatioWhenNoSampleHasBoth) {
  // Allocated and reserved never in the same sample: peak reserved 40 / peak allocated 10.
  const Section s = analyze_process(of({quiet(0, gpu(10.0, std::nullopt, 100.0), 1.0),
                                        quiet(0, gpu(std::nullopt, 40.0, 100.0), 2.0)}),
                                    Options{});
  ASSERT_EQ(s.diagnosis().kind, "GPU_MEMORY_RESERVED_OVERHANG");
  EXPECT_DOUBLE_EQ(*s.diagnosis().score, 4.0);
  EXPECT_EQ(s.diagnosis().summary,
            "PyTorch CUDA allocator reserved memory was 4.00x allocated tensor memory.");
}

// ---- rank imbalance -------------------------------------------------------

TEST(ProcessSection, ImbalanceCritAtThirtyPercentAndFiftyPercentPressure) {
  // Reserved peaks 100 and 70 on 200-byte devices: (100 - 70) / 100 = 30 %, worst rank at 50 %.
  const Section s = analyze_process(
      of({quiet(0, gpu(100.0, 100.0, 200.0)), quiet(1, gpu(70.0, 70.0, 200.0))}), Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "RANK_GPU_MEMORY_IMBALANCE");
  EXPECT_EQ(i.status, "RANK GPU MEMORY IMBALANCE");
  EXPECT_EQ(i.severity, Severity::Crit);
  EXPECT_EQ(i.summary,
            "Process GPU memory differed by 30.0% across ranks; worst rank reached 50.0% of "
            "device capacity.");
  EXPECT_EQ(i.action, "Inspect per-rank workload and memory behavior.");
  EXPECT_EQ(i.metric, "rank_gpu_reserved_imbalance_percent");
  EXPECT_EQ(i.phase, "gpu_memory");
  EXPECT_DOUBLE_EQ(*i.score, 30.0);
  // Rank 0 holds the most reserved memory and has the least headroom: kept twice.
  EXPECT_EQ(i.ranks, (std::vector<int>{0, 0}));
  EXPECT_EQ(i.evidence.dump(),
            R"({"rank_gpu_used_imbalance_percent":30.0,"rank_gpu_reserved_imbalance_percent":30.0,)"
            R"("gpu_mem_reserved_peak_percent":50.0,"gpu_mem_used_peak_percent":50.0,)"
            R"("rank_gpu_memory_pressure_percent":50.0,)"
            R"("rank_gpu_memory_pressure_metric":"gpu_mem_reserved_peak_percent",)"
            R"("rank_gpu_memory_pressure_rank":0,"highest_used_rank":0,)"
            R"("highest_reserved_rank":0,"least_headroom_rank":0})");
}

TEST(ProcessSection, ImbalanceJustBelowCritIsWarn) {
  // 29.9 % apart (100 vs 70.1), pressure 50 % -> warn (>= 20 and >= 30).
  const Section s = analyze_process(
      of({quiet(0, gpu(100.0, 100.0, 200.0)), quiet(1, gpu(70.1, 70.1, 200.0))}), Options{});
  ASSERT_EQ(kinds(s), std::vector<std::string>{"RANK_GPU_MEMORY_IMBALANCE"});
  EXPECT_EQ(s.diagnosis().severity, Severity::Warn);

  // 30 % apart but the worst rank at 49.0 % of its device (100 of 204.1) -> warn.
  const Section p = analyze_process(
      of({quiet(0, gpu(100.0, 100.0, 204.1)), quiet(1, gpu(70.0, 70.0, 204.1))}), Options{});
  EXPECT_DOUBLE_EQ(*p.diagnosis().score, 30.0);
  ASSERT_EQ(kinds(p), std::vector<std::string>{"RANK_GPU_MEMORY_IMBALANCE"});
  EXPECT_EQ(p.diagnosis().severity, Severity::Warn);
}

TEST(ProcessSection, ImbalanceWarnBoundaries) {
  // 60 vs 48 of 200: 20 % apart, worst at 30 % -> warn.
  const Section at = analyze_process(
      of({quiet(0, gpu(60.0, 60.0, 200.0)), quiet(1, gpu(48.0, 48.0, 200.0))}), Options{});
  ASSERT_EQ(kinds(at), std::vector<std::string>{"RANK_GPU_MEMORY_IMBALANCE"});
  EXPECT_EQ(at.diagnosis().severity, Severity::Warn);
  EXPECT_DOUBLE_EQ(*at.diagnosis().score, 20.0);

  // 60 vs 48.1: 19.8 % apart -> nothing.
  EXPECT_EQ(analyze_process(
                of({quiet(0, gpu(60.0, 60.0, 200.0)), quiet(1, gpu(48.1, 48.1, 200.0))}), Options{})
                .diagnosis()
                .kind,
            "NORMAL");
  // 20 % apart but the worst rank at 29.985 % (60 of 200.1) -> nothing.
  EXPECT_EQ(analyze_process(
                of({quiet(0, gpu(60.0, 60.0, 200.1)), quiet(1, gpu(48.0, 48.0, 200.1))}), Options{})
                .diagnosis()
                .kind,
            "NORMAL");
}

TEST(ProcessSection, ImbalanceUsesPerRankPressureOnItsOwnDevice) {
  // Rank 1 holds less (60 vs 100) but on a smaller device: 60 of 100 = 60 % pressure.
  const Section s = analyze_process(
      of({quiet(0, gpu(100.0, 100.0, 400.0)), quiet(1, gpu(60.0, 60.0, 100.0))}), Options{});
  ASSERT_EQ(kinds(s), std::vector<std::string>{"RANK_GPU_MEMORY_IMBALANCE"});
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.severity, Severity::Crit);  // 40 % apart, 60 % pressure
  EXPECT_EQ(i.evidence["rank_gpu_memory_pressure_percent"], 60.0);
  EXPECT_EQ(i.evidence["rank_gpu_memory_pressure_rank"], 1);
  // Most reserved: rank 0; least headroom: rank 1 (100 - 60 = 40 < 400 - 100).
  EXPECT_EQ(i.ranks, (std::vector<int>{0, 1}));
}

TEST(ProcessSection, ImbalanceFallsBackToAllocatedWithoutReserved) {
  const Section s = analyze_process(
      of({quiet(0, gpu(100.0, std::nullopt, 200.0)), quiet(1, gpu(50.0, std::nullopt, 200.0))}),
      Options{});
  ASSERT_EQ(kinds(s), std::vector<std::string>{"RANK_GPU_MEMORY_IMBALANCE"});
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.severity, Severity::Crit);  // 50 % apart, 50 % pressure
  EXPECT_EQ(i.metric, "rank_gpu_used_imbalance_percent");
  EXPECT_EQ(i.evidence["rank_gpu_memory_pressure_metric"], "gpu_mem_used_peak_percent");
  EXPECT_TRUE(i.evidence["rank_gpu_reserved_imbalance_percent"].is_null());
  EXPECT_TRUE(i.evidence["least_headroom_rank"].is_null());
  EXPECT_EQ(i.ranks, std::vector<int>{0});  // highest allocated; no headroom without reserved
}

TEST(ProcessSection, ImbalanceNeedsTwoRanks) {
  EXPECT_EQ(analyze_process(of({quiet(0, gpu(100.0, 100.0, 200.0), 1.0),
                                quiet(0, gpu(10.0, 10.0, 200.0), 2.0)}),
                            Options{})
                .diagnosis()
                .kind,
            "NORMAL");
}

// ---- RSS and CPU ----------------------------------------------------------

TEST(ProcessSection, RssBoundaryAndHighestRssRank) {
  EXPECT_EQ(analyze_process(of({sample(0, 1.0, 10.0, 8, 79.9, 100.0)}), Options{}).diagnosis().kind,
            "NORMAL");
  const Section s = analyze_process(
      of({sample(0, 1.0, 10.0, 8, 40.0, 100.0), sample(1, 1.0, 10.0, 8, 80.0, 100.0)}), Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "HIGH_PROCESS_RSS");
  EXPECT_EQ(i.status, "HIGH PROCESS RSS");
  EXPECT_EQ(i.severity, Severity::Warn);
  EXPECT_EQ(i.summary, "Process RSS was high, peaking at 80.0%.");
  EXPECT_EQ(i.action, "Reduce traced process host memory pressure.");
  EXPECT_EQ(i.metric, "ram_peak_percent");
  EXPECT_EQ(i.phase, "ram");
  EXPECT_EQ(i.ranks, std::vector<int>{1});
  EXPECT_EQ(i.evidence.dump(), R"({"ram_peak_percent":80.0,"highest_rss_rank":1})");
}

TEST(ProcessSection, CpuCapacityBoundary) {
  // 639.2 % of 8 cores = 79.9 % of capacity.
  EXPECT_EQ(
      analyze_process(of({sample(0, 1.0, 639.2, 8, 10.0, 100.0)}), Options{}).diagnosis().kind,
      "NORMAL");
  // Average (600 + 680) / 2 = 640 % of 8 cores = 80 %.
  const Section s = analyze_process(
      of({sample(0, 1.0, 600.0, 8, 10.0, 100.0), sample(0, 2.0, 680.0, 8, 10.0, 100.0)}),
      Options{});
  ASSERT_EQ(s.issues.size(), 1u);
  const Issue& i = s.diagnosis();
  EXPECT_EQ(i.kind, "HIGH_PROCESS_CPU");
  EXPECT_EQ(i.status, "HIGH PROCESS CPU");
  EXPECT_EQ(i.severity, Severity::Warn);
  EXPECT_EQ(i.summary, "Process CPU averaged 80.0% of capacity.");
  EXPECT_EQ(i.action, "Inspect data loading, preprocessing, or host contention.");
  EXPECT_EQ(i.metric, "cpu_capacity_percent");
  EXPECT_EQ(i.phase, "cpu");
  EXPECT_TRUE(i.ranks.empty());
  EXPECT_EQ(i.evidence.dump(),
            R"({"cpu_avg_percent":640.0,"cpu_logical_core_count":8,"cpu_capacity_percent":80.0})");
}

TEST(ProcessSection, CpuWithoutCoresNeverFires) {
  EXPECT_EQ(analyze_process(of({sample(0, 1.0, 900.0, std::nullopt, 10.0, 100.0)}), Options{})
                .diagnosis()
                .kind,
            "NORMAL");
  EXPECT_EQ(
      analyze_process(of({sample(0, 1.0, 900.0, 0, 10.0, 100.0)}), Options{}).diagnosis().kind,
      "NORMAL");
}

// ---- ordering -------------------------------------------------------------

TEST(ProcessSection, CritImbalanceSortsBeforeWarnOverhang) {
  // DECISIONS.md quirk 8: TraceML would list the overhang (priority 2) first.
  // Rank 0: 50 allocated, 100 reserved (ratio 2.0). Rank 1: 70/70. Devices of 200.
  // Reserved 100 vs 70 -> 30 % apart, worst at 50 % -> crit; reserved peak 50 % >= 30.
  const Section s = analyze_process(
      of({quiet(0, gpu(50.0, 100.0, 200.0)), quiet(1, gpu(70.0, 70.0, 200.0))}), Options{});
  EXPECT_EQ(kinds(s), (std::vector<std::string>{"RANK_GPU_MEMORY_IMBALANCE",
                                                "GPU_MEMORY_RESERVED_OVERHANG"}));
}

TEST(ProcessSection, SameSeverityOrdersByScore) {
  // RSS 95 % (warn) before GPU memory 85 % (warn), though the GPU rule has priority.
  const Section s = analyze_process(
      of({sample(0, 1.0, 10.0, 8, 95.0, 100.0, gpu(85.0, 85.0, 100.0))}), Options{});
  EXPECT_EQ(kinds(s), (std::vector<std::string>{"HIGH_PROCESS_RSS", "HIGH_PROCESS_GPU_MEMORY"}));
}

TEST(ProcessSection, EqualSeverityAndScoreFallBackToRulePriority) {
  // GPU memory, RSS and CPU all at 85 % (warn): priority order.
  const Section s = analyze_process(
      of({sample(0, 1.0, 680.0, 8, 85.0, 100.0, gpu(85.0, 85.0, 100.0))}), Options{});
  EXPECT_EQ(kinds(s), (std::vector<std::string>{"HIGH_PROCESS_GPU_MEMORY", "HIGH_PROCESS_RSS",
                                                "HIGH_PROCESS_CPU"}));
}

TEST(ProcessSection, CritBeatsHigherScoredWarn) {
  // Very high GPU memory (crit, 90) before RSS (warn, 99).
  const Section s = analyze_process(
      of({sample(0, 1.0, 10.0, 8, 99.0, 100.0, gpu(90.0, 90.0, 100.0))}), Options{});
  EXPECT_EQ(kinds(s),
            (std::vector<std::string>{"VERY_HIGH_PROCESS_GPU_MEMORY", "HIGH_PROCESS_RSS"}));
}

// ---- window, metadata, identity ------------------------------------------

TEST(ProcessSection, KeepsOnlyTheLatestWindowPerRank) {
  Options o;
  o.window = 2;
  const Section s = analyze_process(
      of({sample(0, 1.0, 800.0, 8, 10.0, 100.0),  // dropped
          sample(0, 2.0, 10.0, 8, 10.0, 100.0), sample(1, 2.5, 30.0, 8, 10.0, 100.0),
          sample(0, 4.0, 20.0, 8, 10.0, 100.0)}),
      o);
  EXPECT_EQ(s.metadata.samples, 3);
  EXPECT_EQ(s.window.samples, 3);
  EXPECT_DOUBLE_EQ(*s.metadata.duration_s, 2.0);  // 4 - 2
  EXPECT_DOUBLE_EQ(*metric(s, "0", "cpu_percent"), 15.0);
  EXPECT_EQ(s.diagnosis().kind, "NORMAL");
  EXPECT_EQ(s.diagnosis().evidence.dump(), R"({"samples_used":3})");
}

TEST(ProcessSection, MetadataAndEnvelope) {
  Telemetry t = of({quiet(0, std::nullopt, 1.0), quiet(1, std::nullopt, 4.0)});
  t.ranks = {identity(0, 0, 0, 2, 2, "host-a"), identity(1, 1, 0, 2, 2, "host-a")};
  const Section s = analyze_process(t, Options{});
  EXPECT_EQ(s.metadata.mode, "single_node");
  EXPECT_EQ(s.metadata.samples, 2);
  EXPECT_EQ(s.metadata.global_ranks_seen, 2);
  EXPECT_EQ(s.metadata.global_ranks_used, 2);
  EXPECT_DOUBLE_EQ(*s.metadata.duration_s, 3.0);
  EXPECT_FALSE(s.metadata.nodes_expected.has_value());
  EXPECT_FALSE(s.metadata.gpus_observed.has_value());
  EXPECT_EQ(s.window.kind, "sample_window");
  EXPECT_EQ(s.window.alignment, "none");
  EXPECT_EQ(s.window.samples, 2);
  EXPECT_FALSE(s.window.window_size.has_value());
  EXPECT_FALSE(s.window.diagnosis_clock.has_value());
  EXPECT_EQ(s.metric_names,
            (std::vector<std::string>{"cpu_percent", "cpu_capacity_percent", "ram_bytes",
                                      "ram_percent", "gpu_mem_used_bytes", "gpu_mem_reserved_bytes",
                                      "gpu_mem_reserved_percent", "gpu_mem_headroom_bytes"}));
  EXPECT_EQ(s.units,
            (std::vector<std::pair<std::string, std::string>>{{"memory", "bytes"}, {"cpu", "%"}}));
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[1].key, "1");
  EXPECT_EQ(s.rows[1].identity.global_rank, 1);
  EXPECT_EQ(s.rows[1].identity.local_rank, 1);
  EXPECT_EQ(s.rows[1].identity.node_rank, 0);
  EXPECT_EQ(s.rows[1].identity.hostname, "host-a");
  EXPECT_EQ(s.rows[1].identity.local_world_size, 2);
  EXPECT_EQ(s.rows[1].identity.world_size, 2);
}

TEST(ProcessSection, UnknownIdentityKeepsOnlyTheRank) {
  const Section s = analyze_process(of({quiet(7, std::nullopt)}), Options{});
  ASSERT_EQ(s.rows.size(), 1u);
  EXPECT_EQ(s.rows[0].key, "7");
  EXPECT_EQ(s.rows[0].identity.global_rank, 7);
  EXPECT_FALSE(s.rows[0].identity.node_rank.has_value());
  EXPECT_FALSE(s.rows[0].identity.hostname.has_value());
  EXPECT_EQ(s.metadata.mode, "single_node");
}

TEST(ProcessSection, ModeIsMultiNodeFromNodeRanksOrWorldSize) {
  Telemetry two_nodes = of({quiet(0, std::nullopt), quiet(1, std::nullopt)});
  two_nodes.ranks = {identity(0, 0, 0, 1, 2), identity(1, 0, 1, 1, 2)};
  EXPECT_EQ(analyze_process(two_nodes, Options{}).metadata.mode, "multi_node");

  // One rank seen, but its world (4) is larger than its node (2).
  Telemetry wide = of({quiet(0, std::nullopt)});
  wide.ranks = {identity(0, 0, 0, 2, 4)};
  EXPECT_EQ(analyze_process(wide, Options{}).metadata.mode, "multi_node");
}

TEST(ProcessSection, RowsInRankOrderAndLaterIdentityWins) {
  Telemetry t = of({quiet(10, std::nullopt), quiet(2, std::nullopt)});
  RankIdentity stale = identity(2, 0, 0, 1, 1, "old");
  RankIdentity fresh = identity(2, 0, 0, 1, 1, "new");
  t.ranks = {stale, fresh};
  const Section s = analyze_process(t, Options{});
  ASSERT_EQ(s.rows.size(), 2u);
  EXPECT_EQ(s.rows[0].key, "2");
  EXPECT_EQ(s.rows[0].identity.hostname, "new");
  EXPECT_EQ(s.rows[1].key, "10");
}

// ---- payload statistics ---------------------------------------------------

TEST(ProcessSection, RankMetricsFollowTheirDefinitions) {
  // Rank 0: CPU 150 and 250 on 4 cores; RSS 2 and 4 of 8; allocated 2/4, reserved 3/5 of 10.
  const Section s = analyze_process(of({sample(0, 1.0, 150.0, 4, 2.0, 8.0, gpu(2.0, 3.0, 10.0)),
                                        sample(0, 2.0, 250.0, 4, 4.0, 8.0, gpu(4.0, 5.0, 10.0))}),
                                    Options{});
  EXPECT_DOUBLE_EQ(*metric(s, "0", "cpu_percent"), 200.0);
  EXPECT_DOUBLE_EQ(*metric(s, "0", "cpu_capacity_percent"), 50.0);  // 200 / 400
  EXPECT_DOUBLE_EQ(*metric(s, "0", "ram_bytes"), 3.0);
  EXPECT_DOUBLE_EQ(*metric(s, "0", "ram_percent"), 37.5);  // mean 3 of 8
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_mem_used_bytes"), 3.0);
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_mem_reserved_bytes"), 4.0);
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_mem_reserved_percent"), 40.0);  // mean 4 of 10
  EXPECT_DOUBLE_EQ(*metric(s, "0", "gpu_mem_headroom_bytes"), 6.0);     // 10 - mean 4
}

TEST(ProcessSection, AverageMedianWorstAndTieRules) {
  // CPU 10, 50, 50 on ranks 0, 5, 3: worst tie 3 vs 5 -> 3 (TraceML would take "5").
  // Headroom (lower is worse) 60 on ranks 9 and 10: -> 9 (TraceML would take "10").
  const Section s =
      analyze_process(of({sample(0, 1.0, 10.0, 8, 1.0, 100.0, gpu(10.0, 10.0, 100.0)),
                          sample(5, 1.0, 50.0, 8, 1.0, 100.0, gpu(10.0, 10.0, 100.0)),
                          sample(3, 1.0, 50.0, 8, 1.0, 100.0, gpu(10.0, 10.0, 100.0)),
                          sample(9, 1.0, 20.0, 8, 1.0, 100.0, gpu(40.0, 40.0, 100.0)),
                          sample(10, 1.0, 20.0, 8, 1.0, 100.0, gpu(40.0, 40.0, 100.0))}),
                      Options{});
  EXPECT_DOUBLE_EQ(*average(s, "cpu_percent"), 30.0);  // (10 + 50 + 50 + 20 + 20) / 5
  EXPECT_EQ(worst(s, "cpu_percent").value, 50.0);
  EXPECT_EQ(worst(s, "cpu_percent").idx, "3");
  EXPECT_EQ(worst(s, "gpu_mem_headroom_bytes").value, 60.0);
  EXPECT_EQ(worst(s, "gpu_mem_headroom_bytes").idx, "9");
  EXPECT_EQ(worst(s, "gpu_mem_reserved_bytes").idx, "9");
  // Median 20 (sorted 10 20 20 50 50): ranks 9 and 10 tie, lower label string "10".
  EXPECT_EQ(median(s, "cpu_percent").value, 20.0);
  EXPECT_EQ(median(s, "cpu_percent").idx, "10");
}

// ---- card -----------------------------------------------------------------

TEST(ProcessSection, CardLabelsUsedPeakWithoutReserved) {
  const Section s = analyze_process(of({quiet(0, gpu(40.0, std::nullopt, 100.0))}), Options{});
  EXPECT_EQ(stats_line(s),
            "- Stats: global ranks 1 | CPU avg 10% | RSS peak 0.0 / 0.0 GB | GPU used peak 40%");
}

TEST(ProcessSection, CardZeroReservedFallsThroughToUsedWithReservedLabel) {
  // Spec §8.2 quirk 14, kept: reserved peak 0 % shows the used value under the reserved label.
  const Section s = analyze_process(of({quiet(0, gpu(5.0, 0.0, 100.0))}), Options{});
  EXPECT_EQ(stats_line(s),
            "- Stats: global ranks 1 | CPU avg 10% | RSS peak 0.0 / 0.0 GB | GPU reserved peak 5%");
}

TEST(ProcessSection, CardDropsAbsentParts) {
  const Section s =
      analyze_process(of({sample(0, 1.0, std::nullopt, std::nullopt, 2e9, std::nullopt),
                          sample(1, 1.0, std::nullopt, std::nullopt, std::nullopt, std::nullopt)}),
                      Options{});
  EXPECT_EQ(stats_line(s), "- Stats: global ranks 2 | RSS peak 2.0 GB");
  EXPECT_EQ(s.card.substr(0, s.card.find('\n')),
            "TraceML Process Summary | duration 0.0s | samples 2");
}

}  // namespace
}  // namespace traceml::analysis
