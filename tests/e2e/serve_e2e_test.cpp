// End-to-end: `traceml serve` hosting the collector for ranks that another
// launcher starts. The ranks here are started by the test itself, as torchrun
// or srun would, with torchrun's variables (RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR, MASTER_PORT) and the two variables serve prints. Real
// processes, real sockets, c10d Gloo between the ranks; the assertions are on
// what a user sees: serve's exit code and lines, final_summary.json and
// manifest.json, and the ranks' own exit codes and output.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "../support/examples.hpp"
#include "../support/json_file.hpp"
#include "../support/subprocess.hpp"
#include "launcher/free_port.hpp"
#include "served.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"
#include "transport/record_codec.hpp"
#include "transport/tcp_client.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kExamples = examples_dir();
const std::string kTinyRank = TRACEML_TINY_RANK_PATH;

std::string primary_kind(const Json& summary) {
  return summary.value("/primary_diagnosis/kind"_json_pointer, std::string());
}

TEST(Serve, TwoRanksStartedByHandGiveOneSummaryThatNamesTheStraggler) {
  TempDir dir;
  Served serve(dir, {"--run-name", "job"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  const auto master = launcher::pick_free_port();
  ASSERT_TRUE(master);
  const std::vector<std::string> program = {
      kExamples + "/ddp", "--steps", "120", "--slow-rank", "1", "--slow-input-ms", "15"};
  ChildProcess r0(rank_argv(vars, 0, 2, *master, program));
  ChildProcess r1(rank_argv(vars, 1, 2, *master, program));
  const ProcessResult p0 = r0.wait();
  const ProcessResult p1 = r1.wait();
  EXPECT_EQ(p0.exit_code, 0) << p0.err;
  EXPECT_EQ(p1.exit_code, 0) << p1.err;
  // The run ends by itself once both ranks said goodbye: no signal needed.
  const ProcessResult s = serve.child.wait();
  ASSERT_EQ(s.exit_code, 0) << s.err;
  EXPECT_NE(s.err.find("traceml: ranks need: export TRACEML_AGGREGATOR_HOST=127.0.0.1 "
                       "TRACEML_AGGREGATOR_PORT="),
            std::string::npos)
      << s.err;
  // The ranks are numbered as they come, in either order.
  EXPECT_NE(s.err.find("rank 0 connected ("), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("rank 1 connected ("), std::string::npos) << s.err;
  EXPECT_NE(s.err.find(" connected (2 of 2)"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find(" ended (2 of 2)"), std::string::npos) << s.err;
  // One diagnosis of the whole job, as a `traceml run` gives it.
  const fs::path run = dir.path() / "logs" / "job";
  const Json summary = load_json(run / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << s.err;
  EXPECT_EQ(primary_kind(summary), "INPUT_STRAGGLER") << s.out;
  EXPECT_EQ(summary.value("/primary_diagnosis/evidence/worst/rank"_json_pointer, -1), 1);
  EXPECT_NE(s.out.find("Verdict: INPUT STRAGGLER"), std::string::npos) << s.out;
  EXPECT_TRUE(fs::exists(run / "final_summary.html"));
  // Neither rank wrote a standalone directory of its own.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path() / "logs"), fs::directory_iterator()),
            1);
  const Json manifest = load_json(run / "manifest.json");
  EXPECT_EQ(manifest["launched_by"], "traceml serve");
  EXPECT_EQ(manifest["status"], "completed");
  EXPECT_EQ(manifest["end_reason"], "world_ended");
  EXPECT_EQ(manifest["world_size"], 2);
  ASSERT_EQ(manifest["ranks"].size(), 2u);
  EXPECT_EQ(manifest["ranks"][1]["ended"], "goodbye");
  EXPECT_EQ(manifest["telemetry"]["records_dropped"], 0);
}

/// `program` on PATH, or empty. torchrun (Debian: python3-torch) and mpirun
/// (openmpi-bin) are installed by scripts/install-deps.sh.
std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  std::string dirs = path != nullptr ? path : "";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "";
}

TEST(Serve, TorchrunStartsTheCppBinaryAndServeGivesTheJobsVerdict) {
  const std::string torchrun = find_on_path("torchrun");
  if (torchrun.empty()) GTEST_SKIP() << "no torchrun on PATH (apt-get install python3-torch)";
  TempDir dir;
  Served serve(dir, {"--run-name", "torchrun_job"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  const auto master = launcher::pick_free_port();
  ASSERT_TRUE(master);
  std::vector<std::string> argv = {"/usr/bin/env", "TRACEML_INTERVAL=0.2"};
  argv.insert(argv.end(), vars.begin(), vars.end());
  // --redirects/--tee name a rank that does not exist: Debian's torch 1.13
  // on Python 3.11 cannot parse their default "0" (its Std flag lookup
  // fails), and a map that leaves ranks 0 and 1 out is the same default.
  for (const std::string& a :
       {torchrun, std::string("--nproc_per_node"), std::string("2"), std::string("--no_python"),
        std::string("--master_port"), std::to_string(*master), std::string("--redirects"),
        std::string("9:1"), std::string("--tee"), std::string("9:1"), kExamples + "/ddp",
        std::string("--steps"), std::string("120"), std::string("--slow-rank"), std::string("1"),
        std::string("--slow-input-ms"), std::string("15")})
    argv.push_back(a);
  const ProcessResult t = run_process(argv);
  ASSERT_EQ(t.exit_code, 0) << t.err;
  const ProcessResult s = serve.child.wait();
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const Json summary = load_json(dir.path() / "logs" / "torchrun_job" / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << s.err;
  EXPECT_EQ(primary_kind(summary), "INPUT_STRAGGLER") << s.out;
  EXPECT_EQ(summary.value("/primary_diagnosis/evidence/worst/rank"_json_pointer, -1), 1);
  EXPECT_EQ(summary.value("/meta/world_size"_json_pointer, 0), 2);
}

// docs/launchers.md's mpirun recipe: Open MPI starts the C++ binary, which
// never calls MPI_Init; the ranks take OMPI_COMM_WORLD_RANK/_SIZE as their
// identity (traceml's and the example's process group alike), and `-x`
// passes serve's variables and the rendezvous.
TEST(Serve, MpirunStartsTheCppBinaryAndServeGivesTheJobsVerdict) {
  const std::string mpirun = find_on_path("mpirun");
  if (mpirun.empty()) GTEST_SKIP() << "no mpirun on PATH (apt-get install openmpi-bin)";
  TempDir dir;
  Served serve(dir, {"--run-name", "mpirun_job", "--world-size", "2"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  const auto master = launcher::pick_free_port();
  ASSERT_TRUE(master);
  // Open MPI refuses to run as root unless told twice; CI runs as root.
  std::vector<std::string> argv = {"/usr/bin/env",
                                   "OMPI_ALLOW_RUN_AS_ROOT=1",
                                   "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1",
                                   mpirun,
                                   "-np",
                                   "2",
                                   "--bind-to",
                                   "none"};
  for (const std::string& v : vars) {
    argv.push_back("-x");
    argv.push_back(v);
  }
  for (const std::string& a :
       {std::string("-x"), std::string("TRACEML_INTERVAL=0.2"), std::string("-x"),
        std::string("MASTER_ADDR=127.0.0.1"), std::string("-x"),
        "MASTER_PORT=" + std::to_string(*master), kExamples + "/ddp", std::string("--steps"),
        std::string("120"), std::string("--slow-rank"), std::string("1"),
        std::string("--slow-input-ms"), std::string("15")})
    argv.push_back(a);
  const ProcessResult m = run_process(argv);
  ASSERT_EQ(m.exit_code, 0) << m.err;
  const ProcessResult s = serve.child.wait();
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const Json summary = load_json(dir.path() / "logs" / "mpirun_job" / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << s.err;
  EXPECT_EQ(primary_kind(summary), "INPUT_STRAGGLER") << s.out;
  EXPECT_EQ(summary.value("/primary_diagnosis/evidence/worst/rank"_json_pointer, -1), 1);
  EXPECT_EQ(summary.value("/meta/world_size"_json_pointer, 0), 2);
  const Json manifest = load_json(dir.path() / "logs" / "mpirun_job" / "manifest.json");
  EXPECT_EQ(manifest.value("launched_by", ""), "traceml serve");
  EXPECT_EQ(manifest["ranks"][0]["ended"], "goodbye");
  EXPECT_EQ(manifest["ranks"][1]["ended"], "goodbye");
}

TEST(Serve, WrongTokenAndRankOutsideTheWorldAreRefusedWithOneLineEachAndTheRunGoesOn) {
  TempDir dir;
  Served serve(dir, {"--run-name", "guarded", "--world-size", "1"},
               {"TRACEML_RUN_TOKEN=the-right-token"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  const auto master = launcher::pick_free_port();
  ASSERT_TRUE(master);
  const std::vector<std::string> quick = {kExamples + "/quickstart", "--steps", "60"};
  // A stray rank with the wrong token, and one of a bigger job: refused,
  // and their training is untouched (fail-open).
  const ProcessResult stray =
      run_process(rank_argv(vars, 0, 1, *master, quick, {"TRACEML_RUN_TOKEN=wrong"}));
  EXPECT_EQ(stray.exit_code, 0) << stray.err;
  ASSERT_TRUE(serve.said("refused a connection")) << serve.child.err_so_far();
  const ProcessResult outside =
      run_process(rank_argv(vars, 1, 2, *master, quick, {"TRACEML_RUN_TOKEN=the-right-token"}));
  EXPECT_EQ(outside.exit_code, 0) << outside.err;
  ASSERT_TRUE(serve.said("outside the run's world size 1")) << serve.child.err_so_far();
  // The rank that belongs ends the run.
  const ProcessResult good =
      run_process(rank_argv(vars, 0, 1, *master, quick, {"TRACEML_RUN_TOKEN=the-right-token"}));
  EXPECT_EQ(good.exit_code, 0) << good.err;
  // Each refused rank is told why (protocol 4), says so in one line and
  // trains on untraced; before, all it could print was "lost the connection
  // ... Broken pipe", and it retried all run long.
  const auto warnings = [](const std::string& err) {
    std::size_t n = 0;
    for (std::size_t at = 0; (at = err.find("traceml: warning: ", at)) != std::string::npos; ++at)
      ++n;
    return n;
  };
  EXPECT_NE(stray.err.find("refused this rank: wrong run token"), std::string::npos) << stray.err;
  EXPECT_NE(stray.err.find("; training continues untraced"), std::string::npos) << stray.err;
  EXPECT_EQ(warnings(stray.err), 1u) << stray.err;
  EXPECT_NE(outside.err.find("refused this rank: "), std::string::npos) << outside.err;
  EXPECT_NE(outside.err.find("outside the run's world size 1"), std::string::npos) << outside.err;
  EXPECT_EQ(warnings(outside.err), 1u) << outside.err;
  EXPECT_EQ(warnings(good.err), 0u) << good.err;
  const ProcessResult s = serve.child.wait();
  ASSERT_EQ(s.exit_code, 0) << s.err;
  // One line per kind of refusal, however often the stray ranks retried.
  std::size_t lines = 0;
  for (std::size_t at = 0; (at = s.err.find("refused a connection", at)) != std::string::npos; ++at)
    ++lines;
  EXPECT_EQ(lines, 2u) << s.err;
  EXPECT_NE(s.err.find("ranks need this run's TRACEML_RUN_TOKEN"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("TRACEML_RUN_TOKEN=\"$TRACEML_RUN_TOKEN\""), std::string::npos) << s.err;
  const Json manifest = load_json(dir.path() / "logs" / "guarded" / "manifest.json");
  EXPECT_EQ(manifest["status"], "completed") << s.err;
  // Told once, each refused rank came once: it does not retry.
  EXPECT_EQ(manifest["telemetry"]["rejected_by_kind"].value("wrong_token", 0), 1);
  EXPECT_EQ(manifest["telemetry"]["rejected_by_kind"].value("invalid_identity", 0), 1);
  const Json summary = load_json(dir.path() / "logs" / "guarded" / "final_summary.json");
  EXPECT_EQ(summary.value("/tracer/ranks"_json_pointer, Json::array()).size(), 1u);
}

TEST(Serve, OnEveryInterfaceWithoutATokenItMakesOneAndARankWithoutItIsRefused) {
  // It took records from anyone who could reach the port, with a warning.
  TempDir dir;
  Served serve(dir, {"--run-name", "open", "--world-size", "1", "--bind-host", "0.0.0.0",
                     "--aggregator-host", "127.0.0.1"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 3u) << serve.child.err_so_far();
  const std::string prefix = "TRACEML_RUN_TOKEN=";
  ASSERT_EQ(vars[2].rfind(prefix, 0), 0u) << vars[2];
  const std::string token = vars[2].substr(prefix.size());
  EXPECT_EQ(token.size(), 32u) << token;
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << token;
  // The file holds a secret: its owner's only.
  struct stat st {};
  ASSERT_EQ(::stat(serve.env_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  ASSERT_TRUE(serve.said("ranks without it are refused")) << serve.child.err_so_far();
  // The line to paste carries it.
  EXPECT_NE(serve.child.err_so_far().find(vars[1] + " TRACEML_RUN_TOKEN=" + token + "\n"),
            std::string::npos)
      << serve.child.err_so_far();
  // A rank that has the address but not the token: one line, trains on.
  const ProcessResult stray =
      run_process(rank_argv({vars[0], vars[1]}, 0, 1, 1, {kTinyRank, "--steps", "50"}));
  EXPECT_EQ(stray.exit_code, 0) << stray.err;
  EXPECT_NE(stray.out.find("tiny_rank: 50 steps"), std::string::npos) << stray.out;
  EXPECT_NE(stray.err.find("refused this rank: wrong run token"), std::string::npos) << stray.err;
  // The rank given the printed variables is taken and ends the run.
  const ProcessResult good = run_process(rank_argv(vars, 0, 1, 1, {kTinyRank, "--steps", "50"}));
  EXPECT_EQ(good.exit_code, 0) << good.err;
  EXPECT_EQ(good.err.find("traceml: warning"), std::string::npos) << good.err;
  const ProcessResult s = serve.child.wait();
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.err.find("no run token: anyone"), std::string::npos) << s.err;
  const Json manifest = load_json(dir.path() / "logs" / "open" / "manifest.json");
  EXPECT_EQ(manifest["status"], "completed") << s.err;
  EXPECT_EQ(manifest["telemetry"]["rejected_by_kind"].value("wrong_token", 0), 1);
  const Json summary = load_json(dir.path() / "logs" / "open" / "final_summary.json");
  EXPECT_EQ(summary.value("/step_time/metadata/training_total_steps"_json_pointer, -1L), 50);
}

TEST(Serve, RanksAllRefusedEndTheRunAtTheIdleTimeoutWithOneClearLine) {
  // --world-size 1, but the job has 2 ranks: both are refused. The idle
  // clock runs from their first attempt, so serve does not wait forever.
  TempDir dir;
  Served serve(dir, {"--run-name", "refused", "--world-size", "1", "--idle-timeout", "2"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  const auto master = launcher::pick_free_port();
  ASSERT_TRUE(master);
  const ProcessResult r =
      run_process(rank_argv(vars, 1, 2, *master, {kExamples + "/quickstart", "--steps", "60"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;  // the training is untouched
  const ProcessResult s = serve.child.wait();
  EXPECT_EQ(s.exit_code, 1) << s.err;
  EXPECT_NE(s.err.find("outside the run's world size 1"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("(--idle-timeout): ending the run"), std::string::npos) << s.err;
  EXPECT_NE(s.err.find("no rank's telemetry was accepted"), std::string::npos) << s.err;
  const Json manifest = load_json(dir.path() / "logs" / "refused" / "manifest.json");
  EXPECT_EQ(manifest["status"], "timed_out");
  EXPECT_EQ(manifest["end_reason"], "idle_timeout");
  EXPECT_EQ(manifest["ranks"][0]["ended"], "never_connected");
}

TEST(Serve, SigintEndsTheRunWithItsSummaryAndTheRankTrainsOn) {
  TempDir dir;
  Served serve(dir, {"--run-name", "stopped"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  const auto master = launcher::pick_free_port();
  ASSERT_TRUE(master);
  // input_bound's steps take about 3.5 ms on any LibTorch (its loader's
  // transform sets the pace): the rank is still training when serve stops.
  ChildProcess rank(
      rank_argv(vars, 0, 1, *master, {kExamples + "/input_bound", "--steps", "3000"}));
  ASSERT_TRUE(serve.said("rank 0 connected")) << serve.child.err_so_far();
  std::this_thread::sleep_for(1500ms);  // a few flushes of steps
  serve.child.signal(SIGINT);
  const ProcessResult s = serve.child.wait();
  EXPECT_EQ(s.exit_code, 128 + SIGINT) << s.err;
  EXPECT_NE(s.err.find("ending the run"), std::string::npos) << s.err;
  const fs::path run = dir.path() / "logs" / "stopped";
  const Json summary = load_json(run / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << s.err;
  EXPECT_EQ(summary.value("/run/status"_json_pointer, std::string()), "interrupted");
  EXPECT_NE(s.out.find("Run: INTERRUPTED"), std::string::npos) << s.out;
  const Json manifest = load_json(run / "manifest.json");
  EXPECT_EQ(manifest["end_reason"], "signal");
  EXPECT_EQ(manifest["ranks"][0]["ended"], "still_connected");
  // The collector went away; the rank did not notice beyond one warning.
  const ProcessResult r = rank.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(Serve, ARankKilledMidRunEndsTheRunAsFailedNamingIt) {
  TempDir dir;
  Served serve(dir, {"--run-name", "crashed", "--world-size", "1"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  const auto master = launcher::pick_free_port();
  ASSERT_TRUE(master);
  ChildProcess rank(
      rank_argv(vars, 0, 1, *master, {kExamples + "/quickstart", "--steps", "100000"}));
  ASSERT_TRUE(serve.said("rank 0 connected")) << serve.child.err_so_far();
  std::this_thread::sleep_for(1000ms);
  rank.signal(SIGKILL);
  rank.wait();
  const ProcessResult s = serve.child.wait();
  EXPECT_EQ(s.exit_code, 1) << s.err;
  EXPECT_NE(s.err.find("rank 0 closed its connection without a goodbye"), std::string::npos)
      << s.err;
  const fs::path run = dir.path() / "logs" / "crashed";
  const Json summary = load_json(run / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << s.err;
  EXPECT_EQ(summary.value("/run/status"_json_pointer, std::string()), "failed");
  EXPECT_EQ(summary.value("/run/failed_rank"_json_pointer, -1), 0);
  const Json manifest = load_json(run / "manifest.json");
  EXPECT_EQ(manifest["ranks"][0]["ended"], "connection_lost");
  EXPECT_EQ(manifest["end_reason"], "world_ended");
}

TEST(Serve, ARankWhoseProgramReturnsThreeFailsTheRunWithItsCode) {
  // The goodbye was sent from an atexit hook, which never sees the status:
  // a program that returned 3 read "completed". Protocol 4's goodbye
  // carries it (glibc's on_exit), so serve sees the failure and its code:
  // also after an explicit traceml::shutdown() (rank 1, as every example
  // does), which sends the records and keeps the connection for the goodbye.
  TempDir dir;
  Served serve(dir, {"--run-name", "three", "--world-size", "2"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  ChildProcess r0(
      rank_argv(vars, 0, 2, 1, {kTinyRank, "--steps", "200", "--step-us", "500", "--no-shutdown"}));
  ChildProcess r1(
      rank_argv(vars, 1, 2, 1, {kTinyRank, "--steps", "200", "--step-us", "500", "--exit", "3"}));
  EXPECT_EQ(r0.wait().exit_code, 0);
  const ProcessResult p1 = r1.wait();
  EXPECT_EQ(p1.exit_code, 3) << p1.err;  // its own, untouched
  EXPECT_EQ(p1.err.find("traceml: warning"), std::string::npos) << p1.err;
  const ProcessResult s = serve.child.wait();
  EXPECT_EQ(s.exit_code, 1) << s.err;
  EXPECT_NE(s.err.find("traceml: warning: rank 1 exited with code 3"), std::string::npos) << s.err;
  const fs::path run = dir.path() / "logs" / "three";
  const Json summary = load_json(run / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << s.err;
  EXPECT_EQ(summary.value("/run/status"_json_pointer, std::string()), "failed");
  EXPECT_EQ(summary.value("/run/failed_rank"_json_pointer, -1), 1);
  bool said = false;
  for (const Json& r : summary["run"]["ranks"])
    if (r["rank"] == 1) said = r["exit_code"] == 3;
  EXPECT_TRUE(said) << summary["run"].dump();
  // Serve sees no process: the rank's code from its goodbye, no black box.
  EXPECT_NE(s.out.find("Run: FAILED · rank 1 failed (it exited with code 3)"), std::string::npos)
      << s.out;
  EXPECT_NE(s.out.find(" · exit code 1 · "), std::string::npos) << s.out;
  EXPECT_EQ(s.out.find("completed steps"), std::string::npos) << s.out;
  const Json manifest = load_json(run / "manifest.json");
  EXPECT_EQ(manifest["status"], "failed");
  EXPECT_EQ(manifest["ranks"][1]["exit_code"], 3);
  EXPECT_EQ(manifest["ranks"][0]["exit_code"], 0);
}

/// What a rank built before protocol 4 sends: a Hello of protocol 3 (no
/// stream), its stats, `steps` steps ending now, Bye. It reads nothing.
std::vector<std::uint8_t> protocol_three_rank(int rank, int world, int steps) {
  std::vector<std::uint8_t> out;
  const auto add = [&out](transport::FrameType t, const std::vector<std::uint8_t>& payload) {
    const auto f = transport::encode_frame(t, payload);
    out.insert(out.end(), f->begin(), f->end());
  };
  transport::Hello hello;
  hello.protocol_version = 3;
  hello.identity.global_rank = rank;
  hello.identity.local_rank = rank;
  hello.identity.node_rank = 0;
  hello.identity.world_size = world;
  hello.identity.local_world_size = world;
  hello.identity.hostname = "old-build";
  add(transport::FrameType::Hello, transport::encode_hello(hello));
  model::TracerStats stats;
  stats.global_rank = rank;
  stats.steps_recorded = steps;
  stats.records_sent = steps;
  add(transport::FrameType::TracerStats, transport::encode(stats));
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  for (int i = 1; i <= steps; ++i) {
    model::StepRecord r;
    r.global_rank = rank;
    r.step = i;
    r.ts = now - 0.001 * double(steps - i);
    r.events.set(model::Event::InputWait, model::Timing{0.05, std::nullopt});
    r.events.set(model::Event::Forward, model::Timing{0.4, std::nullopt});
    r.events.set(model::Event::TracedStepTime, model::Timing{0.5, std::nullopt});
    add(transport::FrameType::Step, transport::encode(r));
  }
  add(transport::FrameType::Bye, {});
  return out;
}

TEST(Serve, ARankOfProtocolThreeIsTakenBesideOneOfFourAndToldNothing) {
  // A job whose ranks were built at different times: this build's rank
  // (protocol 4) and one built before the collector could answer.
  TempDir dir;
  Served serve(dir, {"--run-name", "mixed", "--world-size", "2"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  const auto port = std::uint16_t(std::stoi(vars[1].substr(vars[1].find('=') + 1)));
  ChildProcess r0(rank_argv(vars, 0, 2, 1, {kTinyRank, "--steps", "100", "--step-us", "200"}));
  transport::TcpClient old;
  ASSERT_TRUE(old.connect("127.0.0.1", port, 5000ms)) << old.error();
  const auto bytes = protocol_three_rank(1, 2, 100);
  ASSERT_TRUE(old.send_all(bytes.data(), bytes.size(), 5000ms)) << old.error();
  // No Verdict: a rank of 3 never reads, and bytes it never reads would only
  // fill its socket buffer. serve closes once it has read the Bye.
  std::uint8_t answer[64];
  const auto got = old.receive_some(answer, sizeof answer, 5000ms);
  EXPECT_FALSE(got.has_value() && *got > 0) << "serve wrote to a rank of protocol 3";
  const ProcessResult p0 = r0.wait();
  EXPECT_EQ(p0.exit_code, 0) << p0.err;
  EXPECT_EQ(p0.err.find("traceml: warning"), std::string::npos) << p0.err;
  const ProcessResult s = serve.child.wait();
  EXPECT_EQ(s.exit_code, 0) << s.err;
  EXPECT_EQ(s.err.find("refused"), std::string::npos) << s.err;
  const Json summary = load_json(dir.path() / "logs" / "mixed" / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << s.err;
  EXPECT_EQ(summary.value("/run/status"_json_pointer, std::string()), "completed");
  EXPECT_EQ(summary.value("/step_time/metadata/training_total_steps"_json_pointer, -1L), 100);
  const Json& tracer = summary["tracer"]["ranks"];
  ASSERT_EQ(tracer.size(), 2u) << summary["tracer"].dump();
  for (const Json& r : tracer) {
    EXPECT_EQ(r["clean_end"], true) << r.dump();
    EXPECT_EQ(r["records_received"], r["records_sent"]) << r.dump();
  }
}

TEST(Serve, BadOptionsGetOneLineAndExitTwoAndAGoodRunIsNotTouched) {
  TempDir dir;
  const std::string logs = (dir.path() / "logs").string();
  const auto serve = [&](const std::vector<std::string>& flags) {
    std::vector<std::string> a = {kCli, "serve", "--logs-dir", logs, "--port", "0"};
    a.insert(a.end(), flags.begin(), flags.end());
    return run_process(a);
  };
  const auto one_error_line = [](const ProcessResult& r, const std::string& text) {
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_EQ(r.err.rfind("traceml: error: ", 0), 0u) << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_NE(r.err.find(text), std::string::npos) << r.err;
  };
  one_error_line(serve({"--world-size", "0"}), "--world-size must be in [1,");
  one_error_line(serve({"--idle-timeout", "-1"}), "--idle-timeout must be in [0,");
  one_error_line(serve({"--token-file", (dir.path() / "missing").string()}),
                 "cannot read --token-file");
  {
    std::ofstream(dir.path() / "empty_token") << "\n";
    one_error_line(serve({"--token-file", (dir.path() / "empty_token").string()}), "is empty");
  }
  one_error_line(run_process({"/usr/bin/env", std::string("TRACEML_RUN_TOKEN=a\tb"), kCli, "serve",
                              "--logs-dir", logs, "--port", "0"}),
                 "TRACEML_RUN_TOKEN holds a control character");
  // A run directory that holds a run is never reused: its files stay as they were.
  const fs::path good = dir.path() / "logs" / "good";
  fs::create_directories(good);
  std::ofstream(good / "telemetry.db") << "a good run";
  std::ofstream(good / "final_summary.json") << "{}";
  one_error_line(serve({"--run-name", "good"}), "already holds a run");
  EXPECT_EQ(read_file(good / "telemetry.db"), "a good run");
  EXPECT_EQ(read_file(good / "final_summary.json"), "{}");
  // A port that is taken.
  Served first(dir, {"--run-name", "first"});
  const auto vars = first.rank_env();
  ASSERT_EQ(vars.size(), 2u);
  const std::string port = vars[1].substr(vars[1].find('=') + 1);
  const ProcessResult taken =
      run_process({kCli, "serve", "--logs-dir", logs, "--run-name", "second", "--port", port});
  one_error_line(taken, "address");
  EXPECT_FALSE(fs::exists(dir.path() / "logs" / "second" / "telemetry.db"));
  first.child.signal(SIGTERM);
  const ProcessResult f = first.child.wait();
  // Ended before any rank came: still a summary (of nothing) and a manifest.
  EXPECT_EQ(f.exit_code, 128 + SIGTERM) << f.err;
  EXPECT_TRUE(fs::exists(dir.path() / "logs" / "first" / "manifest.json")) << f.err;
}

TEST(AnyLauncher, TwoRanksTracedOnTheirOwnSayPartialAndMergeIntoTheJobsVerdict) {
  // No collector anywhere: each rank traces itself into logs/ under its
  // working directory, as ranks started by hand without serve do.
  TempDir dir;
  const auto master = launcher::pick_free_port();
  ASSERT_TRUE(master);
  const std::vector<std::string> program = {
      kExamples + "/ddp", "--steps", "120", "--slow-rank", "1", "--slow-input-ms", "15"};
  ChildProcess r0(rank_argv({}, 0, 2, *master, program), dir.path().string());
  ChildProcess r1(rank_argv({}, 1, 2, *master, program), dir.path().string());
  const ProcessResult p0 = r0.wait();
  const ProcessResult p1 = r1.wait();
  ASSERT_EQ(p0.exit_code, 0) << p0.err;
  ASSERT_EQ(p1.exit_code, 0) << p1.err;
  // Each says it is one rank of two, and how to merge.
  EXPECT_NE(p0.err.find("traceml: rank 0 of 2, a partial view: "), std::string::npos) << p0.err;
  EXPECT_NE(p1.err.find("traceml: rank 1 of 2, a partial view: "), std::string::npos) << p1.err;
  const std::string marker = "traceml: merge the job's ranks: ";
  const auto at = p0.err.find(marker);
  ASSERT_NE(at, std::string::npos) << p0.err;
  const std::string merge =
      p0.err.substr(at + marker.size(), p0.err.find('\n', at) - at - marker.size());
  std::vector<fs::path> rank_dirs;
  for (const auto& e : fs::directory_iterator(dir.path() / "logs"))
    rank_dirs.push_back(e.path());
  ASSERT_EQ(rank_dirs.size(), 2u);
  for (const fs::path& d : rank_dirs) {
    const Json s = load_json(d / "final_summary.json");
    EXPECT_EQ(s.value("/partial/world_size"_json_pointer, 0), 2) << d;
    EXPECT_NE(read_file(d / "final_summary.txt").find("Partial view: rank "), std::string::npos);
  }
  // The command as printed, pasted into bash where traceml is on PATH.
  const std::string bin = fs::path(kCli).parent_path().string();
  const ProcessResult m =
      run_process({"/usr/bin/env", "PATH=" + bin + ":/usr/bin:/bin", "/bin/bash", "-c", merge},
                  dir.path().string());
  ASSERT_EQ(m.exit_code, 0) << merge << "\n" << m.err;
  const std::string merged_name = merge.substr(merge.rfind(' ') + 1);
  const Json summary = load_json(dir.path() / merged_name / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << m.err;
  EXPECT_EQ(primary_kind(summary), "INPUT_STRAGGLER") << m.out;
  EXPECT_EQ(summary.value("/primary_diagnosis/evidence/worst/rank"_json_pointer, -1), 1);
  EXPECT_FALSE(summary.contains("partial"));
}

}  // namespace
}  // namespace traceml::testing
