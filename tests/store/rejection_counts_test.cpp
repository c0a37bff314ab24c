// Refusal counts in a real run database: stored after the writer closed the
// file, replaced by a later write, absent from files written before them, and
// read back safely from a file someone edited.
#include "store/rejection_counts.hpp"

#include <gtest/gtest.h>

#include <string>

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
  w.add(store::RejectedConnection{1.0, "127.0.0.1:5",
                                  "wrong run token (the connection is not from this run)"});
  w.flush();
  return path;
}

TEST(RejectionCounts, AbsentFromAFileWrittenBeforeThem) {
  TempDir dir;
  const std::string path = new_run_db(dir);
  EXPECT_EQ(read_rejection_counts(path), std::nullopt);
  // The rest of the file reads as before.
  EXPECT_EQ(read_run_db(path).rejected.size(), 1u);
}

TEST(RejectionCounts, RoundTripAndALaterWriteReplaces) {
  TempDir dir;
  const std::string path = new_run_db(dir);
  const RejectionCounts counts = {{"closed_before_hello", 123456}, {"wrong_token", 1}};
  write_rejection_counts(path, counts);
  EXPECT_EQ(read_rejection_counts(path), counts);
  EXPECT_EQ(total_rejections(counts), 123457);
  write_rejection_counts(path, {});
  // Present and empty: the counts are complete, nobody was refused.
  EXPECT_EQ(read_rejection_counts(path), RejectionCounts{});
  EXPECT_EQ(read_run_db(path).rejected.size(), 1u);
}

TEST(RejectionCounts, EditedFileReadsSafely) {
  TempDir dir;
  const std::string path = new_run_db(dir);
  write_rejection_counts(path, {{"wrong_token", 2}});
  exec_sql(path,
           "INSERT INTO rejection_counts VALUES (CAST(x'626164ff' AS TEXT), 3), ('negative', -5), "
           "(NULL, 1)");
  const auto counts = read_rejection_counts(path);
  ASSERT_TRUE(counts);
  EXPECT_EQ(*counts, (RejectionCounts{
                         {"", 1}, {"bad\xEF\xBF\xBD", 3}, {"negative", 0}, {"wrong_token", 2}}));
}

TEST(RejectionCounts, MissingFileIsOneLineError) {
  TempDir dir;
  const std::string path = (dir.path() / "none.db").string();
  try {
    (void)read_rejection_counts(path);
    FAIL() << "read a file that does not exist";
  } catch (const RunDbError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind(path + ": ", 0), 0u) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace traceml::store
