// The Chrome trace of a run's steps (report/chrome_trace): where each step and
// phase lands on its rank's track, to the nanosecond, from recorded begins
// and (older data) from durations alone; a track per traced thread; the GPU
// track; later rows winning; counters kept to the steps' span; --steps
// parsing; and the default range (the latest steps of the analysed window).
#include "report/chrome_trace.hpp"

#include <gtest/gtest.h>

#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace traceml::report {
namespace {

using model::Event;
using nlohmann::json;

constexpr double kT0 = 1764662400.0;  // a whole second: the trace's origin is kT0 - 1 s
/// A unix time in seconds as a double is exact to ~0.24 us near kT0: times
/// that come from a timestamp are compared to half a microsecond, durations
/// inside a step (from milliseconds) to the nanosecond.
constexpr double kStampUs = 0.5;
constexpr double kNs = 1e-3;

/// A CPU step of `rank` ending at kT0 + end_s: input wait 5 ms, traced step
/// 20 ms of which forward 6, backward 8, optimizer 2 (4 ms unattributed).
model::StepRecord step(int rank, std::int64_t id, double end_s) {
  model::StepRecord r;
  r.global_rank = rank;
  r.step = id;
  r.ts = kT0 + end_s;
  r.events.set(Event::InputWait, {5.0, std::nullopt});
  r.events.set(Event::TracedStepTime, {20.0, std::nullopt});
  r.events.set(Event::Forward, {6.0, std::nullopt});
  r.events.set(Event::Backward, {8.0, std::nullopt});
  r.events.set(Event::OptimizerStep, {2.0, std::nullopt});
  return r;
}

json trace_of(const model::Telemetry& t, StepRange range, TimelineStats* stats = nullptr) {
  std::ostringstream out;
  const TimelineStats s = write_chrome_trace(t, range, "traceml test", out);
  if (stats != nullptr) *stats = s;
  return json::parse(out.str());
}

/// The "X" events of one pid and tid, in file order.
std::vector<json> slices(const json& trace, int pid, int tid) {
  std::vector<json> out;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e["pid"] == pid && e["tid"] == tid) out.push_back(e);
  return out;
}

/// Microseconds from the origin of a time kT0 + s.
double us(double s) {
  return (s + 1.0) * 1e6;
}

TEST(ChromeTrace, PhasesArePlacedBackToBackInsideTheirStep) {
  model::Telemetry t;
  t.ranks.push_back({0, 0, 0, "host", 1, 1});
  t.steps.push_back(step(0, 1, 0.030));
  TimelineStats stats;
  const json trace = trace_of(t, {1, 1}, &stats);
  EXPECT_EQ(stats.ranks, 1);
  EXPECT_EQ(stats.steps, 1);
  EXPECT_FALSE(stats.gpu);
  EXPECT_EQ(trace["otherData"]["time_origin_unix_s"], kT0 - 1.0);
  EXPECT_EQ(trace["otherData"]["steps"], "1:1");
  EXPECT_NE(trace["otherData"]["phase_positions"].get<std::string>().find(
                "recorded without their phases' begin times"),
            std::string::npos);
  EXPECT_EQ(stats.inferred_steps, 1);
  EXPECT_EQ(stats.recorded_steps, 0);
  const auto s = slices(trace, 0, 1);
  // name, begin and duration in microseconds: the step ends at 30 ms and
  // lasts 25 ms; the body's phases follow the wait in the order a step runs.
  const std::vector<std::tuple<std::string, double, double>> expected = {
      {"step 1", us(0.005), 25000.0},    {"input_wait", us(0.005), 5000.0},
      {"traced_step", us(0.010), 20000}, {"forward", us(0.010), 6000.0},
      {"backward", us(0.016), 8000.0},   {"optimizer_step", us(0.024), 2000.0}};
  ASSERT_EQ(s.size(), expected.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i]["name"], std::get<0>(expected[i])) << i;
    EXPECT_NEAR(s[i]["ts"].get<double>(), std::get<1>(expected[i]), kStampUs) << i;
    EXPECT_NEAR(s[i]["dur"].get<double>(), std::get<2>(expected[i]), kNs) << i;
  }
  EXPECT_EQ(s[0]["cat"], "step");
  EXPECT_EQ(s[0]["args"]["step"], 1);
  EXPECT_EQ(s[0]["args"]["unattributed_ms"], 4.0);
  EXPECT_EQ(s[0]["args"]["positions"], "inferred");
  EXPECT_EQ(s[1]["cat"], "phase");
  // The rank's process is named as the text report names ranks.
  bool named = false;
  for (const auto& e : trace["traceEvents"])
    named = named || (e["ph"] == "M" && e["name"] == "process_name" && e["pid"] == 0 &&
                      e["args"]["name"] == "R0/N0");
  EXPECT_TRUE(named);
}

/// step(), with the begins a rank records: the fetch 6 ms before the traced
/// step began (it ended 1 ms before), forward at 1 ms, backward at 9 ms (a
/// 2 ms gap after forward), the optimizer at 17.5 ms.
model::StepRecord recorded_step(int rank, std::int64_t id, double end_s) {
  model::StepRecord r = step(rank, id, end_s);
  r.events.set_begin(Event::InputWait, -6.0);
  r.events.set_begin(Event::Forward, 1.0);
  r.events.set_begin(Event::Backward, 9.0);
  r.events.set_begin(Event::OptimizerStep, 17.5);
  return r;
}

TEST(ChromeTrace, PhasesAreDrawnWhereTheyBeganAsRecorded) {
  model::Telemetry t;
  t.steps.push_back(recorded_step(0, 1, 0.030));
  TimelineStats stats;
  const json trace = trace_of(t, {1, 1}, &stats);
  EXPECT_EQ(stats.recorded_steps, 1);
  EXPECT_EQ(stats.inferred_steps, 0);
  EXPECT_EQ(stats.threads, 1);
  EXPECT_NE(trace["otherData"]["phase_positions"].get<std::string>().find(
                "from where it first began on its step, as the rank recorded it"),
            std::string::npos);
  // The traced step is 10..30 ms; the step spans the fetch too (4..30 ms).
  const auto s = slices(trace, 0, 1);
  const std::vector<std::tuple<std::string, double, double>> expected = {
      {"step 1", us(0.004), 26000.0},    {"traced_step", us(0.010), 20000.0},
      {"input_wait", us(0.004), 5000.0}, {"forward", us(0.011), 6000.0},
      {"backward", us(0.019), 8000.0},   {"optimizer_step", us(0.0275), 2000.0}};
  ASSERT_EQ(s.size(), expected.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    EXPECT_EQ(s[i]["name"], std::get<0>(expected[i])) << i;
    EXPECT_NEAR(s[i]["ts"].get<double>(), std::get<1>(expected[i]), kStampUs) << i;
    EXPECT_NEAR(s[i]["dur"].get<double>(), std::get<2>(expected[i]), kNs) << i;
  }
  EXPECT_EQ(s[0]["args"]["positions"], "recorded");
  EXPECT_EQ(s[0]["args"]["step_ms"], 25.0);
}

TEST(ChromeTrace, RecordedPhasesAreKeptNestingInsideTheirStep) {
  model::Telemetry t;
  // Forward entered twice: 6 ms summed from its first begin at 1 ms runs
  // into backward (begun at 5 ms): it is cut there. The optimizer says it
  // began past the step's end: it is kept inside (zero length at the end).
  model::StepRecord r = recorded_step(0, 1, 0.030);
  r.events.set_begin(Event::Backward, 5.0);
  r.events.set_begin(Event::OptimizerStep, 25.0);
  t.steps.push_back(r);
  // A second step whose fetch reaches back before the first ended: its
  // step starts where the first ended.
  model::StepRecord next = recorded_step(0, 2, 0.045);
  next.events.set_begin(Event::InputWait, -30.0);
  t.steps.push_back(next);
  const json trace = trace_of(t, {1, 2});
  const auto s = slices(trace, 0, 1);
  ASSERT_EQ(s.size(), 12u);
  EXPECT_EQ(s[3]["name"], "forward");
  EXPECT_NEAR(s[3]["dur"].get<double>(), 4000.0, kNs);  // cut at backward's begin
  EXPECT_EQ(s[5]["name"], "optimizer_step");
  EXPECT_NEAR(s[5]["ts"].get<double>(), us(0.030), kStampUs);
  EXPECT_NEAR(s[5]["dur"].get<double>(), 0.0, kNs);
  // Every slice inside its step; steps do not overlap.
  double step_begin = 0, step_end = 0, last_end = 0;
  for (const auto& e : s) {
    const double b = e["ts"].get<double>(), d = e["dur"].get<double>();
    if (e["cat"] == "step") {
      EXPECT_GE(b + kNs, last_end);
      step_begin = b;
      step_end = b + d;
      last_end = step_end;
    } else {
      EXPECT_GE(b + kNs, step_begin) << e.dump();
      EXPECT_LE(b + d, step_end + kNs) << e.dump();
    }
  }
  EXPECT_NEAR(s[6]["ts"].get<double>(), us(0.030), kStampUs);  // step 2 begins at step 1's end
}

TEST(ChromeTrace, EachTracedThreadHasItsOwnTrack) {
  model::Telemetry t;
  // Thread 0 runs steps 1 and 3, thread 1 steps 2 and 4, at the same times.
  for (int i = 1; i <= 4; ++i) {
    model::StepRecord r = recorded_step(0, i, 0.030 * ((i + 1) / 2));
    r.thread = (i + 1) % 2;
    t.steps.push_back(r);
  }
  TimelineStats stats;
  const json trace = trace_of(t, {1, 4}, &stats);
  EXPECT_EQ(stats.threads, 2);
  const auto first = slices(trace, 0, 1), second = slices(trace, 0, 3);
  ASSERT_EQ(first.size(), 12u);
  ASSERT_EQ(second.size(), 12u);
  EXPECT_EQ(first[0]["name"], "step 1");
  EXPECT_EQ(second[0]["name"], "step 2");
  // Overlapping steps on two threads are both drawn in full.
  EXPECT_NEAR(first[0]["ts"].get<double>(), second[0]["ts"].get<double>(), kNs);
  std::map<int, std::string> names;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name")
      names[e["tid"].get<int>()] = e["args"]["name"];
  EXPECT_EQ(names[1], "thread 0: steps (CPU clock)");
  EXPECT_EQ(names[3], "thread 1: steps (CPU clock)");
}

TEST(ChromeTrace, OldAndNewStepsTogetherSayWhichIsWhich) {
  model::Telemetry t;
  t.steps.push_back(step(0, 1, 0.030));
  t.steps.push_back(recorded_step(0, 2, 0.060));
  TimelineStats stats;
  const json trace = trace_of(t, {1, 2}, &stats);
  EXPECT_EQ(stats.recorded_steps, 1);
  EXPECT_EQ(stats.inferred_steps, 1);
  EXPECT_NE(trace["otherData"]["phase_positions"].get<std::string>().find("some steps"),
            std::string::npos);
  const auto s = slices(trace, 0, 1);
  EXPECT_EQ(s[0]["args"]["positions"], "inferred");
  EXPECT_EQ(s[6]["args"]["positions"], "recorded");
}

TEST(ChromeTrace, StepsOfARankNeverOverlapAndLaterRowsWin) {
  model::Telemetry t;
  // Step 2 ends 10 ms after step 1 but lasts 25 ms: it starts where step 1
  // ended, and its phases stay inside it. Step 3 arrives twice: the later wins.
  t.steps.push_back(step(0, 1, 0.030));
  t.steps.push_back(step(0, 2, 0.040));
  t.steps.push_back(step(0, 3, 0.100));
  model::StepRecord again = step(0, 3, 0.200);
  t.steps.push_back(again);
  const json trace = trace_of(t, {1, 3});
  const auto s = slices(trace, 0, 1);
  std::vector<json> steps;
  for (const auto& e : s)
    if (e["cat"] == "step") steps.push_back(e);
  ASSERT_EQ(steps.size(), 3u);
  EXPECT_NEAR(steps[1]["ts"].get<double>(), us(0.030), kStampUs);
  EXPECT_NEAR(steps[1]["dur"].get<double>(), 10000.0, 2 * kStampUs);
  EXPECT_NEAR(steps[2]["ts"].get<double>() + steps[2]["dur"].get<double>(), us(0.200), kStampUs);
  // Every phase lies within the step drawn before it.
  const json* current = nullptr;
  for (const auto& e : s) {
    if (e["cat"] == "step") {
      current = &e;
      continue;
    }
    ASSERT_NE(current, nullptr);
    const double b = (*current)["ts"], d = (*current)["dur"];
    EXPECT_GE(e["ts"].get<double>(), b - 1e-9) << e;
    EXPECT_LE(e["ts"].get<double>() + e["dur"].get<double>(), b + d + 1e-9) << e;
  }
}

TEST(ChromeTrace, GpuClockStepsHaveATrackOfTheirOwn) {
  model::Telemetry t;
  model::StepRecord r = step(1, 7, 1.0);
  r.events.set(Event::InputWait, {5.0, 4.0});
  r.events.set(Event::TracedStepTime, {20.0, 18.0});
  r.events.set(Event::H2D, {std::nullopt, 3.0});  // caught on the GPU only
  t.steps.push_back(r);
  TimelineStats stats;
  const json trace = trace_of(t, {7, 7}, &stats);
  EXPECT_TRUE(stats.gpu);
  const auto gpu = slices(trace, 1, 2);
  ASSERT_EQ(gpu.size(), 4u);  // step, input wait, traced step, h2d
  EXPECT_NEAR(gpu[0]["dur"].get<double>(), 22000.0, kNs);
  EXPECT_EQ(gpu[3]["name"], "h2d");
  EXPECT_NEAR(gpu[3]["dur"].get<double>(), 3000.0, kNs);
  // The CPU track: step, wait, traced step, forward, backward, optimizer (H2D
  // has no CPU value).
  EXPECT_EQ(slices(trace, 1, 1).size(), 6u);
}

TEST(ChromeTrace, OnlyTheRangeAndCountersWithinItsSpan) {
  model::Telemetry t;
  for (int i = 1; i <= 10; ++i)
    t.steps.push_back(step(0, i, 0.030 * i));
  t.step_memory.push_back({0, 4, "cuda:0", 2e9, 3e9});
  t.step_memory.push_back({0, 9, "cuda:0", 2e9, 3e9});  // outside the range
  model::ProcessSample in, out;
  in.global_rank = 0;
  in.ts = kT0 + 0.1;
  in.rss_bytes = 5e8;
  out = in;
  out.ts = kT0 + 5.0;
  t.process = {in, out};
  model::SystemSample sys;
  sys.node_rank = 0;
  sys.ts = kT0 + 0.11;
  sys.cpu_percent = 50.0;
  t.system = {sys};
  TimelineStats stats;
  const json trace = trace_of(t, {3, 5}, &stats);
  EXPECT_EQ(stats.steps, 3);
  std::map<std::string, int> counters;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C") ++counters[e["name"].get<std::string>()];
  EXPECT_EQ(counters["step peak memory (MB)"], 1);
  EXPECT_EQ(counters["process"], 1);
  EXPECT_EQ(counters["system"], 1);
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C" && e["name"] == "step peak memory (MB)") {
      EXPECT_EQ(e["args"]["allocated"], 2000.0);
      EXPECT_NEAR(e["ts"].get<double>(), us(0.120), kStampUs);  // at step 4's end
    }
}

// Two ranges (the run's latest steps and its slow window): only their steps,
// and counters only within each range's own span, not in the gap between.
TEST(ChromeTrace, SeveralRangesDrawTheirStepsAndCountersInTheirSpansOnly) {
  model::Telemetry t;
  for (int i = 1; i <= 20; ++i)
    t.steps.push_back(step(0, i, 1.0 * i));
  model::ProcessSample in_first, in_gap, in_second;
  in_first.global_rank = 0;
  in_first.ts = kT0 + 2.99;  // inside step 3
  in_first.rss_bytes = 5e8;
  in_gap = in_first;
  in_gap.ts = kT0 + 10.5;  // between the ranges
  in_second = in_first;
  in_second.ts = kT0 + 17.99;  // inside step 18
  t.process = {in_first, in_gap, in_second};
  std::ostringstream out;
  const TimelineStats stats = write_chrome_trace(t, {{2, 4}, {17, 19}}, "traceml test", out);
  const json trace = json::parse(out.str());
  EXPECT_EQ(stats.steps, 6);
  EXPECT_EQ(trace["otherData"]["steps"], "2:4,17:19");
  std::vector<std::int64_t> drawn;
  for (const auto& e : slices(trace, 0, 1))
    if (e["cat"] == "step") drawn.push_back(e["args"]["step"].get<std::int64_t>());
  EXPECT_EQ(drawn, (std::vector<std::int64_t>{2, 3, 4, 17, 18, 19}));
  int process_counters = 0;
  for (const auto& e : trace["traceEvents"])
    if (e["ph"] == "C" && e["name"] == "process") ++process_counters;
  EXPECT_EQ(process_counters, 2);
  EXPECT_EQ(ranges_text({{2, 4}, {17, 19}}), "2:4,17:19");
}

TEST(ChromeTrace, StepRangesAreParsedStrictly) {
  std::string error;
  const auto r = parse_step_range("100:200", error);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->first, 100);
  EXPECT_EQ(r->last, 200);
  const std::pair<const char*, const char*> bad[] = {
      {"100", "--steps takes A:B, the first and last step ids (e.g. 100:200), got '100'"},
      {"a:b", "--steps takes A:B with whole step ids (e.g. 100:200), got 'a:b'"},
      {"1:2:3", "--steps takes A:B with whole step ids (e.g. 100:200), got '1:2:3'"},
      {":5", "--steps takes A:B with whole step ids (e.g. 100:200), got ':5'"},
      {"0:5", "--steps A:B needs 1 <= A <= B, got '0:5'"},
      {"9:3", "--steps A:B needs 1 <= A <= B, got '9:3'"},
      {"1:99999999999999999999",
       "--steps takes A:B with whole step ids (e.g. 100:200), got "
       "'1:99999999999999999999'"},
  };
  for (const auto& [text, message] : bad) {
    error.clear();
    EXPECT_FALSE(parse_step_range(text, error).has_value()) << text;
    EXPECT_EQ(error, message);
  }
}

TEST(ChromeTrace, TheDefaultRangeIsTheLatestStepsOfTheAnalysedWindow) {
  model::Telemetry t;
  // Rank 0 steps 1-50, rank 1 steps 11-60: the steps both have are 11-50.
  for (int i = 1; i <= 50; ++i)
    t.steps.push_back(step(0, i, 0.03 * i));
  for (int i = 11; i <= 60; ++i)
    t.steps.push_back(step(1, i, 0.03 * i));
  const auto all = default_timeline_steps(t, 10000, 1000);
  ASSERT_TRUE(all.has_value());
  EXPECT_EQ(all->first, 11);
  EXPECT_EQ(all->last, 50);
  const auto latest = default_timeline_steps(t, 10000, 5);
  ASSERT_TRUE(latest.has_value());
  EXPECT_EQ(latest->first, 46);
  EXPECT_EQ(latest->last, 50);
  EXPECT_FALSE(default_timeline_steps(model::Telemetry{}, 10000, 1000).has_value());
}

}  // namespace
}  // namespace traceml::report
