// `traceml run` as a user calls it, on programs that need no LibTorch: bad
// invocations, exit codes, the run directory it leaves.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "../support/cli_expect.hpp"
#include "../support/subprocess.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
const std::string kCli = TRACEML_CLI_PATH;

ProcessResult traceml(std::vector<std::string> args) {
  args.insert(args.begin(), kCli);
  return run_process(args);
}

TEST(RunCli, InvalidInvocationsAreOneLineErrors) {
  expect_one_error_line(traceml({"run", "--nproc-per-node", "0", "--", "/bin/true"}),
                        "--nproc-per-node must be in [1, 1024] (got 0)");
  expect_one_error_line(
      traceml({"run", "--nnodes", "2", "--node-rank", "2", "--run-name", "x", "--", "/bin/true"}),
      "--node-rank must be less than --nnodes");
  expect_one_error_line(traceml({"run", "--nnodes", "2", "--", "/bin/true"}),
                        "--run-name is required when --nnodes > 1");
  expect_one_error_line(traceml({"run", "--nnodes", "2", "--run-name", "x", "--aggregator-port",
                                 "0", "--", "/bin/true"}),
                        "--aggregator-port 0 (pick a free port) works only with --nnodes 1");
  expect_one_error_line(traceml({"run", "--run-name", "../up", "--", "/bin/true"}),
                        "--run-name must be one path segment");
  expect_one_error_line(traceml({"run", "--run-name", std::string(129, 'n'), "--", "/bin/true"}),
                        "--run-name is 129 bytes; at most 128 are allowed");
  expect_one_error_line(traceml({"run", "--strategy", "dd p\n", "--", "/bin/true"}),
                        "--strategy must be one word of letters, digits, '_' or '-' (ddp, fsdp, "
                        "single_process) (got 'dd p\\x0a')");
  expect_one_error_line(traceml({"run", "--mode", "dashboard", "--", "/bin/true"}),
                        "invalid mode 'dashboard'");
  expect_one_error_line(traceml({"run", "--trace-max-steps", "0", "--", "/bin/true"}),
                        "--trace-max-steps must be in [1, ");
  expect_one_error_line(traceml({"run", "--master-addr", "", "--", "/bin/true"}),
                        "--master-addr cannot be empty");
}

TEST(RunCli, EveryNumberHasARangeCheckedBeforeAnythingStarts) {
  // Each of these was once accepted with exit 0: an interval that overflowed
  // the sampler's wait (it spun inside the training process), a grace period
  // that meant SIGKILL at once, a world size that wrapped to a negative int.
  TempDir dir;
  const std::string marker = (dir.path() / "ran").string();
  const std::vector<std::string> program = {"--", "/bin/sh", "-c", "touch " + marker};
  struct Case {
    std::vector<std::string> flags;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--interval", "1e10"}, "--interval must be in [0.01, 3600] seconds (got 10000000000)"},
      {{"--interval", "0"}, "--interval must be in [0.01, 3600] seconds (got 0)"},
      {{"--interval", "nan"}, "--interval must be in [0.01, 3600] seconds (got nan)"},
      {{"--grace-period-sec", "nan"}, "--grace-period-sec must be in [0, 3600] seconds (got nan)"},
      {{"--grace-period-sec", "-5"}, "--grace-period-sec must be in [0, 3600] seconds (got -5)"},
      {{"--grace-period-sec", "1e300"}, "--grace-period-sec must be in [0, 3600] seconds"},
      {{"--finalize-timeout-sec", "inf"}, "--finalize-timeout-sec must be in [0.001, 86400]"},
      {{"--finalize-timeout-sec", "0"}, "--finalize-timeout-sec must be in [0.001, 86400]"},
      {{"--nnodes", "1073741824", "--nproc-per-node", "2", "--run-name", "x"},
       "--nnodes must be in [1, 16777216] (got 1073741824)"},
      {{"--nnodes", "65536", "--nproc-per-node", "1024", "--run-name", "x"},
       "--nnodes x --nproc-per-node must be at most 16777216 ranks (got 65536 x 1024)"},
      {{"--nproc-per-node", "100000"}, "--nproc-per-node must be in [1, 1024]"},
      {{"--master-port", "65536"}, "--master-port must be in [0, 65535] (got 65536)"},
      {{"--aggregator-port", "-1"}, "--aggregator-port must be in [0, 65535] (got -1)"},
      {{"--summary-window-rows", "0"}, "--summary-window-rows"},
      {{"--trace-max-steps", "-3"}, "--trace-max-steps must be in [1, "},
  };
  for (const auto& c : cases) {
    std::vector<std::string> args = {"run", "--logs-dir", dir.path().string()};
    args.insert(args.end(), c.flags.begin(), c.flags.end());
    args.insert(args.end(), program.begin(), program.end());
    SCOPED_TRACE(c.flags.front() + " " + c.flags[1]);
    expect_one_error_line(traceml(args), c.message);
    EXPECT_FALSE(fs::exists(marker)) << "the program ran";
  }
  EXPECT_TRUE(fs::is_empty(dir.path())) << "a run directory was left behind";
}

TEST(RunCli, UnusableEnvironmentValuesAreErrorsNotIgnored) {
  expect_one_error_line(
      run_process({"/usr/bin/env", "SLURM_NNODES=two", kCli, "run", "--", "/bin/true"}),
      "SLURM_NNODES='two' is not an integer in [1, 16777216]");
  expect_one_error_line(
      run_process({"/usr/bin/env", "SLURM_NODEID=-1", kCli, "run", "--", "/bin/true"}),
      "SLURM_NODEID='-1' is not an integer in [0, 16777216]");
  expect_one_error_line(run_process({"/usr/bin/env", "TRACEML_RUN_TOKEN=" + std::string(2000, 't'),
                                     kCli, "run", "--aggregator-port", "0", "--", "/bin/true"}),
                        "TRACEML_RUN_TOKEN is 2000 bytes; at most 1024 are allowed");
}

TEST(RunCli, SlurmSuppliesTheNodeCountUnlessGiven) {
  expect_one_error_line(run_process({"/usr/bin/env", "SLURM_NNODES=2", "SLURM_NODEID=1", kCli,
                                     "run", "--", "/bin/true"}),
                        "--run-name is required when --nnodes > 1");
  // An explicit --nnodes wins over Slurm's.
  TempDir logs;
  const auto r = run_process({"/usr/bin/env", "SLURM_NNODES=2", "SLURM_NODEID=1", kCli, "run",
                              "--nnodes", "1", "--node-rank", "0", "--aggregator-port", "0",
                              "--logs-dir", logs.path().string(), "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(RunCli, TheProgramsExitCodeComesBackAndTheRunIsStillWritten) {
  TempDir logs;
  const auto r = traceml({"run", "--aggregator-port", "0", "--logs-dir", logs.path().string(),
                          "--run-name", "four", "--", "/bin/sh", "-c", "echo hello; exit 4"});
  EXPECT_EQ(r.exit_code, 4);
  EXPECT_NE(r.out.find("[rank0]: hello\n"), std::string::npos) << r.out;
  // The program never connected and failed: the user is told how it ended
  // (issue 30: not "does the program call traceml::init()?").
  EXPECT_NE(r.err.find("traceml: warning: no rank sent telemetry: rank 0 died (exit code 4) "
                       "before it connected (before traceml::init(), or just after it)\n"),
            std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("traceml: rank 0 failed (exit code 4)"), std::string::npos) << r.err;
  const auto manifest =
      nlohmann::json::parse(read_file(logs.path() / "four" / "manifest.json"), nullptr, false);
  ASSERT_TRUE(manifest.is_object());
  EXPECT_EQ(manifest["status"], "failed");
  EXPECT_EQ(manifest["exit_code"], 4);
  EXPECT_EQ(manifest["ranks"][0]["exit_code"], 4);
  EXPECT_EQ(manifest["command"], (std::vector<std::string>{"/bin/sh", "-c", "echo hello; exit 4"}));
  const auto summary =
      nlohmann::json::parse(read_file(logs.path() / "four" / "final_summary.json"), nullptr, false);
  ASSERT_TRUE(summary.is_object());
  EXPECT_EQ(summary["run"]["status"], "failed");
  EXPECT_EQ(summary["run"]["exit_code"], 4);
}

TEST(RunCli, ARankKilledBySignalReturns128PlusTheSignal) {
  TempDir logs;
  const auto r = traceml({"run", "--aggregator-port", "0", "--logs-dir", logs.path().string(), "--",
                          "/bin/sh", "-c", "kill -9 $$"});
  EXPECT_EQ(r.exit_code, 137);
}

TEST(RunCli, ExportAndReportRefuseWhatIsNotARunDirectory) {
  TempDir dir;
  expect_one_error_line(traceml({"export", (dir.path() / "nope").string(), "--out", "x.jsonl"}),
                        "not a directory");
  expect_one_error_line(traceml({"report", dir.path().string()}), "telemetry.db");
  expect_one_error_line(traceml({"report"}), "give a run directory");
}

}  // namespace
}  // namespace traceml::testing
