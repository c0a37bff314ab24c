// What the collector asks the ranks to profile (collector/profile_requests):
// `--profile auto` asks the rank whose steps turned slow, not the ranks that
// only wait for it, at most once a rank in a while and a bounded number of
// times a run; serve's --profile-steps asks each chosen rank once.
#include "collector/profile_requests.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace traceml::collector {
namespace {

/// A step of `rank` whose time is `forward` + `backward` ms (+ 1 ms elsewhere).
model::StepRecord step(int rank, std::int64_t n, double forward, double backward) {
  model::StepRecord r;
  r.global_rank = rank;
  r.step = n;
  r.ts = 1.8e9 + double(n);
  const auto put = [&r](model::Event e, double ms) {
    r.events.set(e, model::Timing{ms, std::nullopt});
  };
  put(model::Event::InputWait, 0.5);
  put(model::Event::Forward, forward);
  put(model::Event::Backward, backward);
  put(model::Event::OptimizerStep, 0.5);
  put(model::Event::TracedStepTime, forward + backward + 0.5);
  return r;
}

/// Two data-parallel ranks: rank 1's forward slows by `extra` ms from step
/// `from`, and rank 0 waits as long in its backward pass (the all-reduce).
model::Telemetry straggling(std::int64_t steps, std::int64_t from, double extra) {
  model::Telemetry t;
  for (int rank = 0; rank < 2; ++rank)
    for (std::int64_t n = 1; n <= steps; ++n) {
      const bool slow = n >= from;
      const double forward = 2.0 + (slow && rank == 1 ? extra : 0.0);
      const double backward = 3.0 + (slow && rank == 0 ? extra : 0.0);
      t.steps.push_back(step(rank, n, forward, backward));
    }
  return t;
}

TEST(SlowTurns, BothRanksOfAStragglingPairTurnSlowAndOnlyTheStragglerIsTheCause) {
  const model::Telemetry t = straggling(60, 57, 30.0);
  std::size_t judged = 0;
  const std::vector<SlowTurn> turns = slow_turns(t, &judged);
  EXPECT_EQ(judged, 2u);
  ASSERT_EQ(turns.size(), 2u);
  for (const SlowTurn& s : turns) {
    EXPECT_EQ(s.step, 60);
    EXPECT_NEAR(s.base_ms, 6.0, 1e-9);  // 0.5 + 2 + 3 + 0.5
    EXPECT_NEAR(s.recent_ms, 36.0, 1e-9);
  }
  const std::vector<SlowTurn> who = causes(turns, judged);
  ASSERT_EQ(who.size(), 1u);
  EXPECT_EQ(who[0].rank, 1);
  EXPECT_NEAR(who[0].own_rise_ms, 30.0, 1e-9);
}

TEST(SlowTurns, NeedsTheRecentStepsSlowAndABaselineBeforeThem) {
  // Two slow steps of five: the median is not slow yet.
  EXPECT_TRUE(slow_turns(straggling(60, 59, 30.0)).empty());
  // Too few steps before them to say what normal is.
  EXPECT_TRUE(slow_turns(straggling(24, 20, 30.0)).empty());
  // 40% slower, or slower by under a millisecond: not slow.
  EXPECT_TRUE(slow_turns(straggling(60, 50, 2.4)).empty());
  model::Telemetry tiny;
  for (std::int64_t n = 1; n <= 60; ++n)
    tiny.steps.push_back(step(0, n, n > 50 ? 0.9 : 0.1, 0.1));
  EXPECT_TRUE(slow_turns(tiny).empty());
}

TEST(SlowTurns, ProfiledStepsAreLeftOut) {
  // The profiler's own cost made steps 56 to 60 slow: not a slow turn.
  model::Telemetry t = straggling(60, 56, 30.0);
  t.profiled_steps.push_back({1, 56, 60});
  t.profiled_steps.push_back({0, 56, 60});
  EXPECT_TRUE(slow_turns(t).empty());
}

TEST(SlowTurns, ARankSlowInItsBackwardPassAloneIsStillAsked) {
  // One process whose backward pass slowed: no other rank to blame.
  model::Telemetry t;
  for (std::int64_t n = 1; n <= 40; ++n)
    t.steps.push_back(step(0, n, 2.0, n > 35 ? 40.0 : 3.0));
  std::size_t judged = 0;
  std::vector<SlowTurn> turns = slow_turns(t, &judged);
  const std::vector<SlowTurn> who = causes(std::move(turns), judged);
  ASSERT_EQ(who.size(), 1u);
  EXPECT_EQ(who[0].rank, 0);
}

TEST(SlowTurns, AWaitingRankIsNotBlamedWhileTheStragglerIsNotATurn) {
  // Rank 0 waits in its backward pass from step 56. Rank 1, the straggler,
  // is no turn in these rows: its slow steps have not come yet (its sender
  // flushes later), or it has been slow so long that its baseline is slow
  // too (while rank 0's rows lag behind). Rank 0 is not the cause either
  // way; with no other rank judged, it would be asked.
  model::Telemetry t;
  for (std::int64_t n = 1; n <= 60; ++n)
    t.steps.push_back(step(0, n, 2.0, n >= 56 ? 33.0 : 3.0));
  for (std::int64_t n = 1; n <= 55; ++n)
    t.steps.push_back(step(1, n, 2.0, 3.0));
  model::Telemetry long_slow = t;
  for (std::int64_t n = 1; n <= 90; ++n)
    long_slow.steps.push_back(step(2, n, n > 20 ? 32.0 : 2.0, 3.0));
  for (const model::Telemetry* rows : {&t, &long_slow}) {
    std::size_t judged = 0;
    const std::vector<SlowTurn> turns = slow_turns(*rows, &judged);
    ASSERT_EQ(turns.size(), 1u);
    EXPECT_EQ(turns[0].rank, 0);
    EXPECT_EQ(judged, rows == &t ? 2u : 3u);
    EXPECT_TRUE(causes(turns, judged).empty());
    EXPECT_EQ(causes(turns, 1).size(), 1u);
  }
}

TEST(ProfileRequests, AutoAsksTheCauseOnceARankAndWithinTheRunCap) {
  ProfileAsking asking;
  asking.auto_steps = 7;
  ProfileRequests r(asking);
  const model::Telemetry t = straggling(60, 56, 30.0);
  // Not ready (no ProfileReady on a connection): not asked.
  EXPECT_TRUE(r.check(t, {}, 100.0).empty());
  EXPECT_FALSE(r.ready(0, 11).has_value());  // no --profile-steps: nothing asked at once
  EXPECT_FALSE(r.ready(1, 12).has_value());
  const std::vector<ProfileAsk> asks = r.check(t, {}, 101.0);
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(asks[0].connection, 12u);
  EXPECT_EQ(asks[0].request.global_rank, 1);
  EXPECT_EQ(asks[0].request.first_step, 0);  // its next steps
  EXPECT_EQ(asks[0].request.steps, 7);
  // Only the answer to that request gets the reason: a profile of other
  // steps (--profile-steps in the rank's environment) does not.
  EXPECT_EQ(r.profile_came(1, 30, 36), "");
  EXPECT_EQ(r.profile_came(1, 61, 70), "");
  EXPECT_NE(r.profile_came(1, 61, 67).find("turned slow: a median of 36.0 ms over steps 56 to 60 "
                                           "against 6.0 ms before"),
            std::string::npos);
  EXPECT_EQ(r.profile_came(1, 61, 67), "");  // said once
  // The same rank again within the gap: not asked; after it: asked.
  EXPECT_TRUE(r.check(t, {}, 101.0 + kAutoRankGapS - 1.0).empty());
  EXPECT_EQ(r.check(t, {}, 101.0 + kAutoRankGapS).size(), 1u);
  // Its connection closed: not asked on it.
  r.closed(1, 12);
  EXPECT_TRUE(r.check(t, {}, 101.0 + 3 * kAutoRankGapS).empty());
  // The run's cap.
  r.ready(1, 13);
  double now = 101.0 + 4 * kAutoRankGapS;
  int asked = 2;
  for (; asked < kAutoRunCap + 3; now += kAutoRankGapS)
    if (r.check(t, {}, now).empty())
      break;
    else
      ++asked;
  EXPECT_EQ(asked, kAutoRunCap);
  EXPECT_EQ(r.auto_asked(), kAutoRunCap);
}

TEST(ProfileRequests, AResumedStallIsAskedOnce) {
  ProfileAsking asking;
  asking.auto_steps = 10;
  ProfileRequests r(asking);
  model::Stall s;
  s.global_rank = 2;
  s.kind = "stalled";
  s.step = 40;
  s.start = 1.8e9;
  s.duration_s = 12.5;
  // Still stalled: nothing to profile yet.
  EXPECT_TRUE(r.check({}, {s}, 10.0).empty());
  s.resumed = true;
  // Resumed while its rank has no connection that takes requests (it
  // reconnects): left for the next check, not lost.
  EXPECT_TRUE(r.check({}, {s}, 10.5).empty());
  r.ready(2, 5);
  const std::vector<ProfileAsk> asks = r.check({}, {s}, 11.0);
  ASSERT_EQ(asks.size(), 1u);
  EXPECT_EQ(asks[0].request.global_rank, 2);
  EXPECT_EQ(r.profile_came(2, 40, 49), "it resumed after a stall of 12.5 s in step 40");
  // The same stall is acted on once, whatever the gap.
  EXPECT_TRUE(r.check({}, {s}, 11.0 + 2 * kAutoRankGapS).empty());
}

TEST(ProfileRequests, ServeProfileStepsAsksEachChosenRankOnceWhenReady) {
  ProfileAsking asking;
  asking.steps = std::make_pair(std::int64_t{20}, std::int64_t{24});
  asking.ranks = {1, 3};
  ProfileRequests r(asking);
  EXPECT_FALSE(r.automatic());
  EXPECT_FALSE(r.ready(0, 1).has_value());  // not chosen
  const auto a = r.ready(3, 2);
  ASSERT_TRUE(a.has_value());
  EXPECT_EQ(a->connection, 2u);
  EXPECT_EQ(a->request.global_rank, 3);
  EXPECT_EQ(a->request.first_step, 20);
  EXPECT_EQ(a->request.steps, 5);
  // Its connection closed before the answer came: asked again on the next.
  r.closed(3, 2);
  ASSERT_TRUE(r.ready(3, 9).has_value());
  EXPECT_EQ(r.profile_came(3, 20, 24), "");  // the user chose the steps: no reason
  // Answered: a reconnect of the same rank is not asked again.
  r.closed(3, 9);
  EXPECT_FALSE(r.ready(3, 10).has_value());
  // auto is off: nothing comes of slow steps.
  EXPECT_TRUE(r.check(straggling(60, 56, 30.0), {}, 1.0).empty());
}

}  // namespace
}  // namespace traceml::collector
