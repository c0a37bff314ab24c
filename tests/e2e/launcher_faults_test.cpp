// Fail-open when traceml itself is hurt: the launcher killed outright, hung
// up on, sent a scheduler's notice, or left without disk. The training
// program keeps its own exit code and output, and the run stays readable.
#include <gtest/gtest.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "../support/examples.hpp"
#include "../support/json_file.hpp"
#include "../support/subprocess.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kQuickstart = examples_dir() + "/quickstart";

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

/// Waits until the launcher relayed `lines` progress lines of rank 0.
void wait_for_training(const ChildProcess& run, std::size_t lines) {
  const auto give_up = std::chrono::steady_clock::now() + 90s;
  while (count_of(run.out_so_far(), "[rank0]: ") < lines &&
         std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(50ms);
  ASSERT_GE(count_of(run.out_so_far(), "[rank0]: "), lines) << run.err_so_far();
}

std::vector<std::string> traceml_run(const fs::path& logs, const std::string& name,
                                     const std::vector<std::string>& program) {
  std::vector<std::string> argv = {kCli,         "run", "--logs-dir",         logs.string(),
                                   "--run-name", name,  "--aggregator-port",  "0",
                                   "--interval", "0.2", "--grace-period-sec", "5",
                                   "--"};
  argv.insert(argv.end(), program.begin(), program.end());
  return argv;
}

TEST(LauncherFaults, LauncherKilledTheRankFinishesWithItsOwnExitCode) {
  // The rank's stdout and stderr stay the dead launcher's pipes: its progress
  // lines and our sender's "lost the connection" warning both write there.
  // Once they raised SIGPIPE and the rank died with 141.
  TempDir dir;
  const fs::path rc = dir.path() / "rc";
  // A line every step: after the launcher's death the rank still writes
  // well over a pipe's 64 KiB (4,200 lines), which must be drained, not left
  // to block it. input_bound's loader (50 us a sample) sets a step's pace on
  // any LibTorch: 800 steps take over a second, in which the collector
  // commits (LibTorch 2.x ran 800 of the quickstart's steps in 0.3 s, before
  // any commit).
  const std::string script =
      "'" + examples_dir() +
      "/input_bound' --transform-us 50 --steps 5000 --log-every 1; echo $? >'" + rc.string() + "'";
  ChildProcess run(traceml_run(dir.path(), "killed", {"/bin/sh", "-c", script}));
  // Long enough for the collector to have committed some steps (it commits
  // every few hundred milliseconds), then the launcher dies outright.
  wait_for_training(run, 800);
  run.signal(SIGKILL);
  EXPECT_EQ(run.wait().exit_code, 137);
  const auto give_up = std::chrono::steady_clock::now() + 180s;
  while (read_file(rc).empty() && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(100ms);
  EXPECT_EQ(read_file(rc), "0\n") << "the training did not finish on its own";

  // What the collector stored before it died is a readable run.
  const auto report = run_process({kCli, "report", (dir.path() / "killed").string()});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  const Json summary = load_json(dir.path() / "killed" / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << report.err;
  EXPECT_GT(summary["step_time"]["metadata"]["training_total_steps"].get<int>(), 0);
}

struct SignalCase {
  int sig;
  int exit_code;       // the launcher's: the ranks die of the forwarded signal
  const char* status;  // run status in the summary and manifest
};

class LauncherSignal : public ::testing::TestWithParam<SignalCase> {};

TEST_P(LauncherSignal, IsForwardedAndTheSummaryAndManifestAreWritten) {
  // SIGHUP (an SSH session dropped) and SIGUSR1 (a scheduler's notice) once
  // ended the launcher at once: exit 129/138, no summary, no manifest.
  const SignalCase c = GetParam();
  TempDir dir;
  ChildProcess run(
      traceml_run(dir.path(), "sig", {kQuickstart, "--steps", "1000000", "--log-every", "20"}));
  wait_for_training(run, 3);
  // Printing proves nothing was sent: on a fast machine the rank printed its
  // lines before its sender's first flush (every 0.2 s) and the signal ended
  // it with nothing shipped. Give the sender several intervals first.
  std::this_thread::sleep_for(2s);
  run.signal(c.sig);
  const auto r = run.wait();
  EXPECT_EQ(r.exit_code, c.exit_code) << r.err;
  const Json summary = load_json(dir.path() / "sig" / "final_summary.json");
  const Json manifest = load_json(dir.path() / "sig" / "manifest.json");
  ASSERT_TRUE(summary.is_object()) << r.err;
  ASSERT_TRUE(manifest.is_object()) << r.err;
  EXPECT_EQ(summary["run"]["status"], c.status);
  EXPECT_EQ(manifest["status"], c.status);
  EXPECT_EQ(manifest["ranks"][0]["signal"], c.sig);
  EXPECT_GT(summary["tracer"]["records_received"].get<int>(), 0);
  EXPECT_NE(r.err.find("traceml: summary: "), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(Signals, LauncherSignal,
                         ::testing::Values(SignalCase{SIGHUP, 128 + SIGHUP, "interrupted"},
                                           // Passed on, not a stop: the program may catch it to
                                           // checkpoint and go on. This one does not, so it dies
                                           // of it and the run failed.
                                           SignalCase{SIGUSR1, 128 + SIGUSR1, "failed"}),
                         [](const ::testing::TestParamInfo<SignalCase>& p) {
                           return p.param.sig == SIGHUP ? std::string("Hangup")
                                                        : std::string("User1");
                         });

TEST(LauncherFaults, DiskFullKeepsTheExitCodeAndNeverClaimsAMissingSummary) {
  // A 256 KiB tmpfs in a private mount namespace holds the logs: the run
  // database fills it within the first thousand steps.
  if (geteuid() != 0) GTEST_SKIP() << "needs root to mount a small tmpfs";
  TempDir dir;
  const fs::path mnt = dir.path() / "mnt";
  const fs::path copy = dir.path() / "copy";
  fs::create_directories(mnt);
  fs::create_directories(copy);
  std::string traced;
  for (const auto& a : traceml_run(mnt, "full", {kQuickstart, "--steps", "6000"}))
    traced += "'" + a + "' ";
  // Inside the namespace: run, then keep what the tmpfs holds before it goes.
  const std::string script = "mount -t tmpfs -o size=256k traceml-full '" + mnt.string() +
                             "' || exit 99; " + traced + "; rc=$?; cp -r '" + mnt.string() +
                             "/full' '" + copy.string() + "/'; exit $rc";
  const auto r = run_process({"/usr/bin/unshare", "-m", "/bin/sh", "-c", script});
  if (r.exit_code == 99) GTEST_SKIP() << "cannot mount a tmpfs here: " << r.err;
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("done\n"), std::string::npos) << "the training did not finish";
  const fs::path run = copy / "full";
  // One clear line about what was lost, and the summary's path only if it exists.
  EXPECT_EQ(count_of(r.err, "database or disk is full; "), 1u) << r.err;
  EXPECT_NE(r.err.find(" records were stored, telemetry that arrived later was lost"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("traceml: summary: ") != std::string::npos,
            fs::exists(run / "final_summary.txt"))
      << r.err;
  // What was stored before the disk filled is a readable run elsewhere.
  ASSERT_TRUE(fs::exists(run / "telemetry.db"));
  fs::remove(run / "final_summary.json");
  fs::remove(run / "final_summary.txt");
  const auto report = run_process({kCli, "report", run.string()});
  EXPECT_EQ(report.exit_code, 0) << report.err;
  const Json summary = load_json(run / "final_summary.json");
  ASSERT_TRUE(summary.is_object());
  EXPECT_GT(summary["step_time"]["metadata"]["training_total_steps"].get<int>(), 0);
}

}  // namespace
}  // namespace traceml::testing
