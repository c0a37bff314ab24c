// The run's stalls in the text report: a line per stall under the run line
// (a few, then a count), and, when the run was stopped while a rank hung,
// the hung rank and its phase in the verdict area.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "../support/subprocess.hpp"
#include "report/text/text_report.hpp"

namespace traceml::report {
namespace {

using Json = nlohmann::ordered_json;

Json golden() {
  return Json::parse(testing::read_file(std::string(TRACEML_TEST_DATA_DIR) +
                                        "/golden/expected/ddp4_balanced/final_summary.json"));
}

Json stall(int rank, const char* kind, std::int64_t step, const char* phase, double duration,
           bool resumed, int waiting) {
  Json s = Json::object();
  s["rank"] = rank;
  s["kind"] = kind;
  s["step"] = step;
  s["phase"] = phase == nullptr ? Json() : Json(phase);
  s["start"] = 1764892800.0;
  s["duration_s"] = duration;
  s["resumed"] = resumed;
  s["others_waiting"] = waiting > 0 ? Json(waiting) : Json();
  return s;
}

Json with_run(const char* status, Json stalls) {
  Json j = golden();
  j["run"] = {{"status", status},
              {"exit_code", 130},
              {"failed_rank", nullptr},
              {"ranks", Json::array()},
              {"stalls", std::move(stalls)}};
  return j;
}

std::string line_with(const std::string& text, const std::string& needle) {
  const auto at = text.find(needle);
  if (at == std::string::npos) return "";
  const auto start = text.rfind('\n', at) + 1;
  return text.substr(start, text.find('\n', at) - start);
}

TEST(TextStalls, EachStallHasALineWithWhereTheRankWas) {
  const std::string text = render_text(
      with_run("completed", Json::array({stall(1, "silent", 812, "input_wait", 6.24, true, 1),
                                         stall(0, "stalled", 813, "backward", 6.0, true, 0)})));
  EXPECT_EQ(line_with(text, "Stall: R1"),
            "Stall: R1 was silent for 6.2 s (last heard at step 812, input wait) · 1 rank waited "
            "for it")
      << text;
  EXPECT_EQ(line_with(text, "Stall: R0"), "Stall: R0 was stalled for 6.0 s at step 813, backward")
      << text;
  EXPECT_EQ(text.find("HANG"), std::string::npos) << text;  // the run completed
}

// The hang is the headline (DECISIONS 15): the run's `hang` opens the report,
// and the step verdict follows as what the steps showed before it.
TEST(TextStalls, AStoppedRunOpensWithTheHang) {
  Json j =
      with_run("interrupted", Json::array({stall(0, "stalled", 813, "backward", 30.0, false, 0),
                                           stall(1, "silent", 812, "forward", 31.5, false, 1)}));
  j["run"]["hang"] = j["run"]["stalls"][1];
  const std::string text = render_text(j);
  const auto verdict = text.find("Verdict: HANG  (critical)");
  ASSERT_NE(verdict, std::string::npos) << text;
  EXPECT_EQ(line_with(text, "Why: R1"),
            "Why: R1 was silent for 31.5 s (last heard at step 812, forward), when the run was "
            "stopped; 1 rank waited for it.")
      << text;
  EXPECT_NE(text.find("Next: Find what R1 was doing there: its output (rank1.log"),
            std::string::npos)
      << text;
  // The step verdict, after the hang, before the scope line.
  const auto before = text.find("Before the hang: ");
  EXPECT_TRUE(verdict < before && before < text.find("Scope:")) << text;
  EXPECT_EQ(text.find("\nVerdict: " + std::string("BALANCED")), std::string::npos) << text;
  EXPECT_NE(line_with(text, "Stall: R1").find("it never resumed"), std::string::npos) << text;
}

// Read from the rank's black box, a silent rank's position is where it is,
// not where it was last heard.
TEST(TextStalls, AHangReadFromTheBlackBoxSaysWhereTheRankIs) {
  Json hung = stall(1, "silent", 813, "backward", 12.0, false, 1);
  hung["position_from"] = "black_box";
  Json j = with_run("failed", Json::array({hung}));
  j["run"]["hang"] = hung;
  const std::string text = render_text(j);
  EXPECT_NE(text.find("Why: R1 was silent for 12.0 s at step 813, backward, when the run was"),
            std::string::npos)
      << text;
}

// A summary written before `run.hang` existed (no such key) opens with the
// hang its stalls say, by the same rule: the rank the others waited for.
TEST(TextStalls, ASummaryFromBeforeTheHangKeyOpensWithTheHangItsStallsSay) {
  const Json old =
      with_run("interrupted", Json::array({stall(0, "stalled", 813, "backward", 30.0, false, 0),
                                           stall(2, "silent", 700, "forward", 3.0, true, 1),
                                           stall(1, "silent", 812, "forward", 31.5, false, 1)}));
  ASSERT_FALSE(old["run"].contains("hang"));
  const std::string text = render_text(old);
  EXPECT_NE(text.find("Verdict: HANG  (critical)\nWhy: R1 was silent for 31.5 s (last heard at "
                      "step 812, forward), when the run was stopped; 1 rank waited for it."),
            std::string::npos)
      << text;
  // Today's summaries say it themselves: null is no hang.
  Json none = old;
  none["run"]["hang"] = nullptr;
  EXPECT_EQ(render_text(none).find("HANG"), std::string::npos);
}

TEST(TextStalls, ACompletedRunWithoutAHangKeepsItsVerdict) {
  const std::string text = render_text(
      with_run("completed", Json::array({stall(1, "silent", 8, "forward", 4.0, true, 0)})));
  EXPECT_EQ(text.find("HANG"), std::string::npos) << text;
  EXPECT_EQ(text.find("Before the hang"), std::string::npos) << text;
  EXPECT_NE(text.find("\nVerdict: "), std::string::npos) << text;
}

// How a failed rank ended, as `traceml run` saw it, on the Run line.
TEST(TextStalls, TheFailedRanksDeathIsSaidPrecisely) {
  Json j = with_run("failed", Json::array());
  j["run"]["exit_code"] = 137;
  j["run"]["failed_rank"] = 1;
  j["run"]["ranks"] = Json::array({{{"rank", 1},
                                    {"exit_code", 137},
                                    {"signal", 9},
                                    {"stopped_by_launcher", false},
                                    {"signal_name", "SIGKILL"},
                                    {"steps_completed", 1500},
                                    {"phase", "backward"},
                                    {"rss_bytes", 7.5e9}}});
  const std::string text = render_text(j);
  EXPECT_NE(line_with(text, "Run: FAILED")
                .find("rank 1 failed: killed by SIGKILL in step 1501 (backward) after 1500 "
                      "completed steps, RSS "),
            std::string::npos)
      << text;
}

TEST(TextStalls, ManyStallsAreCounted) {
  Json stalls = Json::array();
  for (int i = 0; i < 7; ++i)
    stalls.push_back(stall(i, "silent", 10, nullptr, 4.0, true, 0));
  const std::string text = render_text(with_run("completed", stalls));
  EXPECT_NE(text.find("Stall: ... and 3 more (run.stalls in final_summary.json)"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("Stall: R3 was silent for 4.0 s (last heard at step 10)"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("Stall: R4"), std::string::npos) << text;
}

}  // namespace
}  // namespace traceml::report
