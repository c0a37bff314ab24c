// End-to-end: `traceml run --mode live` as a user sees it. In a real terminal
// (tmux): a row per rank whose step count moves, the ranks' own output above
// the view, a rank stopped with SIGSTOP shown as silent within seconds and
// named as the one the other rank waits for, the stall in final_summary.json
// and in the report, and a terminal left clean after Ctrl-C. Without a
// terminal: a progress line every 10 s.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/examples.hpp"
#include "../support/rank_pid.hpp"
#include "../support/subprocess.hpp"
#include "../support/tmux.hpp"
#include "../support/traceml_run.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using Json = nlohmann::json;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kExamples = examples_dir();

/// Each "R<r>/N0 ... step <n>" row's step count.
std::map<int, long> steps_shown(const std::string& screen) {
  std::map<int, long> out;
  const std::regex row("R([0-9]+)/N0 +step +([0-9]+)");
  for (auto it = std::sregex_iterator(screen.begin(), screen.end(), row);
       it != std::sregex_iterator(); ++it)
    out[std::stoi((*it)[1])] = std::stol((*it)[2]);
  return out;
}

TEST(LiveE2e, ATerminalShowsRanksThatAdvanceAndAStoppedRankAsSilent) {
  TempDir logs;
  const std::string run = "live_tmux";
  const std::string cmd =
      shell_quoted(kCli) + " run --mode live --logs-dir " + shell_quoted(logs.path().string()) +
      " --run-name " + run +
      " --aggregator-port 0 --master-port 0 --nproc-per-node 2 --interval 0.5 -- " +
      shell_quoted(kExamples + "/ddp") +
      " --steps 1000000 --log-every 200 --timeout-s 120 --slow-rank 1 --slow-input-ms 2; echo "
      "TRACEML_EXIT=$?; "
      "sleep 60";
  Tmux tmux(cmd, 150, 30);
  ASSERT_TRUE(tmux.started()) << "tmux: " << tmux.error()
                              << " (scripts/install-deps.sh installs tmux)";

  // Both ranks' rows, then again later with more steps: the view refreshes.
  const std::regex both("R0/N0 +step +[0-9]+[^\n]*\n[^\n]*R1/N0 +step +[0-9]+");
  std::string first = tmux.wait_for(both, 90s);
  ASSERT_TRUE(std::regex_search(first, both)) << first;
  EXPECT_NE(first.find("verdict so far:"), std::string::npos) << first;
  const auto before = steps_shown(first);
  std::this_thread::sleep_for(2500ms);
  const std::string later = tmux.screen();
  const auto after = steps_shown(later);
  ASSERT_EQ(after.size(), 2u) << later;
  EXPECT_GT(after.at(0), before.at(0)) << first << "\n---\n" << later;
  EXPECT_GT(after.at(1), before.at(1)) << first << "\n---\n" << later;
  // Rank 0's own lines scroll above the view, never through it.
  const std::string& s = later;
  const auto own = s.rfind("[rank0]:");
  const auto head = s.find("traceml live");
  ASSERT_NE(own, std::string::npos) << s;
  ASSERT_NE(head, std::string::npos) << s;
  EXPECT_LT(own, head) << s;

  // A narrower terminal: the view is drawn again to its width, once, with no
  // piece of an older frame left on the screen.
  tmux.resize(100, 30);
  std::this_thread::sleep_for(2500ms);
  const std::string narrow = tmux.screen();
  std::size_t heads = 0;
  for (auto at = narrow.find("traceml live"); at != std::string::npos;
       at = narrow.find("traceml live", at + 1))
    ++heads;
  EXPECT_EQ(heads, 1u) << narrow;
  EXPECT_EQ(steps_shown(narrow).size(), 2u) << narrow;
  std::istringstream rows(narrow);
  for (std::string row; std::getline(rows, row);)
    EXPECT_LE(row.size(), 100u) << row;

  // A rank stopped: silent within a few seconds, with where it was, and the
  // other rank, stuck in the gradient all-reduce, waiting for it.
  const pid_t r1 = rank_pid(run, 1);
  ASSERT_GT(r1, 0);
  ASSERT_EQ(::kill(r1, SIGSTOP), 0);
  const auto stopped_at = std::chrono::steady_clock::now();
  const std::string silent =
      tmux.wait_for(std::regex("R1/N0 silent [0-9]+ s \\(last: (step|before step) [0-9]+"), 20s);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - stopped_at).count();
  EXPECT_NE(silent.find("R1/N0 silent"), std::string::npos) << silent;
  EXPECT_LT(took, 6.0) << "3 intervals of 0.5 s, and a refresh a second";
  const std::string waiting = tmux.wait_for(std::regex("R0 wait in [a-z ]+, likely for R1"), 20s);
  EXPECT_NE(waiting.find("likely for R1"), std::string::npos) << waiting;
  // The view opens with the hang (its second line), the verdict after it.
  EXPECT_TRUE(std::regex_search(waiting, std::regex("traceml live[^\n]*\nHANG: R1/N0 silent "
                                                    "[^\n]*likely for R1[^\n]*\nbefore the "
                                                    "hang: ")))
      << waiting;
  std::this_thread::sleep_for(2s);
  ::kill(r1, SIGCONT);
  const std::string resumed =
      tmux.wait_for(std::regex("R1/N0 +step +[0-9]+[^\n]*\n(.|\n)*stalls: [1-9]"), 20s);
  EXPECT_TRUE(std::regex_search(resumed, std::regex("R1/N0 +step"))) << resumed;

  // Ctrl-C ends the run: the summary, with the stall, and no view left over.
  tmux.keys("C-c");
  const std::string done = tmux.wait_for(std::regex("TRACEML_EXIT=[0-9]+"), 60s);
  ASSERT_NE(done.find("TRACEML_EXIT="), std::string::npos) << done;
  const std::string all = tmux.history();
  const auto summary_at = all.rfind("TraceML");
  ASSERT_NE(summary_at, std::string::npos) << all;
  EXPECT_EQ(all.find("verdict so far:", summary_at), std::string::npos) << all;
  EXPECT_NE(all.find("R1 was silent", summary_at), std::string::npos) << all;
  const Json summary = Json::parse(read_file(logs.path() / run / "final_summary.json"));
  const Json& stalls = summary["run"]["stalls"];
  ASSERT_TRUE(stalls.is_array()) << summary["run"].dump();
  bool found = false;
  for (const Json& st : stalls) {
    if (st["rank"] == 1 && st["kind"] == "silent") {
      found = true;
      EXPECT_GE(st["duration_s"].get<double>(), 1.5) << st.dump();
      EXPECT_TRUE(st["phase"].is_string()) << st.dump();
    }
  }
  EXPECT_TRUE(found) << stalls.dump();
}

TEST(LiveE2e, WithoutATerminalAProgressLineComesEveryTenSeconds) {
  TempDir logs;
  ChildProcess run(
      traceml_run_argv(kCli, logs.path(), "live_pipe", 2, {"--mode", "live", "--interval", "0.5"},
                       {kExamples + "/ddp", "--steps", "1000000", "--log-every", "100000",
                        "--timeout-s", "60", "--slow-rank", "1", "--slow-input-ms", "2"}));
  const std::regex line(
      "traceml: 0:00:1[0-9]  2/2 ranks  steps [0-9]+(-[0-9]+)?  step [0-9.]+"
      "(-[0-9.]+)? ms  verdict so far: [A-Z]");
  const auto end = std::chrono::steady_clock::now() + 60s;
  std::string err;
  while (std::chrono::steady_clock::now() < end) {
    err = run.err_so_far();
    if (std::regex_search(err, line)) break;
    std::this_thread::sleep_for(250ms);
  }
  run.signal(SIGINT);
  const ProcessResult r = run.wait();
  EXPECT_TRUE(std::regex_search(r.err, line)) << r.err;
  // No escape sequence reaches a log.
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.err.find('\x1b'), std::string::npos);
  EXPECT_EQ(r.err.find("traceml: 0:00:0"), std::string::npos) << "not before 10 s: " << r.err;
}

// A hang in the default mode (no live view): rank 1 stops, the user presses
// Ctrl-C; the report names the rank that hung, where, and who waited for it.
TEST(LiveE2e, ARunStoppedDuringAHangNamesTheHungRankInTheVerdictArea) {
  TempDir logs;
  const std::string run = "hang";
  ChildProcess launcher(traceml_run_argv(
      kCli, logs.path(), run, 2, {"--interval", "0.5", "--grace-period-sec", "1"},
      {kExamples + "/ddp", "--steps", "1000000", "--log-every", "200", "--timeout-s", "120"}));
  // Steps flow once rank 0 has logged twice.
  const auto end = std::chrono::steady_clock::now() + 90s;
  while (std::chrono::steady_clock::now() < end &&
         launcher.out_so_far().find("step 400 ") == std::string::npos)
    std::this_thread::sleep_for(100ms);
  const pid_t r1 = rank_pid(run, 1);
  ASSERT_GT(r1, 0) << launcher.out_so_far();
  ASSERT_EQ(::kill(r1, SIGSTOP), 0);
  std::this_thread::sleep_for(5s);
  launcher.signal(SIGINT);
  const ProcessResult r = launcher.wait();
  EXPECT_EQ(r.exit_code, 130) << r.err;
  // The hang is the headline (DECISIONS 15), and R1's position is read from
  // its black box: where it really stopped, not where it was last heard.
  const std::regex hang(
      "Verdict: HANG  \\(critical\\)\nWhy: R1 was silent for [0-9.]+ s at step [0-9]+(, [a-z "
      "]+)?, when the run was stopped; 1 rank waited for it\\.");
  EXPECT_TRUE(std::regex_search(r.out, hang)) << r.out;
  const auto verdict = r.out.find("Verdict: HANG");
  const auto before = r.out.find("Before the hang: ");
  const auto scope = r.out.find("Scope:");
  EXPECT_TRUE(verdict < before && before < scope) << r.out;
  const Json summary = Json::parse(read_file(logs.path() / run / "final_summary.json"));
  const Json& h = summary["run"]["hang"];
  ASSERT_TRUE(h.is_object()) << summary["run"].dump();
  EXPECT_EQ(h["rank"], 1);
  EXPECT_EQ(h["kind"], "silent");
  EXPECT_EQ(h["others_waiting"], 1);
  EXPECT_EQ(h["position_from"], "black_box");
  EXPECT_GE(h["duration_s"].get<double>(), 3.0);
  // Its step is the one after the last it completed, every one of which is
  // stored (the black box gave what it had not sent).
  const fs::path jsonl = logs.path() / "hang.jsonl";
  ASSERT_EQ(run_process({kCli, "export", (logs.path() / run).string(), "--out", jsonl.string()})
                .exit_code,
            0);
  std::int64_t last = 0;
  std::int64_t count = 0;
  std::ifstream in(jsonl);
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line);
    if (j.value("type", "") != "step" || j["global_rank"] != 1) continue;
    last = std::max(last, j["step"].get<std::int64_t>());
    ++count;
  }
  EXPECT_EQ(count, last) << "every step R1 completed, once";
  EXPECT_EQ(h["step"].get<std::int64_t>(), last + 1) << summary["run"].dump();
}

}  // namespace
}  // namespace traceml::testing
