// The text report's Tracer line (issue 47): counts said as they are known
// (never "at least 0 of N records dropped"), at most 8 ranks named, and the
// line wrapped within the report's width however many ranks ended early.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <regex>
#include <sstream>

#include "../support/subprocess.hpp"
#include "report/text/text_report.hpp"

namespace traceml::report {
namespace {

using Json = nlohmann::ordered_json;

/// A summary whose tracer block has `ranks` ranks, the first `partial` of
/// them without a goodbye, `dropped` records dropped in all.
Json with_tracer(int ranks, int partial, std::int64_t dropped) {
  Json j = Json::parse(testing::read_file(std::string(TRACEML_TEST_DATA_DIR) +
                                          "/golden/expected/ddp4_balanced/final_summary.json"));
  Json list = Json::array();
  for (int r = 0; r < ranks; ++r)
    list.push_back({{"rank", r},
                    {"records_received", 1000},
                    {"records_dropped", r == 0 ? dropped : 0},
                    {"counters_partial", r < partial}});
  j["tracer"] = {
      {"records_received", 1000 * ranks}, {"records_dropped", dropped}, {"ranks", std::move(list)}};
  return j;
}

std::string tracer_lines(const std::string& text) {
  const auto at = text.find("\nTracer: ");
  if (at == std::string::npos) return "";
  return text.substr(at + 1, text.find("\n\n", at + 1) - at - 1);
}

TEST(TextTracer, NoCountIsSaidThatIsNotKnown) {
  EXPECT_EQ(tracer_lines(render_text(with_tracer(2, 0, 0))), "Tracer: 0 of 2000 records dropped");
  EXPECT_EQ(
      tracer_lines(render_text(with_tracer(2, 1, 0))),
      "Tracer: 2000 records received · R0 ended without a goodbye: its counters are as of the "
      "last report");
  EXPECT_EQ(tracer_lines(render_text(with_tracer(2, 2, 64))),
            "Tracer: at least 64 of 2064 records dropped · R0, R1 each ended without a goodbye: "
            "their counters are as of the last\n        report");
}

TEST(TextTracer, ManyRanksThatEndedEarlyAreCountedAndTheLineWraps) {
  const std::string lines = tracer_lines(render_text(with_tracer(64, 40, 1578)));
  EXPECT_NE(std::regex_replace(lines, std::regex("\n +"), " ")
                .find("R0, R1, R2, R3, R4, R5, R6, R7 and 32 more each ended without a goodbye"),
            std::string::npos)
      << lines;
  std::istringstream in(lines);
  for (std::string line; std::getline(in, line);)
    EXPECT_LE(line.size(), 120u) << line;
}

}  // namespace
}  // namespace traceml::report
