// Reading traceml's command line without running it (cli/command_line.cpp),
// as main and fuzz_cli do: usage errors, help, version, each command's check,
// and the fuzz_cli corpus.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "../fuzz/cli_invariants.hpp"
#include "../support/subprocess.hpp"
#include "commands.hpp"

namespace traceml::cli {
namespace {

CommandLine read(std::vector<std::string> args) {
  args.insert(args.begin(), "traceml");
  return read_command_line(args);
}

TEST(CommandLine, AnUnknownCommandNamesTheCommands) {
  const CommandLine c = read({"launch", "x"});
  ASSERT_EQ(c.exit_code, kExitBadInput);
  EXPECT_EQ(c.error,
            "unknown command 'launch' (commands: run, serve, report, export, view, compare)");
  EXPECT_FALSE(c.action.run);
}

TEST(CommandLine, ACommandWithoutItsArgumentsGivesItsUsage) {
  const CommandLine c = read({"compare"});
  ASSERT_EQ(c.exit_code, kExitBadInput);
  EXPECT_EQ(c.error, "'compare' needs arguments (usage above)");
  EXPECT_NE(c.usage.find("compare"), std::string::npos) << c.usage;
}

TEST(CommandLine, HelpAndVersionExitZeroWithTheirText) {
  const CommandLine help = read({"serve", "--help"});
  ASSERT_EQ(help.exit_code, kExitOk);
  EXPECT_NE(help.out.find("--idle-timeout"), std::string::npos) << help.out;
  EXPECT_TRUE(help.error.empty());
  const CommandLine version = read({"--version"});
  ASSERT_EQ(version.exit_code, kExitOk);
  EXPECT_EQ(version.out.rfind("traceml ", 0), 0u) << version.out;
}

// Each command's check runs before anything starts: nothing launched, no
// port bound, and the run's own message.
TEST(CommandLine, TheChecksOfRunAndServeComeBeforeAnythingRuns) {
  const CommandLine nan = read({"run", "--interval", "nan", "--", "/bin/true"});
  ASSERT_EQ(nan.exit_code, kExitBadInput);
  EXPECT_EQ(nan.error, "--interval must be in [0.01, 3600] seconds (got nan)");
  const CommandLine port = read({"serve", "--port", "70000"});
  ASSERT_EQ(port.exit_code, kExitBadInput);
  EXPECT_EQ(port.error.rfind("--port must be in [0, 65535]", 0), 0u) << port.error;
  const CommandLine bad_option = read({"serve", "--portt", "1"});
  ASSERT_EQ(bad_option.exit_code, kExitBadInput);
  EXPECT_NE(bad_option.error.find("(run 'traceml --help' for usage)"), std::string::npos);
}

TEST(CommandLine, ALineThatPassesItsCheckHasAnActionAndRunsNothingYet) {
  const CommandLine c = read({"serve", "--port", "0", "--world-size", "2", "--run-name", "job"});
  EXPECT_FALSE(c.exit_code) << c.error;
  EXPECT_TRUE(c.action.run);
  EXPECT_TRUE(c.action.check);
}

// The fuzz_cli corpus (tests/fuzz/corpus/fuzz_cli/), read in every build
// with fuzz_cli's promises (tests/fuzz/cli_invariants.hpp).
TEST(CommandLine, EveryFuzzSeedKeepsTheCommandLinesPromises) {
  const auto dir = std::filesystem::path(TRACEML_TEST_DATA_DIR) / "fuzz" / "corpus" / "fuzz_cli";
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string bytes = testing::read_file(entry.path());
    const auto why = fuzz::check_cli_args(
        fuzz::cli_args_of(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()));
    EXPECT_FALSE(why) << entry.path() << ": " << *why;
    ++seeds;
  }
  EXPECT_GE(seeds, 13);
}

}  // namespace
}  // namespace traceml::cli
