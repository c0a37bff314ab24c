// A run directory's profile files as traceml reads them back (the summary's
// list, the timeline's operators): what it wrote, and what it refuses of a
// file someone else put or edited there (a FIFO, a huge line, numbers past
// the bounds, a name that is not its metadata's).
#include "report/profile_trace.hpp"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "../support/subprocess.hpp"
#include "report/atomic_file.hpp"

namespace traceml::report {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

const char* kTrailer =
    "\n],\"displayTimeUnit\":\"ms\",\"otherData\":{\"traceml\":{\"rank\":0,\"first_step\":1,"
    "\"last_step\":2,\"ops\":1,\"ops_cut\":0}}}\n";

void write(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text;
}

TEST(ProfileTrace, WhatTheWriterWritesReadsBack) {
  TempDir tmp;
  {
    ProfileTraceWriter w(tmp.path().string(), 2, 7, 9, 1 << 20);
    w.add(model::ProfileOp{"aten::mm", 1'000'000, 30, 3, 12, 0, "[[2, 3], [3, 4]]"});
    w.add(model::ProfileOp{"a \"quoted\"\nname", 1'000'010, 5, 3, std::nullopt, 1, ""});
    w.flush();
    const ProfileFileInfo info = w.finish(2, "partial");
    EXPECT_EQ(info.path, "profiles/rank2_steps7-9.json");
  }
  const auto infos = read_profile_infos(tmp.path().string());
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].rank, 2);
  EXPECT_EQ(infos[0].first_step, 7);
  EXPECT_EQ(infos[0].last_step, 9);
  EXPECT_EQ(infos[0].ops, 2);
  EXPECT_EQ(infos[0].ops_cut, 2);
  EXPECT_EQ(infos[0].error, "partial");
  const auto ops = read_profile_ops((tmp.path() / infos[0].path).string(), 100);
  ASSERT_EQ(ops.size(), 2u);
  EXPECT_EQ(ops[0].name, "aten::mm");
  EXPECT_EQ(ops[0].sequence, 12);
  EXPECT_EQ(ops[0].shapes, "[[2, 3], [3, 4]]");
  EXPECT_EQ(ops[1].name, "a \"quoted\"\nname");  // one line in the file all the same
  EXPECT_EQ(ops[1].gpu, 1);
  EXPECT_EQ(read_profile_ops((tmp.path() / infos[0].path).string(), 1).size(), 1u);
}

TEST(ProfileTrace, AFileTooBigIsCutAndSaysHowMuch) {
  TempDir tmp;
  ProfileTraceWriter w(tmp.path().string(), 0, 1, 1, 1000);
  for (int i = 0; i < 100; ++i)
    w.add(model::ProfileOp{"aten::add", 1'000'000 + i, 1, 1, std::nullopt, 0, ""});
  w.flush();
  const ProfileFileInfo info = w.finish(0, "");
  EXPECT_GT(info.ops, 0);
  EXPECT_EQ(info.ops + info.ops_cut, 100);
  EXPECT_LE(fs::file_size(tmp.path() / info.path), 1000u + 300u);  // the trailer after the cut
}

TEST(ProfileTrace, AWriterNeverFinishedLeavesNoFile) {
  TempDir tmp;
  {
    ProfileTraceWriter w(tmp.path().string(), 0, 1, 1, 1000);
    w.add(model::ProfileOp{"aten::add", 1, 1, 1, std::nullopt, 0, ""});
    w.flush();
  }
  EXPECT_TRUE(fs::is_empty(tmp.path() / "profiles"));
}

TEST(ProfileTrace, AFileFinishedWithoutReplacingLeavesTheOneThereWhole) {
  TempDir tmp;
  {
    ProfileTraceWriter first(tmp.path().string(), 2, 5, 9, 1 << 20);
    first.add(model::ProfileOp{"aten::mm", 1'000'000, 1, 1, std::nullopt, 0, ""});
    first.finish(0, "");
  }
  const std::string before = testing::read_file(tmp.path() / "profiles" / "rank2_steps5-9.json");
  {
    ProfileTraceWriter second(tmp.path().string(), 2, 5, 9, 1 << 20);
    EXPECT_THROW(second.finish(0, "lost", /*replace=*/false), WriteError);
  }
  EXPECT_EQ(testing::read_file(tmp.path() / "profiles" / "rank2_steps5-9.json"), before);
  // Its partial file went with it; where no file is, it takes the name.
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path() / "profiles"), {}), 1);
  ProfileTraceWriter third(tmp.path().string(), 2, 10, 12, 1 << 20);
  EXPECT_EQ(third.finish(0, "lost", /*replace=*/false).error, "lost");
  EXPECT_EQ(std::distance(fs::directory_iterator(tmp.path() / "profiles"), {}), 2);
}

TEST(ProfileTrace, TheProfilersOwnTraceIsListedWithItsProfileNotAsOne) {
  TempDir tmp;
  for (const std::int64_t first : {5, 20}) {
    ProfileTraceWriter w(tmp.path().string(), 1, first, first + 2, 1 << 20);
    w.add(model::ProfileOp{"aten::mm", 1'000'000, 1, 1, std::nullopt, 0, ""});
    w.finish(0, "");
  }
  std::ofstream(tmp.path() / "profiles" / native_profile_file_name(1, 5, 7)) << "{}";
  const auto infos = read_profile_infos(tmp.path().string());
  ASSERT_EQ(infos.size(), 2u);
  EXPECT_EQ(infos[0].native_path, "profiles/rank1_steps5-7.kineto.json");
  EXPECT_EQ(infos[1].native_path, "");
  const auto list = profiles_json(infos);
  EXPECT_EQ(list[0]["kineto_trace"], "profiles/rank1_steps5-7.kineto.json");
  EXPECT_TRUE(list[1]["kineto_trace"].is_null());
}

TEST(ProfileTrace, FilesThatAreNotOursAreLeftOut) {
  TempDir tmp;
  const fs::path dir = tmp.path() / "profiles";
  // A FIFO under a profile's name would block a reader that opened it.
  fs::create_directories(dir);
  ASSERT_EQ(::mkfifo((dir / "rank0_steps1-2.json").c_str(), 0600), 0);
  // Its metadata names other steps than its name.
  write(dir / "rank1_steps1-2.json", std::string("{\"traceEvents\":[\n{}") + kTrailer);
  // No metadata at all.
  write(dir / "rank2_steps1-2.json", "{\"traceEvents\":[]}");
  // A symbolic link to a good file.
  write(tmp.path() / "elsewhere.json", std::string("{\"traceEvents\":[\n{}") + kTrailer);
  fs::create_symlink(tmp.path() / "elsewhere.json", dir / "rank0_steps3-4.json");
  EXPECT_TRUE(read_profile_infos(tmp.path().string()).empty());
  EXPECT_TRUE(read_profile_ops((dir / "rank0_steps1-2.json").string(), 10).empty());
  EXPECT_TRUE(read_profile_ops((dir / "rank0_steps3-4.json").string(), 10).empty());
}

TEST(ProfileTrace, OpsPastTheBoundsOrOnHugeLinesAreSkipped) {
  TempDir tmp;
  const fs::path file = tmp.path() / "profiles" / "rank0_steps1-2.json";
  const std::string good = R"({"name":"ok","ph":"X","pid":0,"tid":1,"ts":10,"dur":2})";
  write(file,
        "{\"traceEvents\":[\n" + good + ",\n" +
            R"({"name":"x","ph":"X","tid":1,"ts":9223372036854775807,"dur":9223372036854775807})" +
            ",\n" + R"({"name":"x","ph":"X","tid":2147483647,"ts":1,"dur":1})" + ",\n" +
            R"({"name":"x","ph":"X","tid":1,"ts":-5,"dur":1})" + ",\n" + R"({"name":")" +
            std::string(100000, 'a') + R"(","ph":"X","tid":1,"ts":1,"dur":1})" + ",\n" +
            R"({"name":"x","ph":5,"cat":7,"tid":1,"ts":1,"dur":1})" + ",\n" +
            R"({"name":"x","ph":"X","cat":[],"tid":1,"ts":1,"dur":1})" + ",\n" + good + kTrailer);
  const auto ops = read_profile_ops(file.string(), 100);
  ASSERT_EQ(ops.size(), 3u);  // the one whose "cat" is no string is a CPU op
  EXPECT_EQ(ops[0].name, "ok");
  EXPECT_EQ(ops[1].gpu, 0);
  EXPECT_EQ(ops[2].name, "ok");
}

}  // namespace
}  // namespace traceml::report
