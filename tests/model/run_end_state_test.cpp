// The one table of how a hosted run and its ranks ended (model/run_end_state):
// each state's word is the one manifest.json, final_summary.json and the run
// database have always held (the words are artifacts: a changed word is a
// changed file), a status word reads back, and each status stands for its exit
// code.
#include "model/run_end_state.hpp"
#include "model/position.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <string>
#include <vector>

namespace traceml::model {
namespace {

TEST(RunEndState, EachStateHasTheWordItsFilesHold) {
  EXPECT_STREQ(word(RunStatus::Completed), "completed");
  EXPECT_STREQ(word(RunStatus::Failed), "failed");
  EXPECT_STREQ(word(RunStatus::Interrupted), "interrupted");
  EXPECT_STREQ(word(RunStatus::TimedOut), "timed_out");
  EXPECT_STREQ(word(EndReason::WorldEnded), "world_ended");
  EXPECT_STREQ(word(EndReason::Signal), "signal");
  EXPECT_STREQ(word(EndReason::IdleTimeout), "idle_timeout");
  EXPECT_STREQ(word(RankEnding::Goodbye), "goodbye");
  EXPECT_STREQ(word(RankEnding::ConnectionLost), "connection_lost");
  EXPECT_STREQ(word(RankEnding::StillConnected), "still_connected");
  EXPECT_STREQ(word(RankEnding::NeverConnected), "never_connected");
}

TEST(RunEndState, AStatusWordReadsBackAndNothingElseDoes) {
  for (const RunStatus s :
       {RunStatus::Completed, RunStatus::Failed, RunStatus::Interrupted, RunStatus::TimedOut})
    EXPECT_EQ(run_status_from_word(word(s)), s) << word(s);
  for (const char* other : {"", "Completed", "completed ", "world_ended", "goodbye", "ok"})
    EXPECT_FALSE(run_status_from_word(other)) << other;
}

TEST(RunEndState, EachStatusStandsForItsExitCode) {
  EXPECT_EQ(exit_code(RunStatus::Completed, std::nullopt), 0);
  EXPECT_EQ(exit_code(RunStatus::Failed, std::nullopt), 1);
  EXPECT_EQ(exit_code(RunStatus::TimedOut, std::nullopt), 1);
  EXPECT_EQ(exit_code(RunStatus::Interrupted, SIGINT), 130);
  EXPECT_EQ(exit_code(RunStatus::Interrupted, SIGTERM), 143);
  // A signal says nothing about a run that was not interrupted.
  EXPECT_EQ(exit_code(RunStatus::Completed, SIGTERM), 0);
}

TEST(RunEndState, OneRankIsASingleProcessAndAnyOtherWorldDdp) {
  EXPECT_EQ(default_strategy(1), Strategy::SingleProcess);
  EXPECT_EQ(default_strategy(2), Strategy::Ddp);
  EXPECT_EQ(default_strategy(4096), Strategy::Ddp);
  // A served run that was given no world size learns it from its ranks.
  EXPECT_EQ(default_strategy(std::nullopt), Strategy::Ddp);
}

TEST(RunEndState, ASignalIsNamedByItsLinuxName) {
  EXPECT_EQ(signal_name(SIGKILL), "SIGKILL");
  EXPECT_EQ(signal_name(SIGSEGV), "SIGSEGV");
  EXPECT_EQ(signal_name(SIGTERM), "SIGTERM");
  EXPECT_EQ(signal_name(63), "signal 63");
}

Stall never_resumed(int rank, std::optional<int> waiting) {
  Stall s;
  s.global_rank = rank;
  s.kind = "silent";
  s.others_waiting = waiting;
  return s;
}

// The rank the others waited for is the hang, not the ranks stuck waiting
// for it; with none waited for, the first that never resumed.
TEST(RunEndState, TheHangIsTheRankTheOthersWaitedFor) {
  std::vector<Stall> stalls = {never_resumed(0, std::nullopt), never_resumed(1, 1),
                               never_resumed(2, 0)};
  ASSERT_NE(hung_stall(stalls), nullptr);
  EXPECT_EQ(hung_stall(stalls)->global_rank, 1);
  stalls[1].others_waiting.reset();
  EXPECT_EQ(hung_stall(stalls)->global_rank, 0);
  for (Stall& s : stalls)
    s.resumed = true;
  EXPECT_EQ(hung_stall(stalls), nullptr);
}

}  // namespace
}  // namespace traceml::model
