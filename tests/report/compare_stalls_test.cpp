// compare and one-off stalls (DECISIONS 23, issue 47): a stall one run has
// and the other has not is named, a mean moved far while the median step
// held is never called noise without saying why, the rows say which deltas
// are of means and which of the median step, and no row overruns the box.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "../support/compare_fixtures.hpp"
#include "report/text/text_layout.hpp"

namespace {

using namespace traceml::testing;

/// A CPU run whose step times have this median and quartiles.
Json with_median(Json s, double p25, double median, double p75) {
  s["step_time"]["global"]["spread"] =
      Json{{"step_time_ms", Json{{"p25", p25}, {"median", median}, {"p75", p75}}}};
  return s;
}

/// The run's step-time finding holds one stall of `ms` at step 52.
Json with_stall(Json s, double ms, double share, double without) {
  s["step_time"]["issues"] = Json::array({Json{
      {"kind", "INPUT_BOUND"},
      {"evidence",
       Json{{"stalls",
             Json{{"metric", "input_wait_ms"},
                  {"share", share},
                  {"share_without", without},
                  {"steps",
                   Json::array(
                       {Json{{"rank", 0}, {"step", 52}, {"value_ms", ms}, {"step_time_ms", ms}}})},
                  {"median_value_ms", 0.1},
                  {"median_step_time_ms", 2.5}}}}}}});
  return s;
}

std::string flat(const std::string& text) {
  return std::regex_replace(text, std::regex(" *\\|\\n\\|  +"), " ");
}

TEST(CompareStalls, AStallOnlyRunBHasIsNamedAndDecidesTheChangedDiagnosis) {
  const Json a = with_median(cpu_summary(2.6, "COMPUTE-BOUND"), 2.5, 2.6, 2.7);
  const Json b =
      with_stall(with_median(cpu_summary(22.6, "INPUT-BOUND"), 2.5, 2.6, 2.7), 6000.0, 0.89, 0.04);
  const Json c = compare(a, b);
  EXPECT_EQ(c["verdict"]["status"], "EQUIVALENT");
  const std::string w = c["verdict"]["why"].get<std::string>();
  EXPECT_EQ(w.rfind("CPU Step Time mean changed by +769.2%, moved by one stall in run B that run A "
                    "has not (step 52 of R0 waited 6.0 s for input); the median step did not "
                    "change (median shift +0.0 ms is inside the IQR band 0.2 ms",
                    0),
            0u)
      << w;
  EXPECT_NE(w.find("but the primary and step time diagnoses changed from COMPUTE-BOUND to "
                   "INPUT-BOUND, which run B's stall decides (without it, input wait is 4% of its "
                   "step, not 89%)."),
            std::string::npos)
      << w;
  const Json& stalls = c["sections"]["step_time"]["stalls"];
  EXPECT_TRUE(stalls["lhs"].is_null());
  EXPECT_EQ(stalls["rhs"]["steps"][0]["step"], 52);
  EXPECT_EQ(stalls["rhs"]["kind"], "INPUT_BOUND");
  const std::string text = c["text"].get<std::string>();
  EXPECT_NE(text.find("|  CPU Step Time, mean          2.6 ms            22.6 ms"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("|  CPU Step Time, median step   2.6 ms            2.6 ms            +0.0 "
                      "ms (+0.0%)"),
            std::string::npos)
      << text;
  EXPECT_NE(flat(text).find("- Run B: step 52 of R0 waited 6.0 s for input; the means above "
                            "include it, the median step does not."),
            std::string::npos)
      << text;
  // The other way round: the stall is run A's.
  const std::string back = compare(b, a)["verdict"]["why"].get<std::string>();
  EXPECT_NE(back.find("moved by one stall in run A that run B has not"), std::string::npos) << back;
}

TEST(CompareStalls, AMeanMovedFarWhileTheMedianHeldIsNeverJustNoise) {
  // No stall named (TraceML's summaries, or steps too few to call stalls).
  const Json c = compare(with_median(cpu_summary(2.6), 2.5, 2.6, 2.7),
                         with_median(cpu_summary(8.0), 2.5, 2.6, 2.7));
  EXPECT_EQ(c["verdict"]["status"], "EQUIVALENT");
  EXPECT_EQ(c["verdict"]["why"].get<std::string>().rfind(
                "CPU Step Time mean changed by +207.7%, moved by a few outlying steps: the median "
                "step did not change (",
                0),
            0u)
      << c["verdict"]["why"];
}

TEST(CompareStalls, ARegressionSaysTheStallsTheRunsDifferBy) {
  const Json a = with_median(cpu_summary(2.6, "INPUT-BOUND"), 2.5, 2.6, 2.7);
  const Json b =
      with_stall(with_median(cpu_summary(30.0, "INPUT-BOUND"), 9.0, 10.0, 11.0), 6000.0, 0.9, 0.5);
  const std::string w = compare(a, b)["verdict"]["why"].get<std::string>();
  EXPECT_EQ(w,
            "CPU Step Time increased by 1053.8%. The runs differ by one stall in run B that run "
            "A has not (step 52 of R0 waited 6.0 s for input).");
}

TEST(CompareStalls, NoRowOverrunsTheBoxAndAZeroBaseHasNoPercentage) {
  Json a = cpu_summary(1.2);
  Json b = cpu_summary(102.5, "COMPUTE STRAGGLER WITH A LONG NAME");
  a["step_time"]["global"]["average"]["h2d_ms"] = 0.01;
  b["step_time"]["global"]["average"]["h2d_ms"] = 0.02;
  const std::string text = compare(a, b)["text"].get<std::string>();
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);)
    EXPECT_EQ(traceml::report::display_width(line), 88u) << line;
  EXPECT_NE(text.find("+101.3 ms (+8442%) |"), std::string::npos) << text;
  EXPECT_NE(text.find("|  H2D, mean                    0.0 ms            0.0 ms            +0.0 ms"
                      "            |"),
            std::string::npos)
      << text;
}

}  // namespace
