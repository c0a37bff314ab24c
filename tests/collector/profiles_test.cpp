// The ranks' profiles into the run directory (collector/profiles): a file
// per capture, named once it is whole, that Perfetto and chrome://tracing
// open; chunks out of order, too many profiles and a rank that vanishes
// mid-profile are refused or said, never half a file under the final name.
#include "collector/profiles.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "../support/json_file.hpp"
#include "../support/subprocess.hpp"

namespace traceml::collector {
namespace {

namespace fs = std::filesystem;
using testing::load_json;
using testing::TempDir;

model::ProfileChunk chunk(int rank, std::int64_t index, bool last, int ops, std::int64_t first = 5,
                          std::int64_t last_step = 8) {
  model::ProfileChunk c;
  c.global_rank = rank;
  c.first_step = first;
  c.last_step = last_step;
  c.chunk = index;
  c.last = last ? 1 : 0;
  for (int i = 0; i < ops; ++i)
    c.ops.push_back(model::ProfileOp{"aten::addmm \"quoted\"", 1'796'553'490'000'000 + i, 3, 1,
                                     i % 2 ? std::optional<std::int64_t>(i) : std::nullopt, 0,
                                     i % 3 ? "[[32, 64]]" : ""});
  return c;
}

std::size_t files_in(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  return n;
}

/// The store took the chunk (not refused).
bool took(ProfileStore& store, model::ProfileChunk c) {
  return !store.take(std::move(c)).refused;
}

TEST(ProfileStore, ChunksInOrderMakeOneChromeTrace) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  EXPECT_TRUE(took(store, chunk(3, 0, false, 256)));
  // Not under its name until whole: only the hidden partial file.
  EXPECT_FALSE(fs::exists(tmp.path() / "profiles" / "rank3_steps5-8.json"));
  EXPECT_TRUE(took(store, chunk(3, 1, false, 256)));
  model::ProfileChunk end = chunk(3, 2, true, 10);
  end.ops_cut = 4;
  const ProfileStore::Taken last = store.take(std::move(end));
  EXPECT_FALSE(last.refused);
  // Its steps ran under the profiler: the run keeps them as such.
  ASSERT_TRUE(last.profiled);
  EXPECT_EQ(last.profiled->global_rank, 3);
  EXPECT_EQ(last.profiled->first_step, 5);
  EXPECT_EQ(last.profiled->last_step, 8);

  const fs::path file = tmp.path() / "profiles" / "rank3_steps5-8.json";
  const nlohmann::json j = load_json(file);
  ASSERT_TRUE(j.is_object()) << "not JSON";
  EXPECT_EQ(files_in(tmp.path() / "profiles"), 1u);  // the partial file is gone
  const auto& events = j["traceEvents"];
  ASSERT_EQ(events.size(), 1u + 522u);  // the process name, then every op
  EXPECT_EQ(events[0]["ph"], "M");
  const auto& op = events[2];
  EXPECT_EQ(op["name"], "aten::addmm \"quoted\"");
  EXPECT_EQ(op["ph"], "X");
  EXPECT_EQ(op["pid"], 3);
  EXPECT_EQ(op["tid"], 1);
  EXPECT_EQ(op["ts"], 1'796'553'490'000'001);
  EXPECT_EQ(op["dur"], 3);
  EXPECT_EQ(op["args"]["sequence"], 1);
  EXPECT_EQ(op["args"]["input_shapes"], "[[32, 64]]");
  const auto& meta = j["otherData"]["traceml"];
  EXPECT_EQ(meta["rank"], 3);
  EXPECT_EQ(meta["first_step"], 5);
  EXPECT_EQ(meta["last_step"], 8);
  EXPECT_EQ(meta["ops"], 522);
  EXPECT_EQ(meta["ops_cut"], 4);
  // As the summary reads it back.
  const auto infos = report::read_profile_infos(tmp.path().string());
  ASSERT_EQ(infos.size(), 1u);
  EXPECT_EQ(infos[0].path, "profiles/rank3_steps5-8.json");
  EXPECT_EQ(infos[0].ops, 522);
  EXPECT_EQ(report::read_profile_ops(file.string(), 1000).size(), 522u);
}

TEST(ProfileStore, AFailedCaptureGetsAFileThatSaysWhy) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  model::ProfileChunk failed = chunk(0, 0, true, 0);
  failed.error = "LibTorch's profiler did not start: already on";
  const ProfileStore::Taken t = store.take(std::move(failed));
  EXPECT_FALSE(t.refused);
  EXPECT_FALSE(t.profiled);  // no op: its steps ran without the profiler
  const nlohmann::json j = load_json(tmp.path() / "profiles" / "rank0_steps5-8.json");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["traceEvents"].size(), 1u);
  EXPECT_EQ(j["otherData"]["traceml"]["error"], "LibTorch's profiler did not start: already on");
  EXPECT_EQ(j["otherData"]["traceml"]["ops"], 0);
}

TEST(ProfileStore, AChunkOfNoOpenProfileIsRefused) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  EXPECT_FALSE(took(store, chunk(1, 1, false, 3)));  // no chunk 0 before it
  EXPECT_TRUE(took(store, chunk(1, 0, false, 3)));
  EXPECT_FALSE(took(store, chunk(1, 1, true, 3, 5, 9)));  // another profile's
  EXPECT_TRUE(took(store, chunk(1, 1, true, 3)));
  EXPECT_TRUE(fs::exists(tmp.path() / "profiles" / "rank1_steps5-8.json"));
}

TEST(ProfileStore, AChunkThatNeverCameEndsTheProfileWithWhatItHas) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  EXPECT_TRUE(took(store, chunk(1, 0, false, 3)));
  const ProfileStore::Taken gap = store.take(chunk(1, 2, false, 3));  // 1 is missing
  EXPECT_FALSE(gap.refused);
  ASSERT_TRUE(gap.profiled);  // its first chunk's steps did run under the profiler
  EXPECT_TRUE(took(store, chunk(1, 3, true, 3)));  // the rest is dropped, not refused
  const nlohmann::json j = load_json(tmp.path() / "profiles" / "rank1_steps5-8.json");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["otherData"]["traceml"]["ops"], 3);
  EXPECT_EQ(j["otherData"]["traceml"]["error"], "chunk 1 never came");
  EXPECT_EQ(files_in(tmp.path() / "profiles"), 1u);
}

TEST(ProfileStore, ARankHasAtMostEightProfiles) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  for (int i = 0; i < kMaxProfilesPerRank; ++i)
    EXPECT_TRUE(took(store, chunk(2, 0, true, 1, 10 * i + 1, 10 * i + 2)));
  EXPECT_FALSE(took(store, chunk(2, 0, true, 1, 500, 501)));
  EXPECT_FALSE(fs::exists(tmp.path() / "profiles" / "rank2_steps500-501.json"));
  EXPECT_TRUE(took(store, chunk(4, 0, true, 1)));  // another rank's are its own
  EXPECT_EQ(files_in(tmp.path() / "profiles"), std::size_t(kMaxProfilesPerRank) + 1);
}

TEST(ProfileStore, ARunHasAtMost256Profiles) {
  // A token holder naming one rank after another cannot make more.
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  for (int rank = 0; rank < kMaxRunProfiles; ++rank)
    ASSERT_TRUE(took(store, chunk(rank, 0, true, 1)));
  EXPECT_FALSE(took(store, chunk(int(kMaxRunProfiles), 0, true, 1)));
  EXPECT_EQ(files_in(tmp.path() / "profiles"), std::size_t(kMaxRunProfiles));
}

TEST(ProfileStore, AProfileCutShortIsWrittenWithWhatCameAndSaysSo) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  EXPECT_TRUE(took(store, chunk(6, 0, false, 5)));
  EXPECT_EQ(files_in(tmp.path() / "profiles"), 1u);  // the partial file
  const auto profiled = store.close_open();
  ASSERT_EQ(profiled.size(), 1u);
  EXPECT_EQ(profiled[0].global_rank, 6);
  const nlohmann::json j = load_json(tmp.path() / "profiles" / "rank6_steps5-8.json");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["otherData"]["traceml"]["ops"], 5);
  EXPECT_EQ(j["otherData"]["traceml"]["error"],
            "the rank's connection ended before its last chunk");
  EXPECT_EQ(files_in(tmp.path() / "profiles"), 1u);  // no partial file left
}

// Protocol 8: a rank says its capture began; the steps are profiled from
// then, once, and a profile that never comes is written as lost.
TEST(ProfileStore, ACaptureSaidBegunIsProfiledOnceAndCountedOnce) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  const ProfileStore::Taken began = store.began(model::ProfiledSteps{3, 5, 8}, "why it was asked");
  EXPECT_FALSE(began.refused);
  ASSERT_TRUE(began.profiled);
  EXPECT_EQ(began.profiled->first_step, 5);
  EXPECT_EQ(began.profiled->last_step, 8);
  // Its profile comes, a step shorter (training ended inside it): not
  // profiled a second time, and the reason said at its start is its own.
  EXPECT_FALSE(store.take(chunk(3, 0, false, 2, 5, 7)).profiled);
  const ProfileStore::Taken end = store.take(chunk(3, 1, true, 2, 5, 7));
  EXPECT_FALSE(end.refused);
  EXPECT_FALSE(end.profiled);
  const nlohmann::json j = load_json(tmp.path() / "profiles" / "rank3_steps5-7.json");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["otherData"]["traceml"]["ops"], 4);
  EXPECT_EQ(j["otherData"]["traceml"]["reason"], "why it was asked");
  // Nothing is said lost at the end, and the capture counted once: seven more fit.
  EXPECT_TRUE(store.close_open().empty());
  EXPECT_EQ(files_in(tmp.path() / "profiles"), 1u);
  for (int i = 1; i < kMaxProfilesPerRank; ++i)
    EXPECT_FALSE(store.began(model::ProfiledSteps{3, 100 * i, 100 * i + 1}).refused) << i;
  EXPECT_TRUE(store.began(model::ProfiledSteps{3, 1000, 1001}).refused);
}

TEST(ProfileStore, ACaptureWhoseProfileNeverCameIsWrittenAsLost) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  ASSERT_TRUE(store.began(model::ProfiledSteps{1, 100, 300}, "asked").profiled);
  EXPECT_FALSE(fs::exists(tmp.path() / "profiles"));  // nothing before the end
  EXPECT_TRUE(store.close_open().empty());            // its steps were returned when it began
  const nlohmann::json j = load_json(tmp.path() / "profiles" / "rank1_steps100-300.json");
  ASSERT_TRUE(j.is_object()) << "not JSON";
  EXPECT_EQ(j["traceEvents"].size(), 1u);  // the process name alone
  EXPECT_EQ(j["otherData"]["traceml"]["ops"], 0);
  EXPECT_EQ(j["otherData"]["traceml"]["error"], ProfileStore::kNeverCame);
  EXPECT_EQ(j["otherData"]["traceml"]["reason"], "asked");
  EXPECT_EQ(files_in(tmp.path() / "profiles"), 1u);
}

TEST(ProfileStore, AProfileItsRankKeptIsNotSaidLostNorReplaced) {
  TempDir tmp;
  // The rank kept steps 100-206 beside itself (training ended inside the
  // capture, and the run's end came before it could send them), and a
  // second one under the very name a lost profile would take.
  for (const auto& [first, last] : {std::pair{100, 206}, std::pair{400, 409}}) {
    report::ProfileTraceWriter kept(tmp.path().string(), 1, first, last, 1 << 20);
    kept.add(model::ProfileOp{"aten::mm", 1'796'553'490'000'000, 3, 1, std::nullopt, 0, ""});
    kept.finish(0, {});
  }
  ProfileStore store(tmp.path().string());
  ASSERT_TRUE(store.began(model::ProfiledSteps{1, 100, 300}).profiled);
  ASSERT_TRUE(store.began(model::ProfiledSteps{1, 400, 409}).profiled);
  store.close_open();
  EXPECT_EQ(files_in(tmp.path() / "profiles"), 2u);
  EXPECT_FALSE(fs::exists(tmp.path() / "profiles" / "rank1_steps100-300.json"));
  EXPECT_EQ(
      load_json(tmp.path() / "profiles" / "rank1_steps400-409.json")["otherData"]["traceml"]["ops"],
      1);
}

// The capture meant to end at step 8, but step 8 was left by an exception
// and the profiler went off at step 10: steps 9 and 10 ran under it too.
TEST(ProfileStore, StepsPastTheOnesSaidBegunAreProfiledWhenTheProfileComes) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  ASSERT_TRUE(store.began(model::ProfiledSteps{2, 5, 8}).profiled);
  EXPECT_FALSE(store.take(chunk(2, 0, false, 1, 5, 10)).profiled);
  const ProfileStore::Taken end = store.take(chunk(2, 1, true, 1, 5, 10));
  ASSERT_TRUE(end.profiled);
  EXPECT_EQ(end.profiled->first_step, 9);
  EXPECT_EQ(end.profiled->last_step, 10);
}

}  // namespace
}  // namespace traceml::collector
