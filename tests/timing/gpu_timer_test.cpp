// The GPU clock's logic on synthetic CUDA: a hand-written fake of the runtime
// entry points (as libkineto fakes CUPTI) in which events are numbers and the
// test decides when each recorded event completes and at what GPU time. The
// pipeline is the real one: EventPool -> GpuStepBuilder (training thread) ->
// GpuStepResolver (background thread) -> merge_gpu_times.
#include <gtest/gtest.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

#include "../support/fake_cuda.hpp"
#include "timing/cuda_api.hpp"
#include "timing/event_pool.hpp"
#include "timing/gpu_step.hpp"
#include "timing/gpu_step_builder.hpp"
#include "timing/gpu_step_resolver.hpp"

namespace traceml::timing {
namespace {

using testing_support::FakeCuda;

using model::Event;
using std::chrono::seconds;
using TimePoint = GpuStepResolver::TimePoint;

const TimePoint t0 = TimePoint{} + seconds(1000);

/// One rank's GPU clock on the fake: pool, the training thread's builder, the
/// background resolver. Keys stand in for the hot path's CPU start times.
struct Tracer {
  explicit Tracer(FakeCuda& fake, std::size_t pool_capacity = EventPool::kDefaultCapacity,
                  GpuResolverSettings settings = {})
      : api(fake.api()),
        pool(api, pool_capacity),
        builder(api, pool),
        resolver(api, pool, settings) {}

  std::int64_t begin() {
    builder.scope_begin(++key);
    return key;
  }
  void end(Event e, std::int64_t k) { builder.scope_end(e, k); }
  /// A phase with nothing inside it: two records.
  void phase(Event e) { end(e, begin()); }
  /// Ends the step begun with `k` and submits it as step `step`.
  bool end_step(std::int64_t k, std::int64_t step, TimePoint now = t0) {
    end(Event::TracedStepTime, k);
    return resolver.submit(step, builder.finish_step(), now);
  }
  std::vector<GpuStepTimes> poll(TimePoint now = t0) {
    std::vector<GpuStepTimes> out;
    resolver.poll(now, out);
    return out;
  }

  CudaApi api;
  EventPool pool;
  GpuStepBuilder builder;
  GpuStepResolver resolver;
  std::int64_t key = 0;
};

std::optional<double> gpu(const GpuStepTimes& t, Event e) {
  return t.gpu_ms[std::size_t(e)];
}

TEST(GpuTimer, SumsEveryOccurrenceOfAPhase) {
  FakeCuda fake;
  Tracer tr(fake);
  const auto step = tr.begin();       // record 0
  tr.phase(Event::Forward);           // 1, 2
  tr.phase(Event::Backward);          // 3, 4
  tr.phase(Event::Forward);           // 5, 6: gradient accumulation
  tr.phase(Event::Backward);          // 7, 8
  ASSERT_TRUE(tr.end_step(step, 1));  // 9
  ASSERT_EQ(fake.records(), 10u);
  const std::array<double, 10> at{0, 1, 4, 4, 10, 11, 13, 13, 20, 25};
  for (std::size_t k = 0; k < at.size(); ++k)
    fake.complete(k, at[k]);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].step, 1);
  EXPECT_EQ(out[0].outcome, GpuOutcome::Resolved);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::Forward), 3.0 + 2.0);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::Backward), 6.0 + 7.0);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 25.0);
  // Timed on the GPU, with no scope of these: measured zero.
  EXPECT_EQ(gpu(out[0], Event::InputWait), 0.0);
  EXPECT_EQ(gpu(out[0], Event::H2D), 0.0);
  EXPECT_EQ(gpu(out[0], Event::OptimizerStep), 0.0);
  EXPECT_EQ(tr.resolver.resolved(), 1);
  EXPECT_EQ(tr.resolver.pending(), 0u);
  // Timing-enabled events without blocking sync, on the default stream.
  EXPECT_EQ(fake.last_flags(), kCudaEventDefault);
  EXPECT_EQ(fake.last_stream(), nullptr);
}

TEST(GpuTimer, InputWaitBeforeTheStepBelongsToIt) {
  FakeCuda fake;
  Tracer tr(fake);
  tr.phase(Event::InputWait);         // 0, 1: a fetch before the step
  tr.phase(Event::InputWait);         // 2, 3: a retry of the loader
  const auto step = tr.begin();       // 4
  tr.phase(Event::H2D);               // 5, 6
  ASSERT_TRUE(tr.end_step(step, 7));  // 7
  fake.complete_run(0, 8, 100.0, 1.5);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].step, 7);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::InputWait), 3.0);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::H2D), 1.5);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 4.5);
}

TEST(GpuTimer, WaitsWithoutBlockingUntilEveryEventCompleted) {
  FakeCuda fake;
  Tracer tr(fake);
  const auto step = tr.begin();       // 0
  tr.phase(Event::Forward);           // 1, 2
  ASSERT_TRUE(tr.end_step(step, 1));  // 3
  fake.complete(0, 0.0);
  fake.complete(1, 1.0);
  // Intervals are listed as their scopes end (forward, then the step).
  EXPECT_TRUE(tr.poll().empty());
  EXPECT_EQ(fake.queries(), 2);  // 1 complete, 2 not yet
  EXPECT_TRUE(tr.poll().empty());
  EXPECT_EQ(fake.queries(), 3);  // resumes at the first event not seen complete
  fake.complete(2, 2.0);
  fake.complete(3, 8.0);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].outcome, GpuOutcome::Resolved);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::Forward), 1.0);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 8.0);
  EXPECT_EQ(fake.queries(), 6);
}

TEST(GpuTimer, StepsComeOutInOrderEvenWhenALaterOneFinishesFirst) {
  FakeCuda fake;
  Tracer tr(fake);
  auto s = tr.begin();                 // 0
  tr.phase(Event::Forward);            // 1, 2
  ASSERT_TRUE(tr.end_step(s, 1));      // 3
  s = tr.begin();                      // 4
  tr.phase(Event::Forward);            // 5, 6
  ASSERT_TRUE(tr.end_step(s, 2));      // 7
  fake.complete_run(4, 4, 20.0, 1.0);  // step 2 done on the GPU
  fake.complete_run(0, 3, 0.0, 1.0);   // step 1 not yet: its end is missing
  EXPECT_TRUE(tr.poll().empty());
  EXPECT_EQ(tr.resolver.pending(), 2u);
  fake.complete(3, 10.0);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].step, 1);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 10.0);
  EXPECT_EQ(out[1].step, 2);
  EXPECT_DOUBLE_EQ(*gpu(out[1], Event::TracedStepTime), 3.0);
}

TEST(GpuTimer, AStepPastTheDeadlineComesOutWithoutGpuValues) {
  FakeCuda fake;
  GpuResolverSettings settings;
  settings.deadline = seconds(10);
  Tracer tr(fake, EventPool::kDefaultCapacity, settings);
  auto s = tr.begin();
  tr.phase(Event::Forward);
  ASSERT_TRUE(tr.end_step(s, 1, t0));  // records 0-3
  s = tr.begin();
  tr.phase(Event::Forward);
  ASSERT_TRUE(tr.end_step(s, 2, t0));  // records 4-7
  fake.complete_run(0, 3, 0.0, 1.0);   // step 1's end never completes

  EXPECT_TRUE(tr.poll(t0 + seconds(9)).empty());
  auto out = tr.poll(t0 + seconds(10));
  ASSERT_EQ(out.size(), 1u);  // step 2 has not started its own wait yet
  EXPECT_EQ(out[0].step, 1);
  EXPECT_EQ(out[0].outcome, GpuOutcome::Expired);
  for (const auto& v : out[0].gpu_ms)
    EXPECT_FALSE(v);
  EXPECT_EQ(tr.resolver.expired(), 1);
  EXPECT_EQ(tr.resolver.resolved(), 0);

  // Step 2's deadline runs from when it became the oldest (t0 + 10 s).
  EXPECT_TRUE(tr.poll(t0 + seconds(19)).empty());
  fake.complete_run(4, 4, 30.0, 1.0);
  out = tr.poll(t0 + seconds(19));
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].step, 2);
  EXPECT_EQ(out[0].outcome, GpuOutcome::Resolved);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 3.0);
}

TEST(GpuTimer, AQueryErrorComesOutWithoutGpuValues) {
  FakeCuda fake;
  Tracer tr(fake);
  const auto s = tr.begin();
  tr.phase(Event::Forward);
  ASSERT_TRUE(tr.end_step(s, 1));  // 0-3
  fake.complete_run(0, 4, 0.0, 1.0);
  fake.fail_query(2, 700);  // cudaErrorIllegalAddress: the context is gone
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].outcome, GpuOutcome::Failed);
  for (const auto& v : out[0].gpu_ms)
    EXPECT_FALSE(v);
  EXPECT_EQ(tr.resolver.failed(), 1);
}

TEST(GpuTimer, AnElapsedTimeErrorComesOutWithoutGpuValues) {
  FakeCuda fake;
  Tracer tr(fake);
  const auto s = tr.begin();
  ASSERT_TRUE(tr.end_step(s, 1));
  fake.complete_run(0, 2, 0.0, 1.0);
  fake.elapsed_error = 400;  // cudaErrorInvalidResourceHandle
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].outcome, GpuOutcome::Failed);
  EXPECT_FALSE(gpu(out[0], Event::TracedStepTime));
  EXPECT_EQ(tr.resolver.failed(), 1);
}

TEST(GpuTimer, AnExhaustedPoolSkipsTheScopeAndCountsIt) {
  FakeCuda fake;
  Tracer tr(fake, /*pool_capacity=*/4);
  const auto s = tr.begin();       // event 1
  tr.phase(Event::Forward);        // events 2, 3
  const auto b = tr.begin();       // event 4: the pool is now empty
  tr.end(Event::Backward, b);      // no end event: backward is skipped, 4 freed
  ASSERT_TRUE(tr.end_step(s, 1));  // the step's end reuses 4
  EXPECT_EQ(tr.pool.exhausted(), 1);
  EXPECT_EQ(tr.builder.skipped_scopes(), 1);
  EXPECT_EQ(tr.pool.created(), 4u);
  EXPECT_EQ(fake.created(), 4);
  ASSERT_EQ(fake.records(), 5u);
  fake.complete(0, 0.0);
  fake.complete(1, 1.0);
  fake.complete(2, 3.0);
  fake.complete(4, 9.0);  // record 3 (backward's begin) was recorded again as 4
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].outcome, GpuOutcome::Resolved);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::Forward), 2.0);
  EXPECT_FALSE(gpu(out[0], Event::Backward));  // ran, but untimed: absent, not 0
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 9.0);
}

TEST(GpuTimer, AnExhaustedPoolCostsOnlyTheScopesThatFoundNoEvent) {
  FakeCuda fake;
  Tracer tr(fake, /*pool_capacity=*/2);
  const auto s = tr.begin();       // record 0: event 1
  tr.phase(Event::Forward);        // record 1: event 2 begins it; no end event: skipped
  const auto h2d = tr.begin();     // record 2: event 2 again
  tr.end(Event::H2D, h2d);         // no end event: skipped
  ASSERT_TRUE(tr.end_step(s, 1));  // record 3: the step's end gets event 2
  ASSERT_EQ(fake.records(), 4u);
  fake.complete(0, 0.0);
  fake.complete(3, 5.0);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 5.0);
  EXPECT_FALSE(gpu(out[0], Event::Forward));
  EXPECT_FALSE(gpu(out[0], Event::H2D));
}

TEST(GpuTimer, AStepWithoutItsOwnGpuTimeHasNoZeros) {
  // The step's own scope cannot be timed: events without a scope have no
  // basis for a measured zero.
  FakeCuda fake2;
  Tracer tr2(fake2, /*pool_capacity=*/1);
  const auto s2 = tr2.begin();       // the only event
  ASSERT_TRUE(tr2.end_step(s2, 1));  // no end event
  const auto out2 = tr2.poll();
  ASSERT_EQ(out2.size(), 1u);
  EXPECT_EQ(out2[0].outcome, GpuOutcome::Resolved);
  for (const auto& v : out2[0].gpu_ms)
    EXPECT_FALSE(v);
}

TEST(GpuTimer, EventsAreReusedAndThePoolDoesNotGrow) {
  FakeCuda fake;
  Tracer tr(fake, /*pool_capacity=*/64);
  for (std::int64_t step = 1; step <= 200; ++step) {
    const std::size_t first = fake.records();
    tr.phase(Event::InputWait);
    const auto s = tr.begin();
    tr.phase(Event::Forward);
    tr.phase(Event::Backward);
    ASSERT_TRUE(tr.end_step(s, step));
    fake.complete_run(first, fake.records() - first, double(step) * 100.0, 1.0);
    const auto out = tr.poll();
    ASSERT_EQ(out.size(), 1u);
    ASSERT_EQ(out[0].step, step);
    ASSERT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 5.0);
  }
  EXPECT_EQ(tr.pool.created(), 8u);  // one step's worth of events
  EXPECT_EQ(fake.created(), 8);
  EXPECT_EQ(tr.pool.exhausted(), 0);
}

TEST(GpuTimer, PendingStepsAreBounded) {
  FakeCuda fake;
  GpuResolverSettings settings;
  settings.max_pending_steps = 2;
  Tracer tr(fake, EventPool::kDefaultCapacity, settings);
  for (std::int64_t step = 1; step <= 2; ++step) {
    const auto s = tr.begin();
    ASSERT_TRUE(tr.end_step(s, step));
  }
  const auto s = tr.begin();
  EXPECT_FALSE(tr.end_step(s, 3));  // the caller sends step 3 without GPU values
  EXPECT_EQ(tr.resolver.rejected(), 1);
  EXPECT_EQ(tr.resolver.pending(), 2u);
  EXPECT_EQ(tr.pool.created(), 6u);
  // The rejected step's events went back: the next two scopes create nothing.
  tr.phase(Event::Forward);
  EXPECT_EQ(tr.pool.created(), 6u);
  EXPECT_EQ(fake.created(), 6);
}

TEST(GpuTimer, AbandonedStepsComeOutWithoutGpuValues) {
  FakeCuda fake;
  Tracer tr(fake);
  for (std::int64_t step = 1; step <= 3; ++step) {
    const auto s = tr.begin();
    ASSERT_TRUE(tr.end_step(s, step));
  }
  std::vector<GpuStepTimes> out;
  EXPECT_EQ(tr.resolver.abandon_all(out), 3u);
  ASSERT_EQ(out.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(out[i].step, std::int64_t(i + 1));
    EXPECT_EQ(out[i].outcome, GpuOutcome::Abandoned);
    EXPECT_FALSE(gpu(out[i], Event::TracedStepTime));
  }
  EXPECT_EQ(tr.resolver.abandoned(), 3);
  EXPECT_EQ(tr.resolver.pending(), 0u);
}

TEST(GpuTimer, AScopeThatNeverEndedIsDroppedByTheNextOuterEnd) {
  FakeCuda fake;
  Tracer tr(fake, /*pool_capacity=*/8);
  const auto s = tr.begin();       // 0
  tr.begin();                      // 1: a fetch whose loader threw mid-increment
  tr.phase(Event::Forward);        // 2, 3
  ASSERT_TRUE(tr.end_step(s, 1));  // 4: drops the orphan and gives its event back
  fake.complete(0, 0.0);
  fake.complete(2, 1.0);
  fake.complete(3, 2.5);
  fake.complete(4, 4.0);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::Forward), 1.5);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 4.0);
  EXPECT_EQ(tr.builder.skipped_scopes(), 0);
  // All four events are free again: eight more events create only four.
  for (int i = 0; i < 4; ++i)
    tr.phase(Event::H2D);
  tr.builder.discard_step();
  EXPECT_EQ(tr.pool.created(), 8u);
  EXPECT_EQ(tr.pool.exhausted(), 0);
}

TEST(GpuTimer, AnUnmatchedEndMarksItsRegionSkipped) {
  FakeCuda fake;
  Tracer tr(fake);
  const auto s = tr.begin();
  tr.end(Event::Forward, s + 100);  // no open scope has this key
  ASSERT_TRUE(tr.end_step(s, 1));
  fake.complete_run(0, 2, 0.0, 2.0);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(gpu(out[0], Event::Forward));
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 2.0);
  EXPECT_EQ(tr.builder.skipped_scopes(), 1);
}

TEST(GpuTimer, ScopesNestedTooDeepAreSkipped) {
  FakeCuda fake;
  Tracer tr(fake);
  std::vector<std::int64_t> keys;
  for (std::size_t i = 0; i < GpuStepBuilder::kMaxOpenScopes + 1; ++i)
    keys.push_back(tr.begin());
  EXPECT_EQ(fake.records(), GpuStepBuilder::kMaxOpenScopes);  // the deepest got no event
  tr.end(Event::Forward, keys.back());
  EXPECT_EQ(tr.builder.skipped_scopes(), 1);
  for (std::size_t i = keys.size() - 1; i-- > 1;)
    tr.end(Event::Backward, keys[i]);
  ASSERT_TRUE(tr.end_step(keys[0], 1));
  fake.complete_latest(0.0, 1.0);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(gpu(out[0], Event::Forward));
  // 15 nested backward scopes, scope i from record i to record 31 - i:
  // sum of (31 - 2i) for i = 1..15.
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::Backward), 225.0);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 31.0);
  EXPECT_EQ(tr.builder.skipped_scopes(), 1);
}

TEST(GpuTimer, AFailedRecordSkipsTheScope) {
  FakeCuda fake;
  Tracer tr(fake);
  const auto s = tr.begin();  // 0
  fake.record_error = 709;    // cudaErrorContextIsDestroyed
  tr.phase(Event::Forward);
  fake.record_error = kCudaSuccess;
  ASSERT_TRUE(tr.end_step(s, 1));  // 1
  fake.complete_run(0, 2, 0.0, 3.0);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(gpu(out[0], Event::Forward));
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 3.0);
  EXPECT_EQ(tr.builder.skipped_scopes(), 1);
}

TEST(GpuTimer, PhasesThatDoNotFitLeaveRoomForTheStepItself) {
  FakeCuda fake;
  Tracer tr(fake);
  const auto s = tr.begin();
  for (std::size_t i = 0; i < kMaxGpuIntervalsPerStep; ++i)
    tr.phase(Event::Forward);  // one more than fits beside the step
  tr.phase(Event::Backward);
  ASSERT_TRUE(tr.end_step(s, 1));
  fake.complete_latest(0.0, 1.0);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(gpu(out[0], Event::Forward));  // a partial sum would understate it
  EXPECT_FALSE(gpu(out[0], Event::Backward));
  EXPECT_TRUE(gpu(out[0], Event::TracedStepTime));
  EXPECT_EQ(tr.builder.skipped_scopes(), 2);
}

TEST(GpuTimer, ADiscardedStepGivesItsEventsBack) {
  FakeCuda fake;
  Tracer tr(fake, /*pool_capacity=*/4);
  const auto s = tr.begin();
  tr.phase(Event::Forward);
  tr.end(Event::TracedStepTime, s);
  tr.builder.discard_step();  // the step was left by an exception
  const auto again = tr.begin();
  tr.phase(Event::Forward);
  ASSERT_TRUE(tr.end_step(again, 1));
  EXPECT_EQ(tr.pool.created(), 4u);
  EXPECT_EQ(tr.pool.exhausted(), 0);
}

TEST(GpuTimer, AScopeOnAnotherDeviceGetsNoGpuValue) {
  FakeCuda fake;
  Tracer tr(fake);  // the rank's GPU is device 0
  const auto step = tr.begin();
  fake.current_device = 1;  // a device guard moved the thread elsewhere
  tr.phase(Event::Forward);
  fake.current_device = 0;
  tr.phase(Event::Backward);
  ASSERT_TRUE(tr.end_step(step, 1));
  ASSERT_EQ(fake.records(), 4u);  // step begin, backward pair, step end: nothing on device 1
  fake.complete_run(0, 4, 10.0, 2.0);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(gpu(out[0], Event::Forward).has_value());
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::Backward), 2.0);
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 6.0);
  EXPECT_EQ(tr.builder.wrong_device_scopes(), 1);
  EXPECT_EQ(tr.builder.skipped_scopes(), 1);
}

TEST(GpuTimer, NothingIsRecordedIntoAGraphCaptureAndFailuresAreCleared) {
  FakeCuda fake;
  Tracer tr(fake);
  const auto step = tr.begin();  // record 0
  fake.capturing = true;         // the program captures a CUDA graph
  tr.phase(Event::Forward);
  fake.capturing = false;
  EXPECT_EQ(fake.records(), 1u);  // no event went into the capture
  fake.record_error = 999;        // a failing cudaEventRecord
  tr.phase(Event::Backward);
  EXPECT_GE(fake.last_error_reads, 1);  // our failure is not left for LibTorch to find
  fake.record_error = kCudaSuccess;
  ASSERT_TRUE(tr.end_step(step, 1));
  fake.complete_run(0, 2, 0.0, 4.0);
  const auto out = tr.poll();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_FALSE(gpu(out[0], Event::Forward).has_value());
  EXPECT_FALSE(gpu(out[0], Event::Backward).has_value());
  EXPECT_DOUBLE_EQ(*gpu(out[0], Event::TracedStepTime), 4.0);
}

TEST(GpuTimer, EventsGoToTheStreamTheHookNames) {
  FakeCuda fake;
  const CudaApi api = fake.api();
  EventPool pool(api);
  static int asked_device = -1;
  GpuStepBuilder builder(api, pool, /*device=*/2, [](int device) -> void* {
    asked_device = device;
    return reinterpret_cast<void*>(0x5000);
  });
  fake.current_device = 2;
  builder.scope_begin(1);
  builder.scope_end(Event::TracedStepTime, 1);
  EXPECT_EQ(asked_device, 2);
  EXPECT_EQ(fake.last_stream(), reinterpret_cast<void*>(0x5000));
  EXPECT_EQ(builder.finish_step().count, 1u);
}

TEST(GpuTimer, ThePoolDestroysWhatItCreated) {
  FakeCuda fake;
  {
    Tracer tr(fake);
    const auto s = tr.begin();
    tr.phase(Event::Forward);
    ASSERT_TRUE(tr.end_step(s, 1));  // still pending at destruction
  }
  EXPECT_EQ(fake.created(), 4);
  EXPECT_EQ(fake.destroyed(), 4);
}

TEST(GpuTimer, MergeAddsGpuValuesWhereTheCpuMeasured) {
  model::StepEvents ev;
  ev.set(Event::InputWait, {0.0, std::nullopt});  // a measured CPU 0: nothing fetched
  ev.set(Event::Forward, {4.0, std::nullopt});
  ev.set(Event::TracedStepTime, {9.0, std::nullopt});
  GpuStepTimes g;
  g.step = 3;
  g.gpu_ms[std::size_t(Event::InputWait)] = 0.0;
  g.gpu_ms[std::size_t(Event::H2D)] = 0.0;  // no H2D scope on the CPU either
  g.gpu_ms[std::size_t(Event::Forward)] = 3.5;
  g.gpu_ms[std::size_t(Event::TracedStepTime)] = 8.25;
  merge_gpu_times(g, ev);
  EXPECT_EQ(ev.gpu_ms(Event::InputWait), 0.0);
  EXPECT_EQ(ev.cpu_ms(Event::InputWait), 0.0);
  EXPECT_EQ(ev.gpu_ms(Event::Forward), 3.5);
  EXPECT_EQ(ev.cpu_ms(Event::Forward), 4.0);
  EXPECT_EQ(ev.gpu_ms(Event::TracedStepTime), 8.25);
  EXPECT_FALSE(ev.has(Event::H2D));
  EXPECT_FALSE(ev.gpu_ms(Event::H2D));
  EXPECT_FALSE(ev.has(Event::Backward));

  GpuStepTimes absent;  // an expired step changes nothing
  model::StepEvents cpu_only;
  cpu_only.set(Event::Forward, {4.0, std::nullopt});
  merge_gpu_times(absent, cpu_only);
  EXPECT_EQ(cpu_only.cpu_ms(Event::Forward), 4.0);
  EXPECT_FALSE(cpu_only.gpu_ms(Event::Forward));
}

TEST(EventPool, OneEventIsNeverHandedOutTwiceAcrossThreads) {
  // The training thread takes events while the resolver thread gives them
  // back: every event must be held by one side at a time.
  FakeCuda fake;
  const CudaApi api = fake.api();
  constexpr std::size_t kCapacity = 8;
  EventPool pool(api, kCapacity);
  std::array<std::atomic<bool>, kCapacity> held{};
  std::atomic<int> double_handouts{0};
  auto worker = [&] {
    std::vector<EventId> mine;
    for (int i = 0; i < 100000; ++i) {
      if (const auto id = pool.acquire()) {
        if (held[*id].exchange(true)) ++double_handouts;
        mine.push_back(*id);
      }
      if (mine.size() > 2 || (i % 3 == 0 && !mine.empty())) {
        held[mine.back()].store(false);
        pool.release(mine.back());
        mine.pop_back();
      }
    }
    for (EventId id : mine) {
      held[id].store(false);
      pool.release(id);
    }
  };
  std::thread a(worker), b(worker), c(worker);
  a.join();
  b.join();
  c.join();
  EXPECT_EQ(double_handouts.load(), 0);
  EXPECT_LE(pool.created(), kCapacity);
  EXPECT_EQ(fake.created(), int(pool.created()));
  // Everything came back: all eight can be taken at once, and no more.
  std::vector<EventId> all;
  while (const auto id = pool.acquire())
    all.push_back(*id);
  EXPECT_EQ(all.size(), kCapacity);
}

}  // namespace
}  // namespace traceml::timing
