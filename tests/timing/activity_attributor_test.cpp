// The attributor on synthetic records: which activities a step owns, what it
// sums (H2D copies, collective and busy unions), in whatever order the records
// come, and how it stays bounded. Times are in ms of our clock, written as ns.
#include "timing/gpu_activity.hpp"

#include <gtest/gtest.h>

#include <vector>

namespace traceml::timing {
namespace {

constexpr std::int64_t kMs = 1000000;

/// A time in ms on our clock, in ns; fractions allowed.
constexpr std::int64_t ms(double v) {
  return static_cast<std::int64_t>(v * double(kMs));
}

ApiLaunch launch(std::uint32_t id, double cpu_ms) {
  return {id, ms(cpu_ms)};
}

GpuActivity kernel(std::uint32_t id, double start_ms, double end_ms, bool collective = false) {
  GpuActivity a;
  a.kind = ActivityKind::Kernel;
  a.correlation_id = id;
  a.start_ns = ms(start_ms);
  a.end_ns = ms(end_ms);
  a.collective = collective;
  return a;
}

GpuActivity copy(std::uint32_t id, double start_ms, double end_ms, CopyKind kind,
                 std::uint64_t bytes, bool pageable = false) {
  GpuActivity a;
  a.kind = ActivityKind::Memcpy;
  a.correlation_id = id;
  a.start_ns = ms(start_ms);
  a.end_ns = ms(end_ms);
  a.copy_kind = kind;
  a.bytes = bytes;
  a.from_pageable = pageable;
  return a;
}

GpuActivity memset_of(std::uint32_t id, double start_ms, double end_ms, std::uint64_t bytes) {
  GpuActivity a;
  a.kind = ActivityKind::Memset;
  a.correlation_id = id;
  a.start_ns = ms(start_ms);
  a.end_ns = ms(end_ms);
  a.bytes = bytes;
  return a;
}

TEST(CollectiveKernel, NcclKernelsByTheirNames) {
  EXPECT_TRUE(is_collective_kernel("ncclKernel_AllReduce_RING_LL_Sum_float"));
  EXPECT_TRUE(is_collective_kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL"));
  EXPECT_TRUE(is_collective_kernel("ncclDevKernel_Generic"));
  EXPECT_TRUE(is_collective_kernel("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t"));
  // As CUPTI reports them: mangled.
  EXPECT_TRUE(is_collective_kernel(
      "_Z39ncclDevKernel_AllReduce_Sum_f32_RING_LL24ncclDevKernelArgsStorageILm4096EE"));
  EXPECT_TRUE(is_collective_kernel("_Z21ncclDevKernel_Generic24ncclDevKernelArgsStorageILm4096EE"));
  EXPECT_TRUE(
      is_collective_kernel("_Z38ncclKernel_AllReduce_RING_LL_Sum_floatP11ncclDevCommmP8ncclWork"));
  EXPECT_TRUE(is_collective_kernel("_ZL21ncclDevKernel_Genericv"));
  // A one-rank communicator's average: NCCL's oneRankReduce<FuncPreMulSum<T>>,
  // in an anonymous namespace, so nvcc prefixes it; this is the name PyTorch's
  // profiler showed on an H200 with NCCL 2.28.9 (docs/gpu-validation.md).
  EXPECT_TRUE(is_collective_kernel(
      "__nv_static_32__b4148644_10_onerank_cu_fdf47990__ZN43_GLOBAL__N__b4148644_10_onerank_cu_"
      "fdf4799013oneRankReduceI13FuncPreMulSumIfEEEvPvS3_mmb"));
  EXPECT_TRUE(is_collective_kernel("_Z13oneRankReduceI13FuncPreMulSumIfEEvPvPKvmmm"));
  EXPECT_TRUE(is_collective_kernel("oneRankReduce<FuncPreMulSum<float>>"));
  EXPECT_TRUE(is_collective_kernel("_ZN12_GLOBAL__N_121ncclDevKernel_Genericv"));
}

TEST(CollectiveKernel, OtherKernelsAreNot) {
  EXPECT_FALSE(is_collective_kernel(""));
  EXPECT_FALSE(is_collective_kernel("_Z"));
  EXPECT_FALSE(is_collective_kernel("_Z3ncc"));
  EXPECT_FALSE(is_collective_kernel("nccx_kernel"));
  EXPECT_FALSE(is_collective_kernel("sm90_xmma_gemm_bf16bf16_nccl_like"));
  EXPECT_FALSE(
      is_collective_kernel("_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_"
                           "11FillFunctorIfEESt5arrayIPcLm1EEEEviT0_T1_"));
  // The second component of a nested name is not where a kernel's name starts.
  EXPECT_FALSE(is_collective_kernel("_ZN2at4ncclEv"));
  EXPECT_FALSE(is_collective_kernel("_Z10my_kernel24ncclDevKernelArgsStorage"));
  EXPECT_FALSE(is_collective_kernel("_Z9oneReducev"));
  EXPECT_FALSE(is_collective_kernel("_Z16oneRankReduceAllv"));
  EXPECT_FALSE(is_collective_kernel("__nv_static_32__b4148644_10_onerank_cu_fdf47990"));
  EXPECT_FALSE(is_collective_kernel("__nv_static_1__x__ZN12_GLOBAL__N_16kernelEv"));
  EXPECT_FALSE(is_collective_kernel("_ZN12_GLOBAL__N_1"));
  EXPECT_FALSE(is_collective_kernel("_Z999999999ncclx"));
}

TEST(ActivityAttributor, H2dIsHostToDeviceCopiesOnly) {
  ActivityAttributor at;
  at.add({launch(1, 11), launch(2, 12), launch(3, 13), launch(4, 14)},
         {copy(1, 15.0, 15.5, CopyKind::HostToDevice, 1000000),
          copy(2, 16.0, 17.0, CopyKind::HostToDevice, 2000000, /*pageable=*/true),
          copy(3, 17.0, 18.0, CopyKind::DeviceToDevice, 4000000),
          copy(4, 18.0, 18.25, CopyKind::DeviceToHost, 1000000, /*pageable=*/true)});
  const model::StepGpuActivity s = at.attribute(ms(10), ms(20));
  EXPECT_DOUBLE_EQ(s.h2d_ms, 1.5);
  EXPECT_DOUBLE_EQ(s.h2d_bytes, 3000000.0);
  EXPECT_EQ(s.h2d_copies, 2);
  EXPECT_EQ(s.h2d_pageable_copies, 1);
  EXPECT_DOUBLE_EQ(s.h2d_pageable_bytes, 2000000.0);
  EXPECT_DOUBLE_EQ(s.collective_ms, 0.0);
  // Every copy keeps the GPU busy, whatever its direction: 0.5 + 1 + 1 + 0.25.
  EXPECT_DOUBLE_EQ(s.busy_ms, 2.75);
  EXPECT_EQ(at.attributed(), 4);
  EXPECT_EQ(at.stored(), 0u);
}

TEST(ActivityAttributor, H2dSumsDurationsOfOverlappingCopies) {
  // Two streams copying at once: 2 ms of copy work in 1.5 ms of wall time.
  ActivityAttributor at;
  at.add({launch(1, 1), launch(2, 2)}, {copy(1, 5.0, 6.0, CopyKind::HostToDevice, 10),
                                        copy(2, 5.5, 6.5, CopyKind::HostToDevice, 20)});
  const model::StepGpuActivity s = at.attribute(ms(0), ms(3));
  EXPECT_DOUBLE_EQ(s.h2d_ms, 2.0);
  EXPECT_DOUBLE_EQ(s.busy_ms, 1.5);
  EXPECT_DOUBLE_EQ(s.h2d_bytes, 30.0);
}

TEST(ActivityAttributor, CollectiveIsTheUnionOfNcclKernels) {
  ActivityAttributor at;
  at.add({launch(1, 1), launch(2, 2), launch(3, 3), launch(4, 4)},
         {kernel(1, 10, 14, /*collective=*/true), kernel(2, 12, 16, /*collective=*/true),
          kernel(3, 20, 21, /*collective=*/true), kernel(4, 13, 25)});
  const model::StepGpuActivity s = at.attribute(ms(0), ms(5));
  EXPECT_DOUBLE_EQ(s.collective_ms, 7.0);  // [10,16] and [20,21]
  EXPECT_DOUBLE_EQ(s.busy_ms, 15.0);       // [10,25]
  EXPECT_DOUBLE_EQ(s.h2d_ms, 0.0);
  EXPECT_EQ(s.h2d_copies, 0);
}

TEST(ActivityAttributor, BusyIsTheUnionOfKernelsCopiesAndMemsets) {
  ActivityAttributor at;
  at.add({launch(1, 1), launch(2, 2), launch(3, 3), launch(4, 4)},
         {kernel(1, 10, 12), memset_of(2, 11, 13, 64), copy(3, 15, 16, CopyKind::DeviceToHost, 8),
          kernel(4, 15.5, 15.75)});
  const model::StepGpuActivity s = at.attribute(ms(0), ms(5));
  EXPECT_DOUBLE_EQ(s.busy_ms, 4.0);  // [10,13] and [15,16]
  EXPECT_EQ(at.attributed(), 4);
}

TEST(ActivityAttributor, StepWithoutActivityIsAllZero) {
  ActivityAttributor at;
  const model::StepGpuActivity s = at.attribute(ms(0), ms(5));
  EXPECT_DOUBLE_EQ(s.busy_ms, 0.0);
  EXPECT_DOUBLE_EQ(s.h2d_ms, 0.0);
  EXPECT_EQ(s.h2d_copies, 0);
}

TEST(ActivityAttributor, LaunchesAndActivitiesComeInAnyOrderAndBatch) {
  ActivityAttributor at;
  // Activities first, their launches in a later batch, and a second activity
  // of launch 1 (a graph launch owns many) after that.
  at.add({}, {copy(1, 12, 13, CopyKind::HostToDevice, 100, true), kernel(2, 13, 15)});
  EXPECT_EQ(at.stored(), 2u);
  at.add({launch(2, 4), launch(1, 3)}, {});
  at.add({}, {kernel(1, 15, 16)});
  const model::StepGpuActivity s = at.attribute(ms(0), ms(10));
  EXPECT_DOUBLE_EQ(s.h2d_ms, 1.0);
  EXPECT_EQ(s.h2d_pageable_copies, 1);
  EXPECT_DOUBLE_EQ(s.busy_ms, 4.0);  // [12,16]
  EXPECT_EQ(at.attributed(), 3);
  EXPECT_EQ(at.unmatched(), 0);
  EXPECT_EQ(at.stored(), 0u);
}

TEST(ActivityAttributor, WorkLaunchedOutsideTheStepIsNotCounted) {
  ActivityAttributor at;
  // Step [10,20]. Launch 1 before it (a prefetch between steps) runs inside
  // it on the GPU; launch 2 inside; launch 3 after it belongs to the next step.
  at.add({launch(1, 5), launch(2, 15), launch(3, 25)},
         {copy(1, 12, 14, CopyKind::HostToDevice, 100), copy(2, 16, 17, CopyKind::HostToDevice, 10),
          copy(3, 26, 30, CopyKind::HostToDevice, 1)});
  const model::StepGpuActivity s1 = at.attribute(ms(10), ms(20));
  EXPECT_DOUBLE_EQ(s1.h2d_ms, 1.0);
  EXPECT_DOUBLE_EQ(s1.h2d_bytes, 10.0);
  EXPECT_EQ(at.outside_steps(), 1);
  EXPECT_EQ(at.stored(), 2u);  // launch 3 and its copy wait for their step
  const model::StepGpuActivity s2 = at.attribute(ms(21), ms(31));
  EXPECT_DOUBLE_EQ(s2.h2d_ms, 4.0);
  EXPECT_DOUBLE_EQ(s2.h2d_bytes, 1.0);
  EXPECT_EQ(at.attributed(), 2);
  EXPECT_EQ(at.outside_steps(), 1);
  EXPECT_EQ(at.stored(), 0u);
}

TEST(ActivityAttributor, WindowBoundsAreInclusive) {
  ActivityAttributor at;
  at.add({launch(1, 10), launch(2, 20)}, {kernel(1, 21, 22), kernel(2, 23, 25)});
  EXPECT_DOUBLE_EQ(at.attribute(ms(10), ms(20)).busy_ms, 3.0);
}

TEST(ActivityAttributor, SeveralStepsInARow) {
  // The CPU ran three steps ahead of the GPU; all records come in one batch.
  ActivityAttributor at;
  std::vector<ApiLaunch> launches;
  std::vector<GpuActivity> activities;
  for (std::uint32_t step = 0; step < 3; ++step) {
    const double t = 100.0 * step;  // step bodies [t, t+10] on the CPU
    const std::uint32_t id = 10 * step;
    launches.push_back(launch(id + 1, t + 1));
    launches.push_back(launch(id + 2, t + 2));
    launches.push_back(launch(id + 3, t + 3));
    // Work runs later on the GPU, past the CPU window.
    activities.push_back(copy(id + 1, t + 20, t + 20 + (step + 1), CopyKind::HostToDevice,
                              1000 * (step + 1), step == 1));
    activities.push_back(kernel(id + 2, t + 30, t + 35));
    activities.push_back(kernel(id + 3, t + 34, t + 36, /*collective=*/true));
  }
  at.add(launches, activities);
  for (std::uint32_t step = 0; step < 3; ++step) {
    const double t = 100.0 * step;
    const model::StepGpuActivity s = at.attribute(ms(t), ms(t + 10));
    EXPECT_DOUBLE_EQ(s.h2d_ms, step + 1.0) << step;
    EXPECT_DOUBLE_EQ(s.h2d_bytes, 1000.0 * (step + 1)) << step;
    EXPECT_EQ(s.h2d_copies, 1) << step;
    EXPECT_EQ(s.h2d_pageable_copies, step == 1 ? 1 : 0) << step;
    EXPECT_DOUBLE_EQ(s.collective_ms, 2.0) << step;
    EXPECT_DOUBLE_EQ(s.busy_ms, (step + 1.0) + 6.0) << step;  // copy + [30,36]
  }
  EXPECT_EQ(at.attributed(), 9);
  EXPECT_EQ(at.outside_steps(), 0);
  EXPECT_EQ(at.stored(), 0u);
}

TEST(ActivityAttributor, ActivityWithoutLaunchGetsOneStepOfGrace) {
  ActivityAttributor at;
  at.add({}, {kernel(99, 12, 13)});
  at.attribute(ms(10), ms(20));
  EXPECT_EQ(at.unmatched(), 0);
  EXPECT_EQ(at.stored(), 1u);  // its launch may still come in a later batch
  at.attribute(ms(30), ms(40));
  EXPECT_EQ(at.unmatched(), 1);
  EXPECT_EQ(at.stored(), 0u);
  EXPECT_EQ(at.attributed(), 0);
}

TEST(ActivityAttributor, OrphanStartedAfterTheSettledTimeWaitsForItsLaunch) {
  ActivityAttributor at;
  at.attribute(ms(0), ms(10));
  at.add({}, {kernel(7, 22, 23)});
  at.attribute(ms(11), ms(20));  // its launch is not in this step: it may be in the next
  EXPECT_EQ(at.unmatched(), 0);
  at.add({launch(7, 21)}, {});
  EXPECT_DOUBLE_EQ(at.attribute(ms(21), ms(30)).busy_ms, 1.0);
  EXPECT_EQ(at.unmatched(), 0);
}

TEST(ActivityAttributor, RecordsOfASettledStepAreLate) {
  ActivityAttributor at;
  at.add({launch(1, 12)}, {kernel(1, 13, 14)});
  EXPECT_DOUBLE_EQ(at.attribute(ms(10), ms(20)).busy_ms, 1.0);
  // Launch 1 is settled and freed: a second activity of it comes too late.
  at.add({}, {kernel(1, 14, 15)});
  // And a launch inside the attributed step, with its activity, comes late.
  at.add({launch(2, 15)}, {kernel(2, 16, 18)});
  EXPECT_EQ(at.late(), 1);
  const model::StepGpuActivity s = at.attribute(ms(21), ms(30));
  EXPECT_DOUBLE_EQ(s.busy_ms, 0.0);
  // The orphan of launch 1 started before the settled time: never matched.
  EXPECT_EQ(at.unmatched(), 1);
  EXPECT_EQ(at.attributed(), 1);
  EXPECT_EQ(at.stored(), 0u);
}

TEST(ActivityAttributor, DuplicateLaunchIdKeepsTheEarlierCall) {
  ActivityAttributor at;
  // A runtime call and a driver call inside it reported with one id: the
  // earlier one, in the step, is the launch.
  at.add({launch(5, 19), launch(5, 21)}, {kernel(5, 22, 24)});
  EXPECT_DOUBLE_EQ(at.attribute(ms(10), ms(20)).busy_ms, 2.0);
}

TEST(ActivityAttributor, MemoryIsBoundedAndDropsAreCounted) {
  AttributorSettings settings;
  settings.max_records = 4;
  ActivityAttributor at(settings);
  at.add({launch(1, 1), launch(2, 2), launch(3, 3)},
         {kernel(1, 5, 6), kernel(2, 6, 7), kernel(3, 7, 8)});
  EXPECT_EQ(at.stored(), 4u);  // three launches and one activity
  EXPECT_EQ(at.dropped(), 2);  // no room for the other two activities
  at.add({launch(4, 4)}, {});
  EXPECT_EQ(at.dropped(), 3);
  EXPECT_DOUBLE_EQ(at.attribute(ms(0), ms(10)).busy_ms, 1.0);
  EXPECT_EQ(at.stored(), 0u);
  // Room again once settled.
  at.add({launch(5, 11)}, {kernel(5, 12, 14)});
  EXPECT_DOUBLE_EQ(at.attribute(ms(11), ms(20)).busy_ms, 2.0);
  EXPECT_EQ(at.dropped(), 3);
}

TEST(ActivityAttributor, AnOrphanFindingItsLaunchNeedsNoRoom) {
  AttributorSettings settings;
  settings.max_records = 3;
  ActivityAttributor at(settings);
  at.add({launch(1, 1)}, {kernel(2, 5, 6)});  // a launch and an orphan
  at.add({launch(2, 2)}, {});                 // the last room; the orphan moves without taking more
  EXPECT_EQ(at.dropped(), 0);
  EXPECT_EQ(at.stored(), 3u);
  EXPECT_DOUBLE_EQ(at.attribute(ms(0), ms(10)).busy_ms, 1.0);
  // Full after three launches: launch 6 is dropped, and so is its activity.
  at.add({launch(3, 11), launch(4, 12), launch(5, 13), launch(6, 14)}, {kernel(6, 15, 16)});
  EXPECT_EQ(at.dropped(), 2);
}

TEST(ActivityAttributor, DiscardUntilSettlesStretchesWithoutSteps) {
  ActivityAttributor at;
  // An evaluation loop outside steps launches work; nothing attributes it.
  for (std::uint32_t i = 1; i <= 100; ++i)
    at.add({launch(i, i)}, {kernel(i, i + 0.5, i + 0.75)});
  EXPECT_EQ(at.stored(), 200u);
  at.discard_until(ms(100));
  EXPECT_EQ(at.stored(), 0u);
  EXPECT_EQ(at.outside_steps(), 100);
  // Its late records are counted, not held.
  at.add({}, {kernel(50, 60, 61)});
  at.add({launch(101, 90)}, {kernel(101, 91, 92)});
  EXPECT_EQ(at.late(), 1);
  // The next step is clean.
  at.add({launch(200, 110)}, {kernel(200, 111, 113)});
  EXPECT_DOUBLE_EQ(at.attribute(ms(105), ms(120)).busy_ms, 2.0);
  EXPECT_EQ(at.unmatched(), 1);  // the orphan of launch 50
  EXPECT_EQ(at.stored(), 0u);
}

TEST(ActivityAttributor, NegativeDurationsCountAsNothing) {
  ActivityAttributor at;
  at.add({launch(1, 1), launch(2, 2)},
         {copy(1, 6, 5, CopyKind::HostToDevice, 10), kernel(2, 8, 7)});
  const model::StepGpuActivity s = at.attribute(ms(0), ms(5));
  EXPECT_DOUBLE_EQ(s.h2d_ms, 0.0);
  EXPECT_EQ(s.h2d_copies, 1);
  EXPECT_DOUBLE_EQ(s.busy_ms, 0.0);
}

}  // namespace
}  // namespace traceml::timing
