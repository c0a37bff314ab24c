// The sender against a real collector over loopback: it wakes rarely while
// the steps' rings fill slowly, and as often as they fill when steps come
// fast, also right after an idle spell (none overflows); every step it
// drains arrives, converted from ticks, in order. Protocol 4: a refused rank
// is told why once and sends nothing more; a collector of protocol 3, which
// closes on a Hello of 4, gets protocol 3.
#include "runtime/sender.hpp"

#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <traceml/traceml.hpp>

#include "../support/subprocess.hpp"
#include "collector/collector.hpp"
#include "collector/profiles.hpp"
#include "model/env_contract.hpp"
#include "runtime/hot_path.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"

namespace traceml::runtime {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using testing::ProcessResult;
namespace fs = std::filesystem;

struct Rig {
  testing::TempDir dir;
  std::unique_ptr<collector::Collector> collector;
  RecorderRegistry recorders;
  SampleQueue samples;
  timing::WallMapping wall;
  std::atomic<int> ticks{0};
  std::unique_ptr<Sender> sender;

  /// `asking`: what the collector asks of the rank's profiler; `tune`
  /// changes the sender's settings before it starts.
  explicit Rig(const std::string& token = "sender-test",
               std::function<void(const std::string&)> on_refused = {},
               collector::ProfileAsking asking = {},
               const std::function<void(SenderSettings&)>& tune = {}) {
    std::string why;
    timing::select_tick_source(timing::choose_tick_source(std::nullopt, why));
    collector::CollectorOptions o;
    o.token = "sender-test";
    o.run_dir = (dir.path() / "run").string();
    o.run.world_size = 1;
    o.profile_asking = std::move(asking);
    collector = std::make_unique<collector::Collector>(o);
    SenderSettings s;
    s.port = collector->port();
    s.token = token;
    s.identity.global_rank = 0;
    s.on_tick = [this] { ++ticks; };
    s.on_refused = std::move(on_refused);
    if (tune) tune(s);
    sender =
        std::make_unique<Sender>(s, recorders, samples, wall, [] { return model::TracerStats{}; });
    sender->start();
  }
};

/// Records `n` steps of ~`each` on `r`, one every `each`.
void train(ThreadRecorder& r, int n, std::chrono::microseconds each) {
  HotState hot;
  hot.state.store(kRecording);
  for (int i = 0; i < n; ++i) {
    const std::int64_t start = hot_scope_begin(hot);
    r.enter_step();
    const auto until = Clock::now() + each;
    while (Clock::now() < until) {
    }
    hot_step_end(hot, r, start, false);
    if (r.take_filling()) wake_sender();  // as the public StepScope does
  }
}

TEST(Sender, WakesRarelyWhenIdleAndOftenWhenStepsComeFast) {
  Rig rig;
  // Idle: no step at all for 1.5 s.
  std::this_thread::sleep_for(1500ms);
  const int idle = rig.ticks.exchange(0);
  EXPECT_LE(idle, 6) << "an idle sender wakes at most every 0.5 s (after its first 50 ms)";
  EXPECT_GE(idle, 2);
  // Fast steps right after the idle time, when the sender sleeps for 0.5 s:
  // 20 us each (~50,000 a second) fill a 4,096-step ring in 80 ms. The
  // training thread wakes the sender when its ring is half full; without
  // that, the first half second alone would drop ~20,000 of them (~28 %).
  constexpr int kSteps = 75000;
  ThreadRecorder* r = rig.recorders.add();
  train(*r, kSteps, 20us);
  const int busy = rig.ticks.exchange(0);
  EXPECT_GE(busy, 15) << "fast steps keep the sender awake";
  r->retired.store(true);
  rig.sender->stop(Clock::now() + 10s);
  const std::int64_t dropped = rig.recorders.dropped();  // the retired ring's, kept
  EXPECT_LE(dropped, kSteps / 20) << "a ring overflowed for want of a drain; " << busy
                                  << " wake-ups";
  const collector::CollectionReport rep = rig.collector->finish(Clock::now() + 30s, 1);
  EXPECT_EQ(rep.records, kSteps - dropped);
  // The steps arrived in order with durations converted from ticks: ~20 us each.
  const store::RunData run = rig.collector->take_run();
  ASSERT_FALSE(run.telemetry.steps.empty());
  std::int64_t last = 0;
  int near = 0;
  for (const auto& s : run.telemetry.steps) {
    EXPECT_GT(s.step, last);
    last = s.step;
    const double ms = s.events.cpu_ms(model::Event::TracedStepTime).value_or(-1.0);
    if (ms >= 0.0199 && ms < 0.2) ++near;
  }
  EXPECT_GT(near, int(run.telemetry.steps.size()) * 8 / 10);
}

// Protocol 7: a rank says ProfileReady once its Verdict names 7, the
// collector (serve's --profile-steps) asks it at once over the connection,
// and the rank's answer (here a failed capture: no hooks) comes back as a
// profile file that says why, all through the real sockets.
TEST(Sender, ARankThatSaysProfileReadyIsAskedAndAnswersWithAProfile) {
  timing::WallMapping wall;
  ProfileCapture capture(0, wall, nullptr);
  std::atomic<int> asked{0};
  collector::ProfileAsking asking;
  asking.steps = std::make_pair(std::int64_t{3}, std::int64_t{4});
  Rig rig("sender-test", {}, asking, [&](SenderSettings& s) {
    s.profile_requests = [&] {
      ++asked;
      return &capture;
    };
  });
  for (int i = 0; i < 500 && !capture.armed(); ++i)
    std::this_thread::sleep_for(10ms);
  ASSERT_EQ(asked.load(), 1) << "the collector's request never reached the rank";
  ASSERT_TRUE(capture.armed());
  // Armed for steps 3 to 4: a step before them does nothing, step 3 begins it.
  capture.at_step_begin(2);
  EXPECT_FALSE(capture.waiting());
  capture.at_step_begin(3);  // no hooks installed: a failed capture, sent
  EXPECT_TRUE(capture.waiting());
  rig.sender->stop(Clock::now() + 10s);
  rig.collector->finish(Clock::now() + 10s, 1);
  const fs::path file = rig.dir.path() / "run" / "profiles" / "rank0_steps3-4.json";
  ASSERT_TRUE(fs::exists(file));
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("never installed LibTorch's profiler hooks"), std::string::npos) << text;
  EXPECT_EQ(text.find("\"reason\""), std::string::npos) << "the user chose these steps";
}

// Protocol 8: a capture that begins is told to the collector before its
// profile, so when the rank ends inside it (the profile never sent) the
// collector still leaves its steps out and writes the profile as lost.
const char* started_profiler() noexcept {
  return nullptr;
}
const char* stopped_profiler(void** capture) noexcept {
  *capture = nullptr;
  return nullptr;
}
void read_nothing(void*, detail::ProfiledOpSink, void*) noexcept {}
/// Profiler hooks that start and stop and capture nothing, installed for
/// the life of the object.
struct NullProfiler {
  NullProfiler() {
    detail::ProfilerHooks hooks;
    hooks.start = &started_profiler;
    hooks.stop = &stopped_profiler;
    hooks.read = &read_nothing;
    detail::set_profiler_hooks(hooks);
  }
  ~NullProfiler() { detail::set_profiler_hooks(detail::ProfilerHooks{}); }
  NullProfiler(const NullProfiler&) = delete;
  NullProfiler& operator=(const NullProfiler&) = delete;
};

TEST(Sender, ACaptureThatBeganIsToldAndItsLostProfileSaidSo) {
  const NullProfiler profiler;
  timing::WallMapping wall;
  ProfileCapture capture(ProfileRange{3, 40}, 0, wall, nullptr);
  Rig rig("sender-test", {}, {}, [&](SenderSettings& s) { s.profiles = &capture; });
  capture.at_step_begin(3);  // the profiler goes on, and the rank never reaches step 40
  bool told = false;
  for (int i = 0; i < 500 && !told; ++i) {
    std::this_thread::sleep_for(10ms);
    told = !rig.collector->snapshot().telemetry.profiled_steps.empty();
  }
  ASSERT_TRUE(told) << "the collector never heard the capture begin";
  // The rank ends inside the capture: its profile is never sent.
  rig.sender->stop(Clock::now() + 10s);
  rig.collector->finish(Clock::now() + 10s, 1);
  const store::RunData run = rig.collector->take_run();
  ASSERT_EQ(run.telemetry.profiled_steps.size(), 1u);  // once
  EXPECT_EQ(run.telemetry.profiled_steps[0].global_rank, 0);
  EXPECT_EQ(run.telemetry.profiled_steps[0].first_step, 3);
  EXPECT_EQ(run.telemetry.profiled_steps[0].last_step, 40);
  const fs::path file = rig.dir.path() / "run" / "profiles" / "rank0_steps3-40.json";
  ASSERT_TRUE(fs::exists(file));
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find(collector::ProfileStore::kNeverCame), std::string::npos) << text;
}

// Protocol 4: the status the sender is stopped with goes out as the rank's
// goodbye, before its Bye, and lands in the rank's delivery.
TEST(Sender, StoppedWithAnExitStatusItSaysGoodbyeWithIt) {
  Rig rig;
  rig.sender->stop(Clock::now() + 10s, 7);
  rig.collector->stop_ingest(Clock::now() + 30s, 1);
  const store::RunData run = rig.collector->take_run();
  ASSERT_EQ(run.deliveries.size(), 1u);
  EXPECT_TRUE(run.deliveries[0].clean_end);
  EXPECT_EQ(run.deliveries[0].exit_status, 7);
}

// An explicit shutdown (drain) sends every step at once but keeps a
// protocol-4 connection open, heartbeats only, the rank no longer recording:
// the goodbye with the program's exit status comes at its exit (stop).
TEST(Sender, DrainedItSendsEveryStepAndKeepsTheConnectionForTheGoodbye) {
  Rig rig;
  ThreadRecorder* r = rig.recorders.add();
  train(*r, 300, 100us);
  r->retired.store(true);
  rig.sender->drain(Clock::now() + 10s);
  // Every step is in the collector's hands when drain() returns.
  const auto by = Clock::now() + 10s;
  while (rig.collector->snapshot().telemetry.steps.size() < 300 && Clock::now() < by)
    std::this_thread::sleep_for(20ms);
  EXPECT_EQ(rig.collector->snapshot().telemetry.steps.size(), 300u);
  EXPECT_EQ(rig.sender->records_sent(), 300);
  // Held open, no goodbye said, however long the program goes on.
  std::this_thread::sleep_for(2500ms);
  const collector::Progress p = rig.collector->progress();
  ASSERT_EQ(p.ranks.size(), 1u);
  EXPECT_TRUE(p.ranks[0].open);
  EXPECT_FALSE(p.ranks[0].said_bye);
  rig.sender->stop(Clock::now() + 10s, 4);
  rig.collector->stop_ingest(Clock::now() + 30s, 1);
  const store::RunData run = rig.collector->take_run();
  ASSERT_EQ(run.deliveries.size(), 1u);
  EXPECT_TRUE(run.deliveries[0].clean_end);
  EXPECT_EQ(run.deliveries[0].exit_status, 4);
  EXPECT_EQ(run.telemetry.steps.size(), 300u);
}

// A collector of protocol 3 cannot be told the exit status: drain() ends
// the connection with its Bye at once, as shutdown() always did.
TEST(Sender, DrainedAgainstProtocolThreeItSaysByeAtOnce) {
  testing::TempDir dir;
  collector::CollectorOptions o;
  o.token = "sender-test";
  o.run_dir = (dir.path() / "run").string();
  o.run.world_size = 1;
  collector::Collector c(o);
  RecorderRegistry recorders;
  SampleQueue samples;
  timing::WallMapping wall;
  SenderSettings s;
  s.port = c.port();
  s.token = "sender-test";
  s.protocol_version = 3;
  Sender sender(s, recorders, samples, wall, [] { return model::TracerStats{}; });
  sender.start();
  ThreadRecorder* r = recorders.add();
  train(*r, 50, 100us);
  r->retired.store(true);
  sender.drain(Clock::now() + 10s);
  const auto by = Clock::now() + 10s;
  for (collector::Progress q = c.progress();
       (q.ranks.empty() || !q.ranks[0].said_bye) && Clock::now() < by; q = c.progress())
    std::this_thread::sleep_for(20ms);
  const collector::Progress p = c.progress();
  ASSERT_EQ(p.ranks.size(), 1u);
  EXPECT_TRUE(p.ranks[0].said_bye);
  EXPECT_FALSE(p.ranks[0].exit_status);
  sender.stop(Clock::now() + 1s, 4);  // too late to say: nothing more goes
  c.stop_ingest(Clock::now() + 30s, 1);
  EXPECT_EQ(c.take_run().telemetry.steps.size(), 50u);
}

/// A real rank process (tests' tiny_rank) of 20 steps that calls
/// shutdown() and ends as `end` says, against a collector of its own.
store::RunData tiny_rank_run(const std::vector<std::string>& end, ProcessResult& result) {
  testing::TempDir dir;
  collector::CollectorOptions o;
  o.token = "goodbye-test";
  o.run_dir = (dir.path() / "run").string();
  o.run.world_size = 1;
  collector::Collector c(o);
  std::vector<std::string> argv = {
      "/usr/bin/env",
      std::string(model::env::kAggregatorPort) + "=" + std::to_string(c.port()),
      std::string(model::env::kRunToken) + "=goodbye-test",
      std::string(model::env::kCupti) + "=0",
      TRACEML_TINY_RANK_PATH,
      "--steps",
      "20"};
  argv.insert(argv.end(), end.begin(), end.end());
  result = testing::run_process(argv);
  c.stop_ingest(Clock::now() + 30s, 1);
  return c.take_run();
}

// The runtime learns the status from exit(3) (glibc's on_exit), as the
// parent sees it: its low 8 bits. (End to end, with serve:
// Serve.ARankWhoseProgramReturnsThreeFailsTheRunWithItsCode.)
TEST(Sender, ARanksExitStatusReachesTheCollector) {
  ProcessResult r;
  const store::RunData run = tiny_rank_run({"--no-shutdown", "--exit", "259"}, r);
  EXPECT_EQ(r.exit_code, 3) << r.err;
  ASSERT_EQ(run.deliveries.size(), 1u);
  EXPECT_TRUE(run.deliveries[0].clean_end);
  EXPECT_EQ(run.deliveries[0].exit_status, 3);
  EXPECT_EQ(run.telemetry.steps.size(), 20u);
}

// After an explicit shutdown() the connection stays open for the status:
// exit(5) still says 5; a program that then leaves through _exit (no exit
// handlers) or is killed had sent everything, and its goodbye without a
// status said so: a clean end, no status, no step lost.
TEST(Sender, AfterShutdownTheExitStatusStillComesAndAnExitWithoutHandlersLosesNothing) {
  ProcessResult r;
  const store::RunData five = tiny_rank_run({"--exit", "5"}, r);
  EXPECT_EQ(r.exit_code, 5) << r.err;
  ASSERT_EQ(five.deliveries.size(), 1u);
  EXPECT_TRUE(five.deliveries[0].clean_end);
  EXPECT_EQ(five.deliveries[0].exit_status, 5);
  EXPECT_EQ(five.telemetry.steps.size(), 20u);
  for (const auto& end :
       {std::vector<std::string>{"--end", "_exit"}, std::vector<std::string>{"--end", "kill"}}) {
    const store::RunData gone = tiny_rank_run(end, r);
    EXPECT_NE(r.out.find("tiny_rank: 20 steps"), std::string::npos) << r.out << r.err;
    ASSERT_EQ(gone.deliveries.size(), 1u) << end[1];
    EXPECT_TRUE(gone.deliveries[0].clean_end) << end[1];
    EXPECT_FALSE(gone.deliveries[0].exit_status) << end[1];
    EXPECT_EQ(gone.telemetry.steps.size(), 20u) << end[1];
  }
  EXPECT_EQ(r.exit_code, 128 + SIGKILL);
}

TEST(Sender, ARefusedRankIsToldWhyOnceAndSendsNothingMore) {
  std::mutex mu;
  std::vector<std::string> refusals;
  Rig rig("another-run", [&](const std::string& why) {
    const std::lock_guard<std::mutex> lock(mu);
    refusals.push_back(why);
  });
  ThreadRecorder* r = rig.recorders.add();
  train(*r, 200, 1000us);
  // Long enough for several reconnects at the back-off (0.1 s doubling).
  std::this_thread::sleep_for(1500ms);
  r->retired.store(true);
  rig.sender->stop(Clock::now() + 5s);
  {
    const std::lock_guard<std::mutex> lock(mu);
    ASSERT_EQ(refusals.size(), 1u);
    EXPECT_NE(refusals[0].find("refused this rank: wrong run token"), std::string::npos)
        << refusals[0];
  }
  const collector::CollectionReport rep = rig.collector->finish(Clock::now() + 10s);
  EXPECT_EQ(rep.records, 0);
  EXPECT_EQ(rep.ranks_connected, 0);
  const store::RunData run = rig.collector->take_run();
  // Refused once, never again: before protocol 4 it retried all run long.
  EXPECT_EQ(run.rejected.size(), 1u);
}

/// A socket listening on a free loopback port (set in `port`), for the
/// stand-in peers below.
int listen_on_loopback(std::uint16_t& port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  ::listen(fd, 16);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  port = ntohs(a.sin_port);
  return fd;
}

/// Reads connection `c`'s frames into `on_frame` until it returns false or
/// the peer closes.
void read_frames(int c, const std::function<bool(const transport::Frame&)>& on_frame) {
  transport::FrameDecoder d;
  std::uint8_t buf[65536];
  for (;;) {
    const ssize_t k = ::read(c, buf, sizeof buf);
    if (k <= 0) return;
    for (std::size_t at = 0; at < std::size_t(k);) {
      at += d.feed(buf + at, std::size_t(k) - at);
      while (auto f = d.next())
        if (!on_frame(*f)) return;
    }
  }
}

/// A socket listening on loopback and the thread that serves it (`serve`,
/// given the listening socket); closing the socket ends its accept().
class Listener {
 public:
  explicit Listener(std::function<void(int)> serve) {
    fd_ = listen_on_loopback(port_);
    thread_ = std::thread([this, serve = std::move(serve)] { serve(fd_); });
  }
  ~Listener() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  Listener(const Listener&) = delete;
  Listener& operator=(const Listener&) = delete;
  [[nodiscard]] std::uint16_t port() const { return port_; }

 private:
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::thread thread_;
};

/// A collector built before protocol 4, as it behaved: a Hello of a version
/// it does not speak closes the connection without a word; one of 3 is
/// taken, and its Step frames counted.
class OldCollector {
 public:
  [[nodiscard]] std::uint16_t port() const { return listener_.port(); }
  std::vector<std::uint16_t> hellos() {
    const std::lock_guard<std::mutex> lock(mu_);
    return hellos_;
  }
  int steps() {
    const std::lock_guard<std::mutex> lock(mu_);
    return steps_;
  }
  bool said_bye() {
    const std::lock_guard<std::mutex> lock(mu_);
    return bye_;
  }

 private:
  void serve(int listening) {
    for (;;) {
      const int c = ::accept(listening, nullptr, nullptr);
      if (c < 0) return;
      bool hello = false;
      read_frames(c, [&](const transport::Frame& f) {
        const std::lock_guard<std::mutex> lock(mu_);
        if (!hello) {
          const auto h = transport::decode_hello(f.payload);
          hellos_.push_back(h ? h->protocol_version : 0);
          hello = true;
          return h && h->protocol_version <= 3;  // "not supported": closed
        }
        if (f.type == transport::FrameType::Step) ++steps_;
        if (f.type == transport::FrameType::Bye) bye_ = true;
        return true;
      });
      ::close(c);
    }
  }

  std::mutex mu_;
  std::vector<std::uint16_t> hellos_;
  int steps_ = 0;
  bool bye_ = false;
  Listener listener_{[this](int listening) { serve(listening); }};  // last: serves the above
};

/// A collector of protocol 7 (profiles and requests, no ProfiledSteps): it
/// accepts the rank with a Verdict naming 7 and keeps the frame types it
/// reads. One frame it does not know would make the real one close.
class SevenCollector {
 public:
  [[nodiscard]] std::uint16_t port() const { return listener_.port(); }
  std::vector<int> types() {
    const std::lock_guard<std::mutex> lock(mu_);
    return types_;
  }

 private:
  void serve(int listening) {
    const int c = ::accept(listening, nullptr, nullptr);
    if (c < 0) return;
    bool hello = true;
    read_frames(c, [&](const transport::Frame& f) {
      const std::lock_guard<std::mutex> lock(mu_);
      types_.push_back(int(f.type));
      if (hello) {
        hello = false;
        transport::Verdict v;
        v.protocol_version = 7;
        const auto frame =
            transport::encode_frame(transport::FrameType::Verdict, transport::encode_verdict(v));
        if (frame) (void)!::write(c, frame->data(), frame->size());
      }
      return f.type != transport::FrameType::Bye;  // then closed, as a collector does
    });
    ::close(c);
  }

  std::mutex mu_;
  std::vector<int> types_;
  Listener listener_{[this](int listening) { serve(listening); }};  // last: serves the above
};

// Protocol 8's ProfiledSteps goes only to a collector that names 8: one of
// 7 gets the profile itself, and not a frame it would close the connection at.
TEST(Sender, ACollectorOfSevenGetsTheProfileButNoCaptureSaidBegun) {
  const NullProfiler profiler;
  SevenCollector seven;
  RecorderRegistry recorders;
  SampleQueue samples;
  timing::WallMapping wall;
  std::string why;
  timing::select_tick_source(timing::choose_tick_source(std::nullopt, why));
  ProfileCapture capture(ProfileRange{3, 4}, 0, wall, nullptr);
  SenderSettings s;
  s.port = seven.port();
  s.token = "t";
  s.profiles = &capture;
  Sender sender(s, recorders, samples, wall, [] { return model::TracerStats{}; });
  sender.start();
  capture.at_step_begin(3);
  std::this_thread::sleep_for(300ms);  // the capture's start told at the next wake-up, if ever
  capture.at_step_end(4);
  sender.stop(Clock::now() + 10s);
  const std::vector<int> types = seven.types();
  const auto has = [&](auto type) {
    return std::find(types.begin(), types.end(), int(type)) != types.end();
  };
  EXPECT_TRUE(has(transport::frame_type_of<model::ProfileChunk>()))
      << ::testing::PrintToString(types);
  EXPECT_FALSE(has(transport::frame_type_of<model::ProfiledSteps>()));
  EXPECT_TRUE(has(transport::FrameType::Bye));
}

TEST(Sender, ACollectorThatNeverAnswersTheHelloIsSpokenProtocolThree) {
  OldCollector old;
  RecorderRegistry recorders;
  SampleQueue samples;
  timing::WallMapping wall;
  std::string why;
  timing::select_tick_source(timing::choose_tick_source(std::nullopt, why));
  SenderSettings s;
  s.port = old.port();
  s.token = "t";
  std::vector<std::string> warnings;
  s.on_first_failure = [&](const std::string& w) { warnings.push_back(w); };
  Sender sender(s, recorders, samples, wall, [] { return model::TracerStats{}; });
  sender.start();
  ThreadRecorder* r = recorders.add();
  train(*r, 300, 1000us);
  r->retired.store(true);
  sender.stop(Clock::now() + 10s);
  // Written is not yet read: wait for the collector to read the Bye.
  for (const auto give_up = Clock::now() + 30s; !old.said_bye() && Clock::now() < give_up;)
    std::this_thread::sleep_for(10ms);
  // Three Hellos of a rank's protocol (4) closed unanswered, then 3, which
  // it takes.
  EXPECT_EQ(old.hellos(), (std::vector<std::uint16_t>{4, 4, 4, 3}));
  EXPECT_EQ(old.steps(), 300 - int(recorders.dropped()));
  EXPECT_EQ(recorders.dropped(), 0);
  EXPECT_TRUE(old.said_bye());
  EXPECT_EQ(sender.records_dropped(), 0);
  EXPECT_TRUE(warnings.empty()) << warnings.front();
}

// A profile that cannot be sent (a collector older than profiles) is kept
// beside the rank, in its node's run directory, as the collector would have
// written it, and said in one line with its path.
std::vector<std::string> g_profile_lines;
void keep_profile_line(const std::string& line) {
  g_profile_lines.push_back(line);
}

TEST(Sender, AProfileACollectorCannotTakeIsKeptBesideTheRank) {
  OldCollector old;
  testing::TempDir dir;
  RecorderRegistry recorders;
  SampleQueue samples;
  timing::WallMapping wall;
  std::string why;
  timing::select_tick_source(timing::choose_tick_source(std::nullopt, why));
  g_profile_lines.clear();
  ProfileCapture capture(ProfileRange{3, 4}, 0, wall, &keep_profile_line);
  capture.at_step_begin(3);  // no hooks installed here: a failed capture, which says why
  ASSERT_TRUE(capture.waiting());
  SenderSettings s;
  s.port = old.port();
  s.token = "t";
  s.profiles = &capture;
  s.profile_keep_dir = (dir.path() / "logs" / "job").string();
  Sender sender(s, recorders, samples, wall, [] { return model::TracerStats{}; });
  sender.start();
  std::this_thread::sleep_for(200ms);
  sender.stop(Clock::now() + 10s);
  EXPECT_FALSE(capture.waiting());
  const fs::path file = dir.path() / "logs" / "job" / "profiles" / "rank0_steps3-4.json";
  ASSERT_TRUE(fs::exists(file));
  std::ifstream in(file);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("never installed LibTorch's profiler hooks"), std::string::npos) << text;
  bool said = false;
  for (const std::string& line : g_profile_lines)
    said =
        said || line.find("the profile of steps 3 to 4 is kept beside this rank: " + file.string() +
                          " (not sent: ") != std::string::npos;
  EXPECT_TRUE(said) << ::testing::PrintToString(g_profile_lines);
}

/// A relay between a sender and the collector that breaks the connection
/// twice, after `cut_at` bytes from the rank and again after twice as many:
/// it reads on from the rank without passing it on (at least 8 KiB, about a
/// hundred step records the rank has written whole), then closes both
/// sides. Bytes lost in flight, as when a link or a peer breaks.
class LossyRelay {
 public:
  /// `hold`: each connection's bytes wait this long before the relay reads
  /// them (a collector whose node is starved answers the Hello late).
  LossyRelay(std::uint16_t upstream, std::size_t cut_at,
             std::chrono::milliseconds hold = std::chrono::milliseconds(0))
      : upstream_(upstream), cut_at_(cut_at), hold_(hold) {
    fd_ = listen_on_loopback(port_);
    thread_ = std::thread([this] { relay(); });
  }
  ~LossyRelay() {
    ::shutdown(fd_, SHUT_RDWR);
    ::close(fd_);
    thread_.join();
  }
  [[nodiscard]] std::uint16_t port() const { return port_; }
  [[nodiscard]] int cuts() const { return cuts_.load(); }
  [[nodiscard]] std::size_t swallowed() const { return swallowed_.load(); }

 private:
  static sockaddr_in loopback(std::uint16_t port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(port);
    return a;
  }

  void relay() {
    std::size_t forwarded = 0;
    for (;;) {
      const int rank = ::accept(fd_, nullptr, nullptr);
      if (rank < 0) return;
      std::this_thread::sleep_for(hold_);
      const int up = ::socket(AF_INET, SOCK_STREAM, 0);
      sockaddr_in a = loopback(upstream_);
      if (::connect(up, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
        ::close(rank);
        ::close(up);
        continue;
      }
      std::uint8_t buf[16384];
      std::size_t eaten = 0;
      bool open = true;
      while (open) {
        pollfd p[2] = {{rank, POLLIN, 0}, {up, POLLIN, 0}};
        if (::poll(p, 2, 1000) < 0) break;
        if ((p[1].revents & (POLLIN | POLLHUP)) != 0) {  // the Verdict, the rank's way
          const ssize_t k = ::read(up, buf, sizeof buf);
          open = k > 0 && ::write(rank, buf, std::size_t(k)) == k;
        }
        if (open && (p[0].revents & (POLLIN | POLLHUP)) != 0) {
          const ssize_t k = ::read(rank, buf, sizeof buf);
          if (k <= 0) break;
          const bool cutting = cuts_.load() < 2 && forwarded >= cut_at_ * std::size_t(cuts_ + 1);
          if (cutting) {
            eaten += std::size_t(k);
            swallowed_ += std::size_t(k);
            if (eaten >= 8192) {
              ++cuts_;
              break;
            }
          } else {
            open = ::write(up, buf, std::size_t(k)) == k;
            forwarded += std::size_t(k);
          }
        }
      }
      ::close(rank);
      ::close(up);
    }
  }

  std::uint16_t upstream_;
  std::size_t cut_at_;
  std::chrono::milliseconds hold_;
  int fd_ = -1;
  std::uint16_t port_ = 0;
  std::atomic<int> cuts_{0};
  std::atomic<std::size_t> swallowed_{0};
  std::thread thread_;
};

/// What a sender of `steps` 20 us steps left in a collector it reached
/// through a LossyRelay, with `retained` bytes of written records kept.
struct ThroughRelay {
  store::RunData run;
  std::int64_t made = 0;  ///< steps recorded (none lost in the ring)
  std::int64_t sent = 0;
  std::int64_t dropped = 0;  ///< the sender's
  int cuts = 0;
  std::size_t swallowed = 0;
  std::vector<std::string> warnings;
};

ThroughRelay send_through_a_lossy_relay(int steps, std::size_t retained,
                                        std::size_t cut_at = 256 * 1024,
                                        std::chrono::milliseconds hold = 0ms,
                                        std::chrono::milliseconds stop_within = 20000ms) {
  testing::TempDir dir;
  collector::CollectorOptions o;
  o.token = "sender-test";
  o.run_dir = (dir.path() / "run").string();
  o.run.world_size = 1;
  collector::Collector c(o);
  LossyRelay relay(c.port(), cut_at, hold);
  RecorderRegistry recorders;
  SampleQueue samples;
  timing::WallMapping wall;
  std::string why;
  timing::select_tick_source(timing::choose_tick_source(std::nullopt, why));
  ThroughRelay out;
  SenderSettings s;
  s.port = relay.port();
  s.token = "sender-test";
  s.backoff_min = 20ms;
  s.max_retained_bytes = retained;
  s.on_first_failure = [&](const std::string& w) { out.warnings.push_back(w); };
  Sender sender(s, recorders, samples, wall, [] { return model::TracerStats{}; });
  sender.start();
  ThreadRecorder* r = recorders.add();
  train(*r, steps, 20us);
  r->retired.store(true);
  sender.stop(Clock::now() + stop_within);
  c.stop_ingest(Clock::now() + 30s, 1);
  out.run = c.take_run();
  out.made = steps - recorders.dropped();
  out.sent = sender.records_sent();
  out.dropped = sender.records_dropped();
  out.cuts = relay.cuts();
  out.swallowed = relay.swallowed();
  return out;
}

std::int64_t distinct_steps(const store::RunData& run) {
  std::set<std::int64_t> ids;
  for (const auto& step : run.telemetry.steps)
    ids.insert(step.step);
  return std::int64_t(ids.size());
}

// Protocol 4: a connection that breaks loses what was in flight (written by
// the rank, never read by the collector). The reconnecting rank is told how
// many of its records the collector has and resends from there: every step
// is stored once, none lost, none twice. Before, the records lost in flight
// were counted sent and never arrived (4,178 of 40,000 steps here).
TEST(Sender, ARecordLostInFlightWhenTheConnectionBreaksIsResentAndStoredOnce) {
  const ThroughRelay t = send_through_a_lossy_relay(40000, std::size_t{4} << 20);
  EXPECT_EQ(t.cuts, 2);
  EXPECT_GE(t.swallowed, 2u * 8192u);
  EXPECT_EQ(t.warnings.size(), 1u);  // the first break, said once
  EXPECT_EQ(t.dropped, 0);
  EXPECT_EQ(std::int64_t(t.run.telemetry.steps.size()), t.made);
  EXPECT_EQ(distinct_steps(t.run), t.made) << "a step stored twice";
  ASSERT_EQ(t.run.deliveries.size(), 1u);
  EXPECT_EQ(t.run.deliveries[0].records_received, t.sent);
  EXPECT_TRUE(t.run.deliveries[0].clean_end);
}

// What was lost in flight and is no longer kept cannot be resent: it is
// counted dropped, exactly, and what arrived is still stored once.
TEST(Sender, ARecordLostInFlightAndNoLongerKeptIsCountedDropped) {
  const ThroughRelay t = send_through_a_lossy_relay(40000, 2048);
  EXPECT_EQ(t.cuts, 2);
  EXPECT_GT(t.dropped, 0);
  const auto stored = std::int64_t(t.run.telemetry.steps.size());
  EXPECT_EQ(stored + t.dropped, t.made);
  EXPECT_EQ(distinct_steps(t.run), stored) << "a step stored twice";
  ASSERT_EQ(t.run.deliveries.size(), 1u);
  EXPECT_EQ(t.run.deliveries[0].records_received, t.sent);
}

// A collector whose node is starved reads a new connection's Hello late:
// here after 6 s, past the rank's 5 s exit deadline (as the runtime's).
// Before, the rank waited for the Verdict (30 s, then a new connection that
// queued behind the old one) and, ending first, dropped everything it had
// recorded: 256 ranks of 40,000 steps on this 2-core machine lost 89 ranks'
// telemetry. Now a stream's first connection writes after 2 s without the
// Verdict, the collector sends none to a connection that wrote past its
// Hello (it would reach a rank that may have closed, and reset it), and
// every step arrives once.
TEST(Sender, AHelloReadLateStillDeliversEveryStepOnce) {
  const ThroughRelay t =
      send_through_a_lossy_relay(20000, std::size_t{4} << 20, ~std::size_t{0}, 6000ms, 5000ms);
  EXPECT_EQ(t.cuts, 0);
  EXPECT_TRUE(t.warnings.empty()) << t.warnings.front();
  EXPECT_EQ(t.dropped, 0);
  EXPECT_EQ(std::int64_t(t.run.telemetry.steps.size()), t.made);
  EXPECT_EQ(distinct_steps(t.run), t.made);
  ASSERT_EQ(t.run.deliveries.size(), 1u);
  EXPECT_EQ(t.run.deliveries[0].records_received, t.sent);
  EXPECT_TRUE(t.run.deliveries[0].clean_end);
}

}  // namespace
}  // namespace traceml::runtime
