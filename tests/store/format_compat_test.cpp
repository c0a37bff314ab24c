// Files written before the record field lists (model/schema.hpp) still read:
// tests/data/format_v1.jsonl is telemetry JSONL version 1 (h2d_bound's
// records, half of its steps with GPU activity), and format_v1.db is the run
// database that traceml 117f03b's RunDbWriter wrote from it (schema version
// 1, as written since 9ddec06), with the tracer reports of two ranks, one of
// them with a GPU block. Both must import to the same records, and both
// must give the same diagnosis through `traceml report`.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

#include "../support/subprocess.hpp"
#include "../support/telemetry_compare.hpp"
#include "store/jsonl_reader.hpp"
#include "store/run_db.hpp"

namespace {

namespace fs = std::filesystem;
using traceml::testing::read_file;
using traceml::testing::run_process;
using traceml::testing::TempDir;

const fs::path kData = fs::path(TRACEML_TEST_DATA_DIR) / "data";
const std::string kCli = TRACEML_CLI_PATH;

TEST(FormatCompat, VersionOneDatabaseReadsAsItsJsonl) {
  const auto jsonl = traceml::store::read_telemetry_jsonl((kData / "format_v1.jsonl").string());
  EXPECT_TRUE(jsonl.warnings.empty());
  const auto db = traceml::store::read_run_db((kData / "format_v1.db").string());
  traceml::testing::expect_same(jsonl.telemetry, db.telemetry);

  // Every kind of record is in the fixture, so nothing above compared empty lists.
  std::size_t with_activity = 0;
  for (const auto& s : db.telemetry.steps)
    with_activity += s.gpu_activity ? 1 : 0;
  EXPECT_EQ(with_activity, 40u);
  EXPECT_EQ(db.telemetry.steps.size(), 80u);
  EXPECT_FALSE(db.telemetry.step_memory.empty());
  ASSERT_FALSE(db.telemetry.system.empty());
  EXPECT_FALSE(db.telemetry.system[0].gpus.empty());
  ASSERT_FALSE(db.telemetry.process.empty());
  EXPECT_TRUE(db.telemetry.process[0].gpu.has_value());

  ASSERT_EQ(db.deliveries.size(), 2u);
  const auto& first = db.deliveries[0];
  EXPECT_EQ(first.records_received, 1000);
  EXPECT_TRUE(first.clean_end);
  ASSERT_TRUE(first.tracer.has_value());
  EXPECT_EQ(first.tracer->pid, 4242);
  EXPECT_EQ(first.tracer->overhead_ns_per_step, 310.5);
  ASSERT_TRUE(first.tracer->gpu.has_value());
  EXPECT_EQ(first.tracer->gpu->steps_resolved, 198);
  EXPECT_EQ(first.tracer->gpu->steps_unresolved, 2);
  EXPECT_EQ(first.tracer->gpu->scopes_skipped, 5);
  EXPECT_EQ(first.tracer->activity_lost, 3);
  const auto& second = db.deliveries[1];
  EXPECT_FALSE(second.clean_end);
  ASSERT_TRUE(second.tracer.has_value());
  EXPECT_EQ(second.tracer->records_dropped, 1);
  EXPECT_FALSE(second.tracer->gpu.has_value());
  EXPECT_FALSE(second.tracer->activity_lost.has_value());
}

TEST(FormatCompat, VersionOneFilesGiveTheSameDiagnosis) {
  TempDir tmp;
  const fs::path run_dir = tmp.path() / "run";
  fs::create_directories(run_dir);
  fs::copy_file(kData / "format_v1.db", run_dir / "telemetry.db");
  const auto from_db = run_process({kCli, "report", run_dir.string()});
  ASSERT_EQ(from_db.exit_code, 0) << from_db.err;
  const fs::path out = tmp.path() / "jsonl";
  const auto from_jsonl = run_process(
      {kCli, "report", "--telemetry", (kData / "format_v1.jsonl").string(), "--out", out.string()});
  ASSERT_EQ(from_jsonl.exit_code, 0) << from_jsonl.err;

  const auto a = nlohmann::json::parse(read_file(run_dir / "final_summary.json"));
  const auto b = nlohmann::json::parse(read_file(out / "final_summary.json"));
  for (const char* section : {"primary_diagnosis", "step_time", "step_memory", "system", "process"})
    EXPECT_EQ(a.at(section), b.at(section)) << section;
  EXPECT_EQ(a.at("primary_diagnosis").at("kind"), "H2D_BOUND");
}

}  // namespace
