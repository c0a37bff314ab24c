// What `traceml run` and `traceml serve` say when ranks sent no telemetry or
// no step (launcher/run_end.hpp, missing_telemetry_lines; issue 30 item 2.6): a
// program that never connected is asked whether it calls traceml::init(); a
// rank that connected (init ran) and died before its first step is said to
// have died, with its exit status where the launcher knows it. The whole path
// runs end to end in tests/e2e/end_of_run_e2e_test.cpp; serve's cases, which
// no example reaches on demand, are here.
#include "launcher/run_end.hpp"

#include <gtest/gtest.h>

#include <csignal>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

namespace traceml::launcher {
namespace {

using Lines = std::vector<std::string>;

store::RankExit exited(int rank, int code) {
  store::RankExit e;
  e.global_rank = rank;
  e.exit_code = code;
  return e;
}

store::RankExit killed(int rank, int sig) {
  store::RankExit e = exited(rank, 128 + sig);
  e.signal = sig;
  return e;
}

TEST(MissingTelemetry, NoConnectionAndACleanExitAsksForInit) {
  RunEnd end;
  end.exits = {exited(0, 0)};
  EXPECT_EQ(missing_telemetry_lines(end),
            Lines{"no rank sent telemetry: does the program call traceml::init()?"});
}

TEST(MissingTelemetry, NoConnectionAndAFailedRankSaysHowItEnded) {
  RunEnd end;
  end.exits = {exited(0, 0), killed(1, SIGSEGV)};
  EXPECT_EQ(missing_telemetry_lines(end),
            Lines{"no rank sent telemetry: rank 1 died (killed by SIGSEGV) before it connected "
                  "(before traceml::init(), or just after it)"});
}

TEST(MissingTelemetry, NoConnectionUnderServeCannotTellInitFromAnEarlyDeath) {
  RunEnd end;  // serve: no exit status is known
  EXPECT_EQ(missing_telemetry_lines(end),
            Lines{"no rank sent telemetry: do the ranks call traceml::init(), and live until "
                  "they connect?"});
}

TEST(MissingTelemetry, RefusedConnectionsAreSaidFirst) {
  RunEnd end;
  end.collected.rejected_connections = 2;
  end.exits = {exited(0, 4)};
  EXPECT_EQ(missing_telemetry_lines(end),
            Lines{"no rank's telemetry was accepted: 2 connection(s) were refused "
                  "(manifest.json: telemetry.rejected_by_kind)"});
}

TEST(MissingTelemetry, RanksThatConnectedAndDiedBeforeAStepAreNamedByHowTheyEnded) {
  RunEnd end;
  end.collected.ranks_connected = 12;
  for (int r = 0; r < 12; ++r)
    end.ranks_without_steps.push_back(r);
  for (int r = 0; r < 10; ++r)
    end.exits.push_back(exited(r, 3));
  end.exits.push_back(killed(10, SIGABRT));
  end.exits.push_back(exited(11, 143));
  end.exits.back().stopped_by_launcher = true;  // stopped because another failed: not news
  EXPECT_EQ(missing_telemetry_lines(end),
            (Lines{"ranks 0, 1, 2, 3, 4, 5, 6, 7 and 2 more died before their first step (exit "
                   "code 3): traceml::init() ran, no step was recorded",
                   "rank 10 died before its first step (killed by SIGABRT): traceml::init() ran, "
                   "no step was recorded"}));
}

TEST(MissingTelemetry, UnderServeALostConnectionBeforeAStepIsADeathAndAGoodbyeIsNot) {
  RunEnd end;
  end.collected.ranks_connected = 3;
  end.ranks_without_steps = {1, 2};
  end.said_goodbye = {0, 2};
  EXPECT_EQ(missing_telemetry_lines(end),
            Lines{"rank 1 died before its first step (its connection ended without a "
                  "goodbye): traceml::init() ran, no step was recorded"});
}

TEST(MissingTelemetry, RanksThatSteppedOrEndedWellSayNothing) {
  RunEnd end;
  end.collected.ranks_connected = 2;
  end.ranks_without_steps = {1};
  end.exits = {exited(0, 0), exited(1, 0)};
  EXPECT_EQ(missing_telemetry_lines(end), Lines{});
}

}  // namespace
}  // namespace traceml::launcher

namespace traceml::launcher {
namespace {

/// What say_where writes on stderr.
std::string said(const RunEnd& end) {
  std::ostringstream err;
  std::streambuf* const old = std::cerr.rdbuf(err.rdbuf());
  say_where("logs/run", end);
  std::cerr.rdbuf(old);
  return err.str();
}

TEST(SayWhere, StepsFromABlackBoxAreCountedInWords) {
  RunEnd end;
  end.collected.steps_recovered = {{0, 1}, {3, 12}};
  const std::string err = said(end);
  EXPECT_NE(err.find("traceml: rank 0's last step came from its black box: it had not sent it\n"),
            std::string::npos)
      << err;
  EXPECT_NE(
      err.find("traceml: rank 3's last 12 steps came from its black box: it had not sent them\n"),
      std::string::npos)
      << err;
  EXPECT_EQ(err.find("last 1 step"), std::string::npos) << err;
}

}  // namespace
}  // namespace traceml::launcher
