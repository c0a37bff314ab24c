// Golden-file tests: the real `traceml report` on checked-in telemetry must
// produce final_summary.json and final_summary.txt byte for byte as checked in
// under tests/golden/expected/<name>/ (and final_summary.html the same bytes
// twice). After an intended change, regenerate
// with TRACEML_UPDATE_GOLDEN=1 and review the diff like code.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "../support/subprocess.hpp"

namespace fs = std::filesystem;
using traceml::testing::read_file;
using traceml::testing::run_process;
using traceml::testing::TempDir;

namespace {

const fs::path kGolden = fs::path(TRACEML_TEST_DATA_DIR) / "golden";

class Golden : public ::testing::TestWithParam<std::string> {};

/// `text` with every `prefix` taken out: the files name the run directory by
/// its absolute path (a temporary directory here), the checked-in ones by
/// its path below the working directory, as the terminal shows it.
std::string without(std::string text, const std::string& prefix) {
  for (auto at = text.find(prefix); at != std::string::npos; at = text.find(prefix, at))
    text.erase(at, prefix.size());
  return text;
}

TEST_P(Golden, ReportMatchesCheckedInArtifacts) {
  const std::string name = GetParam();
  TempDir cwd;
  const fs::path telemetry = kGolden / "data" / (name + ".jsonl");
  const auto r = run_process(
      {TRACEML_CLI_PATH, "report", "--telemetry", telemetry.string(), "--out", "logs/" + name},
      cwd.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const fs::path out = cwd.path() / "logs" / name;
  const std::string here = fs::weakly_canonical(cwd.path()).string() + "/";
  const std::string json_named = read_file(out / "final_summary.json");
  const std::string txt_named = read_file(out / "final_summary.txt");
  const std::string html = read_file(out / "final_summary.html");
  // The files name the run directory absolutely; the terminal, below the
  // working directory: the same text once the working directory is taken out.
  EXPECT_NE(txt_named.find("Full evidence: " + here + "logs/" + name + "/final_summary.json"),
            std::string::npos)
      << txt_named;
  const std::string json = without(json_named, here);
  const std::string txt = without(txt_named, here);
  EXPECT_EQ(r.out, txt) << "stdout must be the text report, its paths below the working directory";

  const fs::path expected = kGolden / "expected" / name;
  if (std::getenv("TRACEML_UPDATE_GOLDEN") != nullptr) {
    fs::create_directories(expected);
    std::ofstream(expected / "final_summary.json", std::ios::binary) << json;
    std::ofstream(expected / "final_summary.txt", std::ios::binary) << txt;
    GTEST_SKIP() << "golden files rewritten";
  }
  ASSERT_TRUE(fs::exists(expected / "final_summary.json"))
      << "no golden for " << name << "; run with TRACEML_UPDATE_GOLDEN=1";
  EXPECT_EQ(json, read_file(expected / "final_summary.json"));
  EXPECT_EQ(txt, read_file(expected / "final_summary.txt"));

  // The artifacts are a pure function of the input: a second run is identical.
  const auto again = run_process(
      {TRACEML_CLI_PATH, "report", "--telemetry", telemetry.string(), "--out", "logs/" + name},
      cwd.path().string());
  ASSERT_EQ(again.exit_code, 0);
  EXPECT_EQ(read_file(out / "final_summary.json"), json_named);
  // So is the HTML report beside them (not checked in: docs/html-report.md).
  EXPECT_FALSE(html.empty());
  EXPECT_EQ(read_file(out / "final_summary.html"), html);

  // `traceml view` prints the same report from the JSON.
  const auto view = run_process({TRACEML_CLI_PATH, "view", (out / "final_summary.json").string()});
  EXPECT_EQ(view.exit_code, 0);
  EXPECT_EQ(view.out, txt_named);
}

INSTANTIATE_TEST_SUITE_P(Samples, Golden,
                         ::testing::Values("single_input_bound", "ddp_input_straggler",
                                           "ddp4_balanced", "h2d_bound", "ddp4_compute_straggler",
                                           "incomplete_forward", "residual_memory_creep"));

}  // namespace
