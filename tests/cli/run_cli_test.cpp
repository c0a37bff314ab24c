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
                        "--nproc-per-node must be >= 1");
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
  expect_one_error_line(traceml({"run", "--mode", "dashboard", "--", "/bin/true"}),
                        "invalid mode 'dashboard'");
  expect_one_error_line(traceml({"run", "--trace-max-steps", "0", "--", "/bin/true"}),
                        "--trace-max-steps must be > 0");
  expect_one_error_line(traceml({"run", "--master-addr", "", "--", "/bin/true"}),
                        "--master-addr cannot be empty");
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
  // The program never called traceml::init(): the user is told why there is no data.
  EXPECT_NE(r.err.find("no rank sent telemetry: does the program call traceml::init()?"),
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
