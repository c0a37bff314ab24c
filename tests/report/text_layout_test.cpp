// The word wrap every text block uses (report/text/text_layout): greedy by
// display width, and no last line of one short word ("N0." alone, issue 47).
#include "report/text/text_layout.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace traceml::report {
namespace {

using Lines = std::vector<std::string>;

TEST(Wrap, AShortLastWordTakesTheWordBeforeItAlong) {
  EXPECT_EQ(wrap("Evidence: ", "CPU usage was high, averaging 100.0% on N0.", 52, 10),
            (Lines{"Evidence: CPU usage was high, averaging 100.0%", "          on N0."}));
  // A longer last word stays where the greedy wrap put it.
  EXPECT_EQ(wrap("Evidence: ", "CPU usage was high, averaging 100.0% on node0.", 52, 10),
            (Lines{"Evidence: CPU usage was high, averaging 100.0% on", "          node0."}));
  // A line is never left without a word: "two" stays.
  EXPECT_EQ(wrap("", "abcdefghij ab", 11, 0), (Lines{"abcdefghij", "ab"}));
  // Nothing moves when the moved pair would not fit.
  EXPECT_EQ(wrap("", "aaaa bbbbbbbbb cc", 14, 5), (Lines{"aaaa bbbbbbbbb", "     cc"}));
  EXPECT_EQ(wrap("Why: ", "fits on one line", 80, 5), (Lines{"Why: fits on one line"}));
  EXPECT_EQ(wrap("Why: ", "", 80, 5), Lines{});
}

}  // namespace
}  // namespace traceml::report
