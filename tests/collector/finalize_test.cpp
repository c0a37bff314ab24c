// finalize_run: a run database gives the same diagnosis as `traceml report
// --telemetry` on the same records (the checked-in golden artifacts), plus
// the `tracer` block, whose numbers are checked on a hand-computed run.
#include "collector/finalize.hpp"

#include <gtest/gtest.h>

#include <filesystem>
#include <map>
#include <regex>
#include <string>

#include "../support/subprocess.hpp"
#include "report/summary_json.hpp"
#include "store/jsonl_reader.hpp"
#include "store/run_db.hpp"

namespace traceml::collector {
namespace {

namespace fs = std::filesystem;
using model::Event;
using report::Json;
using testing::read_file;
using testing::run_process;
using testing::TempDir;

const fs::path kGolden = fs::path(TRACEML_TEST_DATA_DIR) / "golden";

/// Writes `t` into RUN_DIR/telemetry.db as the collector would, with a
/// delivery per rank and `rejected` refused connections.
void write_db(const fs::path& run_dir, const model::Telemetry& t,
              const std::vector<store::RankDelivery>& deliveries, int rejected = 0) {
  fs::create_directories(run_dir);
  store::RunDbWriter w((run_dir / store::kRunDbFileName).string());
  store::feed(t, w);
  for (const auto& d : deliveries)
    w.add(d);
  for (int i = 0; i < rejected; ++i)
    w.add(store::RejectedConnection{1.7e9 + i, "10.0.0.9:" + std::to_string(40000 + i),
                                    "wrong run token"});
  w.flush();
}

/// A delivery per rank of `t`: everything received, clean end, tracer stats
/// with rank-dependent drops and overhead.
std::vector<store::RankDelivery> deliveries_for(const model::Telemetry& t) {
  std::map<int, std::int64_t> records;
  std::map<int, std::int64_t> steps;
  for (const auto& r : t.steps) {
    ++records[r.global_rank];
    ++steps[r.global_rank];
  }
  for (const auto& r : t.step_memory)
    ++records[r.global_rank];
  for (const auto& r : t.process)
    ++records[r.global_rank];
  std::vector<store::RankDelivery> out;
  for (const auto& id : t.ranks) {
    const int r = id.global_rank;
    model::TracerStats s;
    s.global_rank = r;
    s.pid = 100 + r;
    s.strategy = "ddp";
    s.steps_recorded = steps[r];
    s.records_dropped = r;
    s.records_sent = records[r] + r;
    s.overhead_ns_per_step = 1000.0 * (r + 1);
    out.push_back({r, records[r], true, s});
  }
  return out;
}

/// The summary JSON without the keys a run database adds (`tracer`, and
/// `timeline`: a run directory's) or that are rendered from the rest (`text`).
Json without_tracer_and_text(Json j) {
  j.erase("tracer");
  j.erase("timeline");
  j.erase("text");
  return j;
}

/// The text report without its "Tracer: ..." line and the blank line after it.
std::string without_tracer_line(const std::string& text) {
  const auto at = text.find("\nTracer: ");
  if (at == std::string::npos) return text;
  const auto end = text.find("\n\n", at + 1);
  return text.substr(0, at) + text.substr(end + 1);
}

class FinalizeGolden : public ::testing::TestWithParam<std::string> {};

// The run directory is TMP/logs/<name>, so the text names the same evidence
// path as the golden files (made with --out logs/<name>).
TEST_P(FinalizeGolden, SameDiagnosisAsReportOnTheSameRecords) {
  const std::string name = GetParam();
  const store::ReadResult in =
      store::read_telemetry_jsonl((kGolden / "data" / (name + ".jsonl")).string());
  TempDir tmp;
  const fs::path run_dir = tmp.path() / "logs" / name;
  const auto deliveries = deliveries_for(in.telemetry);
  write_db(run_dir, in.telemetry, deliveries, 2);

  const report::FinalSummary f = finalize_run(run_dir.string());
  const fs::path expected_dir = kGolden / "expected" / name;
  const Json expected = Json::parse(read_file(expected_dir / "final_summary.json"));
  EXPECT_EQ(f.json["primary_diagnosis"], expected["primary_diagnosis"]);
  EXPECT_EQ(report::dump_json(without_tracer_and_text(f.json)),
            report::dump_json(without_tracer_and_text(expected)));
  std::string expected_txt = read_file(expected_dir / "final_summary.txt");
  if (!expected_txt.empty() && expected_txt.back() == '\n') expected_txt.pop_back();
  // The differences from a summary of the JSONL: the slow window's command
  // names the run directory, where the JSONL's says RUN_DIR; the files name
  // it by its absolute path, the checked-in ones below their working directory.
  // And a run directory has its timeline (report/run_timeline.hpp): the
  // summary names it, on two or three lines before the last.
  EXPECT_TRUE(fs::exists(run_dir / "timeline.json"));
  std::string text = without_tracer_line(f.text);
  if (const auto at = text.find("\nTimeline: "); at != std::string::npos) {
    const auto end = text.find("\nFull evidence: ", at);
    ASSERT_NE(end, std::string::npos);
    text.erase(at, end - at);
  } else {
    ADD_FAILURE() << "no Timeline line:\n" << text;
  }
  // A slow window worth a look: the JSONL's report gives the command that
  // draws it; a run directory's names its timeline, which draws it already.
  std::smatch slow;
  if (std::regex_search(expected_txt, slow,
                        std::regex("draw them:\n( +)traceml export RUN_DIR [^\n]+"))) {
    const std::string named = "the run's timeline draws them:\n" + slow[1].str() +
                              fs::weakly_canonical(run_dir).string() +
                              "/timeline.json (open it in ui.perfetto.dev)";
    const auto at = text.find(named);
    ASSERT_NE(at, std::string::npos) << text;
    text.replace(at, named.size(), slow[0].str());
  }
  const std::string here = fs::weakly_canonical(tmp.path()).string() + "/";
  for (auto at = text.find(here); at != std::string::npos; at = text.find(here, at))
    text.erase(at, here.size());
  EXPECT_EQ(text, expected_txt);
  EXPECT_NE(f.text.find("\nTracer: "), std::string::npos);

  // The artifacts on disk are what was returned.
  EXPECT_EQ(read_file(run_dir / "final_summary.json"), report::dump_json(f.json) + "\n");
  EXPECT_EQ(read_file(run_dir / "final_summary.txt"), f.text + "\n");

  // The tracer block: totals and one entry per rank, in rank order.
  const Json& t = f.json["tracer"];
  std::int64_t received = 0;
  std::int64_t dropped = 0;
  for (const auto& d : deliveries) {
    received += d.records_received;
    dropped += d.tracer->records_dropped;
  }
  EXPECT_EQ(t["records_received"], received);
  EXPECT_EQ(t["records_dropped"], dropped);
  EXPECT_EQ(t["rejected_connections"], 2);
  ASSERT_EQ(t["ranks"].size(), deliveries.size());
  for (std::size_t i = 0; i < deliveries.size(); ++i) {
    EXPECT_EQ(t["ranks"][i]["rank"], deliveries[i].global_rank);
    EXPECT_EQ(t["ranks"][i]["records_received"], deliveries[i].records_received);
    EXPECT_EQ(t["ranks"][i]["steps_recorded"], deliveries[i].tracer->steps_recorded);
  }

  // Deterministic: a second finalize writes the same bytes.
  const std::string json = read_file(run_dir / "final_summary.json");
  finalize_run(run_dir.string());
  EXPECT_EQ(read_file(run_dir / "final_summary.json"), json);
}

INSTANTIATE_TEST_SUITE_P(Samples, FinalizeGolden,
                         ::testing::Values("single_input_bound", "ddp_input_straggler",
                                           "ddp4_balanced", "h2d_bound", "ddp4_compute_straggler",
                                           "incomplete_forward", "residual_memory_creep"));

TEST(Finalize, WindowIsPassedToTheAnalysis) {
  const std::string name = "residual_memory_creep";
  const fs::path jsonl = kGolden / "data" / (name + ".jsonl");
  const store::ReadResult in = store::read_telemetry_jsonl(jsonl.string());
  TempDir tmp;
  const fs::path run_dir = tmp.path() / "logs" / name;
  write_db(run_dir, in.telemetry, deliveries_for(in.telemetry));
  const report::FinalSummary f = finalize_run(run_dir.string(), 40);

  const auto r = run_process(
      {TRACEML_CLI_PATH, "report", "--telemetry", jsonl.string(), "--out", "cli", "--window", "40"},
      tmp.path().string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const Json cli = Json::parse(read_file(tmp.path() / "cli" / "final_summary.json"));
  EXPECT_EQ(report::dump_json(without_tracer_and_text(f.json)),
            report::dump_json(without_tracer_and_text(cli)));
  // The window matters here: the default window gives another summary.
  const Json full = finalize_run(run_dir.string()).json;
  EXPECT_NE(report::dump_json(without_tracer_and_text(f.json)),
            report::dump_json(without_tracer_and_text(full)));
}

model::StepRecord step(int rank, std::int64_t id, std::optional<double> cpu_step_ms) {
  model::StepRecord r;
  r.global_rank = rank;
  r.step = id;
  r.ts = 1.7e9 + double(id);
  r.events.set(Event::Forward, {5.0, std::nullopt});
  r.events.set(Event::TracedStepTime, {cpu_step_ms, 12.0});
  return r;
}

TEST(Finalize, TracerBlockNumbers) {
  store::RunData d;
  model::Telemetry& t = d.telemetry;
  // Rank 0: CPU step times 30, 10, 20 ms -> median 20 ms.
  for (const auto& r : {step(0, 1, 30.0), step(0, 2, 10.0), step(0, 3, 20.0)})
    t.steps.push_back(r);
  // Rank 1: 10 and 20 ms -> median 15 ms (even count: mean of the middle two).
  t.steps.push_back(step(1, 1, 10.0));
  t.steps.push_back(step(1, 2, 20.0));
  // Rank 3: no CPU step time at all (GPU clock only).
  t.steps.push_back(step(3, 1, std::nullopt));
  model::TracerStats s0{0, 10, "ddp", 3, 9, 1, 2000.0, std::nullopt, std::nullopt};
  model::TracerStats s1{1, 11, "ddp", 2, 4, 0, 1500.0, std::nullopt, std::nullopt};
  model::TracerStats s3{3, 13, "ddp", 1, 2, 5, 700.0, std::nullopt, std::nullopt};
  model::TracerStats s4{4, 14, "ddp", 0, 0, 0, std::nullopt, std::nullopt, std::nullopt};
  d.deliveries = {{0, 8, true, s0},
                  {1, 4, false, s1},
                  {2, 6, true, std::nullopt},
                  {3, 2, true, s3},
                  {4, 0, false, s4}};
  d.rejected = {{1.0, "a:1", "x"}, {2.0, "b:2", "y"}, {3.0, "c:3", "z"}};

  const Json j = tracer_block(d);
  const std::string expected = R"({
  "ranks": [
    {
      "rank": 0,
      "steps_recorded": 3,
      "records_sent": 9,
      "records_received": 8,
      "records_dropped": 1,
      "clean_end": true,
      "overhead_ns_per_step": 2000.0,
      "overhead_pct_of_step": 0.01
    },
    {
      "rank": 1,
      "steps_recorded": 2,
      "records_sent": 4,
      "records_received": 4,
      "records_dropped": 0,
      "clean_end": false,
      "counters_partial": true,
      "overhead_ns_per_step": 1500.0,
      "overhead_pct_of_step": 0.01
    },
    {
      "rank": 2,
      "steps_recorded": null,
      "records_sent": null,
      "records_received": 6,
      "records_dropped": null,
      "clean_end": true,
      "overhead_ns_per_step": null,
      "overhead_pct_of_step": null
    },
    {
      "rank": 3,
      "steps_recorded": 1,
      "records_sent": 2,
      "records_received": 2,
      "records_dropped": 5,
      "clean_end": true,
      "overhead_ns_per_step": 700.0,
      "overhead_pct_of_step": null
    },
    {
      "rank": 4,
      "steps_recorded": 0,
      "records_sent": 0,
      "records_received": 0,
      "records_dropped": 0,
      "clean_end": false,
      "counters_partial": true,
      "overhead_ns_per_step": null,
      "overhead_pct_of_step": null
    }
  ],
  "records_received": 20,
  "records_dropped": 6,
  "rejected_connections": 3
})";
  EXPECT_EQ(report::dump_json(j), expected);
}

// A rank killed mid-run last sent its counters an interval before its end:
// 461 steps and 469 records, while the collector received 490 records and
// holds 482 steps. The block must not contradict itself.
TEST(Finalize, AKilledRanksCountersNeverContradictWhatTheCollectorHolds) {
  model::Telemetry t;
  t.run.run_name = "killed";
  for (std::int64_t id = 1; id <= 482; ++id)
    t.steps.push_back(step(0, id, 10.0));
  for (std::int64_t id = 1; id <= 3; ++id)
    t.steps.push_back(step(1, id, 10.0));
  model::TracerStats killed{0, 10, "ddp", 461, 469, 2, 900.0, std::nullopt, std::nullopt};
  model::TracerStats clean{1, 11, "ddp", 3, 3, 0, 900.0, std::nullopt, std::nullopt};
  TempDir tmp;
  const fs::path run_dir = tmp.path() / "logs" / "killed";
  write_db(run_dir, t, {{0, 490, false, killed}, {1, 3, true, clean}});

  const report::FinalSummary f = finalize_run(run_dir.string());
  const Json& r0 = f.json["tracer"]["ranks"][0];
  EXPECT_EQ(r0["steps_recorded"], 482);  // raised to the steps held
  EXPECT_EQ(r0["records_sent"], 490);    // raised to the records received
  EXPECT_EQ(r0["records_received"], 490);
  EXPECT_EQ(r0["records_dropped"], 2);  // as of its last report
  EXPECT_EQ(r0["clean_end"], false);
  EXPECT_EQ(r0["counters_partial"], true);
  // A rank that said goodbye has its own exact counters, with no mark.
  const Json& r1 = f.json["tracer"]["ranks"][1];
  EXPECT_EQ(r1["steps_recorded"], 3);
  EXPECT_FALSE(r1.contains("counters_partial"));
  const std::string tracer = std::regex_replace(f.text, std::regex("\n {8}"), " ");
  EXPECT_NE(tracer.find("at least 2 of 495 records dropped"), std::string::npos) << f.text;
  EXPECT_NE(tracer.find("R0 ended without a goodbye: its counters are as of the last report"),
            std::string::npos)
      << f.text;
}

TEST(Finalize, TracerShareIsOfTheWholeStepInputWaitIncluded) {
  // 2 ms traced + 18 ms waiting for input: a 20 ms step. 2000 ns of tracer
  // work is 0.01 % of it (dividing by the traced 2 ms alone gave 0.1 %).
  store::RunData d;
  for (std::int64_t id = 1; id <= 3; ++id) {
    model::StepRecord r = step(0, id, 2.0);
    r.events.set(Event::InputWait, {18.0, std::nullopt});
    d.telemetry.steps.push_back(r);
  }
  d.deliveries = {
      {0, 3, true, model::TracerStats{0, 10, "ddp", 3, 3, 0, 2000.0, std::nullopt, std::nullopt}}};
  const Json j = tracer_block(d);
  EXPECT_DOUBLE_EQ(j["ranks"][0]["overhead_pct_of_step"].get<double>(), 0.01);
}

TEST(Finalize, TracerBlockCountsEveryRefusalWhenTheFileHasTheCounts) {
  store::RunData d;
  d.rejected = {{1.0, "a:1", "x"}, {2.0, "b:2", "y"}};
  // A file from before the counts: one row per refusal.
  const Json rows = tracer_block(d);
  EXPECT_EQ(rows["rejected_connections"], 2);
  EXPECT_FALSE(rows.contains("rejected_by_kind"));
  // With the counts, the rows are only the first refusals.
  const Json counted =
      tracer_block(d, store::RejectionCounts{{"closed_before_hello", 5000}, {"wrong_token", 2}});
  EXPECT_EQ(counted["rejected_connections"], 5002);
  EXPECT_EQ(report::dump_json(counted["rejected_by_kind"]),
            "{\n  \"closed_before_hello\": 5000,\n  \"wrong_token\": 2\n}");
  // A run nobody knocked on keeps the block as it was.
  const Json quiet = tracer_block(store::RunData{}, store::RejectionCounts{});
  EXPECT_EQ(quiet["rejected_connections"], 0);
  EXPECT_FALSE(quiet.contains("rejected_by_kind"));
}

TEST(Finalize, TracerBlockSaysWhichRanksHadTheGpuClock) {
  // ddp_input_straggler has two ranks; rank 0 timed on cuda:0, rank 1 never
  // got a GPU clock (its thread worked on another device, say).
  const store::ReadResult in =
      store::read_telemetry_jsonl((kGolden / "data" / "ddp_input_straggler.jsonl").string());
  TempDir tmp;
  const fs::path run_dir = tmp.path() / "logs" / "gpu";
  auto deliveries = deliveries_for(in.telemetry);
  ASSERT_EQ(deliveries.size(), 2u);
  deliveries[0].tracer->gpu = model::TracerStats::Gpu{0, 118, 2, 3};
  deliveries[0].tracer->activity_lost = 40;
  write_db(run_dir, in.telemetry, deliveries);

  const report::FinalSummary f = finalize_run(run_dir.string());
  const Json& ranks = f.json["tracer"]["ranks"];
  EXPECT_EQ(report::dump_json(ranks[0]["gpu_clock"]), R"({
  "device": 0,
  "steps_resolved": 118,
  "steps_unresolved": 2,
  "scopes_skipped": 3
})");
  EXPECT_EQ(ranks[0]["activity_records_lost"], 40);
  EXPECT_FALSE(ranks[1].contains("gpu_clock"));  // a CPU-only rank: the keys are absent
  EXPECT_FALSE(ranks[1].contains("activity_records_lost"));
  // The Tracer line, wrapped at the report's width, as one line.
  const std::string tracer = std::regex_replace(f.text, std::regex("\n {8}"), " ");
  EXPECT_NE(tracer.find("GPU clock on 1 of 2 ranks (CPU only: r1), 2 steps without GPU times"),
            std::string::npos)
      << f.text;
  EXPECT_NE(tracer.find("40 GPU activity records lost"), std::string::npos) << f.text;
}

TEST(Finalize, EmptyRunStillWritesASummary) {
  TempDir tmp;
  const fs::path run_dir = tmp.path() / "run";
  model::Telemetry t;
  t.run.run_name = "empty";
  write_db(run_dir, t, {});
  const report::FinalSummary f = finalize_run(run_dir.string());
  EXPECT_EQ(f.json["meta"]["mode"], "no_data");
  EXPECT_EQ(f.json["tracer"]["ranks"], Json::array());
  EXPECT_EQ(f.json["tracer"]["records_received"], 0);
  EXPECT_TRUE(fs::exists(run_dir / "final_summary.txt"));
}

TEST(Finalize, MissingDatabaseIsARunDbError) {
  TempDir tmp;
  const std::string db = (tmp.path() / store::kRunDbFileName).string();
  try {
    finalize_run(tmp.path().string());
    FAIL();
  } catch (const store::RunDbError& e) {
    EXPECT_EQ(std::string(e.what()),
              db + ": no such file (no telemetry.db found? pass the run directory written by "
                   "traceml run)");
  }
  EXPECT_FALSE(fs::exists(tmp.path() / "final_summary.json"));
}

}  // namespace
}  // namespace traceml::collector
