// End-to-end: every run writes its timeline beside the summary (issue 47):
// timeline.json, a Chrome trace of the run's latest steps and of its slow
// window, which the text names with the command that draws the others; also
// when a rank is killed.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "../support/examples.hpp"
#include "../support/json_file.hpp"
#include "../support/subprocess.hpp"
#include "../support/traceml_run.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kExamples = examples_dir();

/// The step ids of rank `pid`'s CPU-clock step slices.
std::set<std::int64_t> steps_drawn(const json& trace, int pid) {
  std::set<std::int64_t> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["cat"] == "step" && e["pid"] == pid && e["tid"] == 1)
      out.insert(e["args"]["step"].get<std::int64_t>());
  return out;
}

/// "A:B" as a pair.
std::pair<std::int64_t, std::int64_t> range(const std::string& s) {
  const auto colon = s.find(':');
  return {std::stoll(s.substr(0, colon)), std::stoll(s.substr(colon + 1))};
}

// Two ranks of a real DDP training, rank 1 slow for steps 200-229 only, so
// that the slow window lies far before the latest steps: both are drawn.
TEST(TimelineE2e, ARunDrawsItsLatestStepsAndItsSlowWindowAndSaysHowToDrawOthers) {
  TempDir work;
  const auto r = run_process(traceml_run_argv(kCli, "logs", "tl", 2, {"--mode", "summary"},
                                              {kExamples + "/ddp", "--steps", "1500", "--slow-rank",
                                               "1", "--slow-forward-ms", "8", "--slow-from-step",
                                               "200", "--slow-to-step", "229"}),
                             work.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path run = work.path() / "logs" / "tl";
  const json summary = load_json(run / "final_summary.json");
  ASSERT_TRUE(summary.contains("timeline")) << summary.dump();
  const json& t = summary["timeline"];
  EXPECT_EQ(t["file"], "timeline.json");
  EXPECT_EQ(t["latest_steps"], 1000);
  EXPECT_EQ(t["latest"], "501:1500");
  const json trace = load_json(run / "timeline.json");
  ASSERT_TRUE(trace.is_object()) << "timeline.json is not JSON";
  EXPECT_EQ(trace["otherData"]["steps"], t["steps"]);
  // The slow window the summary found is drawn, wherever it lies.
  const json& sw = summary["step_time"]["global"]["slow_window"];
  ASSERT_TRUE(sw.is_object());
  const std::int64_t first = sw["first_step"], last = sw["last_step"];
  EXPECT_GE(first, 195);
  EXPECT_LE(last, 235);
  EXPECT_EQ(t["steps"], std::to_string(first) + ":" + std::to_string(last) + ",501:1500");
  for (int rank : {0, 1}) {
    const auto drawn = steps_drawn(trace, rank);
    EXPECT_EQ(drawn.size(), std::size_t(1000 + (last - first + 1))) << "rank " << rank;
    EXPECT_EQ(drawn.count(first), 1u);
    EXPECT_EQ(drawn.count(1500), 1u);
    EXPECT_EQ(drawn.count(400), 0u);
  }

  // The text names it where the user is, and the command for other steps
  // runs as printed with A:B filled in.
  EXPECT_NE(r.out.find("Timeline: logs/tl/timeline.json (ui.perfetto.dev): the latest 1000 steps, "
                       "501-1500, and the slow window, " +
                       std::to_string(first) + "-" + std::to_string(last) + "."),
            std::string::npos)
      << r.out;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m,
                                std::regex("traceml export (logs/tl) --format chrome-trace "
                                           "--steps A:B --out steps.json")))
      << r.out;
  const auto other = run_process({kCli, "export", m[1].str(), "--format", "chrome-trace", "--steps",
                                  "300:310", "--out", "steps.json"},
                                 work.path().string());
  EXPECT_EQ(other.exit_code, 0) << other.err;
  EXPECT_EQ(steps_drawn(load_json(work.path() / "steps.json"), 0).size(), 11u);

  // `traceml report` rebuilds it: the same bytes.
  const std::string before = read_file(run / "timeline.json");
  fs::remove(run / "timeline.json");
  const auto again = run_process({kCli, "report", run.string()});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(read_file(run / "timeline.json"), before);
}

// A rank killed mid-run: the run fails, and its timeline is still written,
// up to the steps both ranks completed.
TEST(TimelineE2e, ARunWhoseRankIsKilledStillHasItsTimeline) {
  TempDir logs;
  const auto r = run_process(traceml_run_argv(kCli, logs.path(), "killed", 2, {"--mode", "summary"},
                                              {kExamples + "/ddp", "--steps", "400", "--slow-rank",
                                               "1", "--crash-at-step", "120", "--crash-abruptly"}));
  EXPECT_NE(r.exit_code, 0);
  const fs::path run = logs.path() / "killed";
  const json summary = load_json(run / "final_summary.json");
  ASSERT_TRUE(summary.contains("timeline")) << r.err;
  const auto [first, last] = range(summary["timeline"]["latest"].get<std::string>());
  EXPECT_EQ(first, 1);
  EXPECT_GE(last, 100);
  EXPECT_LT(last, 120);
  const json trace = load_json(run / "timeline.json");
  ASSERT_TRUE(trace.is_object());
  EXPECT_EQ(steps_drawn(trace, 1).count(last), 1u);
}

}  // namespace
}  // namespace traceml::testing
