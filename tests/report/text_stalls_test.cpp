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
  EXPECT_EQ(text.find("Hang:"), std::string::npos) << text;  // the run completed
}

TEST(TextStalls, AStoppedRunNamesTheRankThatHungInTheVerdictArea) {
  const std::string text = render_text(
      with_run("interrupted", Json::array({stall(0, "stalled", 813, "backward", 30.0, false, 0),
                                           stall(1, "silent", 812, "forward", 31.5, false, 1)})));
  // R1, whom R0 waited for, not R0 stuck waiting.
  const auto hang = text.find(
      "Hang: R1 was silent for 31.5 s (last heard at step 812, forward), "
      "when the run was stopped (1 rank waited for it).");
  ASSERT_NE(hang, std::string::npos) << text;
  EXPECT_LT(hang, text.find("Scope:")) << "in the verdict area:\n" << text;
  EXPECT_NE(line_with(text, "Stall: R1").find("it never resumed"), std::string::npos) << text;
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
