// `traceml report` draws final_summary.html last, in a child process with a
// time limit (issue 30): a page whose drawing never ends costs one warning
// line; the command still writes the JSON and the text, prints the report,
// exits 0, and returns within the limit. TRACEML_TEST_PAGE_FAULT makes the
// page hang on demand.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "../support/subprocess.hpp"

namespace {

namespace fs = std::filesystem;
using traceml::testing::read_file;
using traceml::testing::run_process;
using traceml::testing::TempDir;

const std::string kCli = TRACEML_CLI_PATH;
const fs::path kSample =
    fs::path(TRACEML_TEST_DATA_DIR) / "golden" / "data" / "single_input_bound.jsonl";

TEST(ReportPage, APageThatNeverEndsCostsOneLineNotTheReport) {
  TempDir dir;
  const fs::path out = dir.path() / "out";
  const auto start = std::chrono::steady_clock::now();
  const auto r =
      run_process({"/usr/bin/env", "TRACEML_TEST_PAGE_FAULT=hang", "TRACEML_PAGE_TIMEOUT_S=1", kCli,
                   "report", "--telemetry", kSample.string(), "--out", out.string()});
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_LT(seconds, 30.0);
  EXPECT_EQ(r.err,
            "traceml: warning: final_summary.html not written: drawing it took longer than 1 s "
            "(TRACEML_PAGE_TIMEOUT_S); it was stopped\n");
  const std::string txt = read_file(out / "final_summary.txt");
  EXPECT_EQ(r.out, txt);
  EXPECT_NE(txt.find("Full evidence: "), std::string::npos) << txt;
  EXPECT_EQ(txt.find("final_summary.html"), std::string::npos) << txt;
  const auto json = nlohmann::ordered_json::parse(read_file(out / "final_summary.json"));
  EXPECT_EQ(json["text"].get<std::string>() + "\n", txt);
  EXPECT_FALSE(fs::exists(out / "final_summary.html"));
}

// A page limit that is no limit is a usage error, read once by the command
// before it starts: one line that says which variable and how to fix it,
// exit 2, and nothing written (it used to be ignored without a word).
TEST(ReportPage, ABadPageLimitIsRefusedBeforeAnythingIsWritten) {
  const std::pair<const char*, const char*> cases[] = {
      {"TRACEML_PAGE_TIMEOUT_S=abc",
       "TRACEML_PAGE_TIMEOUT_S='abc' is not a number of seconds in (0, 86400]"},
      {"TRACEML_PAGE_TIMEOUT_S=0",
       "TRACEML_PAGE_TIMEOUT_S='0' is not a number of seconds in (0, 86400]"},
      {"TRACEML_PAGE_MEMORY_MB=1.5",
       "TRACEML_PAGE_MEMORY_MB='1.5' is not a whole number of MiB in [1, 1073741824]"},
  };
  for (const auto& [var, why] : cases) {
    TempDir dir;
    const fs::path out = dir.path() / "out";
    const auto r = run_process({"/usr/bin/env", var, kCli, "report", "--telemetry",
                                kSample.string(), "--out", out.string()});
    EXPECT_EQ(r.exit_code, 2) << var;
    EXPECT_EQ(r.err, "traceml: error: " + std::string(why) + "; fix or unset it\n");
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(fs::exists(out)) << var;
    // serve and run read them the same way, before any run directory exists.
    const fs::path logs = dir.path() / "logs";
    for (const std::vector<std::string>& cmd :
         {std::vector<std::string>{"serve", "--logs-dir", logs.string()},
          std::vector<std::string>{"run", "--logs-dir", logs.string(), "--", "/bin/true"}}) {
      std::vector<std::string> argv{"/usr/bin/env", var, kCli};
      argv.insert(argv.end(), cmd.begin(), cmd.end());
      const auto s = run_process(argv);
      EXPECT_EQ(s.exit_code, 2) << var << " " << cmd.front();
      EXPECT_EQ(s.err, "traceml: error: " + std::string(why) + "; fix or unset it\n");
      EXPECT_FALSE(fs::exists(logs)) << var << " " << cmd.front();
    }
  }
}

TEST(ReportPage, TheReportNamesThePageItDrew) {
  TempDir dir;
  const fs::path out = dir.path() / "out";
  const auto r =
      run_process({kCli, "report", "--telemetry", kSample.string(), "--out", out.string()});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string txt = read_file(out / "final_summary.txt");
  EXPECT_EQ(r.out, txt);  // outside the working directory: named absolutely there too
  EXPECT_NE(txt.find(" · " + (fs::weakly_canonical(out) / "final_summary.html").string()),
            std::string::npos)
      << txt;
  EXPECT_TRUE(fs::is_regular_file(out / "final_summary.html"));
}

}  // namespace
