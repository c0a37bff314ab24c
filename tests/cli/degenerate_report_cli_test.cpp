// `traceml report --telemetry` on every degenerate run of
// tests/support/degenerate_runs.hpp, the real binary with a time limit per
// run: it must end (issue 30: a range one ulp wide made the report loop
// forever), exit 0 and leave final_summary.json, .txt and .html.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "../support/degenerate_runs.hpp"
#include "../support/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using traceml::testing::ChildProcess;
using traceml::testing::DegenerateRun;
using traceml::testing::TempDir;

/// A report of these few steps takes well under a second; the limit leaves
/// room for a sanitizer build on a loaded machine, and a hang ends the test
/// instead of holding ctest until its own timeout.
constexpr auto kLimit = std::chrono::seconds(30);

/// Whether `child` ended within `limit`, without reaping it (its wait()
/// collects the status).
bool ended_within(const ChildProcess& child, std::chrono::seconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    siginfo_t info{};
    if (::waitid(P_PID, id_t(child.pid()), &info, WEXITED | WNOHANG | WNOWAIT) == 0 &&
        info.si_pid == child.pid())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class DegenerateReport : public ::testing::TestWithParam<DegenerateRun> {};

TEST_P(DegenerateReport, EndsInTimeWithTheSummaryFiles) {
  const DegenerateRun& run = GetParam();
  TempDir dir;
  const fs::path telemetry = dir.path() / (run.name + ".jsonl");
  std::ofstream(telemetry, std::ios::binary) << run.jsonl;
  const fs::path out = dir.path() / "out";
  ChildProcess child(
      {TRACEML_CLI_PATH, "report", "--telemetry", telemetry.string(), "--out", out.string()});
  ASSERT_GT(child.pid(), 0);
  if (!ended_within(child, kLimit)) {
    child.signal(SIGKILL);
    (void)child.wait();
    FAIL() << "traceml report --telemetry " << run.name << ".jsonl did not end within "
           << kLimit.count() << " s (killed)";
  }
  const auto r = child.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  for (const char* file : {"final_summary.json", "final_summary.txt", "final_summary.html"}) {
    EXPECT_TRUE(fs::is_regular_file(out / file)) << file << "\n" << r.err;
    EXPECT_GT(fs::exists(out / file) ? fs::file_size(out / file) : 0u, 0u) << file;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, DegenerateReport,
                         ::testing::ValuesIn(traceml::testing::degenerate_runs()),
                         [](const ::testing::TestParamInfo<DegenerateRun>& p) {
                           return p.param.name;
                         });

}  // namespace
