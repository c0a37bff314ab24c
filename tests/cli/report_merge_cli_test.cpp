// `traceml report PIECE PIECE... --out DIR`: the pieces of one job, traced
// apart, merged into one run and one diagnosis; pieces of different jobs are
// refused with one line and exit 2, and nothing of a good run is touched.
// The pieces are the golden 2-rank input-straggler telemetry split by rank.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "../support/cli_expect.hpp"
#include "../support/json_file.hpp"
#include "../support/subprocess.hpp"
#include "collector/merge.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kCli = TRACEML_CLI_PATH;
const fs::path kJob =
    fs::path(TRACEML_TEST_DATA_DIR) / "golden" / "data" / "ddp_input_straggler.jsonl";

/// The job's JSONL split into one file per rank, as two ranks traced on
/// their own would have written it: the run line in both, each rank's own
/// lines, the node's system samples with rank 0 (local rank 0 samples them).
/// `edit` may change a piece's lines.
class ReportMerge : public ::testing::Test {
 protected:
  fs::path piece(int rank, const std::function<void(Json&)>& edit = nullptr,
                 const std::string& name = "") {
    const fs::path out =
        dir_.path() / (name.empty() ? "rank" + std::to_string(rank) + ".jsonl" : name + ".jsonl");
    std::ifstream in(kJob);
    std::ofstream o(out);
    for (std::string line; std::getline(in, line);) {
      Json j = Json::parse(line);
      const std::string type = j["type"];
      const bool mine = type == "run" || (type == "system" && rank == 0) ||
                        (j.contains("global_rank") && j["global_rank"] == rank);
      if (!mine) continue;
      if (edit) edit(j);
      o << j.dump() << "\n";
    }
    return out;
  }
  ProcessResult report(const std::vector<std::string>& args) {
    std::vector<std::string> a = {kCli, "report"};
    a.insert(a.end(), args.begin(), args.end());
    return run_process(a);
  }
  std::string out(const std::string& name) const { return (dir_.path() / name).string(); }

  TempDir dir_;
};

TEST_F(ReportMerge, TwoRanksTracedApartGiveTheJobsVerdict) {
  // Each piece alone: a partial view with a single rank's verdict.
  const ProcessResult alone = report({"--telemetry", piece(0).string(), "--out", out("alone")});
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  const ProcessResult r = report({piece(0).string(), piece(1).string(), "--out", out("merged")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("merged 2 input(s), 2 rank(s) of 2"), std::string::npos) << r.err;
  const Json summary = load_json(fs::path(out("merged")) / "final_summary.json");
  EXPECT_EQ(summary.value("/primary_diagnosis/kind"_json_pointer, std::string()),
            "INPUT_STRAGGLER");
  EXPECT_EQ(summary.value("/primary_diagnosis/evidence/worst/rank"_json_pointer, -1), 1);
  EXPECT_FALSE(summary.contains("partial"));
  EXPECT_NE(r.out.find("Verdict: INPUT STRAGGLER"), std::string::npos) << r.out;
  // The merged run is a run directory like any other: report rebuilds it alike.
  EXPECT_TRUE(fs::exists(fs::path(out("merged")) / "telemetry.db"));
  const std::string first = read_file(fs::path(out("merged")) / "final_summary.json");
  const ProcessResult again = report({out("merged")});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(read_file(fs::path(out("merged")) / "final_summary.json"), first);
}

TEST_F(ReportMerge, OneRankOfTwoSaysItIsAPartialView) {
  const ProcessResult r = report({piece(1).string(), "--out", out("one")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("ranks are missing: the merged run still holds 1 of the job's 2"),
            std::string::npos)
      << r.err;
  const Json summary = load_json(fs::path(out("one")) / "final_summary.json");
  ASSERT_TRUE(summary.contains("partial")) << r.out;
  EXPECT_EQ(summary["partial"]["world_size"], 2);
  EXPECT_EQ(summary["partial"]["ranks"], Json::array({1}));
  EXPECT_NE(r.out.find("Partial view: rank 1 of 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Verdict (R1 only): "), std::string::npos) << r.out;
}

TEST_F(ReportMerge, PiecesOfDifferentJobsAreRefusedWithOneLine) {
  const std::string p0 = piece(0).string();
  expect_one_error_line(report({p0, p0, "--out", out("m1")}), "rank 0 is in both");
  expect_one_error_line(report({p0,
                                piece(
                                    1,
                                    [](Json& j) {
                                      if (j.contains("world_size")) j["world_size"] = 4;
                                    },
                                    "four")
                                    .string(),
                                "--out", out("m2")}),
                        "is of world size 2");
  // The job's records span 18 s: rank 1 run 30 s later ran after rank 0 (12
  // s apart), not with it.
  expect_one_error_line(report({p0,
                                piece(
                                    1,
                                    [](Json& j) {
                                      if (j.contains("ts")) j["ts"] = j["ts"].get<double>() + 30.0;
                                    },
                                    "later")
                                    .string(),
                                "--out", out("m3")}),
                        "did not run at the same time");
  expect_one_error_line(report({p0,
                                piece(
                                    1,
                                    [](Json& j) {
                                      if (j["type"] == "run")
                                        j["run_name"] = "other_job_20261205_070000_rank1";
                                    },
                                    "other")
                                    .string(),
                                "--out", out("m4")}),
                        "of 'other_job'");
  expect_one_error_line(report({p0,
                                piece(
                                    1,
                                    [](Json& j) {
                                      if (j.contains("global_rank")) j["global_rank"] = 5;
                                    },
                                    "outside")
                                    .string(),
                                "--out", out("m5")}),
                        "outside its world size 2");
  expect_one_error_line(report({p0, out("no_such_dir")}), "needs --out");
  expect_one_error_line(report({p0, out("no_such_dir"), "--out", out("m6")}),
                        "no such run directory or telemetry file");
  // None of the refusals left a run behind.
  for (const char* m : {"m1", "m2", "m3", "m4", "m5", "m6"})
    EXPECT_FALSE(fs::exists(fs::path(out(m)) / "telemetry.db")) << m;
}

TEST_F(ReportMerge, AnOutDirectoryThatHoldsARunIsNeverOverwritten) {
  const ProcessResult first = report({piece(0).string(), piece(1).string(), "--out", out("m")});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string db = read_file(fs::path(out("m")) / "telemetry.db");
  const std::string summary = read_file(fs::path(out("m")) / "final_summary.json");
  expect_one_error_line(report({piece(0).string(), piece(1).string(), "--out", out("m")}),
                        "already holds a run");
  EXPECT_EQ(read_file(fs::path(out("m")) / "telemetry.db"), db);
  EXPECT_EQ(read_file(fs::path(out("m")) / "final_summary.json"), summary);
  // An input as its own --out.
  expect_one_error_line(report({out("m"), piece(0).string(), "--out", out("m")}),
                        "already holds a run");
}

TEST(RunNameStem, DropsTimestampRankAndCollisionSuffixes) {
  using collector::run_name_stem;
  EXPECT_EQ(run_name_stem("ddp_20261205_070000_rank1"), "ddp");
  EXPECT_EQ(run_name_stem("ddp_20261205_070000_rank1_2"), "ddp");
  EXPECT_EQ(run_name_stem("ddp_20261205_070000"), "ddp");
  EXPECT_EQ(run_name_stem("ddp_20261205_070000_3"), "ddp");
  EXPECT_EQ(run_name_stem("job"), "job");
  EXPECT_EQ(run_name_stem("job_2"), "job");
  EXPECT_EQ(run_name_stem("my_train_rank0"), "my_train");
}

}  // namespace
}  // namespace traceml::testing
