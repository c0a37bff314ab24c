// The runtime's GPU side on a fake CUDA: which device a rank times on, a
// training thread's steps going through GpuClock and the sender's
// StepPipeline (CPU steps at once, GPU steps once their events complete,
// activity attribution, captured H2D, step memory), and the end of a run.
#include <gtest/gtest.h>

#include <thread>

#include <chrono>
#include <set>
#include <vector>

#include "../support/fake_cuda.hpp"
#include "runtime/gpu_clock.hpp"
#include "runtime/step_pipeline.hpp"

namespace traceml::runtime {
namespace {

using model::Event;
using testing_support::FakeCuda;
using TimePoint = std::chrono::steady_clock::time_point;

const TimePoint t0 = TimePoint{} + std::chrono::seconds(100);

TEST(ChooseGpuDevice, TheLocalRanksDeviceWhenTheProgramUsesIt) {
  const std::set<int> used{0, 1, 2, 3};
  const auto in_use = [&](int d) { return used.count(d) > 0; };
  EXPECT_EQ(choose_gpu_device(4, 2, 0, in_use), 2);
  EXPECT_EQ(choose_gpu_device(4, 6, 0, in_use), 2);             // two ranks per GPU
  EXPECT_EQ(choose_gpu_device(4, std::nullopt, 1, in_use), 1);  // no local rank: the current one
}

TEST(ChooseGpuDevice, OtherwiseTheCurrentDeviceInUseAndNoneBeforeIt) {
  std::set<int> used{3};
  const auto in_use = [&](int d) { return used.count(d) > 0; };
  EXPECT_EQ(choose_gpu_device(4, 1, 3, in_use), 3);  // the program set device 3 itself
  // A stray early use of device 0 while the thread points at device 1, whose
  // context is not active yet: no choice now, ask again later.
  used = {0};
  EXPECT_EQ(choose_gpu_device(4, 1, 1, in_use), std::nullopt);
  used.clear();
  EXPECT_EQ(choose_gpu_device(4, 1, 0, in_use), std::nullopt);
  EXPECT_EQ(choose_gpu_device(0, 0, 0, in_use), std::nullopt);
}

RawStep cpu_step(std::int64_t step, std::int64_t end_ns, double traced_ms, double forward_ms) {
  RawStep s;
  s.step = step;
  s.end_ns = end_ns;
  s.ns[std::size_t(Event::TracedStepTime)] = std::int64_t(traced_ms * 1e6);
  s.ns[std::size_t(Event::Forward)] = std::int64_t(forward_ms * 1e6);
  s.mask = std::uint8_t(1u << unsigned(Event::TracedStepTime) | 1u << unsigned(Event::Forward));
  return s;
}

/// Records what the pipeline emits.
struct Sink {
  std::vector<model::StepRecord> steps;
  std::vector<model::StepMemoryRecord> memory;
  StepPipeline::Emit emit() {
    return [this](const model::StepRecord& r, const std::optional<model::StepMemoryRecord>& m) {
      steps.push_back(r);
      if (m) memory.push_back(*m);
    };
  }
};

/// An activity stage that reports fixed activity for every step, once the
/// test says the records have arrived.
class FixedActivity : public ActivityStage {
 public:
  void collect(bool final) override { final_collects += final ? 1 : 0; }
  std::optional<std::int64_t> delivered_through() const override { return through; }
  model::StepGpuActivity attribute(std::int64_t begin_ns, std::int64_t end_ns) override {
    seen.push_back({begin_ns, end_ns});
    return activity;
  }
  model::StepGpuActivity activity;
  void flush_idle() override {
    ++idle_flushes;
    if (through_after_flush) through = through_after_flush;
  }
  std::optional<std::int64_t> through = std::int64_t{1} << 62;
  std::optional<std::int64_t> through_after_flush;
  int final_collects = 0;
  int idle_flushes = 0;
  std::vector<std::pair<std::int64_t, std::int64_t>> seen;
};

/// One GPU step of one scope (two records) through the clock, as step `step`.
void gpu_step(GpuClock& clock, GpuThread& t, std::int64_t step) {
  t.builder.scope_begin(step);
  t.builder.scope_end(Event::TracedStepTime, step);
  ASSERT_TRUE(clock.publish(t, step, t.builder.finish_step()));
}

TEST(GpuClock, WaitsUntilTheProgramUsesAGpu) {
  FakeCuda fake;
  fake.active_devices = {};
  GpuClock clock(fake.api(), 2, /*local_rank=*/1, nullptr);
  EXPECT_EQ(clock.attach_thread(), nullptr);
  EXPECT_EQ(clock.device(), std::nullopt);
  fake.active_devices = {1};
  ASSERT_NE(clock.attach_thread(), nullptr);
  EXPECT_EQ(clock.device(), 1);
}

TEST(GpuClock, TheSendersThreadSelectsTheTimedDeviceOnce) {
  FakeCuda fake;
  fake.active_devices = {1};
  GpuClock clock(fake.api(), 2, /*local_rank=*/1, nullptr);
  std::vector<timing::GpuStepTimes> out;
  // No device chosen yet: nothing to select.
  std::thread([&] { clock.poll(t0, out); }).join();
  EXPECT_TRUE(fake.set_device_calls.empty());
  ASSERT_NE(clock.attach_thread(), nullptr);
  ASSERT_EQ(clock.device(), 1);
  // The polling thread (the sender's) selects device 1, once.
  std::thread([&] {
    clock.poll(t0, out);
    clock.poll(t0, out);
  }).join();
  EXPECT_EQ(fake.set_device_calls, std::vector<int>{1});
}

TEST(StepPipeline, GpuStepsWaitForTheirEventsThenCarryBothClocks) {
  FakeCuda fake;
  GpuClock clock(fake.api(), 1, 0, nullptr);
  GpuThread* t = clock.attach_thread();
  ASSERT_NE(t, nullptr);
  // Training thread: step 1 with a forward phase (4 records).
  t->builder.scope_begin(10);
  t->builder.scope_begin(11);
  t->builder.scope_end(Event::Forward, 11);
  t->builder.scope_end(Event::TracedStepTime, 10);
  ASSERT_TRUE(clock.publish(*t, 1, t->builder.finish_step()));

  timing::WallMapping wall;
  FixedActivity activity;
  activity.activity.h2d_copies = 2;
  activity.activity.h2d_ms = 1.25;
  activity.activity.collective_ms = 3.0;
  StepPipeline pipeline(/*rank=*/3, wall, &clock, &activity);
  Sink sink;
  std::vector<GpuRawStep> gpu;
  clock.drain(gpu);
  ASSERT_EQ(gpu.size(), 1u);
  RawStep raw = cpu_step(1, 50'000'000, 20.0, 8.0);
  raw.memory = StepMemoryPeak{0, 1e9, 2e9};
  pipeline.add({raw, cpu_step(2, 60'000'000, 9.0, 4.0)}, gpu, t0, sink.emit());
  // Step 2 had no GPU record: out at once, CPU only. Step 1 waits.
  ASSERT_EQ(sink.steps.size(), 1u);
  EXPECT_EQ(sink.steps[0].step, 2);
  EXPECT_FALSE(sink.steps[0].events.gpu_ms(Event::TracedStepTime));
  EXPECT_EQ(pipeline.waiting(), 1u);

  fake.complete_run(0, 4, 5.0, 2.0);  // begin 5, fwd 7..9, end 11
  pipeline.poll(t0, sink.emit());
  ASSERT_EQ(sink.steps.size(), 2u);
  const model::StepRecord& s1 = sink.steps[1];
  EXPECT_EQ(s1.step, 1);
  EXPECT_EQ(s1.global_rank, 3);
  EXPECT_DOUBLE_EQ(*s1.events.cpu_ms(Event::TracedStepTime), 20.0);
  EXPECT_DOUBLE_EQ(*s1.events.gpu_ms(Event::TracedStepTime), 6.0);
  EXPECT_DOUBLE_EQ(*s1.events.gpu_ms(Event::Forward), 2.0);
  // CUPTI saw copies and the program marked no H2D: H2D on the GPU clock only.
  ASSERT_TRUE(s1.events.has(Event::H2D));
  EXPECT_FALSE(s1.events.cpu_ms(Event::H2D));
  EXPECT_DOUBLE_EQ(*s1.events.gpu_ms(Event::H2D), 1.25);
  ASSERT_TRUE(s1.gpu_activity);
  EXPECT_DOUBLE_EQ(s1.gpu_activity->collective_ms, 3.0);
  // The activity window is the step body on the CPU clock.
  ASSERT_EQ(activity.seen.size(), 1u);
  EXPECT_EQ(activity.seen[0].first, 50'000'000 - 20'000'000);
  EXPECT_EQ(activity.seen[0].second, 50'000'000);
  // The step's allocator peaks travel with it.
  ASSERT_EQ(sink.memory.size(), 1u);
  EXPECT_EQ(sink.memory[0].step, 1);
  EXPECT_EQ(sink.memory[0].device, "cuda:0");
  EXPECT_DOUBLE_EQ(*sink.memory[0].peak_reserved_bytes, 2e9);
  EXPECT_EQ(pipeline.waiting(), 0u);
}

TEST(StepPipeline, AStepWaitsForItsActivityRecordsThenGivesUp) {
  FakeCuda fake;
  GpuClock clock(fake.api(), 1, 0, nullptr);
  GpuThread* t = clock.attach_thread();
  ASSERT_NE(t, nullptr);
  gpu_step(clock, *t, 1);
  gpu_step(clock, *t, 2);
  std::vector<GpuRawStep> gpu;
  clock.drain(gpu);
  timing::WallMapping wall;
  FixedActivity activity;
  activity.activity.collective_ms = 7.0;
  activity.through = std::nullopt;  // no record delivered yet
  StepPipeline pipeline(0, wall, &clock, &activity);
  Sink sink;
  pipeline.add({cpu_step(1, 1000, 0.5, 0.1), cpu_step(2, 2000, 0.5, 0.1)}, gpu, t0, sink.emit());
  fake.complete_run(0, 4, 1.0, 1.0);
  pipeline.poll(t0, sink.emit());
  EXPECT_TRUE(sink.steps.empty());  // GPU done, records not there yet
  EXPECT_EQ(pipeline.waiting(), 2u);
  activity.through = 1500;  // step 1's launches have all been delivered, not step 2's
  pipeline.poll(t0 + std::chrono::seconds(1), sink.emit());
  ASSERT_EQ(sink.steps.size(), 1u);
  EXPECT_EQ(sink.steps[0].step, 1);
  ASSERT_TRUE(sink.steps[0].gpu_activity);
  EXPECT_DOUBLE_EQ(sink.steps[0].gpu_activity->collective_ms, 7.0);
  // Step 2's never come: after the wait it goes out without activity.
  pipeline.poll(t0 + StepPipeline::kActivityWait + std::chrono::seconds(1), sink.emit());
  ASSERT_EQ(sink.steps.size(), 2u);
  EXPECT_FALSE(sink.steps[1].gpu_activity);
  EXPECT_TRUE(sink.steps[1].events.gpu_ms(Event::TracedStepTime));
  EXPECT_EQ(pipeline.activity_timeouts(), 1);
}

TEST(StepPipeline, WithTheGpuIdleTheRecordsAreFlushedOutAfterAWhile) {
  FakeCuda fake;
  GpuClock clock(fake.api(), 1, 0, nullptr);
  GpuThread* t = clock.attach_thread();
  ASSERT_NE(t, nullptr);
  gpu_step(clock, *t, 1);
  gpu_step(clock, *t, 2);
  std::vector<GpuRawStep> gpu;
  clock.drain(gpu);
  timing::WallMapping wall;
  FixedActivity activity;
  activity.through = std::nullopt;        // the next step's work never comes
  activity.through_after_flush = 100000;  // what a forced flush hands back
  activity.activity.h2d_copies = 3;
  StepPipeline pipeline(0, wall, &clock, &activity);
  Sink sink;
  pipeline.add({cpu_step(1, 1000, 0.5, 0.1), cpu_step(2, 2000, 0.5, 0.1)}, gpu, t0, sink.emit());
  // Step 1's GPU work is done, step 2's is not: a step is still on the GPU,
  // so no flush, however long step 1 waits.
  fake.complete_run(0, 2, 1.0, 1.0);
  pipeline.poll(t0, sink.emit());
  pipeline.poll(t0 + std::chrono::seconds(2), sink.emit());
  EXPECT_EQ(activity.idle_flushes, 0);
  EXPECT_TRUE(sink.steps.empty());
  // Step 2 done too: the GPU is idle. Not before kIdleFlushWait...
  fake.complete_run(2, 2, 3.0, 1.0);
  const auto resolved = t0 + std::chrono::seconds(3);
  pipeline.poll(resolved, sink.emit());
  pipeline.poll(resolved + StepPipeline::kIdleFlushWait / 2, sink.emit());
  EXPECT_EQ(activity.idle_flushes, 0);
  EXPECT_TRUE(sink.steps.empty());
  // ... then once, and both steps go out with their activity.
  pipeline.poll(resolved + StepPipeline::kIdleFlushWait, sink.emit());
  EXPECT_EQ(activity.idle_flushes, 1);
  ASSERT_EQ(sink.steps.size(), 2u);
  ASSERT_TRUE(sink.steps[1].gpu_activity);
  EXPECT_EQ(sink.steps[1].gpu_activity->h2d_copies, 3);
  EXPECT_EQ(pipeline.activity_timeouts(), 0);
}

TEST(StepPipeline, AtTheEndTheLastRecordsAreTakenAndAttributed) {
  FakeCuda fake;
  GpuClock clock(fake.api(), 1, 0, nullptr);
  GpuThread* t = clock.attach_thread();
  ASSERT_NE(t, nullptr);
  gpu_step(clock, *t, 1);
  std::vector<GpuRawStep> gpu;
  clock.drain(gpu);
  timing::WallMapping wall;
  FixedActivity activity;
  activity.through = std::nullopt;
  activity.activity.h2d_copies = 1;
  StepPipeline pipeline(0, wall, &clock, &activity);
  Sink sink;
  pipeline.add({cpu_step(1, 1000, 0.5, 0.1)}, gpu, t0, sink.emit());
  fake.complete_run(0, 2, 1.0, 1.0);
  pipeline.abandon(sink.emit());
  EXPECT_EQ(activity.final_collects, 1);
  ASSERT_EQ(sink.steps.size(), 1u);
  ASSERT_TRUE(sink.steps[0].gpu_activity);
  EXPECT_EQ(sink.steps[0].gpu_activity->h2d_copies, 1);
}

TEST(StepPipeline, AMarkedH2DKeepsItsOwnGpuTime) {
  model::StepEvents events;
  events.set(Event::H2D, model::Timing{4.0, 3.5});
  model::StepGpuActivity a;
  a.h2d_copies = 1;
  a.h2d_ms = 1.0;
  add_captured_h2d(a, events);
  EXPECT_DOUBLE_EQ(*events.gpu_ms(Event::H2D), 3.5);
  model::StepEvents none;
  add_captured_h2d(model::StepGpuActivity{}, none);  // no copies: H2D stays absent
  EXPECT_FALSE(none.has(Event::H2D));
}

TEST(StepPipeline, AtTheEndUnfinishedStepsGoOutWithCpuTimes) {
  FakeCuda fake;
  GpuClock clock(fake.api(), 1, 0, nullptr);
  GpuThread* t = clock.attach_thread();
  ASSERT_NE(t, nullptr);
  for (std::int64_t step = 1; step <= 3; ++step)
    gpu_step(clock, *t, step);
  std::vector<GpuRawStep> gpu;
  clock.drain(gpu);
  timing::WallMapping wall;
  StepPipeline pipeline(0, wall, &clock, nullptr);
  Sink sink;
  // Step 3's CPU record was lost (a full ring): its events go back.
  pipeline.add({cpu_step(1, 10, 1.0, 0.5), cpu_step(2, 20, 1.0, 0.5)}, gpu, t0, sink.emit());
  fake.complete_run(0, 2, 1.0, 1.0);  // step 1's events only
  pipeline.abandon(sink.emit());
  ASSERT_EQ(sink.steps.size(), 2u);
  EXPECT_DOUBLE_EQ(*sink.steps[0].events.gpu_ms(Event::TracedStepTime), 1.0);
  EXPECT_FALSE(sink.steps[1].events.gpu_ms(Event::TracedStepTime));  // abandoned
  EXPECT_EQ(clock.counters().steps_abandoned, 1);
  EXPECT_EQ(clock.counters().steps_resolved, 1);
}

TEST(StepPipeline, AGpuRecordDrainedBeforeItsCpuStepWaitsForIt) {
  FakeCuda fake;
  GpuClock clock(fake.api(), 1, 0, nullptr);
  GpuThread* t = clock.attach_thread();
  ASSERT_NE(t, nullptr);
  gpu_step(clock, *t, 1);
  std::vector<GpuRawStep> gpu;
  clock.drain(gpu);
  timing::WallMapping wall;
  StepPipeline pipeline(0, wall, &clock, nullptr);
  Sink sink;
  // The sender drained between the GPU push and the CPU publish.
  pipeline.add({}, gpu, t0, sink.emit());
  EXPECT_TRUE(sink.steps.empty());
  pipeline.add({cpu_step(1, 10, 1.0, 0.5)}, {}, t0, sink.emit());
  fake.complete_run(0, 2, 1.0, 3.0);
  pipeline.poll(t0, sink.emit());
  ASSERT_EQ(sink.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(*sink.steps[0].events.gpu_ms(Event::TracedStepTime), 3.0);
}

TEST(StepPipeline, ARecordWhoseCpuStepNeverComesGivesItsEventsBack) {
  FakeCuda fake;
  GpuClock clock(fake.api(), 1, 0, nullptr);
  GpuThread* t = clock.attach_thread();
  ASSERT_NE(t, nullptr);
  gpu_step(clock, *t, 1);
  std::vector<GpuRawStep> gpu;
  clock.drain(gpu);
  timing::WallMapping wall;
  StepPipeline pipeline(0, wall, &clock, nullptr);
  Sink sink;
  pipeline.add({}, gpu, t0, sink.emit());
  for (int i = 0; i < 5; ++i)
    pipeline.add({}, {}, t0, sink.emit());
  // Both events went back to the pool: the next step reuses them.
  EXPECT_TRUE(sink.steps.empty());
  EXPECT_EQ(clock.pending(), 0u);
  gpu_step(clock, *t, 2);
  EXPECT_EQ(fake.created(), 2);
}

TEST(StepPipeline, WithoutAGpuClockEveryStepGoesOutAtOnce) {
  timing::WallMapping wall;
  StepPipeline pipeline(0, wall, nullptr, nullptr);
  Sink sink;
  pipeline.add({cpu_step(1, 10, 2.0, 1.0)}, {}, t0, sink.emit());
  ASSERT_EQ(sink.steps.size(), 1u);
  EXPECT_DOUBLE_EQ(*sink.steps[0].events.cpu_ms(Event::Forward), 1.0);
  EXPECT_FALSE(sink.steps[0].gpu_activity);
  EXPECT_TRUE(sink.memory.empty());
}

}  // namespace
}  // namespace traceml::runtime
