// End-to-end: `traceml serve` under load it cannot keep up with. Runs alone
// (tests/CMakeLists.txt: RUN_SERIAL): it loads the machine on purpose, and
// the other tests' timings must not pay for it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <csignal>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/json_file.hpp"
#include "../support/subprocess.hpp"
#include "served.hpp"

namespace traceml::testing {
namespace {

using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kTinyRank = TRACEML_TINY_RANK_PATH;

TEST(Serve, AStarvedCollectorStoresEveryStepOnceAndCallsNoHealthyRankDead) {
  // A collector that cannot keep up (its node busy: here serve is stopped
  // twice for 12 s while eight ranks make thousands of steps a second, and
  // go on for 6 s after it is back: ranks that end while their collector is
  // stopped are the next test).
  // Once a rank's send timed out after 2 s, it closed the connection, said
  // it "lost the connection ... telemetry is dropped", reconnected and sent
  // its whole buffer again: records stored twice (received > sent), and
  // serve called healthy ranks "crashed or killed?" (issue 32).
  constexpr int kWorld = 8;
  constexpr int kSteps = 10000000;  // more than 32 s of steps: the time ends them
  TempDir dir;
  Served serve(dir, {"--run-name", "starved", "--world-size", std::to_string(kWorld)});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.push_back(std::make_unique<ChildProcess>(rank_argv(
        vars, r, kWorld, 1,
        {kTinyRank, "--steps", std::to_string(kSteps), "--step-us", "50", "--for-ms", "32000"})));
  ASSERT_TRUE(serve.said("connected (8 of 8)")) << serve.child.err_so_far();
  for (int i = 0; i < 2; ++i) {
    std::this_thread::sleep_for(1s);
    serve.child.signal(SIGSTOP);
    std::this_thread::sleep_for(12s);
    serve.child.signal(SIGCONT);
  }
  std::vector<std::string> rank_err;
  std::vector<long> rank_steps;
  for (int r = 0; r < kWorld; ++r) {
    const ProcessResult p = ranks[std::size_t(r)]->wait();
    EXPECT_EQ(p.exit_code, 0) << p.err;
    const std::size_t at = p.out.rfind("tiny_rank: ");
    ASSERT_NE(at, std::string::npos) << p.out;
    rank_steps.push_back(std::stol(p.out.substr(at + 11)));
    // Slow is not gone: the connection was kept.
    EXPECT_EQ(p.err.find("lost the connection"), std::string::npos) << "rank " << r << p.err;
    rank_err.push_back(p.err);
  }
  const ProcessResult s = serve.child.wait();
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.err.find("without a goodbye"), std::string::npos) << s.err;
  const Json summary = load_json(dir.path() / "logs" / "starved" / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << s.err;
  EXPECT_EQ(summary.value("/run/status"_json_pointer, std::string()), "completed");
  const Json& tracer = summary["tracer"];
  ASSERT_EQ(tracer["ranks"].size(), std::size_t(kWorld)) << tracer.dump();
  bool any_dropped = false;
  for (const Json& r : tracer["ranks"]) {
    // Each record the rank sent arrived once: none twice, none lost.
    EXPECT_EQ(r["records_received"], r["records_sent"]) << r.dump();
    EXPECT_EQ(r["clean_end"], true) << r.dump();
    const auto dropped = r["records_dropped"].get<std::int64_t>();
    const std::string& err = rank_err.at(r["rank"].get<std::size_t>());
    if (dropped == 0) {
      EXPECT_EQ(r["steps_recorded"], rank_steps.at(r["rank"].get<std::size_t>())) << r.dump();
      EXPECT_EQ(err.find("dropped"), std::string::npos) << err;
    } else {
      // A buffer past its bound drops, and says so with the count.
      any_dropped = true;
      EXPECT_NE(err.find(std::to_string(dropped) + " telemetry records were dropped"),
                std::string::npos)
          << err;
    }
  }
  if (!any_dropped) {
    EXPECT_EQ(summary.value("/step_time/metadata/training_total_steps"_json_pointer, -1L),
              *std::max_element(rank_steps.begin(), rank_steps.end()));
  }
}

// Issue 47: ranks that end while their collector is stopped (a starved
// node), each with megabytes queued behind the collector: at their end the
// records still waiting are dropped and counted, and each rank's last word
// (its counters, its goodbye with the exit status, Bye) waits for the
// collector instead. Before, it waited behind the backlog, was lost with
// it, and serve called the run FAILED and healthy ranks "crashed or killed?".
TEST(Serve, RanksThatEndWhileTheirCollectorIsStoppedStillSayGoodbyeAndCountWhatTheyDropped) {
  constexpr int kWorld = 4;
  TempDir dir;
  Served serve(dir, {"--run-name", "stopped", "--world-size", std::to_string(kWorld)});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  for (int r = 0; r < kWorld; ++r)
    ranks.push_back(std::make_unique<ChildProcess>(
        rank_argv(vars, r, kWorld, 1,
                  {kTinyRank, "--steps", "20000000", "--step-us", "0", "--for-ms", "2000"})));
  ASSERT_TRUE(serve.said("connected (4 of 4)")) << serve.child.err_so_far();
  // Stopped until the ranks have ended their steps (2 s) and their
  // shutdown's 5 s, and are in their exit's: back before that ends.
  serve.child.signal(SIGSTOP);
  std::this_thread::sleep_for(9s);
  serve.child.signal(SIGCONT);
  std::vector<std::string> rank_err;
  for (int r = 0; r < kWorld; ++r) {
    const ProcessResult p = ranks[std::size_t(r)]->wait();
    EXPECT_EQ(p.exit_code, 0) << p.err;
    rank_err.push_back(p.err);
  }
  const ProcessResult s = serve.child.wait();
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.err.find("without a goodbye"), std::string::npos) << s.err;
  const Json summary = load_json(dir.path() / "logs" / "stopped" / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << s.err;
  EXPECT_EQ(summary.value("/run/status"_json_pointer, std::string()), "completed") << s.out;
  const Json& tracer = summary["tracer"];
  ASSERT_EQ(tracer["ranks"].size(), std::size_t(kWorld)) << tracer.dump();
  std::int64_t said_total = 0;
  for (const Json& r : tracer["ranks"]) {
    EXPECT_EQ(r["clean_end"], true) << r.dump();
    EXPECT_FALSE(r.value("counters_partial", false)) << r.dump();
    EXPECT_EQ(r["records_received"], r["records_sent"]) << r.dump();
    // The rank's own count reached the run: what it said is what the run says.
    const auto dropped = r["records_dropped"].get<std::int64_t>();
    EXPECT_GT(dropped, 0) << r.dump();
    const std::string& err = rank_err.at(r["rank"].get<std::size_t>());
    EXPECT_NE(err.find(std::to_string(dropped) + " telemetry records were dropped"),
              std::string::npos)
        << r.dump() << "\n"
        << err;
    said_total += dropped;
  }
  EXPECT_EQ(tracer["records_dropped"], said_total);
}

}  // namespace
}  // namespace traceml::testing
