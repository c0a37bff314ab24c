// Outside strings are data: UTF-8 checks, repair, and terminal escaping.
#include <gtest/gtest.h>

#include <string>

#include "model/text.hpp"

namespace traceml::model {
namespace {

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_TRUE(valid_utf8(""));
  EXPECT_TRUE(valid_utf8("node-01"));
  EXPECT_TRUE(valid_utf8("h\xC3\xA9te \xE2\x82\xAC \xF0\x9F\x98\x80"));  // é € 😀
  EXPECT_TRUE(valid_utf8("\xF4\x8F\xBF\xBF"));                           // U+10FFFF
}

TEST(Utf8, RejectsIllFormedText) {
  EXPECT_FALSE(valid_utf8("\xFF"));
  EXPECT_FALSE(valid_utf8("\xC3"));              // truncated
  EXPECT_FALSE(valid_utf8("\xC0\xAF"));          // overlong '/'
  EXPECT_FALSE(valid_utf8("\xE0\x80\xAF"));      // overlong
  EXPECT_FALSE(valid_utf8("\xED\xA0\x80"));      // surrogate U+D800
  EXPECT_FALSE(valid_utf8("\xF4\x90\x80\x80"));  // above U+10FFFF
  EXPECT_FALSE(valid_utf8("ok\x80"));
}

TEST(Utf8, SanitizeReplacesEachBadByteAndKeepsGoodText) {
  EXPECT_EQ(sanitize_utf8("host\xFF\xFE-1"), "host\xEF\xBF\xBD\xEF\xBF\xBD-1");
  EXPECT_EQ(sanitize_utf8("h\xC3\xA9"), "h\xC3\xA9");
  EXPECT_TRUE(valid_utf8(sanitize_utf8("\xC3\x28\xE2\x82\xF0\x9F")));
}

TEST(Utf8, SanitizeCutsOnACharacterBoundary) {
  EXPECT_EQ(sanitize_utf8("abcdef", 3), "abc");
  // "é" is two bytes: a limit of 2 keeps "a" and drops the half character.
  EXPECT_EQ(sanitize_utf8("a\xC3\xA9", 2), "a");
  EXPECT_EQ(sanitize_utf8("a\xC3\xA9", 3), "a\xC3\xA9");
}

TEST(TerminalEscape, ControlCharactersBecomeVisible) {
  EXPECT_EQ(escape_for_terminal("a\x1b[2Jb"), "a\\x1b[2Jb");
  EXPECT_EQ(escape_for_terminal(std::string("n\0ul", 4)), "n\\x00ul");
  EXPECT_EQ(escape_for_terminal("bell\x07\x7f"), "bell\\x07\\x7f");
  EXPECT_EQ(escape_for_terminal("csi\xC2\x9B"), "csi\\u009b");  // C1 CSI
  EXPECT_EQ(escape_for_terminal("cr\rlf"), "cr\\x0dlf");
}

TEST(TerminalEscape, OneLineEscapesNewlinesToo) {
  EXPECT_EQ(escape_for_terminal("a\nb\tc", true), "a\\x0ab\tc");
  EXPECT_EQ(escape_for_terminal("a\nb", false), "a\nb");
}

TEST(TerminalEscape, PrintableTextIsUnchanged) {
  EXPECT_EQ(escape_for_terminal("R1/N0 waits 39.9 ms\tok\n"), "R1/N0 waits 39.9 ms\tok\n");
  EXPECT_EQ(escape_for_terminal("├─ Input Wait ◀ 20x"), "├─ Input Wait ◀ 20x");
  EXPECT_EQ(escape_for_terminal("bad\xFF"), "bad\xEF\xBF\xBD");
}

}  // namespace
}  // namespace traceml::model
