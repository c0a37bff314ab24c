// Golden-file tests of `traceml compare`: the real binary on two checked-in
// summaries (tests/golden/expected/<name>/final_summary.json) must write the
// compare JSON and text byte for byte as checked in under tests/golden/compare/.
// Absolute input paths are replaced by "<golden>" before comparing. After an
// intended change (including regenerated summaries), rewrite with
// TRACEML_UPDATE_GOLDEN=1 and review the diff like code.
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

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (std::size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

class CompareGolden : public ::testing::TestWithParam<std::pair<std::string, std::string>> {};

TEST_P(CompareGolden, MatchesCheckedInArtifacts) {
  const auto& [a, b] = GetParam();
  const std::string name = a + "_vs_" + b;
  TempDir cwd;
  const fs::path summaries = (kGolden / "expected").lexically_normal();
  const auto r =
      run_process({TRACEML_CLI_PATH, "compare", (summaries / a / "final_summary.json").string(),
                   (summaries / b / "final_summary.json").string()},
                  cwd.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  // Default output base: <cwd>/compare/{A}_vs_{B}.
  const fs::path base = cwd.path() / "compare" / name;
  const std::string json =
      replace_all(read_file(base.string() + ".json"), summaries.string(), "<golden>");
  const std::string txt = read_file(base.string() + ".txt");
  EXPECT_EQ(r.out.substr(0, txt.size()), txt) << "stdout starts with the text";

  const fs::path expected = kGolden / "compare";
  if (std::getenv("TRACEML_UPDATE_GOLDEN") != nullptr) {
    fs::create_directories(expected);
    std::ofstream(expected / (name + ".json"), std::ios::binary) << json;
    std::ofstream(expected / (name + ".txt"), std::ios::binary) << txt;
    GTEST_SKIP() << "golden files rewritten";
  }
  ASSERT_TRUE(fs::exists(expected / (name + ".json")))
      << "no golden for " << name << "; run with TRACEML_UPDATE_GOLDEN=1";
  EXPECT_EQ(json, read_file(expected / (name + ".json")));
  EXPECT_EQ(txt, read_file(expected / (name + ".txt")));
}

INSTANTIATE_TEST_SUITE_P(Pairs, CompareGolden,
                         ::testing::Values(std::make_pair(std::string("ddp_input_straggler"),
                                                          std::string("ddp4_balanced")),
                                           std::make_pair(std::string("single_input_bound"),
                                                          std::string("h2d_bound")),
                                           std::make_pair(std::string("ddp4_balanced"),
                                                          std::string("ddp4_compute_straggler"))),
                         [](const auto& p) { return p.param.first + "_vs_" + p.param.second; });

}  // namespace
