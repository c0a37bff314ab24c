// The profile capture of --profile-steps on the training thread's step
// edges (runtime/profile_capture), over hooks that stand in for LibTorch's
// profiler: when it goes on and off, what the sender gets, and what a
// failure costs (a chunk that says why, and nothing else).
#include "runtime/profile_capture.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/subprocess.hpp"

namespace traceml::runtime {
namespace {

/// What the fake profiler saw, and what it will record.
struct Fake {
  int starts = 0;
  int stops = 0;
  std::thread::id thread;
  const char* start_failure = nullptr;
  std::vector<detail::ProfiledOp> ops;  // names point to static strings
};
Fake* g_fake = nullptr;

const char* fake_start() noexcept {
  ++g_fake->starts;
  g_fake->thread = std::this_thread::get_id();
  return g_fake->start_failure;
}
const char* fake_stop(void** capture) noexcept {
  ++g_fake->stops;
  *capture = new std::vector<detail::ProfiledOp>(g_fake->ops);
  return nullptr;
}
void fake_read(void* capture, detail::ProfiledOpSink sink, void* context) noexcept {
  auto* ops = static_cast<std::vector<detail::ProfiledOp>*>(capture);
  for (const auto& op : *ops)
    sink(context, op);
  delete ops;
}

/// The profiler's own trace: the ops' count, as a file (what Kineto's save
/// writes is its own business); a reason instead when `g_save_failure`.
const char* g_save_failure = nullptr;
const char* fake_save(void* capture, const char* path) noexcept {
  if (g_save_failure != nullptr) return g_save_failure;
  std::ofstream(path) << "{\"ops\":"
                      << static_cast<std::vector<detail::ProfiledOp>*>(capture)->size() << "}";
  return nullptr;
}

std::vector<std::string> g_warnings;
void keep_warning(const std::string& line) {
  g_warnings.push_back(line);
}
std::vector<std::string> g_notes;
void keep_note(const std::string& line) {
  g_notes.push_back(line);
}

class ProfileCaptureTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_fake = &fake_;
    g_warnings.clear();
    detail::ProfilerHooks hooks;
    hooks.start = &fake_start;
    hooks.stop = &fake_stop;
    hooks.read = &fake_read;
    detail::set_profiler_hooks(hooks);
  }
  void TearDown() override {
    detail::set_profiler_hooks(detail::ProfilerHooks{});
    g_fake = nullptr;
  }
  /// Steps 1..n through the capture, as the step scope calls it.
  static void run_steps(ProfileCapture& c, std::int64_t from, std::int64_t to) {
    for (std::int64_t s = from; s <= to; ++s) {
      c.at_step_begin(s);
      c.at_step_end(s);
    }
  }
  static std::vector<model::ProfileChunk> chunks(ProfileCapture& c) {
    std::vector<model::ProfileChunk> out;
    model::ProfileChunk chunk;
    while (c.next_chunk(chunk))
      out.push_back(chunk);
    return out;
  }
  Fake fake_;
  timing::WallMapping wall_;
};

detail::ProfiledOp op(const char* name, std::int64_t start_us, std::int64_t seq = -1) {
  detail::ProfiledOp o;
  o.name = name;
  o.start_us = start_us;
  o.duration_us = 5;
  o.thread = 1;
  o.sequence = seq;
  o.shapes = "[[2, 3]]";
  return o;
}

TEST_F(ProfileCaptureTest, OnAtTheFirstStepBeginOffAtTheLastStepEnd) {
  const std::int64_t now_us = std::int64_t(timing::wall_seconds() * 1e6);
  fake_.ops = {op("aten::mm", now_us + 200, 4), op("aten::relu", now_us + 100)};
  ProfileCapture c(ProfileRange{3, 5}, 2, wall_, &keep_warning);
  run_steps(c, 1, 2);
  EXPECT_EQ(fake_.starts, 0);
  model::ProfiledSteps began;
  EXPECT_FALSE(c.next_began(began));
  c.at_step_begin(3);
  EXPECT_EQ(fake_.starts, 1);
  EXPECT_EQ(fake_.thread, std::this_thread::get_id());  // on the training thread
  EXPECT_FALSE(c.waiting());
  // The steps it means to capture, for the collector, once.
  ASSERT_TRUE(c.next_began(began));
  EXPECT_EQ(began.global_rank, 2);
  EXPECT_EQ(began.first_step, 3);
  EXPECT_EQ(began.last_step, 5);
  EXPECT_FALSE(c.next_began(began));
  c.at_step_end(3);
  run_steps(c, 4, 4);
  EXPECT_EQ(fake_.stops, 0);
  c.at_step_begin(5);
  c.at_step_end(5);
  EXPECT_EQ(fake_.stops, 1);
  run_steps(c, 6, 20);  // once only
  EXPECT_EQ(fake_.starts, 1);
  EXPECT_EQ(fake_.stops, 1);

  ASSERT_TRUE(c.waiting());
  const auto got = chunks(c);
  ASSERT_EQ(got.size(), 1u);
  const model::ProfileChunk& p = got[0];
  EXPECT_EQ(p.global_rank, 2);
  EXPECT_EQ(p.first_step, 3);
  EXPECT_EQ(p.last_step, 5);
  EXPECT_EQ(p.chunk, 0);
  EXPECT_EQ(p.last, 1);
  EXPECT_TRUE(p.error.empty());
  EXPECT_FALSE(p.ops_cut);
  ASSERT_EQ(p.ops.size(), 2u);
  EXPECT_EQ(p.ops[0].name, "aten::relu");  // in time order
  EXPECT_EQ(p.ops[1].name, "aten::mm");
  EXPECT_EQ(p.ops[1].sequence, 4);
  EXPECT_FALSE(p.ops[0].sequence);
  EXPECT_EQ(p.ops[0].shapes, "[[2, 3]]");
  // Moved onto traceml's clock: the same unix time, to the offset between
  // two clocks read back to back (well under a millisecond here).
  EXPECT_NEAR(double(p.ops[0].start_us), double(now_us + 100), 1000.0);
  EXPECT_EQ(p.ops[1].start_us - p.ops[0].start_us, 100);
  EXPECT_FALSE(c.waiting());
  EXPECT_TRUE(g_warnings.empty());
}

TEST_F(ProfileCaptureTest, AProfileTravelsInChunksOfAtMost256Ops) {
  for (int i = 0; i < 600; ++i)
    fake_.ops.push_back(op("aten::add", 1'000'000 + i));
  ProfileCapture c(ProfileRange{1, 1}, 0, wall_, &keep_warning);
  run_steps(c, 1, 1);
  const auto got = chunks(c);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[0].ops.size(), 256u);
  EXPECT_EQ(got[1].ops.size(), 256u);
  EXPECT_EQ(got[2].ops.size(), 88u);
  for (std::size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].chunk, std::int64_t(i));
    EXPECT_EQ(got[i].last, i == 2 ? 1 : 0);
  }
}

// Where the hooks can save the profiler's own trace (Kineto's), it is kept
// beside the rank before the ops are read, said once as a note (not a
// warning); where they cannot (Debian's 1.13 has no Kineto), nothing is kept
// and nothing said.
TEST_F(ProfileCaptureTest, TheProfilersOwnTraceIsKeptBesideTheRankWhenItCanBeSaved) {
  testing::TempDir dir;
  detail::ProfilerHooks hooks = profiler_hooks();
  hooks.save = &fake_save;
  detail::set_profiler_hooks(hooks);
  fake_.ops = {op("aten::mm", 1'000'000), op("aten::relu", 1'000'100)};
  for (const char* failure : {static_cast<const char*>(nullptr), "requires Kineto"}) {
    g_save_failure = failure;
    g_warnings.clear();
    g_notes.clear();
    ProfileCapture c(ProfileRange{3, 5}, 2, wall_, &keep_warning);
    c.note_with(&keep_note);
    c.keep_native_traces_in(dir.path().string());
    run_steps(c, 1, 6);
    ASSERT_EQ(chunks(c).size(), 1u);  // the profile itself, whole either way
    const std::filesystem::path kept = dir.path() / "profiles" / "rank2_steps3-5.kineto.json";
    if (failure == nullptr) {
      EXPECT_EQ(testing::read_file(kept), "{\"ops\":2}");
      EXPECT_TRUE(g_warnings.empty()) << g_warnings[0];
      ASSERT_EQ(g_notes.size(), 1u);
      EXPECT_EQ(g_notes[0], "LibTorch's own trace of steps 3 to 5: " + kept.string() +
                                " (open it in ui.perfetto.dev; it has the GPU's streams where "
                                "the rank ran on a GPU)");
      std::filesystem::remove(kept);
    } else {
      EXPECT_TRUE(g_warnings.empty()) << g_warnings[0];
      EXPECT_TRUE(g_notes.empty()) << g_notes[0];
    }
    EXPECT_FALSE(std::filesystem::exists(dir.path() / "profiles") &&
                 !std::filesystem::is_empty(dir.path() / "profiles"))
        << "a partial file left";
  }
  g_save_failure = nullptr;
}

TEST_F(ProfileCaptureTest, WithoutTheHooksOneWarningAndAChunkThatSaysWhy) {
  detail::set_profiler_hooks(detail::ProfilerHooks{});
  ProfileCapture c(ProfileRange{2, 3}, 0, wall_, &keep_warning);
  run_steps(c, 1, 10);
  const auto got = chunks(c);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].last, 1);
  EXPECT_TRUE(got[0].ops.empty());
  EXPECT_NE(got[0].error.find("never installed LibTorch's profiler hooks"), std::string::npos);
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_NE(g_warnings[0].find("no profile of steps 2 to 3"), std::string::npos) << g_warnings[0];
  EXPECT_NE(g_warnings[0].find("training continues"), std::string::npos);
}

TEST_F(ProfileCaptureTest, AProfilerThatFailsToStartCostsOneWarning) {
  fake_.start_failure = "Profiler is already enabled on this thread";
  ProfileCapture c(ProfileRange{2, 3}, 0, wall_, &keep_warning);
  run_steps(c, 1, 10);
  EXPECT_EQ(fake_.starts, 1);
  EXPECT_EQ(fake_.stops, 0);  // never switched off what it did not switch on
  const auto got = chunks(c);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].error,
            "LibTorch's profiler did not start: Profiler is already enabled on this thread");
  EXPECT_EQ(g_warnings.size(), 1u);
  model::ProfiledSteps began;
  EXPECT_FALSE(c.next_began(began)) << "no step ran under traceml's capture";
}

TEST_F(ProfileCaptureTest, TrainingThatEndsBeforeOrInsideTheRangeSaysSo) {
  {
    ProfileCapture c(ProfileRange{50, 60}, 0, wall_, &keep_warning);
    run_steps(c, 1, 40);
    c.at_shutdown(40, true);
    const auto got = chunks(c);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].error, "training ended after step 40, before step 50");
  }
  {
    // Inside it, on the capturing thread at an explicit shutdown: the
    // profile of the steps that ran.
    fake_.ops = {op("aten::mm", 1'000'000)};
    ProfileCapture c(ProfileRange{5, 60}, 0, wall_, &keep_warning);
    run_steps(c, 1, 9);
    c.at_shutdown(9, true);
    EXPECT_EQ(fake_.stops, 1);
    const auto got = chunks(c);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].first_step, 5);
    EXPECT_EQ(got[0].last_step, 9);
    EXPECT_TRUE(got[0].error.empty());
    EXPECT_EQ(got[0].ops.size(), 1u);
  }
  {
    // At the process's exit LibTorch may be going away: not touched then;
    // the capturing thread switches it off at its next step edge (steps
    // traceml no longer records), and says so.
    ProfileCapture c(ProfileRange{5, 60}, 0, wall_, &keep_warning);
    run_steps(c, 1, 9);
    const int stops = fake_.stops;
    g_warnings.clear();
    c.at_shutdown(9, false);
    EXPECT_EQ(fake_.stops, stops);
    ASSERT_EQ(g_warnings.size(), 1u);
    EXPECT_NE(g_warnings[0].find("training ended inside it (after step 9)"), std::string::npos)
        << g_warnings[0];
    c.at_untraced_step_begin(10);
    EXPECT_EQ(fake_.stops, stops + 1);
    const auto got = chunks(c);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].last_step, 9);
    EXPECT_EQ(got[0].error, "traceml was shut down during the capture (at step 9)");
  }
  {
    // A shutdown from another thread: the profiler is the training
    // thread's, switched off there, once.
    ProfileCapture c(ProfileRange{5, 60}, 0, wall_, &keep_warning);
    run_steps(c, 1, 7);
    const int stops = fake_.stops;
    std::thread other([&] { c.at_shutdown(7, true); });
    other.join();
    EXPECT_EQ(fake_.stops, stops);
    c.at_untraced_step_begin(8);
    c.at_untraced_step_begin(9);
    EXPECT_EQ(fake_.stops, stops + 1);
    EXPECT_EQ(chunks(c).size(), 1u);
  }
}

timing::CuptiDutyCycle* unlendable_cupti(std::string& refusal) {
  refusal = "traceml's CUPTI activity records are on in this process";
  return nullptr;
}

TEST_F(ProfileCaptureTest, ARefusedCaptureNeverStartsTheProfiler) {
  ProfileCapture c(ProfileRange{2, 3}, 0, wall_, &keep_warning, &unlendable_cupti);
  run_steps(c, 1, 5);
  EXPECT_EQ(fake_.starts, 0);
  const auto got = chunks(c);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].error, "traceml's CUPTI activity records are on in this process");
  EXPECT_EQ(g_warnings.size(), 1u);
}

TEST_F(ProfileCaptureTest, ADiscardedCaptureIsFreedUnsent) {
  fake_.ops = {op("aten::mm", 1'000'000)};
  ProfileCapture c(ProfileRange{1, 1}, 0, wall_, &keep_warning);
  run_steps(c, 1, 1);
  ASSERT_TRUE(c.waiting());
  c.discard();  // read with a sink that keeps nothing: the fake frees it
  EXPECT_FALSE(c.waiting());
  model::ProfileChunk chunk;
  EXPECT_FALSE(c.next_chunk(chunk));
}

TEST_F(ProfileCaptureTest, AStepOfAnotherThreadDoesNotEndTheCapture) {
  ProfileCapture c(ProfileRange{1, 2}, 0, wall_, &keep_warning);
  c.at_step_begin(1);
  std::thread other([&] { c.at_step_end(2); });
  other.join();
  EXPECT_EQ(fake_.stops, 0);
  c.at_step_end(2);
  EXPECT_EQ(fake_.stops, 1);
}

}  // namespace
}  // namespace traceml::runtime

namespace traceml::runtime {
namespace {

// The collector's requests (protocol 7): a capture made with nothing armed
// takes "the next N steps" from the step that begins next, one capture at a
// time, again after the last one ended; the same fixed steps asked twice
// (a reconnect) are one capture; after a shutdown a request is said late.
TEST_F(ProfileCaptureTest, RequestsArmTheNextStepsOneCaptureAtATime) {
  ProfileCapture c(4, wall_, &keep_warning);
  run_steps(c, 1, 5);  // idle: nothing happens
  EXPECT_EQ(fake_.starts, 0);
  EXPECT_FALSE(c.armed());
  ASSERT_TRUE(c.request(0, 3));
  EXPECT_TRUE(c.armed());
  // A second request while armed is left, with one line.
  EXPECT_FALSE(c.request(0, 5));
  ASSERT_EQ(g_warnings.size(), 1u);
  EXPECT_NE(g_warnings[0].find("while another capture is armed or running"), std::string::npos);
  run_steps(c, 6, 10);  // steps 6, 7 and 8 captured
  EXPECT_EQ(fake_.starts, 1);
  EXPECT_EQ(fake_.stops, 1);
  std::vector<model::ProfileChunk> got = chunks(c);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].global_rank, 4);
  EXPECT_EQ(got[0].first_step, 6);
  EXPECT_EQ(got[0].last_step, 8);
  EXPECT_EQ(got[0].error, "");
  // After it ended: a fixed range is taken.
  ASSERT_TRUE(c.request(20, 2));
  EXPECT_TRUE(c.request(20, 2));  // asked again: the same capture
  run_steps(c, 11, 25);
  EXPECT_EQ(fake_.starts, 2);
  got = chunks(c);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first_step, 20);
  EXPECT_EQ(got[0].last_step, 21);
  // Captured already: asking for those steps again makes no second one.
  EXPECT_TRUE(c.request(20, 2));
  EXPECT_FALSE(c.armed());
}

TEST_F(ProfileCaptureTest, ARequestAfterTheShutdownIsSaidLateOnceAndKeptAsAFailedProfile) {
  ProfileCapture c(1, wall_, &keep_warning);
  run_steps(c, 1, 4);
  c.at_shutdown(4, true);  // idle: nothing to say
  EXPECT_TRUE(g_warnings.empty());
  EXPECT_FALSE(c.waiting());
  // A collector that asks and asks: a few lines, one failed profile.
  for (int i = 0; i < 20; ++i)
    EXPECT_FALSE(c.request(100 + i, 5));
  EXPECT_FALSE(c.request(0, 5));
  EXPECT_LE(g_warnings.size(), 3u);
  EXPECT_NE(g_warnings[0].find("steps 100 to 104 after training ended"), std::string::npos);
  const std::vector<model::ProfileChunk> got = chunks(c);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first_step, 100);
  EXPECT_EQ(got[0].error, "the collector's request came after training ended");
  EXPECT_EQ(fake_.starts, 0);
}

TEST_F(ProfileCaptureTest, ARequestArmedAtTheShutdownSaysItNeverBegan) {
  ProfileCapture c(1, wall_, &keep_warning);
  run_steps(c, 1, 7);
  ASSERT_TRUE(c.request(0, 10));
  c.at_shutdown(7, true);
  const std::vector<model::ProfileChunk> got = chunks(c);
  ASSERT_EQ(got.size(), 1u);
  EXPECT_EQ(got[0].first_step, 8);
  EXPECT_EQ(got[0].last_step, 17);
  EXPECT_EQ(got[0].error, "training ended after step 7, before step 8");
}

}  // namespace
}  // namespace traceml::runtime
