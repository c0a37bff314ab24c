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

TEST(ProfileStore, ChunksInOrderMakeOneChromeTrace) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  EXPECT_FALSE(store.take(chunk(3, 0, false, 256)));
  // Not under its name until whole: only the hidden partial file.
  EXPECT_FALSE(fs::exists(tmp.path() / "profiles" / "rank3_steps5-8.json"));
  EXPECT_FALSE(store.take(chunk(3, 1, false, 256)));
  model::ProfileChunk end = chunk(3, 2, true, 10);
  end.ops_cut = 4;
  EXPECT_FALSE(store.take(std::move(end)));

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

  const auto outcomes = store.outcomes(true);
  ASSERT_EQ(outcomes.size(), 1u);
  EXPECT_TRUE(outcomes[0].written);
  EXPECT_EQ(outcomes[0].file.path, "profiles/rank3_steps5-8.json");
  EXPECT_EQ(outcomes[0].file.ops, 522);
}

TEST(ProfileStore, AFailedCaptureGetsAFileThatSaysWhy) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  model::ProfileChunk failed = chunk(0, 0, true, 0);
  failed.error = "LibTorch's profiler did not start: already on";
  EXPECT_FALSE(store.take(std::move(failed)));
  const nlohmann::json j = load_json(tmp.path() / "profiles" / "rank0_steps5-8.json");
  ASSERT_TRUE(j.is_object());
  EXPECT_EQ(j["traceEvents"].size(), 1u);
  EXPECT_EQ(j["otherData"]["traceml"]["error"], "LibTorch's profiler did not start: already on");
  EXPECT_EQ(j["otherData"]["traceml"]["ops"], 0);
}

TEST(ProfileStore, ChunksOutOfOrderAreRefused) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  EXPECT_TRUE(store.take(chunk(1, 1, false, 3)));  // no chunk 0 before it
  EXPECT_FALSE(store.take(chunk(1, 0, false, 3)));
  EXPECT_TRUE(store.take(chunk(1, 2, false, 3)));       // 1 is missing
  EXPECT_TRUE(store.take(chunk(1, 1, true, 3, 5, 9)));  // another profile's
  EXPECT_FALSE(store.take(chunk(1, 1, true, 3)));
  EXPECT_TRUE(fs::exists(tmp.path() / "profiles" / "rank1_steps5-8.json"));
}

TEST(ProfileStore, ARankHasAtMostEightProfiles) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  for (int i = 0; i < kMaxProfilesPerRank; ++i)
    EXPECT_FALSE(store.take(chunk(2, 0, true, 1, 10 * i + 1, 10 * i + 2)));
  EXPECT_TRUE(store.take(chunk(2, 0, true, 1, 500, 501)));
  EXPECT_FALSE(fs::exists(tmp.path() / "profiles" / "rank2_steps500-501.json"));
  EXPECT_FALSE(store.take(chunk(4, 0, true, 1)));  // another rank's are its own
  EXPECT_EQ(files_in(tmp.path() / "profiles"), std::size_t(kMaxProfilesPerRank) + 1);
}

TEST(ProfileStore, AProfileCutShortLeavesNoFileAndIsSaid) {
  TempDir tmp;
  ProfileStore store(tmp.path().string());
  EXPECT_FALSE(store.take(chunk(6, 0, false, 5)));
  auto open = store.outcomes(false);  // while the run goes: still open
  ASSERT_EQ(open.size(), 1u);
  EXPECT_FALSE(open[0].written);
  EXPECT_EQ(files_in(tmp.path() / "profiles"), 1u);
  const auto ended = store.outcomes(true);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_FALSE(ended[0].written);
  EXPECT_EQ(ended[0].file.error, "the rank's connection ended before its last chunk");
  EXPECT_EQ(files_in(tmp.path() / "profiles"), 0u);  // no half file left
}

}  // namespace
}  // namespace traceml::collector
