// The CLI as a user meets it: exit codes, the one-line error messages, and
// that bad input never destroys an existing summary.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../support/cli_expect.hpp"
#include "../support/subprocess.hpp"

namespace fs = std::filesystem;
using traceml::testing::expect_one_error_line;
using traceml::testing::ProcessResult;
using traceml::testing::read_file;
using traceml::testing::run_process;
using traceml::testing::TempDir;

namespace {

const std::string kCli = TRACEML_CLI_PATH;
const fs::path kSample =
    fs::path(TRACEML_TEST_DATA_DIR) / "golden" / "data" / "single_input_bound.jsonl";
const std::string kHeader =
    R"({"type":"run","format":"traceml-telemetry","version":1,"run_name":"t","world_size":1,"strategy":"ddp"})";
const std::string kStep =
    R"({"type":"step","global_rank":0,"step":1,"ts":1.0,"events":{"input_wait":{"cpu_ms":1.0},"traced_step_time":{"cpu_ms":2.0}}})";

class Cli : public ::testing::Test {
 protected:
  TempDir dir_;
  fs::path write(const std::string& name, const std::string& content) {
    const fs::path p = dir_.path() / name;
    std::ofstream(p, std::ios::binary) << content;
    return p;
  }
  /// A run directory holding a good summary that bad input must not touch.
  fs::path good_out() {
    const fs::path out = dir_.path() / "out";
    fs::create_directories(out);
    std::ofstream(out / "final_summary.json") << "GOOD";
    return out;
  }
  ProcessResult report(const fs::path& telemetry, const fs::path& out) {
    return run_process({kCli, "report", "--telemetry", telemetry.string(), "--out", out.string()});
  }
};

TEST_F(Cli, VersionAndHelp) {
  const auto v = run_process({kCli, "--version"});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out, std::string("traceml ") + TRACEML_TEST_PROJECT_VERSION + "\n");
  const auto h = run_process({kCli, "--help"});
  EXPECT_EQ(h.exit_code, 0);
  EXPECT_NE(h.out.find("report"), std::string::npos);
  EXPECT_NE(h.out.find("view"), std::string::npos);
  for (const char* sub : {"report", "view"}) {
    const auto sh = run_process({kCli, sub, "--help"});
    EXPECT_EQ(sh.exit_code, 0) << sub;
    EXPECT_NE(sh.out.find("Usage"), std::string::npos) << sub;
  }
}

TEST_F(Cli, UsageErrorsExitTwo) {
  expect_one_error_line(run_process({kCli}), "subcommand");
  expect_one_error_line(run_process({kCli, "frobnicate"}), "frobnicate");
  expect_one_error_line(run_process({kCli, "report", "--out", "x"}), "--telemetry");
  expect_one_error_line(
      run_process({kCli, "report", "--telemetry", kSample.string(), "--out", "x", "--window", "0"}),
      "--window");
}

TEST_F(Cli, ReportWritesTheSummaryTextAndPageAndPrintsTheText) {
  const fs::path out = dir_.path() / "run1";
  const auto r = report(kSample, out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, read_file(out / "final_summary.txt"));
  EXPECT_NE(r.out.find("Verdict: INPUT-BOUND"), std::string::npos);
  const std::string json = read_file(out / "final_summary.json");
  EXPECT_NE(json.find("\"schema_version\": 1.7"), std::string::npos);
  EXPECT_NE(json.find("\"kind\": \"INPUT_BOUND\""), std::string::npos);
  EXPECT_NE(read_file(out / "final_summary.html").find("Verdict: INPUT-BOUND"), std::string::npos);
  // No temporary file is left behind.
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(out))
    files += e.is_regular_file() ? 1 : 0;
  EXPECT_EQ(files, 3u);
}

TEST_F(Cli, MissingTelemetryFile) {
  const fs::path out = good_out();
  const auto r = report(dir_.path() / "nope.jsonl", out);
  expect_one_error_line(r, "nope.jsonl");
  EXPECT_NE(r.err.find("No such file"), std::string::npos);
  EXPECT_EQ(read_file(out / "final_summary.json"), "GOOD");
}

struct BadInput {
  const char* name;
  std::string content;
  const char* where;  // "FILE:LINE" suffix expected in the message
};

class CliBadInput : public Cli, public ::testing::WithParamInterface<BadInput> {};

TEST_P(CliBadInput, OneLineErrorExitTwoAndNothingWritten) {
  const BadInput& b = GetParam();
  const fs::path f = write("bad.jsonl", b.content);
  const fs::path out = good_out();
  const auto r = report(f, out);
  expect_one_error_line(r, f.string() + ":" + b.where + ": ");
  EXPECT_EQ(read_file(out / "final_summary.json"), "GOOD");
  EXPECT_FALSE(fs::exists(out / "final_summary.txt"));
}

INSTANTIATE_TEST_SUITE_P(
    Cases, CliBadInput,
    ::testing::Values(
        BadInput{"Malformed", kHeader + "\n" + R"({"type":"step",)" + "\n", "2"},
        BadInput{"NotAnObject", kHeader + "\n[1, 2]\n", "2"},
        BadInput{"WrongFormat",
                 R"({"type":"run","format":"other","version":1,"run_name":"t"})"
                 "\n",
                 "1"},
        BadInput{"WrongVersion",
                 R"({"type":"run","format":"traceml-telemetry","version":3,"run_name":"t"})"
                 "\n",
                 "1"},
        BadInput{"NoHeader", kStep + "\n", "1"},
        BadInput{
            "NegativeDuration",
            kHeader + "\n\n" +
                R"({"type":"step","global_rank":0,"step":1,"ts":1.0,"events":{"forward":{"cpu_ms":-3.0}}})" +
                "\n",
            "3"},
        BadInput{"NonFiniteNumber",
                 kHeader + "\n" +
                     R"({"type":"process","global_rank":0,"ts":1.0,"rss_bytes":1e999})" + "\n",
                 "2"}),
    [](const ::testing::TestParamInfo<BadInput>& i) { return std::string(i.param.name); });

TEST_F(Cli, UnknownRecordTypeIsAWarningNotAnError) {
  const fs::path f =
      write("t.jsonl", kHeader + "\n" + R"({"type":"gossip","x":1})" + "\n" + kStep + "\n");
  const auto r = report(f, dir_.path() / "o");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("traceml: warning: "), std::string::npos);
  EXPECT_NE(r.err.find("gossip"), std::string::npos);
  EXPECT_TRUE(fs::exists(dir_.path() / "o" / "final_summary.json"));
}

TEST_F(Cli, UnwritableOutputDirectory) {
  const fs::path blocker = write("file", "x");  // a file where a directory must go
  const auto r = report(kSample, blocker / "sub");
  expect_one_error_line(r, "--out");
}

TEST_F(Cli, ViewPrintsTheStoredText) {
  const fs::path out = dir_.path() / "run";
  ASSERT_EQ(report(kSample, out).exit_code, 0);
  const auto v = run_process({kCli, "view", (out / "final_summary.json").string()});
  EXPECT_EQ(v.exit_code, 0);
  EXPECT_EQ(v.out, read_file(out / "final_summary.txt"));
}

TEST_F(Cli, ViewAcceptsARunDirectory) {
  const fs::path out = dir_.path() / "run";
  ASSERT_EQ(report(kSample, out).exit_code, 0);
  const auto v = run_process({kCli, "view", out.string()});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(v.out, read_file(out / "final_summary.txt"));
  // A directory that holds no summary says what to pass instead.
  expect_one_error_line(run_process({kCli, "view", dir_.path().string()}),
                        "a directory without final_summary.json; pass a run directory "
                        "(logs/<run>) or a final_summary.json file");
}

TEST_F(Cli, ViewRendersASummaryWithoutText) {
  // TraceML-style summary without `text`: rendered from the sections.
  const fs::path f = write("s.json", R"({"schema_version": 1.7, "primary_diagnosis": {"kind":
      "INPUT_BOUND", "status": "INPUT-BOUND", "severity": "crit", "section": "step_time",
      "summary": "Input wait is 64.0% of the typical GPU Step Time.", "action": "x",
      "evidence": {"type": "phase_share", "score": 0.64}}})");
  const auto v = run_process({kCli, "view", f.string()});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_NE(v.out.find("Verdict: INPUT-BOUND  (CRITICAL)"), std::string::npos) << v.out;
}

TEST_F(Cli, ViewNeverPassesControlCharactersToTheTerminal) {
  // A summary's strings are data: an ESC sequence (here "clear screen" and a
  // title change), a NUL, a C1 CSI in a stored text or in a section rendered
  // from JSON reach the terminal as visible escapes.
  const fs::path stored = write(
      "t.json",
      R"({"schema_version": 1.7, "text": "Verdict \u001b[2J\u001b]0;pwned\u0007 ok\u0000 \u009b"})");
  auto v = run_process({kCli, "view", stored.string()});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(v.out, "Verdict \\x1b[2J\\x1b]0;pwned\\x07 ok\\x00 \\u009b\n");
  const fs::path rendered = write("r.json", R"({"schema_version": 1.7, "primary_diagnosis": {"kind":
      "INPUT_BOUND", "status": "INPUT-BOUND\u001b[31m", "severity": "crit", "section": "step_time",
      "summary": "host \u001b[2J evil", "action": "x"}})");
  v = run_process({kCli, "view", rendered.string()});
  EXPECT_EQ(v.exit_code, 0) << v.err;
  EXPECT_EQ(v.out.find('\x1b'), std::string::npos) << v.out;
  EXPECT_NE(v.out.find("host \\x1b[2J evil"), std::string::npos) << v.out;
}

TEST_F(Cli, ViewErrors) {
  expect_one_error_line(run_process({kCli, "view", (dir_.path() / "none.json").string()}),
                        "none.json");
  expect_one_error_line(run_process({kCli, "view", write("bad.json", "{oops").string()}),
                        "not valid JSON");
  expect_one_error_line(run_process({kCli, "view", write("arr.json", "[1]").string()}),
                        "JSON object");
  expect_one_error_line(run_process({kCli, "view", write("other.json", R"({"a": 1})").string()}),
                        "not a final_summary.json");
  // Found by fuzz_summary: the parser's number overflow escaped as an
  // exception whose message named no file.
  expect_one_error_line(
      run_process({kCli, "view", write("huge.json", R"({"text": "x", "n": 1e999})").string()}),
      "huge.json: not valid JSON (");
}

}  // namespace
