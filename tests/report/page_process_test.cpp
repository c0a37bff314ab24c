// final_summary.html is drawn last, in a child process with a time and a
// memory limit (report/html/page_process.hpp, issue 30): a page that never ends,
// crashes or wants all memory costs one line, never the JSON and the text,
// and write_run_report returns within the limit. TRACEML_TEST_PAGE_FAULT
// makes the child fail on demand.
#include "report/html/page_process.hpp"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../support/html_fixtures.hpp"
#include "../support/subprocess.hpp"
#include "model/env_contract.hpp"
#include "report/atomic_file.hpp"
#include "report/final_summary.hpp"

namespace traceml::report {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using testing::RunShape;
using testing::summary_of;
using testing::synthetic_run;

/// Sets an environment variable for one test (the child inherits it).
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::set<std::string> files_in(const fs::path& dir) {
  std::set<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.insert(e.path().filename().string());
  return names;
}

const std::string kNamed =
    "Full evidence: logs/run/final_summary.json · logs/run/final_summary.html";
const std::string kUnnamed = "Full evidence: logs/run/final_summary.json\n";

struct Outcome {
  FinalSummary f;
  double seconds = 0;
};

Outcome write_report(const fs::path& run, const PageLimits& limits = {}) {
  RunShape shape;
  shape.ranks = 2;
  shape.steps = 120;
  const model::Telemetry t = synthetic_run(shape);
  Outcome o{summary_of(t, shape), 0};
  const auto start = Clock::now();
  write_run_report(o.f, run.string(), &t, limits);
  o.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return o;
}

/// The JSON and the text are whole, agree, and do not name a page.
void expect_summary_without_page(const fs::path& run, const FinalSummary& f) {
  const std::string txt = testing::read_file(run / "final_summary.txt");
  EXPECT_NE(txt.find(kUnnamed), std::string::npos) << txt;
  EXPECT_EQ(txt.find("final_summary.html"), std::string::npos) << txt;
  const auto json = nlohmann::ordered_json::parse(testing::read_file(run / "final_summary.json"));
  EXPECT_EQ(json["text"].get<std::string>() + "\n", txt);
  EXPECT_EQ(f.text + "\n", txt);
  EXPECT_TRUE(json.contains("primary_diagnosis"));
  // No page, and no half-written one beside it.
  EXPECT_EQ(files_in(run), (std::set<std::string>{"final_summary.json", "final_summary.txt"}));
}

TEST(PageProcess, ARunsPageIsDrawnAndTheTextNamesIt) {
  testing::TempDir dir;
  const fs::path run = dir.path() / "run";
  const Outcome o = write_report(run);
  EXPECT_FALSE(o.f.html_error);
  const std::string txt = testing::read_file(run / "final_summary.txt");
  EXPECT_NE(txt.find(kNamed), std::string::npos) << txt;
  EXPECT_EQ(o.f.text + "\n", txt);
  const auto json = nlohmann::ordered_json::parse(testing::read_file(run / "final_summary.json"));
  EXPECT_EQ(json["text"].get<std::string>() + "\n", txt);
  // The page shows the text that names it, as the text on disk does.
  const std::string page = testing::read_file(run / "final_summary.html");
  EXPECT_NE(page.find("</html>"), std::string::npos);
  EXPECT_NE(page.find("logs/run/final_summary.html"), std::string::npos);
  EXPECT_EQ(files_in(run), (std::set<std::string>{"final_summary.html", "final_summary.json",
                                                  "final_summary.txt"}));
}

TEST(PageProcess, APageThatNeverEndsIsStoppedAtItsTimeLimit) {
  ScopedEnv fault(model::env::kTestPageFault, "hang");
  PageLimits limit;
  limit.time = std::chrono::seconds(1);
  testing::TempDir dir;
  const fs::path run = dir.path() / "run";
  const Outcome o = write_report(run, limit);
  ASSERT_TRUE(o.f.html_error);
  EXPECT_EQ(*o.f.html_error,
            "final_summary.html not written: drawing it took longer than 1 s "
            "(TRACEML_PAGE_TIMEOUT_S); it was stopped");
  EXPECT_GE(o.seconds, 0.9);
  EXPECT_LT(o.seconds, 10.0);
  expect_summary_without_page(run, o.f);
}

/// No child of this test process is left, running or unreaped.
bool no_child_left() {
  return ::waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD;
}

TEST(PageProcess, AChildNotWaitedForIsStoppedAndReaped) {
  // The end of a run starts the page's child, then writes the JSON and the
  // text: when that throws, the child is killed and reaped on the way out.
  ScopedEnv fault(model::env::kTestPageFault, "hang");
  RunShape shape;
  const model::Telemetry t = synthetic_run(shape);
  const auto start = Clock::now();
  {
    PageChild child(summary_of(t, shape).json, &t, HtmlOptions{}, PageLimits{});
    ASSERT_FALSE(no_child_left());
  }
  EXPECT_TRUE(no_child_left());
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
}

TEST(PageProcess, AFailedWriteWhileThePageDrawsLeavesNoChild) {
  ScopedEnv fault(model::env::kTestPageFault, "hang");
  testing::TempDir dir;
  const fs::path run = dir.path() / "run";
  std::ofstream(run.string()) << "a file where the run directory would go";
  RunShape shape;
  const model::Telemetry t = synthetic_run(shape);
  FinalSummary f = summary_of(t, shape);
  const auto start = Clock::now();
  EXPECT_THROW(write_run_report(f, run.string(), &t, PageLimits{}), WriteError);
  EXPECT_TRUE(no_child_left());
  // Not the page's 60 s: the child was stopped, not waited for.
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - start).count(), 10.0);
}

TEST(PageProcess, APageThatCrashesCostsOneLine) {
  ScopedEnv fault(model::env::kTestPageFault, "abort");
  testing::TempDir dir;
  const fs::path run = dir.path() / "run";
  // A page from an earlier report would be another summary's: it goes too.
  fs::create_directories(run);
  { std::ofstream(run / "final_summary.html") << "<html>an earlier run</html>"; }
  const Outcome o = write_report(run);
  ASSERT_TRUE(o.f.html_error);
  EXPECT_EQ(*o.f.html_error, "final_summary.html not written: drawing it ended on signal 6 (" +
                                 std::string(::strsignal(6)) + ")");
  expect_summary_without_page(run, o.f);
}

TEST(PageProcess, APageThatWantsAllMemoryIsStoppedAtItsMemoryLimit) {
  ScopedEnv fault(model::env::kTestPageFault, "oom");
  PageLimits limit;
  limit.memory_bytes = std::uint64_t(256) << 20;
  testing::TempDir dir;
  const fs::path run = dir.path() / "run";
  const Outcome o = write_report(run, limit);
  ASSERT_TRUE(o.f.html_error);
  // A sanitizer's allocator ends the process instead of throwing bad_alloc.
  const std::string& e = *o.f.html_error;
  EXPECT_TRUE(e == "final_summary.html not written: drawing it needed more than 256 MiB of "
                   "memory (TRACEML_PAGE_MEMORY_MB)" ||
              e.rfind("final_summary.html not written: drawing it ended", 0) == 0)
      << e;
  EXPECT_LT(o.seconds, 30.0);
  expect_summary_without_page(run, o.f);
}

TEST(PageProcess, LimitsComeFromTheVariablesValuesOrTheirDefaults) {
  std::vector<std::string> problems;
  {
    const PageLimits d = page_limits_from(std::nullopt, std::string(), problems);
    EXPECT_EQ(d.time, std::chrono::seconds(60));
    EXPECT_EQ(d.memory_bytes, std::uint64_t(2048) << 20);
    EXPECT_TRUE(problems.empty());
  }
  {
    const PageLimits l = page_limits_from("0.25", "512", problems);
    EXPECT_EQ(l.time, std::chrono::milliseconds(250));
    EXPECT_EQ(l.memory_bytes, std::uint64_t(512) << 20);
    EXPECT_TRUE(problems.empty());
  }
  // A value that is no limit keeps the default and is said, one line each.
  for (const char* bad : {"0", "-1", "nan", "inf", "1e9", "5s", " 5"}) {
    problems.clear();
    const PageLimits l = page_limits_from(std::string(bad), std::string(bad), problems);
    EXPECT_EQ(l.time, std::chrono::seconds(60)) << bad;
    EXPECT_EQ(l.memory_bytes, std::uint64_t(2048) << 20) << bad;
    ASSERT_EQ(problems.size(), 2u) << bad;
    EXPECT_EQ(problems[0], std::string("TRACEML_PAGE_TIMEOUT_S='") + bad +
                               "' is not a number of seconds in (0, 86400]");
    EXPECT_EQ(problems[1], std::string("TRACEML_PAGE_MEMORY_MB='") + bad +
                               "' is not a whole number of MiB in [1, 1073741824]");
  }
}

TEST(PageProcess, TheChildsPageIsTheOneDrawnInProcess) {
  RunShape shape;
  shape.ranks = 3;
  shape.steps = 200;
  const model::Telemetry t = synthetic_run(shape);
  const FinalSummary f = summary_of(t, shape);
  HtmlOptions opts;
  opts.run_dir = "logs/run";
  opts.step_window = f.step_window.get();
  const DrawnPage drawn = draw_page_in_child(f.json, &t, opts, PageLimits{});
  ASSERT_TRUE(drawn.page) << drawn.error;
  EXPECT_EQ(*drawn.page, render_html(f.json, &t, opts));
}

}  // namespace
}  // namespace traceml::report
