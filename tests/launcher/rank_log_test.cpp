#include "launcher/rank_log.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../support/subprocess.hpp"

namespace traceml::launcher {
namespace {

namespace fs = std::filesystem;
using testing::read_file;
using testing::TempDir;

TEST(RankLog, KeepsEachLineAsWritten) {
  TempDir dir;
  const std::string path = (dir.path() / "rank0.log").string();
  RankLog log(path);
  log.write("first\n");
  log.write("second\n");
  EXPECT_EQ(read_file(path), "first\nsecond\n");
  EXPECT_FALSE(log.rotated());
  EXPECT_FALSE(log.error());
}

TEST(RankLog, AtItsCapTheFileBecomesDotOneAndTheLatestOutputIsKept) {
  TempDir dir;
  const std::string path = (dir.path() / "rank1.log").string();
  RankLog log(path, 20);
  for (int i = 0; i < 10; ++i)
    log.write("line " + std::to_string(i) + "\n");  // 7 bytes each
  EXPECT_TRUE(log.rotated());
  // Never more than twice the cap on disk, and the last line always kept.
  EXPECT_LE(fs::file_size(path) + fs::file_size(path + ".1"), 40u);
  // Two 7-byte lines fit the cap of 20; the third starts a new file.
  EXPECT_EQ(read_file(path), "line 8\nline 9\n");
  EXPECT_EQ(read_file(path + ".1"), "line 6\nline 7\n");
  EXPECT_FALSE(fs::exists(path + ".2"));
}

TEST(RankLog, ALineLongerThanTheCapIsStillKeptWhole) {
  TempDir dir;
  const std::string path = (dir.path() / "rank0.log").string();
  RankLog log(path, 4);
  log.write("a long line\n");
  EXPECT_EQ(read_file(path), "a long line\n");
}

TEST(RankLog, AFullDiskEndsTheLogWithOneErrorAndNothingElse) {
  RankLog log("/dev/full");  // every write fails with ENOSPC
  log.write("lost\n");
  ASSERT_TRUE(log.error());
  EXPECT_NE(log.error()->find("cannot write"), std::string::npos) << *log.error();
  log.write("also lost\n");  // quietly: the log is off
}

TEST(RankLog, ADirectoryThatCannotBeWrittenIsAnErrorNotACrash) {
  RankLog log("/nonexistent-dir/rank0.log");
  ASSERT_TRUE(log.error());
  EXPECT_NE(log.error()->find("cannot open"), std::string::npos);
  log.write("nowhere\n");
}

}  // namespace
}  // namespace traceml::launcher
