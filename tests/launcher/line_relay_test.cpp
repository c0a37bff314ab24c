#include "launcher/line_relay.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace traceml::launcher {
namespace {

struct Collected {
  std::vector<std::string> lines;
  LineRelay relay;
  explicit Collected(std::string prefix)
      : relay(std::move(prefix), [this](std::string_view l) { lines.emplace_back(l); }) {}
};

TEST(LineRelay, EmitsEachCompleteLineWithPrefixInOneCall) {
  Collected c("[rank3]: ");
  c.relay.feed("first\nsecond\n");
  EXPECT_EQ(c.lines, (std::vector<std::string>{"[rank3]: first\n", "[rank3]: second\n"}));
}

TEST(LineRelay, JoinsALineSplitAcrossReads) {
  Collected c("[rank0]: ");
  c.relay.feed("hel");
  EXPECT_TRUE(c.lines.empty());
  c.relay.feed("lo wor");
  c.relay.feed("ld\nnext");
  EXPECT_EQ(c.lines, (std::vector<std::string>{"[rank0]: hello world\n"}));
}

TEST(LineRelay, FinishFlushesAPartialLineWithANewline) {
  Collected c("[rank1]: ");
  c.relay.feed("a\nno newline");
  c.relay.finish();
  EXPECT_EQ(c.lines, (std::vector<std::string>{"[rank1]: a\n", "[rank1]: no newline\n"}));
  c.relay.finish();  // nothing left: no empty line
  EXPECT_EQ(c.lines.size(), 2u);
}

TEST(LineRelay, KeepsEmptyLines) {
  Collected c("");
  c.relay.feed("\n\nx\n");
  EXPECT_EQ(c.lines, (std::vector<std::string>{"\n", "\n", "x\n"}));
}

TEST(LineRelay, CutsALongLineIntoChunksOfTheCap) {
  Collected c("[rank0]: ");
  const std::size_t cap = LineRelay::kMaxLineBytes;
  // Fed in uneven pieces, as reads from a pipe come.
  const std::string big(cap * 2 + 100, 'x');
  c.relay.feed(std::string_view(big).substr(0, 1000));
  c.relay.feed(std::string_view(big).substr(1000, cap));
  ASSERT_EQ(c.lines.size(), 1u);  // the first chunk went out before any newline
  c.relay.feed(std::string_view(big).substr(1000 + cap));
  c.relay.feed("\n");
  ASSERT_EQ(c.lines.size(), 3u);
  EXPECT_EQ(c.lines[0], "[rank0]: " + std::string(cap, 'x') + "\n");
  EXPECT_EQ(c.lines[1], "[rank0]: " + std::string(cap, 'x') + "\n");
  EXPECT_EQ(c.lines[2], "[rank0]: " + std::string(100, 'x') + "\n");
}

TEST(LineRelay, ALineOfExactlyTheCapStaysOneLine) {
  Collected c("");
  const std::string line(LineRelay::kMaxLineBytes, 'y');
  c.relay.feed(line.substr(0, 10));
  c.relay.feed(line.substr(10) + "\n");
  ASSERT_EQ(c.lines.size(), 1u);
  EXPECT_EQ(c.lines[0], line + "\n");
}

TEST(LineRelay, AWholeLongLineInOneReadIsCutToo) {
  Collected c("");
  const std::string line(LineRelay::kMaxLineBytes + 5, 'z');
  c.relay.feed(line + "\nend\n");
  EXPECT_EQ(c.lines, (std::vector<std::string>{std::string(LineRelay::kMaxLineBytes, 'z') + "\n",
                                               "zzzzz\n", "end\n"}));
}

}  // namespace
}  // namespace traceml::launcher
