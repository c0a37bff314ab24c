// The live board's rules: silent after 3 intervals without a word, stalled
// when heard from but not advancing for 20x the median step (never sooner
// than 3 intervals), the stalls it records, and who the others wait for.
#include "collector/live_board.hpp"

#include <algorithm>

#include <gtest/gtest.h>

namespace traceml::collector {
namespace {

using namespace std::chrono_literals;

model::RankPosition at(int rank, std::int64_t done, model::LoopPhase phase) {
  model::RankPosition p;
  p.global_rank = rank;
  p.steps_done = done;
  p.phase = phase;
  return p;
}

const RankLive& rank_of(const std::vector<RankLive>& v, int rank) {
  for (const RankLive& r : v)
    if (r.global_rank == rank) return r;
  throw std::runtime_error("no rank " + std::to_string(rank));
}

TEST(LiveBoard, ARankThatSaysNothingForThreeIntervalsIsSilentWithItsLastPosition) {
  const auto t0 = LiveClock::now();
  LiveBoard b(StallRules{1.0}, 1000.0);
  b.connected(0, 0, t0);
  b.heartbeat(at(0, 811, model::LoopPhase::Backward), t0 + 1s);
  b.heard(0, 811, t0 + 1s);
  EXPECT_EQ(rank_of(b.update(t0 + 3900ms), 0).condition, RankCondition::Running);
  const RankLive r = rank_of(b.update(t0 + 4100ms), 0);
  EXPECT_EQ(r.condition, RankCondition::Silent);
  EXPECT_NEAR(r.quiet_s, 3.1, 1e-6);
  ASSERT_TRUE(r.position);
  EXPECT_EQ(r.position->steps_done, 811);
  EXPECT_EQ(r.position->phase, model::LoopPhase::Backward);
  // The stall starts when the rank was last heard from, not when noticed.
  const auto stalls = b.stalls(t0 + 13s);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].kind, "silent");
  EXPECT_EQ(stalls[0].step, 812);
  EXPECT_EQ(stalls[0].phase, model::LoopPhase::Backward);
  EXPECT_NEAR(stalls[0].start, 1001.0, 0.01);
  EXPECT_NEAR(stalls[0].duration_s, 12.0, 0.05);
  EXPECT_FALSE(stalls[0].resumed);
}

TEST(LiveBoard, HeardFromButNotAdvancingIsStalledAfterTwentyMedianSteps) {
  const auto t0 = LiveClock::now();
  LiveBoard b(StallRules{1.0}, 0.0);
  b.connected(0, 0, t0);
  b.heard(0, 100, t0);
  b.set_median_steps({{0, 0.5}});  // 20 x 0.5 s = 10 s
  for (int s = 1; s <= 12; ++s)    // heartbeats every second, the step stays
    b.heartbeat(at(0, 100, model::LoopPhase::Forward), t0 + std::chrono::seconds(s));
  EXPECT_EQ(rank_of(b.update(t0 + 9500ms), 0).condition, RankCondition::Running);
  EXPECT_EQ(rank_of(b.update(t0 + 10500ms), 0).condition, RankCondition::Stalled);
  // It advances again: the stall ends, with its length.
  b.heartbeat(at(0, 101, model::LoopPhase::Step), t0 + 15s);
  EXPECT_EQ(rank_of(b.update(t0 + 15s), 0).condition, RankCondition::Running);
  const auto stalls = b.stalls(t0 + 16s);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].kind, "stalled");
  EXPECT_TRUE(stalls[0].resumed);
  EXPECT_NEAR(stalls[0].duration_s, 15.0, 0.05);
}

TEST(LiveBoard, AFastRankIsNotStalledSoonerThanThreeIntervals) {
  const auto t0 = LiveClock::now();
  LiveBoard b(StallRules{1.0}, 0.0);
  b.connected(0, 0, t0);
  b.heard(0, 5, t0);
  b.set_median_steps({{0, 0.001}});  // 20 x 1 ms is far less than the flush
  b.heartbeat(at(0, 5, model::LoopPhase::Step), t0 + 1s);
  b.heartbeat(at(0, 5, model::LoopPhase::Step), t0 + 2s);
  EXPECT_EQ(rank_of(b.update(t0 + 2900ms), 0).condition, RankCondition::Running);
  EXPECT_EQ(rank_of(b.update(t0 + 3100ms), 0).condition, RankCondition::Stalled);
}

TEST(LiveBoard, ARankThatNoLongerRecordsIsNeverStalledOnlySilent) {
  const auto t0 = LiveClock::now();
  LiveBoard b(StallRules{1.0}, 0.0);
  b.connected(0, 0, t0);
  b.heard(0, 10, t0);
  b.set_median_steps({{0, 0.01}});
  auto p = at(0, 10, model::LoopPhase::Outside);
  p.recording = false;  // --trace-max-steps reached: its count stands still
  for (int s = 1; s <= 30; ++s)
    b.heartbeat(p, t0 + std::chrono::seconds(s));
  EXPECT_EQ(rank_of(b.update(t0 + 30s), 0).condition, RankCondition::Running);
  EXPECT_TRUE(b.stalls(t0 + 30s).empty());
  EXPECT_EQ(rank_of(b.update(t0 + 34s), 0).condition, RankCondition::Silent);
}

TEST(LiveBoard, OthersStuckInACollectiveNameTheOneRankThatIsElsewhere) {
  const auto t0 = LiveClock::now();
  LiveBoard b(StallRules{1.0}, 0.0);
  for (int r = 0; r < 3; ++r) {
    b.connected(r, 0, t0);
    b.heard(r, 50, t0);
  }
  b.set_median_steps({{0, 0.1}, {1, 0.1}, {2, 0.1}});
  // R1 went quiet in forward; R0 and R2 keep beating, stuck in backward.
  b.heartbeat(at(1, 50, model::LoopPhase::Forward), t0 + 500ms);
  for (int s = 1; s <= 8; ++s) {
    b.heartbeat(at(0, 50, model::LoopPhase::Backward), t0 + std::chrono::seconds(s));
    b.heartbeat(at(2, 50, model::LoopPhase::Backward), t0 + std::chrono::seconds(s));
  }
  const auto ranks = b.update(t0 + 8s);
  EXPECT_EQ(rank_of(ranks, 1).condition, RankCondition::Silent);
  EXPECT_EQ(rank_of(ranks, 0).condition, RankCondition::Stalled);
  const auto stalls = b.stalls(t0 + 8s);
  int named = 0;
  for (const auto& s : stalls) {
    if (s.global_rank == 1) {
      ASSERT_TRUE(s.others_waiting);
      EXPECT_EQ(*s.others_waiting, 2);
      ++named;
    } else {
      EXPECT_FALSE(s.others_waiting);
    }
  }
  EXPECT_EQ(named, 1);
}

TEST(LiveBoard, AClosedConnectionEndsTheRankAndItsStall) {
  const auto t0 = LiveClock::now();
  LiveBoard b(StallRules{1.0}, 0.0);
  b.connected(0, 0, t0);
  b.heard(0, 3, t0);
  EXPECT_EQ(rank_of(b.update(t0 + 5s), 0).condition, RankCondition::Silent);
  b.closed(0, t0 + 6s);
  EXPECT_EQ(rank_of(b.update(t0 + 7s), 0).condition, RankCondition::Ended);
  const auto stalls = b.stalls(t0 + 7s);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_FALSE(stalls[0].resumed);  // it ended without resuming: a hang
  EXPECT_NEAR(stalls[0].duration_s, 6.0, 0.05);
}

TEST(LiveBoard, StallsAreCappedAndTheRestCounted) {
  const auto t0 = LiveClock::now();
  LiveBoard b(StallRules{1.0}, 0.0);
  b.connected(0, 0, t0);
  auto t = t0;
  for (std::size_t i = 0; i < LiveBoard::kMaxStalls + 10; ++i) {
    t += 5s;
    b.update(t);  // silent: a stall opens
    b.heard(0, std::int64_t(i) + 1, t);
    b.update(t);  // heard again: it closes
  }
  EXPECT_EQ(b.stalls(t).size(), LiveBoard::kMaxStalls);
  EXPECT_EQ(b.stalls_dropped(), 10);
  // One more stall past the cap, classified every half second for a minute
  // (the writer's ticks, the live view's refreshes): counted once.
  t += 5s;
  for (int i = 0; i < 120; ++i)
    b.update(t += 500ms);
  EXPECT_EQ(b.stalls_dropped(), 11);
  b.heard(0, 1000, t);
  b.update(t);
  t += 5s;
  b.update(t);  // and the next one counts again
  b.update(t += 1s);
  EXPECT_EQ(b.stalls_dropped(), 12);
}

// DECISIONS 15: a rank between steps that no rank waits for is idle. The
// program of a new user evaluated for 9 s after its 938th step and the report
// said "R0 was stalled for 9.4 s at step 939, outside · it never resumed".
TEST(LiveBoard, ARankBetweenStepsThatNobodyWaitsForIsIdleNotStalled) {
  const auto t0 = LiveClock::now();
  LiveBoard b(StallRules{1.0}, 0.0);
  b.connected(0, 0, t0);
  b.heard(0, 938, t0);
  b.set_median_steps({{0, 0.003}});
  for (int s = 1; s <= 10; ++s)  // it evaluates, beating every second
    b.heartbeat(at(0, 938, model::LoopPhase::Outside), t0 + std::chrono::seconds(s));
  const RankLive r = rank_of(b.update(t0 + 10s), 0);
  EXPECT_EQ(r.condition, RankCondition::Idle);
  EXPECT_NEAR(r.stuck_s, 10.0, 1e-6);
  EXPECT_TRUE(b.stalls(t0 + 10s).empty());
  b.closed(0, t0 + 10500ms);  // the program ends
  EXPECT_EQ(rank_of(b.update(t0 + 11s), 0).condition, RankCondition::Ended);
  EXPECT_TRUE(b.stalls(t0 + 11s).empty());
}

TEST(LiveBoard, ARankBetweenStepsIsStalledWhileTheOthersWaitInACollective) {
  const auto t0 = LiveClock::now();
  LiveBoard b(StallRules{1.0}, 0.0);
  for (int r = 0; r < 3; ++r) {
    b.connected(r, 0, t0);
    b.heard(r, 50, t0);
  }
  b.set_median_steps({{0, 0.1}, {1, 0.1}, {2, 0.1}});
  // R1 never begins step 51; R0 and R2 sit in its all-reduce.
  for (int s = 1; s <= 8; ++s) {
    const auto t = t0 + std::chrono::seconds(s);
    b.heartbeat(at(0, 50, model::LoopPhase::Backward), t);
    b.heartbeat(at(1, 50, model::LoopPhase::Outside), t);
    b.heartbeat(at(2, 50, model::LoopPhase::Backward), t);
  }
  const auto ranks = b.update(t0 + 8s);
  EXPECT_EQ(rank_of(ranks, 1).condition, RankCondition::Stalled);
  const auto stalls = b.stalls(t0 + 8s);
  const auto r1 = std::find_if(stalls.begin(), stalls.end(),
                               [](const model::Stall& s) { return s.global_rank == 1; });
  ASSERT_NE(r1, stalls.end());
  EXPECT_EQ(r1->kind, "stalled");
  EXPECT_EQ(r1->step, 51);
  EXPECT_EQ(r1->phase, model::LoopPhase::Outside);
  ASSERT_TRUE(r1->others_waiting);
  EXPECT_EQ(*r1->others_waiting, 2);

  // The waiters give up (a collective's timeout ends them); R1 has still not
  // advanced: its stall goes on to its end, it does not turn idle.
  b.closed(0, t0 + 9s);
  b.closed(2, t0 + 9s);
  b.heartbeat(at(1, 50, model::LoopPhase::Outside), t0 + 10s);
  EXPECT_EQ(rank_of(b.update(t0 + 10s), 1).condition, RankCondition::Stalled);
  b.closed(1, t0 + 11s);
  for (const auto& s : b.stalls(t0 + 12s)) {
    if (s.global_rank == 1) {
      EXPECT_FALSE(s.resumed);
    }
  }
}

TEST(LiveBoard, ARankStuckInsideAPhaseIsStalledWhenAlone) {
  const auto t0 = LiveClock::now();
  LiveBoard b(StallRules{1.0}, 0.0);
  b.connected(0, 0, t0);
  b.heard(0, 938, t0);
  b.set_median_steps({{0, 0.003}});
  for (int s = 1; s <= 10; ++s)
    b.heartbeat(at(0, 938, model::LoopPhase::Step), t0 + std::chrono::seconds(s));
  EXPECT_EQ(rank_of(b.update(t0 + 10s), 0).condition, RankCondition::Stalled);
  b.closed(0, t0 + 10500ms);
  const auto stalls = b.stalls(t0 + 11s);
  ASSERT_EQ(stalls.size(), 1u);
  EXPECT_EQ(stalls[0].phase, model::LoopPhase::Step);
  EXPECT_FALSE(stalls[0].resumed);
}

}  // namespace
}  // namespace traceml::collector
