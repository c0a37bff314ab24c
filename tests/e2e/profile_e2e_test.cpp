// LibTorch's profiler on the steps `traceml run --profile-steps A:B` chose
// (issue 34), end to end: a real LibTorch training (the quickstart example)
// under the real launcher, the profile read back as a user opens it (the
// JSON file Perfetto loads) and checked against the steps the run stored
// (traceml export), and the summary that names it. A program that never
// installed the profiler's hooks trains on and is told why.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "../support/examples.hpp"
#include "../support/json_file.hpp"
#include "../support/subprocess.hpp"
#include "../support/traceml_run.hpp"
#include "launcher/free_port.hpp"
#include "served.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

const std::string kCli = TRACEML_CLI_PATH;
const std::string kQuickstart = examples_dir() + "/quickstart";
const std::string kTinyRank = TRACEML_TINY_RANK_PATH;
const std::string kDdp = examples_dir() + "/ddp";

/// A step's span on the unix clock in microseconds, as the run stored it:
/// from the earliest begin of any of its events (the input wait begins
/// before the step scope) to its timestamp.
struct Span {
  double begin_us = 0.0;
  double end_us = 0.0;
};

std::map<std::int64_t, Span> step_spans(const fs::path& run_dir, const fs::path& out, int rank) {
  const ProcessResult e = run_process({kCli, "export", run_dir.string(), "--out", out.string()});
  EXPECT_EQ(e.exit_code, 0) << e.err;
  std::map<std::int64_t, Span> spans;
  std::ifstream in(out);
  for (std::string line; std::getline(in, line);) {
    const Json j = Json::parse(line);
    if (j.value("type", "") != "step" || j["global_rank"] != rank) continue;
    const double end_us = j["ts"].get<double>() * 1e6;
    const auto& ev = j["events"];
    const double traced_ms = ev["traced_step_time"]["cpu_ms"].get<double>();
    double earliest_ms = 0.0;  // the traced step's own start
    for (const auto& event : ev)
      if (event.contains("begin_ms"))
        earliest_ms = std::min(earliest_ms, event["begin_ms"].get<double>());
    spans[j["step"].get<std::int64_t>()] = {end_us - (traced_ms - earliest_ms) * 1e3, end_us};
  }
  return spans;
}

std::vector<Json> ops_of(const Json& trace) {
  std::vector<Json> ops;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X") ops.push_back(e);
  return ops;
}

/// Whether the examples' LibTorch has Kineto, so that a capture must also
/// leave LibTorch's own trace: scripts/torch2.sh says so of pip's LibTorch
/// 2.x (TRACEML_TEST_EXPECT_KINETO=1); Debian's 1.13 was built without it.
bool expect_kineto() {
  const char* v = std::getenv("TRACEML_TEST_EXPECT_KINETO");
  return v != nullptr && std::string(v) == "1";
}

/// LibTorch's own trace of a capture (Kineto's Chrome trace) checked as
/// Perfetto's JSON importer reads it, and against traceml's profile of the
/// same capture: the same operators (each aten::addmm of the steps), on the
/// same clock (Kineto's ts plus its baseTimeNanoseconds are unix
/// microseconds), inside the steps asked.
void expect_kineto_trace_of(const fs::path& kineto, const Json& traceml_profile,
                            const std::map<std::int64_t, Span>& spans, std::int64_t first,
                            std::int64_t last) {
  const Json k = load_json(kineto);
  ASSERT_TRUE(k.is_object()) << kineto;
  ASSERT_TRUE(k["traceEvents"].is_array()) << kineto;
  ASSERT_TRUE(k["baseTimeNanoseconds"].is_number_unsigned()) << kineto;
  const double base_us = double(k["baseTimeNanoseconds"].get<std::uint64_t>()) / 1e3;
  ASSERT_TRUE(spans.count(first) && spans.count(last));
  std::size_t cpu_ops = 0, addmm = 0;
  for (const Json& e : k["traceEvents"]) {
    ASSERT_TRUE(e.is_object() && e["ph"].is_string()) << e.dump();
    if (e["ph"] != "X" || e.value("cat", "") != "cpu_op") continue;
    ASSERT_TRUE(e["name"].is_string() && e["ts"].is_number() && e["dur"].is_number() &&
                e["pid"].is_number() && e["tid"].is_number())
        << e.dump();
    ++cpu_ops;
    if (e["name"] == "aten::addmm") ++addmm;
    const double ts = e["ts"].get<double>() + base_us;
    EXPECT_GE(ts, spans.at(first).begin_us - 1000.0) << e.dump();
    EXPECT_LE(ts + e["dur"].get<double>(), spans.at(last).end_us + 1000.0) << e.dump();
  }
  std::size_t traceml_addmm = 0;
  for (const Json& op : ops_of(traceml_profile))
    if (op["name"] == "aten::addmm") ++traceml_addmm;
  EXPECT_GT(cpu_ops, 0u);
  EXPECT_EQ(addmm, traceml_addmm) << "the same capture's Linear layers";
  EXPECT_GE(addmm, std::size_t(3 * (last - first + 1)));
}

TEST(ProfileE2E, ProfileStepsWritesTheOperatorsOfThoseSteps) {
  TempDir tmp;
  const ProcessResult r = run_process(
      traceml_run_argv(kCli, tmp.path() / "logs", "prof", 1, {"--profile-steps", "20:24"},
                       {kQuickstart, "--steps", "60", "--log-every", "1000"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path run_dir = tmp.path() / "logs" / "prof";
  const fs::path file = run_dir / "profiles" / "rank0_steps20-24.json";
  const Json trace = load_json(file);
  ASSERT_TRUE(trace.is_object()) << "no profile at " << file << "\n" << r.err;
  const auto& meta = trace["otherData"]["traceml"];
  EXPECT_EQ(meta["first_step"], 20);
  EXPECT_EQ(meta["last_step"], 24);
  EXPECT_FALSE(meta.contains("error")) << meta.dump();
  const std::vector<Json> ops = ops_of(trace);
  EXPECT_EQ(meta["ops"], ops.size());

  // Every operator falls inside steps 20 to 24 as traceml stored them (the
  // profiler's clock mapped onto the steps' clock: within 1 ms), and each
  // step's forward ran its Linear layers (aten::addmm) inside it.
  const std::map<std::int64_t, Span> spans = step_spans(run_dir, tmp.path() / "run.jsonl", 0);
  ASSERT_TRUE(spans.count(20) && spans.count(24));
  constexpr double kToleranceUs = 1000.0;
  std::map<std::int64_t, int> addmm_in_step;
  for (const Json& op : ops) {
    const double ts = op["ts"].get<double>();
    const double end = ts + op["dur"].get<double>();
    EXPECT_GE(ts, spans.at(20).begin_us - kToleranceUs) << op.dump();
    EXPECT_LE(end, spans.at(24).end_us + kToleranceUs) << op.dump();
    if (op["name"] != "aten::addmm") continue;
    for (std::int64_t s = 20; s <= 24; ++s)
      if (ts >= spans.at(s).begin_us - kToleranceUs && end <= spans.at(s).end_us + kToleranceUs)
        ++addmm_in_step[s];
  }
  for (std::int64_t s = 20; s <= 24; ++s)
    EXPECT_GE(addmm_in_step[s], 3) << "step " << s << ": the MLP's three Linear layers";

  // The summary names it: the JSON's profiles list, the text after Next,
  // and the page.
  const Json summary = load_json(run_dir / "final_summary.json");
  ASSERT_TRUE(summary.contains("profiles")) << summary.dump().substr(0, 400);
  // The captured steps, slowed by the profiler, are left out of the
  // step-time analysis.
  EXPECT_EQ(summary["step_time"]["global"]["window"]["profiled_steps_left_out"], 5)
      << summary["step_time"]["global"]["window"].dump();
  ASSERT_EQ(summary["profiles"].size(), 1u);
  EXPECT_EQ(summary["profiles"][0]["path"], "profiles/rank0_steps20-24.json");
  // LibTorch's own trace beside it where LibTorch has Kineto (Debian's 1.13
  // has none: then no file, and none listed).
  const fs::path kineto = run_dir / "profiles" / "rank0_steps20-24.kineto.json";
  if (expect_kineto()) {
    ASSERT_TRUE(fs::exists(kineto)) << r.err;
    EXPECT_EQ(summary["profiles"][0]["kineto_trace"], "profiles/rank0_steps20-24.kineto.json");
    expect_kineto_trace_of(kineto, trace, spans, 20, 24);
    // One note, not a warning, where it is.
    const std::size_t note =
        r.err.find("[rank0]: traceml: LibTorch's own trace of steps 20 to 24: ");
    ASSERT_NE(note, std::string::npos) << r.err;
    EXPECT_NE(
        r.err.substr(note, r.err.find('\n', note) - note).find("rank0_steps20-24.kineto.json"),
        std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("warning: LibTorch's own trace"), std::string::npos) << r.err;
  } else {
    EXPECT_FALSE(fs::exists(kineto));
    EXPECT_TRUE(summary["profiles"][0]["kineto_trace"].is_null());
  }
  EXPECT_FALSE(fs::exists(run_dir / "profiles" / ".rank0_steps20-24.kineto.json.partial"));
  EXPECT_EQ(summary["profiles"][0]["ops"], ops.size());
  const std::string text = read_file(run_dir / "final_summary.txt");
  EXPECT_NE(text.find("Profiles: LibTorch's operators"), std::string::npos) << text;
  // The run directory as the report names it: absolutely, in the file.
  EXPECT_NE(text.find("R0 steps 20-24: " + fs::weakly_canonical(run_dir).string() +
                      "/profiles/rank0_steps20-24.json ("),
            std::string::npos)
      << text;
  EXPECT_NE(read_file(run_dir / "final_summary.html").find("id=\"profiles\""), std::string::npos);
  // The timeline draws the operators under their steps: on a track of
  // their own in rank 0's process, inside the span of steps 20 to 24.
  const fs::path timeline = tmp.path() / "timeline.json";
  const ProcessResult x = run_process({kCli, "export", run_dir.string(), "--format", "chrome-trace",
                                       "--steps", "20:24", "--out", timeline.string()});
  ASSERT_EQ(x.exit_code, 0) << x.err;
  EXPECT_NE(x.err.find(" LibTorch operators under their steps"), std::string::npos) << x.err;
  const Json drawn = load_json(timeline);
  ASSERT_TRUE(drawn.is_object());
  double steps_begin = 1e300, steps_end = -1e300;
  std::size_t drawn_ops = 0;
  for (const auto& e : drawn["traceEvents"]) {
    if (e["ph"] != "X") continue;
    if (e["cat"] == "cpu_op") {
      ++drawn_ops;
      EXPECT_EQ(e["pid"], 0);
      continue;
    }
    if (e["name"].get<std::string>().rfind("step ", 0) == 0) {
      steps_begin = std::min(steps_begin, e["ts"].get<double>());
      steps_end = std::max(steps_end, e["ts"].get<double>() + e["dur"].get<double>());
    }
  }
  EXPECT_GT(drawn_ops, ops.size() / 2);  // the ops of the fetches before step 20 may fall outside
  for (const auto& e : drawn["traceEvents"]) {
    if (e["ph"] != "X" || e["cat"] != "cpu_op") continue;
    EXPECT_GE(e["ts"].get<double>(), steps_begin - 1.0) << e.dump();
    EXPECT_LE(e["ts"].get<double>() + e["dur"].get<double>(), steps_end + 1.0) << e.dump();
  }

  // Nothing half-written is left beside it.
  for (const auto& e : fs::directory_iterator(run_dir / "profiles"))
    EXPECT_EQ(e.path().filename().string().front(), 'r') << e.path();
}

TEST(ProfileE2E, ProfileRanksNarrowsItToTheRanksNamed) {
  TempDir tmp;
  const ProcessResult r = run_process(traceml_run_argv(
      kCli, tmp.path() / "logs", "two", 2, {"--profile-steps", "5:6", "--profile-ranks", "1"},
      {kQuickstart, "--steps", "20", "--log-every", "1000"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path dir = tmp.path() / "logs" / "two" / "profiles";
  EXPECT_TRUE(fs::exists(dir / "rank1_steps5-6.json")) << r.err;
  EXPECT_FALSE(fs::exists(dir / "rank0_steps5-6.json"));
}

TEST(ProfileE2E, TwoNodesGetEveryRanksProfileIntoTheRunDirectory) {
  // Two nodes of two ranks on this machine, each its own logs directory (as
  // without a shared file system): node 1's ranks send theirs to node 0.
  TempDir dir;
  const auto master = launcher::pick_free_port();
  const auto collector = launcher::pick_free_port();
  ASSERT_TRUE(master && collector);
  const auto node = [&](int node_rank) {
    return traceml_node_argv(kCli, node_rank, 2, *master, *collector,
                             dir.path() / ("logs" + std::to_string(node_rank)), "two_nodes",
                             {"--mode", "summary", "--profile-steps", "5:6"},
                             {kQuickstart, "--steps", "20", "--log-every", "1000"});
  };
  ChildProcess node0(node(0));
  ChildProcess node1(node(1));
  const ProcessResult r1 = node1.wait();
  const ProcessResult r0 = node0.wait();
  ASSERT_EQ(r1.exit_code, 0) << r1.err;
  ASSERT_EQ(r0.exit_code, 0) << r0.err;
  const fs::path run_dir = dir.path() / "logs0" / "two_nodes";
  for (int rank = 0; rank < 4; ++rank) {
    const Json trace =
        load_json(run_dir / "profiles" / ("rank" + std::to_string(rank) + "_steps5-6.json"));
    ASSERT_TRUE(trace.is_object()) << "rank " << rank << "\n" << r0.err;
    EXPECT_GT(trace["otherData"]["traceml"]["ops"].get<int>(), 0);
  }
  // Node 1 keeps no profile of traceml's: only LibTorch's own traces, where
  // LibTorch has Kineto, stay beside the ranks that made them (each is
  // megabytes: never sent).
  const fs::path node1_profiles = dir.path() / "logs1" / "two_nodes" / "profiles";
  if (expect_kineto()) {
    for (int rank = 0; rank < 4; ++rank)
      EXPECT_TRUE(fs::exists((rank < 2 ? run_dir / "profiles" : node1_profiles) /
                             ("rank" + std::to_string(rank) + "_steps5-6.kineto.json")))
          << "rank " << rank;
    for (const auto& f : fs::directory_iterator(node1_profiles))
      EXPECT_NE(f.path().string().find(".kineto.json"), std::string::npos) << f.path();
  } else {
    EXPECT_FALSE(fs::exists(node1_profiles));
  }
  EXPECT_EQ(load_json(run_dir / "final_summary.json")["profiles"].size(), 4u);
}

// Issue 47: including <traceml/torch.hpp> is enough, on a CPU: the
// quickstart without its use_device() call (--no-gpu-clock) still
// gets its operators profiled.
TEST(ProfileE2E, IncludingTheTorchHeaderIsEnoughForTheProfiler) {
  TempDir tmp;
  const ProcessResult r = run_process(
      traceml_run_argv(kCli, tmp.path() / "logs", "included", 1, {"--profile-steps", "20:24"},
                       {kQuickstart, "--steps", "60", "--no-gpu-clock"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err.find("never installed"), std::string::npos) << r.err;
  const Json summary = load_json(tmp.path() / "logs" / "included" / "final_summary.json");
  ASSERT_TRUE(summary.contains("profiles")) << r.err;
  EXPECT_GT(summary["profiles"][0]["ops"].get<std::int64_t>(), 0) << summary["profiles"].dump();
  EXPECT_TRUE(summary["profiles"][0]["error"].is_null()) << summary["profiles"].dump();
}

TEST(ProfileE2E, AProgramWithoutTheProfilerHooksTrainsOnAndIsToldWhy) {
  // tiny_rank links no LibTorch and installs no hooks.
  TempDir tmp;
  const ProcessResult r = run_process(
      traceml_run_argv(kCli, tmp.path() / "logs", "nohooks", 1, {"--profile-steps", "3:4"},
                       {kTinyRank, "--steps", "50", "--step-us", "200"}));
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("tiny_rank: 50 steps"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("no profile of steps 3 to 4: the program never installed LibTorch's "
                       "profiler hooks"),
            std::string::npos)
      << r.err;
  const fs::path run_dir = tmp.path() / "logs" / "nohooks";
  const Json summary = load_json(run_dir / "final_summary.json");
  ASSERT_TRUE(summary.contains("profiles")) << r.err;
  EXPECT_EQ(summary["profiles"][0]["ops"], 0);
  EXPECT_NE(summary["profiles"][0]["error"].get<std::string>().find("never installed"),
            std::string::npos);
  const std::string text = read_file(run_dir / "final_summary.txt");
  EXPECT_NE(text.find("R0 steps 3-4: none (the program never installed"), std::string::npos)
      << text;
}

TEST(ProfileE2E, ProfileAutoCapturesTheRankWhoseForwardSlowsInsideItsSlowWindow) {
  // Two data-parallel ranks; rank 1's forward pass is 40 ms slower in steps
  // 150 to 300 only, and rank 0 waits for it in the all-reduce. The
  // collector sees the steps turn slow and asks rank 1, the straggler, not
  // rank 0, for its next 10 steps: they fall inside the window. Every step
  // of rank 1 waits 10 ms for its batch, so that a step is long enough
  // (~14 ms) for a loaded machine's noise never to look like a slow turn.
  TempDir tmp;
  constexpr std::int64_t kFrom = 150, kTo = 300;
  const ProcessResult r = run_process(traceml_run_argv(
      kCli, tmp.path() / "logs", "auto", 2, {"--profile", "auto", "--interval", "0.2"},
      {kDdp, "--steps", "400", "--log-every", "1000", "--slow-rank", "1", "--slow-input-ms", "10",
       "--slow-forward-ms", "40", "--slow-from-step", std::to_string(kFrom), "--slow-to-step",
       std::to_string(kTo)}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path run_dir = tmp.path() / "logs" / "auto";
  const Json summary = load_json(run_dir / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << r.err;
  ASSERT_EQ(summary["profiles"].size(), 1u) << summary["profiles"].dump();
  const Json& p = summary["profiles"][0];
  EXPECT_EQ(p["rank"], 1);
  EXPECT_EQ(p["last_step"].get<std::int64_t>() - p["first_step"].get<std::int64_t>(), 9);
  EXPECT_GT(p["first_step"].get<std::int64_t>(), kFrom);
  EXPECT_LE(p["last_step"].get<std::int64_t>(), kTo);
  EXPECT_TRUE(p["error"].is_null()) << p.dump();
  EXPECT_NE(p["reason"].get<std::string>().find("its steps turned slow: a median of "),
            std::string::npos)
      << p.dump();
  EXPECT_EQ(summary["step_time"]["global"]["window"]["profiled_steps_left_out"], 10);
  // The profile shows what made the steps slow: the extra work in rank 1's
  // forward pass (examples/ddp.cpp's busy_for, tensor products), inside
  // those steps.
  const Json trace = load_json(run_dir / p["path"].get<std::string>());
  ASSERT_TRUE(trace.is_object());
  const std::map<std::int64_t, Span> spans = step_spans(run_dir, tmp.path() / "run.jsonl", 1);
  const std::int64_t first = p["first_step"], last = p["last_step"];
  ASSERT_TRUE(spans.count(first) && spans.count(last));
  std::size_t ops = 0;
  for (const Json& op : ops_of(trace)) {
    ++ops;
    EXPECT_GE(op["ts"].get<double>(), spans.at(first).begin_us - 1000.0) << op.dump();
    EXPECT_LE(op["ts"].get<double>() + op["dur"].get<double>(), spans.at(last).end_us + 1000.0);
  }
  EXPECT_GT(ops, 1000u);
  if (expect_kineto()) {
    ASSERT_TRUE(p["kineto_trace"].is_string()) << p.dump();
    expect_kineto_trace_of(run_dir / p["kineto_trace"].get<std::string>(), trace, spans, first,
                           last);
  } else {
    EXPECT_TRUE(p["kineto_trace"].is_null()) << p.dump();
  }
  const std::string text = read_file(run_dir / "final_summary.txt");
  EXPECT_NE(text.find("R1 steps " + std::to_string(first) + "-" + std::to_string(last) + ": "),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("asked by --profile auto: its steps turned slow"), std::string::npos) << text;
  // The page marks where the captured steps were left out of its plots.
  const std::string page = read_file(run_dir / "final_summary.html");
  EXPECT_NE(page.find("<path class=\"profiled\""), std::string::npos);
  EXPECT_NE(page.find("R1 steps " + std::to_string(first) + "-" + std::to_string(last) +
                      " ran under LibTorch&#39;s profiler"),
            std::string::npos);
}

TEST(ProfileE2E, ServeProfileStepsAsksTheRanksTorchrunStarted) {
  // Ranks started as torchrun starts them, with nothing of traceml's
  // profile options in their environment: serve asks rank 1 for steps 150
  // to 154 over its connection (it says it takes requests at its first
  // connection, and reads the answer within a flush interval). Steps of
  // ~5 ms (rank 1 sleeps 4 ms in each) reach step 150 after ~0.75 s.
  TempDir dir;
  Served serve(dir, {"--run-name", "job", "--world-size", "2", "--profile-steps", "150:154",
                     "--profile-ranks", "1"});
  const auto vars = serve.rank_env();
  ASSERT_EQ(vars.size(), 2u) << serve.child.err_so_far();
  const auto master = launcher::pick_free_port();
  ASSERT_TRUE(master);
  const std::vector<std::string> program = {
      kDdp, "--steps", "300", "--log-every", "1000", "--slow-rank", "1", "--slow-residual-ms", "4"};
  ChildProcess r0(rank_argv(vars, 0, 2, *master, program));
  ChildProcess r1(rank_argv(vars, 1, 2, *master, program));
  EXPECT_EQ(r0.wait().exit_code, 0);
  EXPECT_EQ(r1.wait().exit_code, 0);
  const ProcessResult s = serve.child.wait();
  ASSERT_EQ(s.exit_code, 0) << s.err;
  const fs::path run_dir = dir.path() / "logs" / "job";
  const Json trace = load_json(run_dir / "profiles" / "rank1_steps150-154.json");
  ASSERT_TRUE(trace.is_object()) << s.err;
  EXPECT_GT(trace["otherData"]["traceml"]["ops"].get<int>(), 100);
  EXPECT_FALSE(trace["otherData"]["traceml"].contains("reason"));  // the user chose the steps
  EXPECT_FALSE(fs::exists(run_dir / "profiles" / "rank0_steps150-154.json"));
  EXPECT_EQ(load_json(run_dir / "final_summary.json")["profiles"].size(), 1u);
}

TEST(ProfileE2E, ARankKilledInsideItsCaptureLeavesItsStepsOutAndTheProfileSaidLost) {
  // Rank 1 is profiled from step 20 and dies abruptly in step 150 (no exit
  // handler runs, as when the OOM killer strikes): the profiler's operators
  // die with it. It had said the capture began (protocol 8), so the run
  // leaves those steps out of the analysis and lists the profile as lost,
  // and rank 0, left waiting in the all-reduce, is stopped by the launcher.
  TempDir tmp;
  const ProcessResult r = run_process(
      traceml_run_argv(kCli, tmp.path() / "logs", "killed", 2,
                       {"--profile-steps", "20:400", "--profile-ranks", "1", "--interval", "0.2"},
                       {kDdp, "--steps", "300", "--log-every", "1000", "--slow-rank", "1",
                        "--slow-residual-ms", "4", "--crash-at-step", "150", "--crash-abruptly"}));
  EXPECT_EQ(r.exit_code, 3) << r.err;
  const fs::path run_dir = tmp.path() / "logs" / "killed";
  const Json trace = load_json(run_dir / "profiles" / "rank1_steps20-400.json");
  ASSERT_TRUE(trace.is_object()) << r.err;
  EXPECT_EQ(trace["otherData"]["traceml"]["ops"], 0);
  EXPECT_NE(
      trace["otherData"]["traceml"]["error"].get<std::string>().find("its operators never came"),
      std::string::npos);
  const Json summary = load_json(run_dir / "final_summary.json");
  ASSERT_EQ(summary["profiles"].size(), 1u) << summary["profiles"].dump();
  // Steps 20 to 149 ran under the profiler: left out of the step-time window.
  const Json& window = summary["step_time"]["global"]["window"];
  ASSERT_TRUE(window.contains("profiled_steps_left_out")) << window.dump();
  EXPECT_GE(window["profiled_steps_left_out"].get<int>(), 120);
  const std::string text = read_file(run_dir / "final_summary.txt");
  EXPECT_NE(text.find("R1 steps 20-400: none (its operators never came: the rank ended"),
            std::string::npos)
      << text;
}

TEST(ProfileE2E, ABadRangeIsAUsageErrorBeforeAnythingStarts) {
  TempDir tmp;
  for (const std::vector<std::string>& flags :
       {std::vector<std::string>{"--profile-steps", "9:3"},
        std::vector<std::string>{"--profile-steps", "1:5000"},
        std::vector<std::string>{"--profile-ranks", "1"},
        std::vector<std::string>{"--profile-steps", "1:2", "--profile-ranks", "x"},
        std::vector<std::string>{"--profile-steps", "1:2", "--profile-ranks", "0,1"},
        std::vector<std::string>{"--profile-steps", "5:9", "--trace-max-steps", "8"},
        std::vector<std::string>{"--profile", "always"},
        std::vector<std::string>{"--profile", "auto:0"},
        std::vector<std::string>{"--profile", "auto:1001"}}) {
    const ProcessResult r = run_process(
        traceml_run_argv(kCli, tmp.path() / "logs", "bad", 1, flags, {kTinyRank, "--steps", "2"}));
    EXPECT_EQ(r.exit_code, 2) << flags[1] << ": " << r.err;
    // The flag named: "--profile " for --profile's values, "--profile-" for the others.
    const bool auto_flag = flags[0] == "--profile";
    EXPECT_NE(r.err.find(auto_flag ? "traceml: error: --profile must be auto or auto:N"
                                   : "traceml: error: --profile-"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
    EXPECT_FALSE(fs::exists(tmp.path() / "logs" / "bad")) << "nothing left behind";
  }
}

}  // namespace
}  // namespace traceml::testing
