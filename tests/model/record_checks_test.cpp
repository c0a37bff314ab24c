// The shared value checks: every rule at its boundary, and the exact phrase
// that the collector, the JSONL reader and the run-database reader report.
#include "model/record_checks.hpp"
#include "model/limits.hpp"

#include <gtest/gtest.h>

#include <limits>

namespace traceml::model {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

StepRecord good_step() {
  StepRecord r;
  r.global_rank = 0;
  r.step = 1;
  r.ts = 0.0;
  r.events.set(Event::Forward, {0.0, -0.0});  // zero and -0 are measurements
  return r;
}

TEST(RecordChecks, GoodRecordsPass) {
  EXPECT_EQ(check_step(good_step()), std::nullopt);
  EXPECT_EQ(check_run_info(RunInfo{}), std::nullopt);
  EXPECT_EQ(check_rank_identity(RankIdentity{0, 0, 0, "h", 1, 1}), std::nullopt);
  EXPECT_EQ(check_step_memory(StepMemoryRecord{0, 1, "cuda:0", 0.0, 0.0}), std::nullopt);
  SystemSample s;
  s.gpus.push_back(GpuSample{0, 0.0, 0.0, 0.0, -5.0, 0.0, 0.0});  // below-zero temperature
  EXPECT_EQ(check_system(s), std::nullopt);
  ProcessSample p;
  p.cpu_cores = 1;
  p.gpu = ProcessGpu{0, 0.0, 0.0, 0.0};
  EXPECT_EQ(check_process(p), std::nullopt);
  TracerStats t;
  t.gpu = TracerStats::Gpu{};
  t.activity_lost = 0;
  EXPECT_EQ(check_tracer_stats(t), std::nullopt);
}

TEST(RecordChecks, StepDurationsAndIds) {
  StepRecord r = good_step();
  r.events.set(Event::Forward, {-1.5, 2.0});
  EXPECT_EQ(check_step(r), "'events.forward.cpu_ms' must be a finite number >= 0, got -1.5");
  r.events.set(Event::Backward, {1.0, kNaN});
  r.events.set(Event::Forward, {1.0, 2.0});
  EXPECT_EQ(check_step(r), "'events.backward.gpu_ms' must be a finite number >= 0, got nan");
  r = good_step();
  r.events.set(Event::TracedStepTime, {kInf, std::nullopt});
  EXPECT_EQ(check_step(r),
            "'events.traced_step_time.cpu_ms' must be a finite number >= 0, got inf");
  r = good_step();
  r.step = 0;
  EXPECT_EQ(check_step(r), "'step' must be an integer >= 1, got 0");
  r = good_step();
  r.global_rank = -7;
  EXPECT_EQ(check_step(r), "'global_rank' must be an integer >= 0, got -7");
  r = good_step();
  r.ts = -kInf;
  EXPECT_EQ(check_step(r), "'ts' must be a finite number >= 0, got -inf");
  r = good_step();
  r.ts = -3.2e9;
  EXPECT_EQ(check_step(r), "'ts' must be a finite number >= 0, got -3.2e+09");
}

TEST(RecordChecks, StepGpuActivity) {
  StepRecord r = good_step();
  r.gpu_activity = StepGpuActivity{};
  EXPECT_EQ(check_step(r), std::nullopt);
  r.gpu_activity->busy_ms = -1.0;
  EXPECT_EQ(check_step(r), "'gpu_activity.busy_ms' must be a finite number >= 0, got -1");
  r.gpu_activity = StepGpuActivity{};
  r.gpu_activity->h2d_copies = -2;
  EXPECT_EQ(check_step(r), "'gpu_activity.h2d_copies' must be an integer >= 0, got -2");
  r.gpu_activity = StepGpuActivity{};
  r.gpu_activity->h2d_copies = 2;
  r.gpu_activity->h2d_pageable_copies = 3;
  EXPECT_EQ(check_step(r),
            "'gpu_activity.h2d_pageable_copies' (3) must not exceed 'gpu_activity.h2d_copies' (2)");
  r.gpu_activity->h2d_pageable_copies = 2;  // the boundary
  EXPECT_EQ(check_step(r), std::nullopt);
  r.gpu_activity->h2d_pageable_bytes = 1.0;
  EXPECT_EQ(check_step(r),
            "'gpu_activity.h2d_pageable_bytes' (1) must not exceed 'gpu_activity.h2d_bytes' (0)");
}

TEST(RecordChecks, RanksSizesAndCounts) {
  EXPECT_EQ(check_run_info(RunInfo{"r", 0, Strategy::Ddp}),
            "'world_size' must be an integer >= 1, got 0");
  EXPECT_EQ(check_rank_identity(RankIdentity{-1, {}, {}, {}, {}, {}}),
            "'global_rank' must be an integer >= 0, got -1");
  EXPECT_EQ(check_rank_identity(RankIdentity{0, -1, {}, {}, {}, {}}),
            "'local_rank' must be an integer >= 0, got -1");
  EXPECT_EQ(check_rank_identity(RankIdentity{0, {}, -2, {}, {}, {}}),
            "'node_rank' must be an integer >= 0, got -2");
  EXPECT_EQ(check_rank_identity(RankIdentity{0, {}, {}, {}, 0, {}}),
            "'local_world_size' must be an integer >= 1, got 0");
  EXPECT_EQ(check_rank_identity(RankIdentity{0, {}, {}, {}, {}, 0}),
            "'world_size' must be an integer >= 1, got 0");
  EXPECT_EQ(check_step_memory(StepMemoryRecord{0, 1, "", -5.0, {}}),
            "'peak_allocated_bytes' must be a finite number >= 0, got -5");
  EXPECT_EQ(check_step_memory(StepMemoryRecord{0, -3, "", {}, {}}),
            "'step' must be an integer >= 1, got -3");
}

TEST(RecordChecks, SystemAndItsGpus) {
  SystemSample s;
  s.node_rank = -1;
  EXPECT_EQ(check_system(s), "'node_rank' must be an integer >= 0, got -1");
  s = SystemSample{};
  s.cpu_percent = -0.5;
  EXPECT_EQ(check_system(s), "'cpu_percent' must be a finite number >= 0, got -0.5");
  s = SystemSample{};
  s.gpus = {GpuSample{}, GpuSample{}};
  s.gpus[1].util_percent = -5.0;
  EXPECT_EQ(check_system(s), "'gpus[1].util_percent' must be a finite number >= 0, got -5");
  s.gpus[1] = GpuSample{};
  s.gpus[1].temperature_c = kInf;
  EXPECT_EQ(check_system(s), "'gpus[1].temperature_c' must be a finite number, got inf");
  s.gpus[1] = GpuSample{};
  s.gpus[0].index = -1;
  EXPECT_EQ(check_system(s), "'gpus[0].index' must be an integer >= 0, got -1");
  // One GPU alone (a row of the run database's system_gpus): no list position.
  EXPECT_EQ(check_gpu_sample(s.gpus[0]), "'index' must be an integer >= 0, got -1");
  EXPECT_EQ(check_gpu_sample(GpuSample{}), std::nullopt);
}

TEST(RecordChecks, ProcessAndItsGpu) {
  ProcessSample p;
  p.cpu_cores = 0;
  EXPECT_EQ(check_process(p), "'cpu_cores' must be an integer >= 1, got 0");
  p = ProcessSample{};
  p.rss_bytes = -4096.0;
  EXPECT_EQ(check_process(p), "'rss_bytes' must be a finite number >= 0, got -4096");
  p = ProcessSample{};
  p.gpu = ProcessGpu{-1, {}, {}, {}};
  EXPECT_EQ(check_process(p), "'gpu.device' must be an integer >= 0, got -1");
  p.gpu = ProcessGpu{0, {}, -1.0, {}};
  EXPECT_EQ(check_process(p), "'gpu.reserved_bytes' must be a finite number >= 0, got -1");
}

TEST(RecordChecks, TracerStats) {
  TracerStats t;
  t.records_dropped = -1;
  EXPECT_EQ(check_tracer_stats(t), "'records_dropped' must be an integer >= 0, got -1");
  t = TracerStats{};
  t.overhead_ns_per_step = kNaN;
  EXPECT_EQ(check_tracer_stats(t), "'overhead_ns_per_step' must be a finite number >= 0, got nan");
  t = TracerStats{};
  t.activity_lost = -3;
  EXPECT_EQ(check_tracer_stats(t), "'activity_lost' must be an integer >= 0, got -3");
  t = TracerStats{};
  t.gpu = TracerStats::Gpu{0, 1, -1, 0};
  EXPECT_EQ(check_tracer_stats(t), "'gpu.steps_unresolved' must be an integer >= 0, got -1");
}

TEST(RecordChecks, ProfileChunk) {
  ProfileChunk p;
  p.first_step = 5;
  p.last_step = 8;
  p.ops.push_back(ProfileOp{"aten::addmm", 1000, 20, 1, 7, 0, "[[32, 64]]"});
  EXPECT_EQ(check_profile_chunk(p), std::nullopt);
  p.last = 1;
  p.ops_cut = 3;
  p.error = "partial";
  EXPECT_EQ(check_profile_chunk(p), std::nullopt);  // the last chunk says how it ended

  ProfileChunk q = p;
  q.last = 0;
  EXPECT_EQ(check_profile_chunk(q), "only a profile's last chunk says how it ended");
  q = p;
  q.last = 2;
  EXPECT_EQ(check_profile_chunk(q), "'last' must be 0 or 1, got 2");
  q = p;
  q.last_step = 4;
  EXPECT_EQ(check_profile_chunk(q), "'last_step' 4 is before 'first_step' 5");
  q = p;
  q.last_step = q.first_step + kMaxProfileSteps;
  EXPECT_EQ(check_profile_chunk(q), "a profile covers at most 1000 steps, got 5 to 1005");
  q = p;
  q.first_step = 0;
  EXPECT_EQ(check_profile_chunk(q), "'first_step' must be an integer >= 1, got 0");
  q = p;
  q.ops.assign(std::size_t(kMaxProfileChunkOps) + 1, p.ops.front());
  EXPECT_EQ(check_profile_chunk(q), "a chunk carries at most 256 ops, got 257");
  q = p;
  q.ops.front().gpu = 2;
  EXPECT_EQ(check_profile_chunk(q), "'ops[].gpu' must be 0 or 1, got 2");
  q = p;
  q.ops.front().duration_us = -1;
  EXPECT_NE(check_profile_chunk(q), std::nullopt);
}

}  // namespace
}  // namespace traceml::model
