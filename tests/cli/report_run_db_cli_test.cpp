// `traceml report RUN_DIR` on a run database that holds what no collector
// would store (changed by hand, or written from a bad peer's strings): a bad
// value is one error line and exit 2; a bad string never blocks the summary.
#include <gtest/gtest.h>
#include <sqlite3.h>

#include <filesystem>
#include <string>

#include "../support/cli_expect.hpp"
#include "../support/step_blocks.hpp"
#include "../support/subprocess.hpp"
#include "report/summary_json.hpp"
#include "store/jsonl_reader.hpp"
#include "store/run_db.hpp"

namespace {

namespace fs = std::filesystem;
using traceml::testing::expect_one_error_line;
using traceml::testing::ProcessResult;
using traceml::testing::read_file;
using traceml::testing::run_process;
using traceml::testing::TempDir;

const std::string kCli = TRACEML_CLI_PATH;
const fs::path kSample =
    fs::path(TRACEML_TEST_DATA_DIR) / "golden" / "data" / "single_input_bound.jsonl";

class ReportRunDb : public ::testing::Test {
 protected:
  /// A run directory whose database holds the sample's records, as the
  /// collector writes them, and a delivery with tracer stats for rank 0.
  void SetUp() override {
    const auto in = traceml::store::read_telemetry_jsonl(kSample.string());
    fs::create_directories(run_dir_);
    traceml::store::RunDbWriter w(db_.string());
    w.add(in.telemetry.run);
    for (const auto& r : in.telemetry.ranks)
      w.add(r);
    for (const auto& r : in.telemetry.steps)
      w.add(r);
    for (const auto& s : in.telemetry.system)
      w.add(s);
    for (const auto& s : in.telemetry.process)
      w.add(s);
    traceml::model::TracerStats t;
    t.strategy = "single_process";
    t.steps_recorded = static_cast<std::int64_t>(in.telemetry.steps.size());
    w.add(traceml::store::RankDelivery{0, t.steps_recorded, true, t});
    w.flush();
  }

  /// Runs SQL on the database with the plain SQLite API.
  void exec_sql(const std::string& sql) {
    sqlite3* db = nullptr;
    ASSERT_EQ(sqlite3_open(db_.c_str(), &db), SQLITE_OK);
    char* err = nullptr;
    EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &err), SQLITE_OK)
        << (err != nullptr ? err : "");
    sqlite3_free(err);
    sqlite3_close(db);
  }

  ProcessResult report() { return run_process({kCli, "report", run_dir_.string()}); }

  TempDir dir_;
  fs::path run_dir_ = dir_.path() / "logs" / "r1";
  fs::path db_ = run_dir_ / traceml::store::kRunDbFileName;
};

TEST_F(ReportRunDb, GoodDatabaseGivesTheSummary) {
  const ProcessResult r = report();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("Verdict: INPUT-BOUND"), std::string::npos) << r.out;
  const auto j = traceml::report::Json::parse(read_file(run_dir_ / "final_summary.json"));
  EXPECT_FALSE(j["tracer"].contains("strings_repaired"));
}

TEST_F(ReportRunDb, NegativeDurationIsOneErrorLine) {
  // Before the shared checks such a value was read into the analysis.
  traceml::testing::rewrite_step_block(
      db_.string(), 1, [](std::int64_t record, traceml::model::StepRecord& r) {
        if (record == 17) r.events.set(traceml::model::Event::InputWait, {-1e6, std::nullopt});
      });
  const ProcessResult r = report();
  expect_one_error_line(r, db_.string() +
                               ": table step_blocks, block 1, record 17: "
                               "'events.input_wait.cpu_ms' must be a finite number >= 0, got "
                               "-1e+06");
  EXPECT_FALSE(fs::exists(run_dir_ / "final_summary.json"));
}

TEST_F(ReportRunDb, TextInANumberColumnIsOneErrorLine) {
  exec_sql("UPDATE step_blocks SET rows = 'many' WHERE id = 1");
  expect_one_error_line(report(), db_.string() +
                                      ": table step_blocks, block 1: column 'rows' holds text "
                                      "\"many\", not an integer");
}

TEST_F(ReportRunDb, TruncatedStepBlockIsOneErrorLine) {
  exec_sql("UPDATE step_blocks SET data = substr(data, 1, 1000) WHERE id = 1");
  const ProcessResult r = report();
  ASSERT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(db_.string() + ": table step_blocks, block 1, record "), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find(": the block ends inside the record\n"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(run_dir_ / "final_summary.json"));
}

TEST_F(ReportRunDb, RankOutOfRangeIsOneErrorLine) {
  exec_sql("UPDATE process_samples SET global_rank = -7 WHERE id = 2");
  expect_one_error_line(
      report(),
      db_.string() +
          ": table process_samples, row 2: 'global_rank' must be an integer >= 0, got -7");
}

TEST_F(ReportRunDb, HostnameWithInvalidUtf8AndEscapeStillGivesTheSummary) {
  // "node" 0xFF ESC "[31m": the invalid byte used to make writing the summary
  // JSON throw (type_error.316), so the run could never be reported.
  exec_sql("UPDATE ranks SET hostname = CAST(x'6e6f6465ff1b5b33316d' AS TEXT)");
  const ProcessResult r = report();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  EXPECT_NE(r.out.find("Tracer: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("1 strings repaired (invalid UTF-8 or over 1024 bytes)"), std::string::npos)
      << r.out;
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "no raw ESC on the terminal";
  const std::string json = read_file(run_dir_ / "final_summary.json");
  // U+FFFD for the invalid byte; the ESC kept, escaped as JSON writes it.
  EXPECT_NE(json.find(R"("hostname": "node\ufffd\u001b[31m")"), std::string::npos) << json;
  const auto j = traceml::report::Json::parse(json);
  EXPECT_EQ(j["tracer"]["strings_repaired"], 1);
  EXPECT_EQ(read_file(run_dir_ / "final_summary.txt"), r.out);
  // The artifacts stay a pure function of the database.
  const ProcessResult again = report();
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(read_file(run_dir_ / "final_summary.json"), json);
}

}  // namespace
