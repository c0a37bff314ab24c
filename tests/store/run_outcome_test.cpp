// The run outcome in a real run database: how the program ended and its
// stalls round-trip, a database from before stalls has none, and a stored
// stall no collector writes is an error that names its row.
#include "store/run_outcome.hpp"

#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <utility>

#include "../support/sql_edit.hpp"
#include "../support/subprocess.hpp"
#include "store/run_db.hpp"

namespace traceml::store {
namespace {

using testing::exec_sql;
using testing::TempDir;

std::string new_run_db(const TempDir& dir) {
  const std::string path = (dir.path() / kRunDbFileName).string();
  RunDbWriter w(path);
  w.flush();
  return path;
}

RunOutcome hung_run() {
  RunOutcome o;
  o.status = model::RunStatus::Interrupted;
  o.exit_code = 130;
  o.ranks = {{0, 130, 2, true, 1500, model::LoopPhase::Backward, 7.5e6},
             {1, 137, 9, true, std::nullopt, std::nullopt, std::nullopt}};
  model::Stall silent;
  silent.global_rank = 1;
  silent.kind = "silent";
  silent.step = 812;
  silent.phase = model::LoopPhase::Backward;
  silent.start = 1764892800.5;
  silent.duration_s = 12.25;
  silent.others_waiting = 1;
  silent.from_black_box = true;
  model::Stall stalled;
  stalled.global_rank = 0;
  stalled.kind = "stalled";
  stalled.step = 813;
  stalled.start = 1764892801.0;
  stalled.duration_s = 11.5;
  stalled.resumed = true;
  o.stalls = {silent, stalled};
  return o;
}

TEST(RunOutcome, StallsRoundTripInTheOrderTheyBegan) {
  TempDir dir;
  const std::string path = new_run_db(dir);
  write_run_outcome(path, hung_run());
  const auto back = read_run_outcome(path);
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, model::RunStatus::Interrupted);
  ASSERT_EQ(back->stalls.size(), 2u);
  const model::Stall& s = back->stalls[0];
  EXPECT_EQ(s.global_rank, 1);
  EXPECT_EQ(s.kind, "silent");
  EXPECT_EQ(s.step, 812);
  EXPECT_EQ(s.phase, model::LoopPhase::Backward);
  EXPECT_DOUBLE_EQ(s.start, 1764892800.5);
  EXPECT_DOUBLE_EQ(s.duration_s, 12.25);
  EXPECT_FALSE(s.resumed);
  EXPECT_EQ(s.others_waiting, 1);
  EXPECT_TRUE(s.from_black_box);
  EXPECT_FALSE(back->stalls[1].from_black_box);
  EXPECT_EQ(back->stalls[1].phase, std::nullopt);
  EXPECT_TRUE(back->stalls[1].resumed);
  EXPECT_EQ(back->stalls[1].others_waiting, std::nullopt);
  // A second write replaces the first.
  RunOutcome calm = hung_run();
  calm.stalls.clear();
  write_run_outcome(path, calm);
  EXPECT_TRUE(read_run_outcome(path)->stalls.empty());
}

TEST(RunOutcome, ADatabaseFromBeforeStallsHasNone) {
  TempDir dir;
  const std::string path = new_run_db(dir);
  write_run_outcome(path, hung_run());
  exec_sql(path, "DROP TABLE run_stalls");
  const auto back = read_run_outcome(path);
  ASSERT_TRUE(back);
  EXPECT_TRUE(back->stalls.empty());
  EXPECT_EQ(back->ranks.size(), 2u);
}

TEST(RunOutcome, WhereEachRankEndedRoundTrips) {
  TempDir dir;
  const std::string path = new_run_db(dir);
  write_run_outcome(path, hung_run());
  const auto back = read_run_outcome(path);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->ranks.size(), 2u);
  EXPECT_EQ(back->ranks[0].steps_completed, 1500);
  EXPECT_EQ(back->ranks[0].phase, model::LoopPhase::Backward);
  EXPECT_EQ(back->ranks[0].rss_bytes, 7.5e6);
  EXPECT_EQ(back->ranks[1].steps_completed, std::nullopt);
  EXPECT_EQ(back->ranks[1].phase, std::nullopt);
  EXPECT_EQ(back->ranks[1].rss_bytes, std::nullopt);
}

// A run database of an earlier build has neither the ranks' positions nor
// the stalls' source: they read as absent, the rest as stored.
TEST(RunOutcome, ADatabaseFromBeforeTheBlackBoxReadsWithoutIt) {
  TempDir dir;
  const std::string path = new_run_db(dir);
  write_run_outcome(path, hung_run());
  exec_sql(path,
           "ALTER TABLE rank_exits DROP COLUMN rss_bytes; ALTER TABLE rank_exits DROP COLUMN phase;"
           " ALTER TABLE rank_exits DROP COLUMN steps_completed;"
           " ALTER TABLE run_stalls DROP COLUMN from_black_box");
  const auto back = read_run_outcome(path);
  ASSERT_TRUE(back);
  ASSERT_EQ(back->ranks.size(), 2u);
  EXPECT_EQ(back->ranks[0].exit_code, 130);
  EXPECT_EQ(back->ranks[0].steps_completed, std::nullopt);
  ASSERT_EQ(back->stalls.size(), 2u);
  EXPECT_EQ(back->stalls[0].step, 812);
  EXPECT_FALSE(back->stalls[0].from_black_box);
}

/// Each `sql` edit of a stored outcome makes reading it fail with one line
/// that holds "table TABLE, " and the case's expected words.
void expect_refused(const char* table,
                    std::initializer_list<std::pair<const char*, const char*>> cases) {
  for (const auto& [sql, expected] : cases) {
    TempDir dir;
    const std::string path = new_run_db(dir);
    write_run_outcome(path, hung_run());
    exec_sql(path, sql);
    try {
      (void)read_run_outcome(path);
      ADD_FAILURE() << sql << " was read without an error";
    } catch (const RunDbError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("table " + std::string(table) + ", " + expected), std::string::npos)
          << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(RunOutcome, APositionNoLauncherWritesIsAnErrorNamingItsRank) {
  expect_refused(
      "rank_exits",
      {{"UPDATE rank_exits SET phase = 'lunch' WHERE global_rank = 0", "rank 0: 'phase'"},
       {"UPDATE rank_exits SET steps_completed = -2 WHERE global_rank = 1",
        "rank 1: 'steps_completed'"},
       {"UPDATE rank_exits SET rss_bytes = -1 WHERE global_rank = 0", "rank 0: 'rss_bytes'"}});
}

TEST(RunOutcome, AStallNoCollectorWritesIsAnErrorNamingItsRow) {
  expect_refused(
      "run_stalls",
      {{"UPDATE run_stalls SET kind = 'asleep' WHERE rowid = 2", "row 2: 'kind'"},
       {"UPDATE run_stalls SET phase = 'lunch' WHERE rowid = 1", "row 1: 'phase'"},
       {"UPDATE run_stalls SET duration_s = -1 WHERE rowid = 1", "row 1: 'duration_s'"},
       {"UPDATE run_stalls SET global_rank = -3 WHERE rowid = 2", "row 2: 'global_rank'"},
       {"UPDATE run_stalls SET start = 1e999 WHERE rowid = 1", "row 1: 'start'"}});
}

TEST(RunOutcome, EveryStatusRoundTripsThroughItsWord) {
  for (const model::RunStatus status :
       {model::RunStatus::Completed, model::RunStatus::Failed, model::RunStatus::Interrupted,
        model::RunStatus::TimedOut}) {
    TempDir dir;
    const std::string path = new_run_db(dir);
    RunOutcome o = hung_run();
    o.status = status;
    write_run_outcome(path, o);
    EXPECT_EQ(read_run_outcome(path)->status, status) << model::word(status);
  }
}

TEST(RunOutcome, AStatusNoCollectorWritesIsAnError) {
  for (const char* sql :
       {"UPDATE run_outcome SET status = 'hung'", "UPDATE run_outcome SET status = 'Completed'",
        "UPDATE run_outcome SET status = NULL"}) {
    TempDir dir;
    const std::string path = new_run_db(dir);
    write_run_outcome(path, hung_run());
    // The NOT NULL column cannot hold NULL: a table made by hand can.
    if (std::string(sql).find("NULL") != std::string::npos)
      exec_sql(path,
               "DROP TABLE run_outcome; CREATE TABLE run_outcome (status TEXT, exit_code INTEGER "
               "NOT NULL, failed_rank INTEGER); INSERT INTO run_outcome VALUES ('failed', 1, "
               "NULL)");
    exec_sql(path, sql);
    try {
      (void)read_run_outcome(path);
      ADD_FAILURE() << sql << " was read without an error";
    } catch (const RunDbError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("table run_outcome: 'status' is not a run status"), std::string::npos)
          << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
    }
  }
}

TEST(RunOutcome, MoreStallsThanACollectorKeepsIsRefused) {
  TempDir dir;
  const std::string path = new_run_db(dir);
  write_run_outcome(path, hung_run());
  exec_sql(path,
           "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 5000) "
           "INSERT INTO run_stalls SELECT 0, 'silent', 1, NULL, 1.0, 1.0, 0, NULL, 0 FROM n");
  EXPECT_THROW((void)read_run_outcome(path), RunDbError);
}

}  // namespace
}  // namespace traceml::store
