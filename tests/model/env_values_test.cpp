// The rules for run names, strategy words, run tokens and host names that the
// CLI and the runtime share (model/env_values.hpp).
#include "model/env_values.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace traceml::model {
namespace {

TEST(EnvValues, ARunNameIsOneShortPathSegment) {
  for (const std::string& ok :
       {std::string("job"), std::string("job_7.b-2"), std::string(kMaxRunNameBytes, 'n')})
    EXPECT_FALSE(run_name_problem(ok)) << ok;
  for (const char* bad : {"", ".", "..", "../up", "a/b", "sp ace", "caf\xc3\xa9", "a\nb"})
    EXPECT_EQ(run_name_problem(bad), "must be one path segment of letters, digits, '_', '.' or '-'")
        << bad;
  EXPECT_EQ(run_name_problem(std::string(kMaxRunNameBytes + 1, 'n')),
            "is 129 bytes; at most 128 are allowed");
}

TEST(EnvValues, AStrategyIsOneWord) {
  for (const char* ok : {"ddp", "fsdp", "single_process", "zero-3"})
    EXPECT_FALSE(strategy_problem(ok)) << ok;
  for (const char* bad : {"", "d.p", "dd p", "ddp\n", "\xff"})
    EXPECT_TRUE(strategy_problem(bad)) << bad;
  EXPECT_TRUE(strategy_problem(std::string(kMaxStrategyBytes + 1, 's')));
  EXPECT_FALSE(strategy_problem(std::string(kMaxStrategyBytes, 's')));
}

TEST(EnvValues, ATokenIsPrintableUtf8OfAtMost1024Bytes) {
  EXPECT_FALSE(token_problem("0123456789abcdef"));
  EXPECT_FALSE(token_problem("run:job caf\xc3\xa9"));  // spaces and non-ASCII travel fine
  EXPECT_FALSE(token_problem(std::string(kMaxTokenBytes, 't')));
  EXPECT_EQ(token_problem(""), "is empty");
  EXPECT_EQ(token_problem(std::string(kMaxTokenBytes + 1, 't')),
            "is 1025 bytes; at most 1024 are allowed");
  EXPECT_EQ(token_problem("a\xff"), "is not valid UTF-8");
  EXPECT_EQ(token_problem("a\tb"), "holds a control character");
  EXPECT_EQ(token_problem("a\x7f"), "holds a control character");
}

TEST(EnvValues, AHostIsANameOrAnAddress) {
  for (const char* ok : {"127.0.0.1", "node-01.cluster", "::1", "[::1]", "fe80::1%eth0", "my_host"})
    EXPECT_FALSE(host_problem(ok)) << ok;
  EXPECT_EQ(host_problem(""), "is empty");
  for (const char* bad : {"evil host", "a\nb", "host/path", "h\xc3\xa9", "$(id)"})
    EXPECT_EQ(host_problem(bad), "must be a host name or an IP address") << bad;
  EXPECT_TRUE(host_problem(std::string(kMaxHostBytes + 1, 'h')));
}

TEST(EnvValues, AQuotedValueIsOneShortPrintableLine) {
  EXPECT_EQ(quote_value("plain"), "plain");
  EXPECT_EQ(quote_value("a\nb\x1b[0m"), "a\\x0ab\\x1b[0m");
  // fuzz_config found SLURM_PROCID='<tab>' quoted with the tab itself.
  EXPECT_EQ(quote_value("\t"), "\\x09");
  EXPECT_EQ(quote_value("x\xffy"), "x\xef\xbf\xbdy");  // U+FFFD
  const std::string long_value(1 << 20, 'v');
  EXPECT_EQ(quote_value(long_value), std::string(64, 'v') + "...");
  // The cut falls on a character boundary: no half of a UTF-8 sequence.
  const std::string accents = std::string(63, 'a') + "\xc3\xa9\xc3\xa9";
  EXPECT_EQ(quote_value(accents), std::string(63, 'a') + "...");
}

TEST(EnvValues, ProfileStepsAreAFewStepsAToB) {
  std::string why;
  const auto steps = parse_profile_steps("100:109", why);
  ASSERT_TRUE(steps) << why;
  EXPECT_EQ(steps->first, 100);
  EXPECT_EQ(steps->last, 109);
  ASSERT_TRUE(parse_profile_steps("7:7", why));
  ASSERT_TRUE(parse_profile_steps("1:1000", why));  // kMaxProfileSteps steps, both ends counted
  for (const char* bad : {"", "5", "5:", ":5", "0:3", "9:8", "a:b", "1:2:3", " 1:2", "-1:2",
                          "1:99999999999999999999"}) {
    why.clear();
    EXPECT_FALSE(parse_profile_steps(bad, why)) << bad;
    EXPECT_NE(why.find("must be A:B"), std::string::npos) << bad << ": " << why;
  }
  EXPECT_FALSE(parse_profile_steps("1:1001", why));
  EXPECT_NE(why.find("at most 1000 steps"), std::string::npos) << why;
}

TEST(EnvValues, ProfileRanksAreAllOrAList) {
  std::string why;
  const auto all = parse_profile_ranks("all", why);
  ASSERT_TRUE(all);
  EXPECT_TRUE(all->empty());
  const auto some = parse_profile_ranks("8,0,3,3", why);
  ASSERT_TRUE(some) << why;
  EXPECT_EQ(*some, (std::vector<int>{0, 3, 8}));  // sorted, once each
  for (const char* bad : {"", ",", "1,", "1,,2", "-1", "x", "ALL", "16777216", "1 ,2"}) {
    why.clear();
    EXPECT_FALSE(parse_profile_ranks(bad, why)) << bad;
    EXPECT_NE(why.find("must be 'all' or global ranks"), std::string::npos) << why;
  }
  std::string many;
  for (int r = 0; r <= 1024; ++r)
    many += (r ? "," : "") + std::to_string(r);
  EXPECT_FALSE(parse_profile_ranks(many, why));
}

}  // namespace
}  // namespace traceml::model
