// Loading a final_summary.json for traceml view and traceml compare: what each
// accepts, the one-line problem for what it rejects, and the inputs found by
// fuzz_summary (tests/fuzz/corpus/fuzz_summary/) that escaped or crashed.
#include "report/summary_file.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

namespace traceml::report {
namespace {

std::string golden_summary() {
  std::ifstream in(std::string(TRACEML_TEST_DATA_DIR) +
                   "/golden/expected/h2d_bound/final_summary.json");
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

std::string nested(std::size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(SummaryFile, AcceptsAWrittenSummaryForViewAndCompare) {
  const std::string text = golden_summary();
  ASSERT_FALSE(text.empty());
  const SummaryParse v = parse_summary_to_view(text);
  ASSERT_TRUE(v.json) << v.problem;
  EXPECT_EQ(v.problem, "");
  EXPECT_EQ((*v.json)["schema_version"], 1.7);
  const SummaryParse c = parse_summary_to_compare(text);
  ASSERT_TRUE(c.json) << c.problem;
  // Key order is kept: the report code renders in the file's order.
  EXPECT_EQ(c.json->begin().key(), "schema_version");
}

TEST(SummaryFile, ViewAcceptsTraceMLStyleSummaries) {
  EXPECT_TRUE(parse_summary_to_view(R"({"text": "report"})").json);
  EXPECT_TRUE(parse_summary_to_view(R"({"primary_diagnosis": {}})").json);
  EXPECT_TRUE(parse_summary_to_view(R"({"schema_version": "1.4"})").json);
}

TEST(SummaryFile, RejectionsAreOneLineProblems) {
  EXPECT_EQ(parse_summary_to_view("[1]").problem, "a summary must be a JSON object");
  EXPECT_EQ(parse_summary_to_view(R"({"a": 1})").problem,
            "not a final_summary.json (no schema_version, primary_diagnosis or text)");
  EXPECT_EQ(parse_summary_to_view("{oops").problem.rfind("not valid JSON (", 0), 0u);
  EXPECT_EQ(parse_summary_to_compare(R"({"system": {}})").problem,
            "not a run summary (no 'schema_version')");
  EXPECT_EQ(parse_summary_to_compare(R"({"schema_version": 2, "system": {}})").problem,
            "unsupported schema_version 2 (compare reads schema 1.x summaries)");
  EXPECT_EQ(parse_summary_to_compare(R"({"schema_version": 1.7, "system": {}})").problem,
            "summary is missing required section 'process'");
  EXPECT_EQ(
      parse_summary_to_compare(R"({"schema_version": 2, "verdict": {}, "lhs": {}, "system": {}})")
          .problem,
      "this is a compare result, not a run summary");
}

// Found by fuzz_summary: nlohmann reports a number beyond double's range as
// out_of_range, not parse_error, and it escaped both loaders.
TEST(SummaryFile, ANumberOutOfRangeIsNotValidJson) {
  for (const char* text : {R"({"schema_version": 1e999})", R"({"text": "x", "n": -4444e445})"}) {
    SummaryParse v;
    ASSERT_NO_THROW(v = parse_summary_to_view(text)) << text;
    EXPECT_FALSE(v.json);
    EXPECT_EQ(v.problem.rfind("not valid JSON (", 0), 0u) << v.problem;
    EXPECT_NE(v.problem.find("number overflow"), std::string::npos) << v.problem;
    SummaryParse c;
    ASSERT_NO_THROW(c = parse_summary_to_compare(text)) << text;
    EXPECT_EQ(c.problem, v.problem);
  }
}

// Found by fuzz_summary: compare walks values recursively, so a deeply nested
// schema_version overflowed the stack. Nesting is bounded at the boundary.
TEST(SummaryFile, NestingIsBounded) {
  const std::string sections = R"("system":{},"process":{},"step_time":{},"step_memory":{})";
  const std::string deep = R"({"schema_version":)" + nested(100000) + "," + sections + "}";
  const SummaryParse c = parse_summary_to_compare(deep);
  EXPECT_FALSE(c.json);
  EXPECT_EQ(c.problem, "JSON nested more than 64 levels deep");
  EXPECT_EQ(parse_summary_to_view(deep).problem, c.problem);

  // The limit is exact: the object itself is level 1.
  EXPECT_TRUE(parse_summary_to_view(R"({"text":"x","a":)" + nested(63) + "}").json);
  EXPECT_FALSE(parse_summary_to_view(R"({"text":"x","a":)" + nested(64) + "}").json);
  // Brackets inside strings, escaped quotes included, are not nesting.
  const std::string brackets(1000, '[');
  EXPECT_TRUE(parse_summary_to_view(R"({"text":"\")" + brackets + R"(\\","b":"{{{{"})").json);
}

}  // namespace
}  // namespace traceml::report
