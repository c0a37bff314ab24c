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
  EXPECT_EQ(bad_option.error,
            "unknown option --portt (run 'traceml serve --help' for the options)");
}

// Issue 47: what a new user typed wrong is said in the words they typed,
// with where the options are; a command given nothing gets its one-line
// usage, not its whole help.
TEST(CommandLine, MistakesAreSaidInTheUsersWordsInOneLine) {
  const CommandLine bogus = read({"run", "--bogus-flag", "--", "prog"});
  ASSERT_EQ(bogus.exit_code, kExitBadInput);
  EXPECT_EQ(bogus.error, "unknown option --bogus-flag (run 'traceml run --help' for the options)");
  const CommandLine extra = read({"view", "a.json", "b.json"});
  ASSERT_EQ(extra.exit_code, kExitBadInput);
  EXPECT_EQ(extra.error, "unexpected argument b.json (run 'traceml view --help' for the options)");
  const CommandLine nothing = read({"run"});
  ASSERT_EQ(nothing.exit_code, kExitBadInput);
  EXPECT_EQ(nothing.usage,
            "usage: traceml run [options] -- PROGRAM [ARGS...]\n"
            "       run 'traceml run --help' for the options\n");
  EXPECT_EQ(nothing.error, "'run' needs arguments (usage above)");
  for (const char* pct : {"-5", "1e400", "nan", "five"}) {
    const CommandLine limit = read({"compare", "a", "b", "--max-step-time-regression", pct});
    ASSERT_EQ(limit.exit_code, kExitBadInput) << pct;
    EXPECT_LT(limit.error.size(), 160u) << limit.error;
    EXPECT_EQ(limit.error.rfind("--max-step-time-regression: must be a ", 0), 0u) << limit.error;
    EXPECT_NE(limit.error.find("e.g. 5 for 5%"), std::string::npos) << limit.error;
  }
  EXPECT_FALSE(read({"compare", "a", "b", "--max-memory-regression", "2.5"}).exit_code);
}

TEST(CommandLine, ALineThatPassesItsCheckHasAnActionAndRunsNothingYet) {
  const CommandLine c = read({"serve", "--port", "0", "--world-size", "2", "--run-name", "job"});
  EXPECT_FALSE(c.exit_code) << c.error;
  EXPECT_TRUE(c.action.run);
  EXPECT_TRUE(c.action.check);
}

/// Runs in an empty directory of its own while it lives, as fuzz_cli does.
class InEmptyDirectory {
 public:
  InEmptyDirectory() : home_(std::filesystem::current_path()) {
    std::filesystem::current_path(dir_.path());
  }
  ~InEmptyDirectory() { std::filesystem::current_path(home_); }
  InEmptyDirectory(const InEmptyDirectory&) = delete;
  InEmptyDirectory& operator=(const InEmptyDirectory&) = delete;
  const std::filesystem::path& path() const { return dir_.path(); }

 private:
  testing::TempDir dir_;
  std::filesystem::path home_;
};

// Every output path is checked before anything starts (a command that exits
// 2 leaves no file behind), and checking creates nothing.
TEST(CommandLine, OutputPathsAreCheckedAndTheCheckCreatesNothing) {
  const InEmptyDirectory here;
  const CommandLine junit = read({"compare", "a.json", "b.json", "--junit", "missing/dir/x.xml"});
  ASSERT_EQ(junit.exit_code, kExitBadInput);
  EXPECT_EQ(junit.error,
            "--junit missing/dir/x.xml: directory missing/dir does not exist (choose a writable "
            "--junit path)");
  // The default compare/ directory and a missing --output directory are
  // made when the command runs, not by the check.
  EXPECT_FALSE(read({"compare", "a.json", "b.json"}).exit_code);
  EXPECT_FALSE(read({"compare", "a.json", "b.json", "--output", "new/dir/c"}).exit_code);
  EXPECT_FALSE(read({"report", "--telemetry", "t.jsonl", "--out", "new/run"}).exit_code);
  EXPECT_FALSE(read({"serve", "--logs-dir", "new/logs", "--env-file", "env"}).exit_code);
  for (const std::vector<std::string>& bad :
       {std::vector<std::string>{"export", "run", "--out", "missing/x.jsonl"},
        {"view", "s.json", "--html", "missing/x.html"},
        {"serve", "--env-file", "missing/env"},
        {"serve", "--env-file", "."},
        {"run", "--logs-dir", "/dev/null/logs", "--", "/bin/true"}}) {
    const CommandLine c = read(bad);
    EXPECT_EQ(c.exit_code, kExitBadInput) << bad.front() << " " << bad[1];
    EXPECT_NE(c.error.find("(choose a writable "), std::string::npos) << c.error;
  }
  EXPECT_FALSE(fuzz::holds_anything(here.path()));
}

// The fuzz_cli corpus (tests/fuzz/corpus/fuzz_cli/), read in every build
// with fuzz_cli's promises (tests/fuzz/cli_invariants.hpp), in an empty
// working directory as fuzz_cli reads it.
TEST(CommandLine, EveryFuzzSeedKeepsTheCommandLinesPromises) {
  const auto dir = std::filesystem::path(TRACEML_TEST_DATA_DIR) / "fuzz" / "corpus" / "fuzz_cli";
  const InEmptyDirectory here;
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string bytes = testing::read_file(entry.path());
    const auto why = fuzz::check_cli_args(
        fuzz::cli_args_of(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size()),
        &here.path());
    EXPECT_FALSE(why) << entry.path() << ": " << *why;
    ++seeds;
  }
  EXPECT_GE(seeds, 13);
}

}  // namespace
}  // namespace traceml::cli
