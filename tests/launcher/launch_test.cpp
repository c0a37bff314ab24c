// Real child processes (/bin/sh scripts) started by launch_and_wait; the
// launcher's own stdout/stderr are redirected to files to see what it relays.
#include "launcher/launch.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/subprocess.hpp"

namespace traceml::launcher {
namespace {

using traceml::testing::read_file;
using traceml::testing::TempDir;
using namespace std::chrono_literals;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (auto pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1)) {
    ++n;
  }
  return n;
}

/// Processes of process group `pgid` that are alive (zombies waiting for
/// their reaper do not count), read from /proc.
std::size_t live_members_of_group(long pgid) {
  std::size_t n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string stat = read_file(entry.path() / "stat");
    const auto close = stat.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream fields(stat.substr(close + 1));
    char state = 0;
    long ppid = 0;
    long pgrp = 0;
    if (fields >> state >> ppid >> pgrp && pgrp == pgid && state != 'Z') ++n;
  }
  return n;
}

/// True once no process of the group is alive; false after 10 s.
bool group_ends(long pgid) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (live_members_of_group(pgid) > 0) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(10ms);
  }
  return true;
}

/// Points fds 1 and 2 at files for its lifetime (gtest's own output is
/// flushed first and goes back to the terminal afterwards).
class CapturedStdio {
 public:
  CapturedStdio() : out_path_(dir_.path() / "out"), err_path_(dir_.path() / "err") {
    std::fflush(stdout);
    std::fflush(stderr);
    saved_out_ = ::dup(1);
    saved_err_ = ::dup(2);
    redirect(out_path_.c_str(), 1);
    redirect(err_path_.c_str(), 2);
  }
  ~CapturedStdio() {
    std::fflush(stdout);
    std::fflush(stderr);
    ::dup2(saved_out_, 1);
    ::dup2(saved_err_, 2);
    ::close(saved_out_);
    ::close(saved_err_);
  }
  CapturedStdio(const CapturedStdio&) = delete;
  CapturedStdio& operator=(const CapturedStdio&) = delete;

  [[nodiscard]] std::string out() const { return read_file(out_path_); }
  [[nodiscard]] std::string err() const { return read_file(err_path_); }

  /// Waits until stdout holds `n` copies of `needle`; false after 20 s.
  [[nodiscard]] bool wait_for_out(const std::string& needle, std::size_t n) const {
    const auto deadline = std::chrono::steady_clock::now() + 20s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (count_of(out(), needle) >= n) return true;
      std::this_thread::sleep_for(10ms);
    }
    return false;
  }

 private:
  static void redirect(const char* path, int target) {
    const int fd = ::open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    ::dup2(fd, target);
    ::close(fd);
  }

  TempDir dir_;
  std::filesystem::path out_path_;
  std::filesystem::path err_path_;
  int saved_out_ = -1;
  int saved_err_ = -1;
};

struct Relayed {
  LaunchOutcome outcome;
  std::string out;
  std::string err;
  double seconds = 0.0;
};

Relayed run_captured(const LaunchPlan& plan) {
  CapturedStdio io;
  Relayed r;
  const auto start = std::chrono::steady_clock::now();
  r.outcome = launch_and_wait(plan);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.out = io.out();
  r.err = io.err();
  return r;
}

LaunchPlan sh_plan(int nproc, const std::string& script) {
  LaunchPlan plan;
  plan.nproc_per_node = nproc;
  plan.command = {"/bin/sh", "-c", script};
  plan.grace = 2000ms;
  return plan;
}

/// The disposition of `sig` now (handler address or SIG_DFL/SIG_IGN).
void* handler_of(int sig) {
  struct sigaction now {};
  ::sigaction(sig, nullptr, &now);
  return reinterpret_cast<void*>(now.sa_handler);
}

extern "C" void test_noop_handler(int) {}

/// Makes a stray SIGINT harmless to the test process and checks afterwards
/// that launch_and_wait handed the disposition back.
class NoopSigint {
 public:
  NoopSigint() {
    struct sigaction action {};
    action.sa_handler = test_noop_handler;
    sigemptyset(&action.sa_mask);
    ::sigaction(SIGINT, &action, &previous_);
  }
  ~NoopSigint() { ::sigaction(SIGINT, &previous_, nullptr); }
  NoopSigint(const NoopSigint&) = delete;
  NoopSigint& operator=(const NoopSigint&) = delete;

 private:
  struct sigaction previous_ {};
};

TEST(TorchrunEnvironment, NamesAndValuesForALocalRankOnTheSecondNode) {
  LaunchPlan plan;
  plan.nproc_per_node = 4;
  plan.nnodes = 2;
  plan.node_rank = 1;
  plan.master_addr = "10.0.0.7";
  plan.master_port = 29501;
  const EnvVars env = torchrun_environment(plan, 2);
  EXPECT_EQ(env, (EnvVars{{"RANK", "6"},
                          {"WORLD_SIZE", "8"},
                          {"LOCAL_RANK", "2"},
                          {"LOCAL_WORLD_SIZE", "4"},
                          {"GROUP_RANK", "1"},
                          {"ROLE_RANK", "6"},
                          {"MASTER_ADDR", "10.0.0.7"},
                          {"MASTER_PORT", "29501"}}));
}

TEST(LaunchAndWait, TwoRanksGetTheTorchrunEnvironmentAndPrefixedOutput) {
  LaunchPlan plan =
      sh_plan(2,
              "echo \"RANK=$RANK WORLD_SIZE=$WORLD_SIZE LOCAL_RANK=$LOCAL_RANK "
              "LOCAL_WORLD_SIZE=$LOCAL_WORLD_SIZE GROUP_RANK=$GROUP_RANK ROLE_RANK=$ROLE_RANK "
              "MASTER_ADDR=$MASTER_ADDR MASTER_PORT=$MASTER_PORT\"; echo \"to stderr $RANK\" >&2");
  plan.master_addr = "127.0.0.2";
  plan.master_port = 29555;
  const Relayed r = run_captured(plan);

  EXPECT_EQ(r.outcome.exit_code, 0);
  const auto out = lines_of(r.out);
  ASSERT_EQ(out.size(), 2u) << r.out;
  for (int rank = 0; rank < 2; ++rank) {
    const std::string expected =
        "[rank" + std::to_string(rank) + "]: RANK=" + std::to_string(rank) +
        " WORLD_SIZE=2 LOCAL_RANK=" + std::to_string(rank) +
        " LOCAL_WORLD_SIZE=2 GROUP_RANK=0 ROLE_RANK=" + std::to_string(rank) +
        " MASTER_ADDR=127.0.0.2 MASTER_PORT=29555";
    EXPECT_EQ(count_of(r.out, expected + "\n"), 1u) << r.out;
    EXPECT_EQ(count_of(r.err, "[rank" + std::to_string(rank) + "]: to stderr " +
                                  std::to_string(rank) + "\n"),
              1u)
        << r.err;
  }
  EXPECT_EQ(lines_of(r.err).size(), 2u) << r.err;
}

TEST(LaunchAndWait, SecondNodeRanksUseGlobalRankInPrefixAndOutcome) {
  LaunchPlan plan = sh_plan(2, "echo \"$RANK/$WORLD_SIZE local $LOCAL_RANK group $GROUP_RANK\"");
  plan.nnodes = 2;
  plan.node_rank = 1;
  const Relayed r = run_captured(plan);

  EXPECT_EQ(count_of(r.out, "[rank2]: 2/4 local 0 group 1\n"), 1u) << r.out;
  EXPECT_EQ(count_of(r.out, "[rank3]: 3/4 local 1 group 1\n"), 1u) << r.out;
  ASSERT_EQ(r.outcome.ranks.size(), 2u);
  EXPECT_EQ(r.outcome.ranks[0].global_rank, 2);
  EXPECT_EQ(r.outcome.ranks[0].local_rank, 0);
  EXPECT_EQ(r.outcome.ranks[1].global_rank, 3);
  EXPECT_EQ(r.outcome.ranks[1].local_rank, 1);
}

TEST(LaunchAndWait, InheritedAndExtraEnvironmentWithTorchrunNamesWinning) {
  ::setenv("TRACEML_LAUNCH_TEST_INHERITED", "from-parent", 1);
  ::setenv("WORLD_SIZE", "1000", 1);  // a stale value in the launcher's env loses too
  LaunchPlan plan =
      sh_plan(1, "echo \"$TRACEML_LAUNCH_TEST_INHERITED $EXTRA_ONE $RANK $WORLD_SIZE\"");
  plan.extra_env = {{"EXTRA_ONE", "extra-value"}, {"RANK", "99"}};
  const Relayed r = run_captured(plan);
  ::unsetenv("TRACEML_LAUNCH_TEST_INHERITED");
  ::unsetenv("WORLD_SIZE");

  EXPECT_EQ(r.out, "[rank0]: from-parent extra-value 0 1\n");
}

TEST(LaunchAndWait, WithoutPrefixLinesAreRelayedAsTheyAre) {
  LaunchPlan plan = sh_plan(1, "echo plain; printf 'no newline'");
  plan.prefix_output = false;
  const Relayed r = run_captured(plan);
  EXPECT_EQ(r.out, "plain\nno newline\n");
}

TEST(LaunchAndWait, AllRanksSucceedRecordsPidsAndTimes) {
  const double before =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  const Relayed r = run_captured(sh_plan(3, "echo $$"));

  EXPECT_EQ(r.outcome.exit_code, 0);
  EXPECT_FALSE(r.outcome.first_failed_rank.has_value());
  EXPECT_FALSE(r.outcome.interrupt_signal.has_value());
  ASSERT_EQ(r.outcome.ranks.size(), 3u);
  for (const RankOutcome& rank : r.outcome.ranks) {
    EXPECT_EQ(rank.exit_code, 0);
    EXPECT_FALSE(rank.signal.has_value());
    EXPECT_FALSE(rank.stopped_by_launcher);
    EXPECT_GT(rank.pid, 0);
    // The child printed its own pid: the recorded one is the rank itself.
    EXPECT_EQ(count_of(r.out, "[rank" + std::to_string(rank.global_rank) +
                                  "]: " + std::to_string(rank.pid) + "\n"),
              1u)
        << r.out;
    EXPECT_GE(rank.started_at, before - 1.0);
    EXPECT_LE(rank.started_at, rank.ended_at);
  }
}

TEST(LaunchAndWait, ARankThatFailsStopsTheOthersWithSigterm) {
  LaunchPlan plan = sh_plan(3, "if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 3; fi; sleep 30; true");
  plan.grace = 5000ms;
  const Relayed r = run_captured(plan);

  EXPECT_EQ(r.outcome.exit_code, 3);
  EXPECT_EQ(r.outcome.first_failed_rank, std::optional<int>(1));
  EXPECT_LT(r.seconds, 15.0);
  ASSERT_EQ(r.outcome.ranks.size(), 3u);
  EXPECT_EQ(r.outcome.ranks[1].exit_code, 3);
  EXPECT_FALSE(r.outcome.ranks[1].stopped_by_launcher);
  for (int other : {0, 2}) {
    const RankOutcome& rank = r.outcome.ranks[static_cast<std::size_t>(other)];
    EXPECT_EQ(rank.signal, std::optional<int>(SIGTERM)) << other;
    EXPECT_EQ(rank.exit_code, 128 + SIGTERM) << other;
    EXPECT_TRUE(rank.stopped_by_launcher) << other;
    EXPECT_GE(rank.ended_at, r.outcome.ranks[1].ended_at) << other;
    // The signal went to the group: the shell's `sleep 30` child is gone too.
    EXPECT_TRUE(group_ends(rank.pid)) << other;
  }
}

TEST(LaunchAndWait, ARankKilledBySignalCountsAs128PlusSignal) {
  const Relayed r = run_captured(sh_plan(1, "kill -9 $$"));
  EXPECT_EQ(r.outcome.exit_code, 137);
  EXPECT_EQ(r.outcome.first_failed_rank, std::optional<int>(0));
  ASSERT_EQ(r.outcome.ranks.size(), 1u);
  EXPECT_EQ(r.outcome.ranks[0].signal, std::optional<int>(SIGKILL));
  EXPECT_EQ(r.outcome.ranks[0].exit_code, 137);
}

TEST(LaunchAndWait, ARankIgnoringSigtermIsKilledAfterTheGrace) {
  TempDir sync;
  // Rank 0 fails only once rank 1 ignores SIGTERM, so the order is certain.
  LaunchPlan plan = sh_plan(2,
                            "if [ \"$RANK\" = 0 ]; then"
                            "  while [ ! -e \"$SYNC_DIR/ready\" ]; do sleep 0.01; done; exit 1; "
                            "fi; trap '' TERM; touch \"$SYNC_DIR/ready\"; "
                            "while :; do sleep 0.05; done");
  plan.extra_env = {{"SYNC_DIR", sync.path().string()}};
  plan.grace = 300ms;
  const Relayed r = run_captured(plan);

  EXPECT_EQ(r.outcome.exit_code, 1);
  EXPECT_EQ(r.outcome.first_failed_rank, std::optional<int>(0));
  EXPECT_LT(r.seconds, 15.0);
  ASSERT_EQ(r.outcome.ranks.size(), 2u);
  const RankOutcome& stubborn = r.outcome.ranks[1];
  EXPECT_EQ(stubborn.signal, std::optional<int>(SIGKILL));
  EXPECT_EQ(stubborn.exit_code, 137);
  EXPECT_TRUE(stubborn.stopped_by_launcher);
  // SIGKILL comes only after the grace: never earlier than 300 ms.
  EXPECT_GE(stubborn.ended_at - r.outcome.ranks[0].ended_at, 0.29);
  EXPECT_TRUE(group_ends(stubborn.pid));  // its sleep (TERM ignored too) was killed as well
}

TEST(LaunchAndWait, SigintToTheLauncherIsForwardedToTheRanks) {
  NoopSigint guard;
  void* const before = handler_of(SIGINT);
  CapturedStdio io;
  std::thread sender([&io] {
    if (io.wait_for_out("ready", 2)) ::kill(::getpid(), SIGINT);
  });
  const LaunchOutcome outcome = launch_and_wait(sh_plan(2, "echo ready; exec sleep 30"));
  sender.join();

  EXPECT_EQ(outcome.interrupt_signal, std::optional<int>(SIGINT));
  EXPECT_EQ(outcome.exit_code, 130);
  EXPECT_FALSE(outcome.first_failed_rank.has_value());
  ASSERT_EQ(outcome.ranks.size(), 2u);
  for (const RankOutcome& rank : outcome.ranks) {
    EXPECT_EQ(rank.signal, std::optional<int>(SIGINT));
    EXPECT_EQ(rank.exit_code, 130);
    EXPECT_TRUE(rank.stopped_by_launcher);
  }
  EXPECT_EQ(handler_of(SIGINT), before);
}

TEST(LaunchAndWait, InterruptWithEveryRankExitingZeroStillReports128PlusSignal) {
  NoopSigint guard;
  CapturedStdio io;
  std::thread sender([&io] {
    if (io.wait_for_out("ready", 1)) ::kill(::getpid(), SIGTERM);
  });
  const LaunchOutcome outcome = launch_and_wait(
      sh_plan(1, "trap 'echo cleaned up; exit 0' TERM; echo ready; while :; do sleep 0.05; done"));
  sender.join();

  EXPECT_EQ(outcome.interrupt_signal, std::optional<int>(SIGTERM));
  EXPECT_EQ(outcome.exit_code, 128 + SIGTERM);
  ASSERT_EQ(outcome.ranks.size(), 1u);
  EXPECT_EQ(outcome.ranks[0].exit_code, 0);
  EXPECT_TRUE(outcome.ranks[0].stopped_by_launcher);
  EXPECT_EQ(count_of(io.out(), "[rank0]: cleaned up\n"), 1u) << io.out();
}

TEST(LaunchAndWait, ASecondSigintKillsAtOnce) {
  NoopSigint guard;
  CapturedStdio io;
  std::atomic<bool> second_sent{false};
  std::thread sender([&io, &second_sent] {
    if (!io.wait_for_out("ready", 1)) return;
    ::kill(::getpid(), SIGINT);
    // The rank reports that the first one reached it; only then the second.
    if (!io.wait_for_out("got-int", 1)) return;
    ::kill(::getpid(), SIGINT);
    second_sent = true;
  });
  LaunchPlan plan =
      sh_plan(1, "trap 'echo got-int' INT; echo ready; while :; do sleep 0.05 || true; done");
  plan.grace = 60000ms;  // far longer than the test: only the second SIGINT can end it
  const auto start = std::chrono::steady_clock::now();
  const LaunchOutcome outcome = launch_and_wait(plan);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  sender.join();

  EXPECT_TRUE(second_sent.load()) << io.out();
  EXPECT_LT(seconds, 30.0);
  EXPECT_EQ(outcome.interrupt_signal, std::optional<int>(SIGINT));
  ASSERT_EQ(outcome.ranks.size(), 1u);
  EXPECT_EQ(outcome.ranks[0].signal, std::optional<int>(SIGKILL));
  EXPECT_EQ(outcome.exit_code, 137);
}

TEST(LaunchAndWait, OutputWrittenJustBeforeExitIsNotLostAndPartialLineIsFlushed) {
  const Relayed r = run_captured(sh_plan(2, "echo first; printf 'last without newline'; exit 0"));
  for (const char* prefix : {"[rank0]: ", "[rank1]: "}) {
    EXPECT_EQ(count_of(r.out, std::string(prefix) + "first\n"), 1u) << r.out;
    EXPECT_EQ(count_of(r.out, std::string(prefix) + "last without newline\n"), 1u) << r.out;
  }
  EXPECT_EQ(r.out.back(), '\n');
}

TEST(LaunchAndWait, LinesOfDifferentRanksNeverInterleave) {
  const std::string payload = "0123456789abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnop";
  const Relayed r = run_captured(sh_plan(3, "yes \"$RANK-" + payload + "\" | head -n 4000"));
  EXPECT_EQ(r.outcome.exit_code, 0);
  std::vector<std::size_t> per_rank(3, 0);
  for (const std::string& line : lines_of(r.out)) {
    bool matched = false;
    for (int rank = 0; rank < 3; ++rank) {
      const std::string rs = std::to_string(rank);
      if (line == "[rank" + rs + "]: " + rs + "-" + payload) {
        ++per_rank[static_cast<std::size_t>(rank)];
        matched = true;
      }
    }
    ASSERT_TRUE(matched) << "mangled line: " << line;
  }
  EXPECT_EQ(per_rank, (std::vector<std::size_t>{4000, 4000, 4000}));
}

TEST(LaunchAndWait, ALineLongerThan64KiBIsRelayedInChunks) {
  const Relayed r =
      run_captured(sh_plan(1, "head -c 200000 /dev/zero | tr '\\0' x; echo; echo after"));
  const auto lines = lines_of(r.out);
  const std::string prefix = "[rank0]: ";
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0], prefix + std::string(65536, 'x'));
  EXPECT_EQ(lines[1], prefix + std::string(65536, 'x'));
  EXPECT_EQ(lines[2], prefix + std::string(65536, 'x'));
  EXPECT_EQ(lines[3], prefix + std::string(200000 - 3 * 65536, 'x'));
  EXPECT_EQ(lines[4], prefix + "after");
}

TEST(LaunchAndWait, AGrandchildHoldingThePipeDoesNotHangTheLauncher) {
  const Relayed r = run_captured(sh_plan(1, "sleep 30 & echo started"));
  EXPECT_EQ(r.outcome.exit_code, 0);
  EXPECT_EQ(r.out, "[rank0]: started\n");
  EXPECT_LT(r.seconds, 10.0);
  ASSERT_EQ(r.outcome.ranks.size(), 1u);
  EXPECT_EQ(live_members_of_group(r.outcome.ranks[0].pid),
            1u);  // the sleep, still holding the pipe
  ::kill(-static_cast<pid_t>(r.outcome.ranks[0].pid), SIGKILL);  // the orphaned sleep
}

TEST(LaunchAndWait, RanksStartWithDefaultSignalsNoStrayFdsAndNullStdin) {
  // What a child must not inherit: an ignored signal, a blocked signal, and a
  // descriptor opened without O_CLOEXEC.
  struct sigaction ignore {};
  ignore.sa_handler = SIG_IGN;
  sigemptyset(&ignore.sa_mask);
  struct sigaction previous_usr1 {};
  ::sigaction(SIGUSR1, &ignore, &previous_usr1);
  sigset_t usr2;
  sigemptyset(&usr2);
  sigaddset(&usr2, SIGUSR2);
  sigset_t previous_mask;
  ::pthread_sigmask(SIG_BLOCK, &usr2, &previous_mask);
  const int leaky = ::open("/dev/null", O_RDONLY);
  ASSERT_GT(leaky, 2);

  const Relayed r =
      run_captured(sh_plan(1, "if [ -e /proc/$$/fd/" + std::to_string(leaky) +
                                  " ]; then echo leaked; else echo closed; fi; "
                                  "if read line; then echo stdin-data; else echo stdin-eof; fi; "
                                  "exec grep -E '^Sig(Blk|Ign)' /proc/self/status"));

  ::close(leaky);
  ::pthread_sigmask(SIG_SETMASK, &previous_mask, nullptr);
  ::sigaction(SIGUSR1, &previous_usr1, nullptr);

  EXPECT_EQ(r.out,
            "[rank0]: closed\n"
            "[rank0]: stdin-eof\n"
            "[rank0]: SigBlk:\t0000000000000000\n"
            "[rank0]: SigIgn:\t0000000000000000\n");
}

TEST(LaunchAndWait, SignalDispositionsAreRestoredAfterwards) {
  NoopSigint guard;
  void* const int_before = handler_of(SIGINT);
  void* const term_before = handler_of(SIGTERM);
  void* const pipe_before = handler_of(SIGPIPE);
  void* const chld_before = handler_of(SIGCHLD);
  (void)run_captured(sh_plan(1, "true"));
  EXPECT_EQ(handler_of(SIGINT), int_before);
  EXPECT_EQ(handler_of(SIGTERM), term_before);
  EXPECT_EQ(handler_of(SIGPIPE), pipe_before);
  EXPECT_EQ(handler_of(SIGCHLD), chld_before);
}

TEST(LaunchAndWait, ProgramIsLookedUpInPath) {
  LaunchPlan plan;
  plan.command = {"sh", "-c", "echo found"};
  EXPECT_EQ(run_captured(plan).out, "[rank0]: found\n");
}

TEST(LaunchAndWait, ProgramNotFoundFailsBeforeStartingAnything) {
  NoopSigint guard;
  void* const before = handler_of(SIGINT);
  LaunchPlan plan;
  plan.nproc_per_node = 2;
  plan.command = {"traceml-no-such-program-xyz", "--flag"};
  CapturedStdio io;
  try {
    (void)launch_and_wait(plan);
    FAIL() << "expected LaunchError";
  } catch (const LaunchError& e) {
    EXPECT_STREQ(e.what(),
                 "traceml-no-such-program-xyz: program not found (give a path, or put it on PATH)");
  }
  plan.command = {"./no/such/dir/train"};
  try {
    (void)launch_and_wait(plan);
    FAIL() << "expected LaunchError";
  } catch (const LaunchError& e) {
    EXPECT_STREQ(e.what(),
                 "./no/such/dir/train: program not found (give a path, or put it on PATH)");
  }
  EXPECT_EQ(io.out(), "");
  EXPECT_EQ(io.err(), "");
  EXPECT_EQ(handler_of(SIGINT), before);
}

TEST(LaunchAndWait, ANonExecutableProgramFailsBeforeStartingAnything) {
  TempDir dir;
  const std::string script = (dir.path() / "train.sh").string();
  {
    std::FILE* f = std::fopen(script.c_str(), "w");
    ASSERT_NE(f, nullptr);
    std::fputs("#!/bin/sh\necho should-not-run\n", f);
    std::fclose(f);
  }
  ::chmod(script.c_str(), 0644);
  LaunchPlan plan;
  plan.command = {script};
  CapturedStdio io;
  try {
    (void)launch_and_wait(plan);
    FAIL() << "expected LaunchError";
  } catch (const LaunchError& e) {
    EXPECT_EQ(std::string(e.what()), script + ": not executable");
  }
  plan.command = {dir.path().string()};  // a directory cannot be executed either
  try {
    (void)launch_and_wait(plan);
    FAIL() << "expected LaunchError";
  } catch (const LaunchError& e) {
    EXPECT_EQ(std::string(e.what()), dir.path().string() + ": not executable");
  }
  EXPECT_EQ(io.out(), "");
}

}  // namespace
}  // namespace traceml::launcher
