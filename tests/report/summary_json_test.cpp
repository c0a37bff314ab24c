// The summary's JSON text never fails on a bad string, and the renderers'
// view of a summary carries no control character.
#include <gtest/gtest.h>

#include <string>

#include "report/summary_json.hpp"

namespace traceml::report {
namespace {

TEST(SummaryJson, IllFormedUtf8IsWrittenAsReplacementNotAThrow) {
  // Once "[json.exception.type_error.316] invalid UTF-8" stopped the summary
  // of a run whose peer sent such a host name, and every later report too.
  Json j;
  j["hostname"] = std::string("node\xFF\xC3-1");
  std::string text;
  ASSERT_NO_THROW(text = dump_json(j));
  EXPECT_NE(text.find(R"("node\ufffd\ufffd-1")"), std::string::npos) << text;
  EXPECT_EQ(Json::parse(text)["hostname"], "node\xEF\xBF\xBD\xEF\xBF\xBD-1");
}

TEST(SummaryJson, TimestampsOutsideTheFormatAreClampedNotUndefined) {
  // 1e300 seconds once went through a double-to-time_t conversion out of
  // range (undefined behaviour, caught by UBSan in the sanitizer build).
  EXPECT_EQ(iso8601_utc(0.0), "1970-01-01T00:00:00.000000+00:00");
  EXPECT_EQ(iso8601_utc(1e300), "9999-12-31T23:59:59.000000+00:00");
  EXPECT_EQ(iso8601_utc(1.7976931348623157e308), "9999-12-31T23:59:59.000000+00:00");
  EXPECT_EQ(iso8601_utc(-5.0), "1970-01-01T00:00:00.000000+00:00");
  EXPECT_EQ(iso8601_utc(1764758400.25), "2025-12-03T10:40:00.250000+00:00");
}

TEST(SummaryJson, TerminalViewEscapesKeysAndValuesAtAnyDepth) {
  Json j;
  j["a\x1b"] = Json::array({"x\x07", 1.5, nullptr, Json{{"k", "\xC2\x9B"}}});
  const Json e = escape_strings_for_terminal(j);
  ASSERT_TRUE(e.contains("a\\x1b"));
  EXPECT_EQ(e["a\\x1b"][0], "x\\x07");
  EXPECT_EQ(e["a\\x1b"][1], 1.5);
  EXPECT_TRUE(e["a\\x1b"][2].is_null());
  EXPECT_EQ(e["a\\x1b"][3]["k"], "\\u009b");
}

TEST(SummaryJson, TerminalSafeViewCopiesOnlyWhenAStringNeedsIt) {
  Json clean;
  clean["meta"]["run_name"] = "run ◀ 1";
  const TerminalSafeJson a(clean);
  EXPECT_EQ(&a.get(), &clean);  // the renderers' common case costs no copy
  Json dirty = clean;
  dirty["meta"]["host"] = "h\x1b[2J";
  const TerminalSafeJson b(dirty);
  EXPECT_NE(&b.get(), &dirty);
  EXPECT_EQ(b.get()["meta"]["host"], "h\\x1b[2J");
  Json key;
  key["k\x07"] = 1;
  EXPECT_TRUE(TerminalSafeJson(key).get().contains("k\\x07"));
}

TEST(SummaryJson, TerminalViewOfAHostileDepthDoesNotRecurseWithoutEnd) {
  Json deep = "leaf";
  for (int i = 0; i < 100000; ++i)
    deep = Json::array({std::move(deep)});
  const TerminalSafeJson safe(deep);  // too deep: the bounded copy
  const Json& e = safe.get();
  EXPECT_EQ(escape_strings_for_terminal(deep), e);
  const Json* p = &e;
  int depth = 0;
  while (p->is_array() && !p->empty()) {
    p = &(*p)[0];
    ++depth;
  }
  EXPECT_EQ(depth, 64);  // nothing a renderer reads lies deeper
  EXPECT_TRUE(p->is_null());
}

}  // namespace
}  // namespace traceml::report
