// The hosted run's own decisions (launcher/hosted_run.hpp), without ranks:
// how a served run ended from how its ranks ended and why it was ended (its
// status, failed rank and exit code), the words the manifests write for each
// end state, and a run directory that holds a run, or a run that never
// started, with a real collector: refused, and nothing of it left behind.
// The whole path runs end to end in tests/e2e/serve_e2e_test.cpp and
// run_e2e_test.cpp.
#include "launcher/hosted_run.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "../support/subprocess.hpp"
#include "store/run_db.hpp"

namespace traceml::launcher {
namespace {

namespace fs = std::filesystem;
using model::EndReason;
using model::RankEnding;
using model::RunStatus;
using testing::TempDir;

TEST(Loopback, OnlyAddressesThisMachineAloneReachesAreLoopback) {
  // serve makes a token for any other: a name that merely starts like a
  // loopback address is not one.
  for (const char* h : {"127.0.0.1", "127.1.2.3", "localhost", "::1", "[::1]", "::ffff:127.0.0.1"})
    EXPECT_TRUE(loopback(h)) << h;
  for (const char* h : {"0.0.0.0", "::", "10.0.0.1", "127.example.net", "node0", "::ffff:10.0.0.1",
                        "", "128.0.0.1"})
    EXPECT_FALSE(loopback(h)) << h;
}

TEST(ServedEnd, EveryRankSaidGoodbye) {
  const ServedEnd e =
      served_end({{0, RankEnding::Goodbye}, {1, RankEnding::Goodbye}}, EndReason::WorldEnded, {});
  EXPECT_EQ(e.status, RunStatus::Completed);
  EXPECT_FALSE(e.failed_rank);
  EXPECT_EQ(e.exit_code, 0);
  // All said goodbye before a signal came: still completed.
  EXPECT_EQ(served_end({{0, RankEnding::Goodbye}}, EndReason::Signal, SIGINT).exit_code, 0);
}

TEST(ServedEnd, AWorldThatEndedWithALostRankFailedAtTheFirstOne) {
  const ServedEnd e = served_end(
      {{0, RankEnding::Goodbye}, {1, RankEnding::ConnectionLost}, {2, RankEnding::ConnectionLost}},
      EndReason::WorldEnded, {});
  EXPECT_EQ(e.status, RunStatus::Failed);
  EXPECT_EQ(e.failed_rank, 1);
  EXPECT_EQ(e.exit_code, 1);
}

TEST(ServedEnd, AGoodbyeWithANonZeroExitStatusFailsTheRunAtThatRank) {
  // Protocol 4: the goodbye says how the program ended. exit(3) is a
  // failure, though the rank said goodbye (before, serve read "completed").
  const ServedEnd e = served_end({{0, RankEnding::Goodbye, 0},
                                  {1, RankEnding::Goodbye, 3},
                                  {2, RankEnding::Goodbye, 4},
                                  {3, RankEnding::Goodbye, std::nullopt}},
                                 EndReason::WorldEnded, {});
  EXPECT_EQ(e.status, RunStatus::Failed);
  EXPECT_EQ(e.failed_rank, 1);
  EXPECT_EQ(e.exit_code, 1);
  // Exit 0, or no status said (protocol 3 and older), is a goodbye as before.
  EXPECT_EQ(served_end({{0, RankEnding::Goodbye, 0}, {1, RankEnding::Goodbye, std::nullopt}},
                       EndReason::WorldEnded, {})
                .status,
            RunStatus::Completed);
}

TEST(ServedEnd, ASignalInterruptsWithItsCode) {
  const ServedEnd e = served_end({{0, RankEnding::StillConnected}, {1, RankEnding::ConnectionLost}},
                                 EndReason::Signal, SIGTERM);
  EXPECT_EQ(e.status, RunStatus::Interrupted);
  EXPECT_FALSE(e.failed_rank);
  EXPECT_EQ(e.exit_code, 128 + SIGTERM);
}

TEST(ServedEnd, AnIdleTimeoutTimesOutNamingALostRank) {
  const ServedEnd e = served_end({{0, RankEnding::Goodbye}, {1, RankEnding::NeverConnected}},
                                 EndReason::IdleTimeout, {});
  EXPECT_EQ(e.status, RunStatus::TimedOut);
  EXPECT_FALSE(e.failed_rank);
  EXPECT_EQ(e.exit_code, 1);
  const ServedEnd lost = served_end({{3, RankEnding::ConnectionLost}}, EndReason::IdleTimeout, {});
  EXPECT_EQ(lost.status, RunStatus::TimedOut);
  EXPECT_EQ(lost.failed_rank, 3);
  // No rank at all is not a completed run.
  EXPECT_EQ(served_end({}, EndReason::IdleTimeout, {}).status, RunStatus::TimedOut);
}

model::RankEnd relayed_end(int rank, int exit_code, std::optional<int> signal, bool stopped) {
  model::RankEnd e;
  e.global_rank = rank;
  e.exit_code = exit_code;
  e.signal = signal;
  e.stopped_by_launcher = stopped ? 1 : 0;
  e.steps_completed = 10 * rank;
  e.phase = int(model::LoopPhase::Forward);
  return e;
}

TEST(OtherNodes, ARankThatFailedThereFailsARunWhoseRanksHereEndedWell) {
  store::RunOutcome o;
  o.ranks.resize(2);
  o.ranks[0].global_rank = 1;  // this node's, in launch order
  add_other_nodes(o, {relayed_end(3, 137, SIGKILL, false), relayed_end(2, 143, SIGTERM, true),
                      relayed_end(1, 9, std::nullopt, false)});  // rank 1 is this node's
  ASSERT_EQ(o.ranks.size(), 4u);
  for (int r = 0; r < 4; ++r)
    EXPECT_EQ(o.ranks[std::size_t(r)].global_rank, r);
  EXPECT_EQ(o.ranks[1].exit_code, 0) << "this node's own word on its rank wins";
  EXPECT_EQ(o.ranks[3].signal, SIGKILL);
  EXPECT_EQ(o.ranks[3].steps_completed, 30);
  EXPECT_EQ(o.ranks[3].phase, model::LoopPhase::Forward);
  EXPECT_TRUE(o.ranks[2].stopped_by_launcher);
  EXPECT_EQ(o.status, model::RunStatus::Failed);
  EXPECT_EQ(o.failed_rank, 3);
  EXPECT_EQ(o.exit_code, 137);
}

TEST(OtherNodes, ARunThatEndedOtherwiseHereKeepsItsStatus) {
  store::RunOutcome interrupted;
  interrupted.status = model::RunStatus::Interrupted;
  interrupted.exit_code = 130;
  add_other_nodes(interrupted, {relayed_end(1, 137, SIGKILL, false)});
  EXPECT_EQ(interrupted.status, model::RunStatus::Interrupted);
  EXPECT_EQ(interrupted.exit_code, 130);
  EXPECT_FALSE(interrupted.failed_rank);
  store::RunOutcome fine;
  add_other_nodes(fine, {relayed_end(1, 0, std::nullopt, false)});
  EXPECT_EQ(fine.status, model::RunStatus::Completed);
  EXPECT_EQ(fine.ranks.size(), 1u);
}

TEST(Manifest, ServedEndStatesAreWrittenAsTheirWords) {
  ServeManifestInput in;
  in.status = RunStatus::TimedOut;
  in.exit_code = 1;
  in.end_reason = EndReason::IdleTimeout;
  in.ranks = {{0, RankEnding::Goodbye},
              {1, RankEnding::ConnectionLost},
              {2, RankEnding::StillConnected},
              {3, RankEnding::NeverConnected}};
  const report::Json j = serve_manifest_json(in);
  EXPECT_EQ(j["status"], "timed_out");
  EXPECT_EQ(j["end_reason"], "idle_timeout");
  EXPECT_EQ(j["exit_code"], 1);
  ASSERT_EQ(j["ranks"].size(), 4u);
  EXPECT_EQ(j["ranks"][0]["ended"], "goodbye");
  EXPECT_EQ(j["ranks"][1]["ended"], "connection_lost");
  EXPECT_EQ(j["ranks"][2]["ended"], "still_connected");
  EXPECT_EQ(j["ranks"][3]["ended"], "never_connected");
  ManifestInput run;
  run.status = RunStatus::Interrupted;
  EXPECT_EQ(manifest_json(run)["status"], "interrupted");
}

HostOptions options_in(const fs::path& run_dir) {
  HostOptions o;
  o.run_dir = run_dir;
  return o;
}

TEST(HostedRun, ARunDirectoryThatHoldsARunIsRefused) {
  TempDir dir;
  const fs::path run_dir = dir.path() / "taken";
  fs::create_directories(run_dir);
  std::ofstream(run_dir / store::kRunDbFileName) << "a run";
  try {
    HostedRun host(options_in(run_dir), 1);
    FAIL() << "a run directory that holds a run was taken";
  } catch (const HostError& e) {
    EXPECT_NE(std::string(e.what()).find("already holds a run"), std::string::npos) << e.what();
  }
}

TEST(HostedRun, ARunThatNeverRanLeavesNothingBehind) {
  TempDir dir;
  {
    const fs::path made = dir.path() / "made";
    HostedRun host(options_in(made), 2);
    EXPECT_GT(host.port(), 0);
    EXPECT_EQ(host.run_name(), "made");
    EXPECT_TRUE(fs::exists(made / store::kRunDbFileName));
    host.abandon();
    EXPECT_FALSE(fs::exists(made));
  }
  // A directory that was there keeps what it held; the database goes.
  const fs::path kept = dir.path() / "kept";
  fs::create_directories(kept);
  std::ofstream(kept / "notes.txt") << "mine";
  HostedRun host(options_in(kept), std::nullopt);
  host.abandon();
  EXPECT_TRUE(fs::exists(kept / "notes.txt"));
  EXPECT_FALSE(fs::exists(kept / store::kRunDbFileName));
}

}  // namespace
}  // namespace traceml::launcher
