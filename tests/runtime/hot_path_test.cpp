// The training-thread side of the runtime: how scopes become step records.
#include <gtest/gtest.h>

#include <thread>
#include <vector>

#include "runtime/hot_path.hpp"
#include "runtime/spsc_ring.hpp"
#include "runtime/thread_recorder.hpp"

namespace traceml::runtime {
namespace {

using model::Event;

constexpr unsigned bit(Event e) {
  return 1u << unsigned(e);
}

std::vector<RawStep> drain(ThreadRecorder& r) {
  std::vector<RawStep> out;
  r.drain([&](const RawStep& s) { out.push_back(s); });
  return out;
}

struct Fixture : ::testing::Test {
  Fixture() { state.state.store(kRecording); }
  /// A step of known durations: the recorder adds durations, so tests feed
  /// them directly instead of sleeping.
  bool step(std::int64_t start, std::int64_t end, bool failed = false) {
    recorder.enter_step();
    if (!recorder.leave_step()) return false;
    if (failed) {
      recorder.discard();
      return false;
    }
    const std::int64_t id = state.last_step.fetch_add(1) + 1;
    recorder.publish(recorder.finish(id, start, end));
    return true;
  }
  HotState state;
  ThreadRecorder recorder{64};
};

TEST_F(Fixture, PhasesAndFetchesBeforeTheStepEndBelongToIt) {
  // Fetched before the step began: its input wait.
  recorder.add_fetch(7'000'000, 10'000'000);
  recorder.add(Event::Forward, 11'000'000, 13'000'000);
  recorder.add(Event::Forward, 13'500'000, 14'500'000);  // a phase entered twice adds up
  recorder.add(Event::Backward, 14'500'000, 18'500'000);
  ASSERT_TRUE(step(10'000'000, 19'000'000));
  const auto steps = drain(recorder);
  ASSERT_EQ(steps.size(), 1u);
  const RawStep& s = steps[0];
  EXPECT_EQ(s.step, 1);
  EXPECT_EQ(s.end_ns, 19'000'000);
  EXPECT_EQ(s.ns[std::size_t(Event::InputWait)], 3'000'000);
  EXPECT_EQ(s.ns[std::size_t(Event::Forward)], 3'000'000);
  EXPECT_EQ(s.ns[std::size_t(Event::Backward)], 4'000'000);
  EXPECT_EQ(s.ns[std::size_t(Event::TracedStepTime)], 9'000'000);
  // H2D and optimizer were never timed: absent, not zero.
  EXPECT_EQ(s.mask, bit(Event::InputWait) | bit(Event::Forward) | bit(Event::Backward) |
                        bit(Event::TracedStepTime));
  EXPECT_EQ(s.scopes, 5u);  // fetch, three phase scopes, the step
  // Each event's first begin, from the step scope's start: the fetch before
  // it is negative; the step's own span has none.
  EXPECT_EQ(s.begin_mask, bit(Event::InputWait) | bit(Event::Forward) | bit(Event::Backward));
  EXPECT_EQ(s.begin_ns[std::size_t(Event::InputWait)], -3'000'000);
  EXPECT_EQ(s.begin_ns[std::size_t(Event::Forward)], 1'000'000);
  EXPECT_EQ(s.begin_ns[std::size_t(Event::Backward)], 4'500'000);
}

TEST_F(Fixture, BeginsStartAfreshEachStepAndADiscardedStepLeavesNone) {
  recorder.add(Event::Forward, 2, 4);
  ASSERT_TRUE(step(0, 10));
  recorder.add(Event::H2D, 11, 12);
  ASSERT_FALSE(step(10, 20, /*failed=*/true));  // left by an exception: nothing kept
  recorder.add(Event::Forward, 25, 27);
  ASSERT_TRUE(step(20, 30));
  const auto steps = drain(recorder);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].begin_ns[std::size_t(Event::Forward)], 2);
  EXPECT_EQ(steps[1].begin_mask, bit(Event::Forward));  // the failed step's H2D is gone
  EXPECT_EQ(steps[1].begin_ns[std::size_t(Event::Forward)], 5);
}

TEST(ThreadRecorderThread, EveryStepCarriesItsRecordersThread) {
  ThreadRecorder r(8, 3);
  ASSERT_TRUE(r.enter_step());
  ASSERT_TRUE(r.leave_step());
  r.publish(r.finish(1, 0, 5));
  std::vector<RawStep> out;
  r.drain([&](const RawStep& s) { out.push_back(s); });
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].thread, 3);
  EXPECT_EQ(out[0].begin_mask, 0u);
}

TEST(HotPath, APhaseMapsToItsEventAndAValueOutsideTheEnumToNothing) {
  EXPECT_EQ(to_event(Phase::H2D), Event::H2D);
  EXPECT_EQ(to_event(Phase::Forward), Event::Forward);
  EXPECT_EQ(to_event(Phase::Backward), Event::Backward);
  EXPECT_EQ(to_event(Phase::OptimizerStep), Event::OptimizerStep);
  // Casts from integers: InputWait (0) and TracedStepTime (5) are not phases,
  // and 9 or 255 would index past the recorder's arrays.
  for (const int v : {0, 5, 6, 9, 255})
    EXPECT_EQ(to_event(Phase(v)), std::nullopt) << v;
}

TEST(HotPath, TheFormerNameOfOptimizerStepIsTheSamePhase) {
  // Programs written against Phase::Optimizer keep compiling (with a
  // deprecation warning) and time the same event.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
  constexpr Phase former = Phase::Optimizer;
#pragma GCC diagnostic pop
  static_assert(former == Phase::OptimizerStep);
  EXPECT_EQ(to_event(former), Event::OptimizerStep);
}

TEST_F(Fixture, InputWaitIsAbsentUntilAFetchWasEverTimedThenAMeasuredZero) {
  recorder.add(Event::Forward, 2, 3);
  ASSERT_TRUE(step(0, 10));
  recorder.add_fetch(9, 14);
  ASSERT_TRUE(step(10, 20));
  ASSERT_TRUE(step(20, 30));  // no fetch this step, but the loader is instrumented
  const auto steps = drain(recorder);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_EQ(steps[0].mask & bit(Event::InputWait), 0u);
  EXPECT_NE(steps[1].mask & bit(Event::InputWait), 0u);
  EXPECT_EQ(steps[1].ns[0], 5);
  EXPECT_NE(steps[2].mask & bit(Event::InputWait), 0u);
  EXPECT_EQ(steps[2].ns[0], 0);
  EXPECT_EQ(steps[2].mask & bit(Event::Forward), 0u);  // phases reset each step
}

TEST_F(Fixture, NestedStepsCountOnceAndFailedStepsAreDropped) {
  const std::int64_t outer = hot_scope_begin(state);
  recorder.enter_step();
  const std::int64_t inner = hot_scope_begin(state);
  recorder.enter_step();
  EXPECT_FALSE(hot_step_end(state, recorder, inner, false));  // inner: not a step of its own
  EXPECT_TRUE(hot_step_end(state, recorder, outer, false));
  recorder.add(Event::Forward, 0, 7);
  recorder.enter_step();
  EXPECT_FALSE(
      hot_step_end(state, recorder, hot_scope_begin(state), true));  // left by an exception
  recorder.enter_step();
  EXPECT_TRUE(hot_step_end(state, recorder, hot_scope_begin(state), false));
  const auto steps = drain(recorder);
  ASSERT_EQ(steps.size(), 2u);
  EXPECT_EQ(steps[0].step, 1);
  EXPECT_EQ(steps[1].step, 2);
  // The failed step's forward was discarded with it.
  EXPECT_EQ(steps[1].mask & bit(Event::Forward), 0u);
  EXPECT_GE(steps[0].ns[std::size_t(Event::TracedStepTime)], 0);
}

TEST_F(Fixture, MaxStepsStopsRecordingAfterStepN) {
  state.max_steps = 3;
  for (int i = 0; i < 5; ++i) {
    const std::int64_t start = hot_scope_begin(state);
    if (start == 0) continue;  // not recording: the public API does nothing
    recorder.enter_step();
    hot_step_end(state, recorder, start, false);
  }
  EXPECT_EQ(drain(recorder).size(), 3u);
  EXPECT_EQ(state.state.load(), kMaxStepsReached);
  // The steps done are the steps traced: the fourth, not recorded, is not
  // counted (a heartbeat or black box said 4 before).
  EXPECT_EQ(state.last_step.load(), 3);
  EXPECT_EQ(hot_scope_begin(state), 0);
}

TEST_F(Fixture, ScopesAreFreeWhenNotRecording) {
  state.state.store(kOff);
  EXPECT_EQ(hot_scope_begin(state), 0);
}

TEST(ThreadRecorder, AFullRingDropsAndCounts) {
  ThreadRecorder r(4);
  for (int i = 1; i <= 6; ++i) {
    r.enter_step();
    r.leave_step();
    r.publish(r.finish(i, 0, 1));
  }
  EXPECT_EQ(r.dropped(), 2);
  std::vector<std::int64_t> ids;
  r.drain([&](const RawStep& s) { ids.push_back(s.step); });
  EXPECT_EQ(ids, (std::vector<std::int64_t>{1, 2, 3, 4}));  // the oldest are kept
}

TEST(SpscRing, CapacityRoundsUpAndElementsArriveInOrderAcrossThreads) {
  SpscRing<std::int64_t> ring(1000);
  EXPECT_EQ(ring.capacity(), 1024u);
  constexpr std::int64_t kCount = 200000;
  std::thread producer([&] {
    for (std::int64_t i = 0; i < kCount;) {
      if (ring.push(i)) ++i;
    }
  });
  std::int64_t expected = 0;
  bool in_order = true;
  while (expected < kCount) {
    ring.drain([&](std::int64_t v) {
      in_order = in_order && v == expected;
      ++expected;
    });
  }
  producer.join();
  EXPECT_TRUE(in_order);
  EXPECT_TRUE(ring.empty());
}

}  // namespace
}  // namespace traceml::runtime
