// End-to-end: the commands that README.md and docs/launchers.md tell a user
// to type, run as written. Each is read from the Markdown when the test runs
// (the fenced block after a `<!-- recipe NAME: ... -->` comment), so a doc that
// drifts from what works fails here rather than in a new user's terminal. They
// run on the build these tests belong to, never a rebuild: the launchers'
// recipes in a scratch directory whose `build` links to it, the README's demo
// in the repository with TRACEML_BUILD_DIR naming it.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/examples.hpp"
#include "../support/json_file.hpp"
#include "../support/subprocess.hpp"

namespace traceml::testing {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;
using namespace std::chrono_literals;

const fs::path kRepo = fs::path(TRACEML_TEST_DATA_DIR).parent_path();
// examples_dir() is <build>/bin/examples.
const fs::path kBuild = fs::path(examples_dir()).parent_path().parent_path();

/// The body of the fenced block that follows `<!-- recipe NAME:` in `doc`,
/// or empty when the marker or its block is missing.
std::string recipe(const fs::path& doc, const std::string& name) {
  const std::string text = read_file(doc);
  const std::size_t marker = text.find("<!-- recipe " + name + ":");
  if (marker == std::string::npos) return "";
  const std::size_t fence = text.find("\n```", marker);
  if (fence == std::string::npos) return "";
  const std::size_t body = text.find('\n', fence + 1);
  if (body == std::string::npos) return "";
  const std::size_t end = text.find("\n```", body);
  if (end == std::string::npos) return "";
  return text.substr(body + 1, end - body);
}

/// `program` on PATH, or empty. torchrun (Debian: python3-torch) and mpirun
/// (openmpi-bin) are installed by scripts/install-deps.sh.
std::string find_on_path(const std::string& program) {
  const char* path = std::getenv("PATH");
  const std::string dirs = path != nullptr ? path : "";
  for (std::size_t start = 0; start <= dirs.size();) {
    const std::size_t end = std::min(dirs.find(':', start), dirs.size());
    const fs::path candidate = fs::path(dirs.substr(start, end - start)) / program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
    start = end + 1;
  }
  return "";
}

/// A directory that stands for the repository root of a built tree: the
/// recipes' `build/bin/...` paths resolve to this test's build, and what
/// they write (logs/) stays here.
struct BuiltTree {
  BuiltTree() { fs::create_directory_symlink(kBuild, dir.path() / "build"); }
  [[nodiscard]] std::string root() const { return dir.path().string(); }
  TempDir dir;
};

/// A recipe's text run by bash under GNU timeout, which signals the whole
/// process group: a recipe that hangs, or a test that stops early, leaves no
/// serve or rank behind to hold the recipes' fixed ports.
struct Script {
  Script(const std::string& text, const std::string& cwd, const std::vector<std::string>& env = {})
      : child(argv(text, env), cwd) {}
  static std::vector<std::string> argv(const std::string& text,
                                       const std::vector<std::string>& env) {
    std::vector<std::string> a = {"/usr/bin/env"};
    a.insert(a.end(), env.begin(), env.end());
    for (const std::string& s :
         {std::string("timeout"), std::string("-k"), std::string("5"), std::string("240"),
          std::string("/bin/bash"), std::string("-c"), text})
      a.push_back(s);
    return a;
  }
  // timeout passes SIGTERM on to the group; it must live until it has.
  ~Script() {
    child.signal(SIGTERM);
    child.wait();
  }
  Script(const Script&) = delete;
  Script& operator=(const Script&) = delete;

  /// Waits until the script's stderr holds `text` (at most `limit`).
  bool said(const std::string& text, std::chrono::milliseconds limit = 60s) {
    const auto end = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < end) {
      if (child.err_so_far().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(50ms);
    }
    return false;
  }

  ChildProcess child;
};

/// What docs/launchers.md promises of its recipes: serve's summary names
/// rank 1, starved of input, as the job's straggler.
void expect_the_jobs_straggler_verdict(const fs::path& run, const ProcessResult& serve) {
  EXPECT_NE(serve.out.find("Verdict: INPUT STRAGGLER"), std::string::npos) << serve.out;
  const Json summary = load_json(run / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << serve.err;
  EXPECT_EQ(summary.value("/primary_diagnosis/kind"_json_pointer, std::string()), "INPUT_STRAGGLER")
      << serve.out;
  EXPECT_EQ(summary.value("/primary_diagnosis/evidence/worst/rank"_json_pointer, -1), 1);
  EXPECT_EQ(summary.value("/meta/world_size"_json_pointer, 0), 2);
  EXPECT_EQ(summary.value("/run/status"_json_pointer, std::string()), "completed");
}

/// Whether the torchrun on PATH is PyTorch 2.x's: only 2.x spells its flags
/// with dashes too (`--nproc-per-node`); 1.x rejects them.
bool torchrun_is_2x(const std::string& torchrun) {
  const ProcessResult help = run_process({torchrun, "--help"});
  return help.exit_code == 0 && help.out.find("--nproc-per-node") != std::string::npos;
}

/// docs/launchers.md's serve recipe, then its ranks' recipe `ranks` (run by
/// the torchrun on PATH) in the same directory: the job's verdict.
void run_torchrun_recipes(const std::string& ranks_recipe) {
  const std::string serve_text = recipe(kRepo / "docs" / "launchers.md", "torchrun-serve");
  const std::string ranks_text = recipe(kRepo / "docs" / "launchers.md", ranks_recipe);
  ASSERT_FALSE(serve_text.empty()) << "docs/launchers.md lost its torchrun-serve recipe";
  ASSERT_FALSE(ranks_text.empty()) << "docs/launchers.md lost its " << ranks_recipe << " recipe";
  BuiltTree tree;
  // The first terminal, then the second once serve listens.
  Script serve(serve_text, tree.root());
  ASSERT_TRUE(serve.said("traceml: ranks need: ")) << serve_text << serve.child.err_so_far();
  const ProcessResult ranks = Script(ranks_text, tree.root()).child.wait();
  ASSERT_EQ(ranks.exit_code, 0) << ranks_text << "\n" << ranks.err;
  const ProcessResult s = serve.child.wait();
  EXPECT_EQ(s.exit_code, 0) << s.err;
  expect_the_jobs_straggler_verdict(tree.dir.path() / "logs" / "job", s);
}

// 1.x's spelling runs on both (scripts/torch2.sh runs this again with 2.x's).
TEST(DocsRecipes, LaunchersTorchrunRecipeRunsAsWrittenOnDebiansTorchrun) {
  if (find_on_path("torchrun").empty())
    GTEST_SKIP() << "no torchrun on PATH (apt-get install python3-torch)";
  run_torchrun_recipes("torchrun-ranks");
}

TEST(DocsRecipes, LaunchersTorchrunRecipeFor2xRunsAsWrittenOnItsTorchrun) {
  const std::string torchrun = find_on_path("torchrun");
  const bool is_2x = !torchrun.empty() && torchrun_is_2x(torchrun);
  // scripts/torch2.sh puts 2.x's torchrun on PATH and says so: then a
  // torchrun that is not 2.x's is a failure, not a skip.
  const char* required = std::getenv("TRACEML_TEST_TORCHRUN_2X");
  if (required != nullptr && std::string(required) == "1") {
    ASSERT_TRUE(is_2x) << "the torchrun on PATH (" << torchrun << ") is not PyTorch 2.x's";
  }
  if (!is_2x)
    GTEST_SKIP() << "the torchrun on PATH is not PyTorch 2.x's (scripts/torch2.sh runs this test "
                    "with it)";
  run_torchrun_recipes("torchrun-ranks-2x");
}

TEST(DocsRecipes, LaunchersMpirunRecipeRunsAsWritten) {
  const std::string text = recipe(kRepo / "docs" / "launchers.md", "mpirun");
  ASSERT_FALSE(text.empty()) << "docs/launchers.md lost its mpirun recipe";
  if (find_on_path("mpirun").empty())
    GTEST_SKIP() << "no mpirun on PATH (apt-get install openmpi-bin)";
  BuiltTree tree;
  // As root (CI), Open MPI wants these, or the recipe's --allow-run-as-root
  // that the page mentions; elsewhere they change nothing.
  const ProcessResult r =
      Script(text, tree.root(), {"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1"})
          .child.wait();
  ASSERT_EQ(r.exit_code, 0) << text << "\n" << r.err;
  expect_the_jobs_straggler_verdict(tree.dir.path() / "logs" / "job", r);
  const Json manifest = load_json(tree.dir.path() / "logs" / "job" / "manifest.json");
  EXPECT_EQ(manifest.value("launched_by", ""), "traceml serve");
  EXPECT_EQ(manifest.value("end_reason", ""), "world_ended");
}

/// The value of `key` in a CMake cache, or empty.
std::string cache_value(const fs::path& cache, const std::string& key) {
  std::ifstream in(cache);
  for (std::string line; std::getline(in, line);)
    if (line.rfind(key + ":", 0) == 0) return line.substr(line.find('=') + 1);
  return "";
}

TEST(DocsRecipes, ReadmeDemoCommandRunsAsWrittenOnTheBuiltTreeAndPrintsItsVerdict) {
  const std::string block = recipe(kRepo / "README.md", "quickstart");
  ASSERT_FALSE(block.empty()) << "README.md lost its quick-start block";
  std::string demo;
  std::istringstream lines(block);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("scripts/demo.sh", 0) == 0) demo = line;
  ASSERT_FALSE(demo.empty()) << block;
  // The demo configures its build with scripts/build.sh's options; a build
  // configured otherwise would be rebuilt whole, which a test must not do.
  const fs::path cache = kBuild / "CMakeCache.txt";
  if (cache_value(cache, "TRACEML_WARNINGS_AS_ERRORS") != "ON" ||
      cache_value(cache, "CMAKE_CXX_FLAGS_RELWITHDEBINFO") != "-O2 -g1 -DNDEBUG")
    GTEST_SKIP() << kBuild << " was not configured by scripts/build.sh";
  TempDir logs;
  const ProcessResult r = run_process({"/usr/bin/env", "TRACEML_BUILD_DIR=" + kBuild.string(),
                                       "TRACEML_DEMO_LOGS_DIR=" + logs.path().string(), "timeout",
                                       "-k", "5", "240", "/bin/bash", "-c", demo},
                                      kRepo.string());
  ASSERT_EQ(r.exit_code, 0) << demo << "\n" << r.out << r.err;
  // Its first line says what a first run costs, before any of it is spent.
  const std::string first = r.out.substr(0, r.out.find('\n'));
  EXPECT_NE(first.find("a first build takes about "), std::string::npos) << first;
  // On a built tree, the build is Ninja's no-op: it shows no progress.
  EXPECT_EQ(r.out.find("demo: built "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Verdict: INPUT-BOUND"), std::string::npos) << r.out;
  const fs::path run = logs.path() / "demo";
  const Json summary = load_json(run / "final_summary.json");
  ASSERT_TRUE(summary.is_object()) << r.err;
  EXPECT_EQ(summary.value("/primary_diagnosis/kind"_json_pointer, std::string()), "INPUT_BOUND");
  EXPECT_TRUE(fs::exists(run / "final_summary.html"));
  EXPECT_TRUE(fs::exists(run / "timeline.json"));
  EXPECT_NE(r.out.find("HTML report: " + run.string() + "/final_summary.html"), std::string::npos)
      << r.out;
}

/// The section of `doc` that begins with the heading `heading` and ends
/// before the next heading of the same level.
std::string section(const fs::path& doc, const std::string& heading) {
  const std::string text = read_file(doc);
  const std::size_t at = text.find("\n" + heading);
  if (at == std::string::npos) return "";
  const std::string level = heading.substr(0, heading.find(' ') + 1);
  const std::size_t end = text.find("\n" + level, at + 1);
  return text.substr(at, end == std::string::npos ? std::string::npos : end - at);
}

TEST(DocsAgree, QuickstartSaysWhereTheGpuPathsRanAsGpuValidationDoes) {
  // gpu-validation.md opens with "**Status (DATE): ..." of its last run.
  const std::string validation = read_file(kRepo / "docs" / "gpu-validation.md");
  const std::string marker = "**Status (";
  const std::size_t at = validation.find(marker);
  ASSERT_NE(at, std::string::npos);
  const std::string date = validation.substr(at + marker.size(), 10);
  const std::string measures =
      section(kRepo / "docs" / "quickstart.md", "## 11. What this build measures");
  ASSERT_FALSE(measures.empty());
  EXPECT_NE(measures.find("on a GPU on " + date), std::string::npos) << date << "\n" << measures;
  EXPECT_NE(measures.find("H200"), std::string::npos) << measures;
  EXPECT_EQ(measures.find("has run on a GPU yet"), std::string::npos) << measures;
}

/// A Ninja build of `steps` steps of `seconds` each and one that prints a
/// line of its own, in `dir`.
void write_build(const fs::path& dir, int steps, const std::string& seconds) {
  std::ofstream ninja(dir / "build.ninja");
  ninja << "rule slow\n  command = sleep " << seconds << " && touch $out\n"
        << "rule noisy\n  command = echo 'a line of its own' && touch $out\n";
  for (int i = 1; i <= steps; ++i)
    ninja << "build s" << i << ": slow\n";
  ninja << "build noisy: noisy\n";
}

/// Runs the build in `dir`, one step at a time, piped through the demo's
/// progress filter with a period of 1 s. `terminal`: under a pseudo-terminal
/// (script(1)), as a user at a shell sees it.
ProcessResult progress_of_a_build(const fs::path& dir, bool terminal) {
  const std::string pipeline = "NINJA_STATUS='[%f/%t] ' ninja -j1 | bash " +
                               (kRepo / "scripts" / "build-progress.sh").string() + " demo";
  std::vector<std::string> argv = {"/usr/bin/env", "TRACEML_PROGRESS_EVERY_S=1"};
  if (terminal) {
    for (const std::string& a :
         {std::string("script"), std::string("-qfec"), pipeline, std::string("/dev/null")})
      argv.push_back(a);
  } else {
    for (const std::string& a : {std::string("/bin/bash"), std::string("-o"),
                                 std::string("pipefail"), std::string("-c"), pipeline})
      argv.push_back(a);
  }
  return run_process(argv, dir.string());
}

std::size_t count(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = 0; (at = text.find(what, at)) != std::string::npos; at += what.size())
    ++n;
  return n;
}

TEST(DemoProgress, OffATerminalABuildPrintsAPlainLineEveryPeriodNotOnePerFile) {
  TempDir dir;
  write_build(dir.path(), 8, "0.5");
  const ProcessResult r = progress_of_a_build(dir.path(), false);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 4 s of build, a line a second at most: some progress, not one per step.
  const std::size_t progress = count(r.out, "demo: building ");
  EXPECT_GE(progress, 2u) << r.out;
  EXPECT_LE(progress, 5u) << r.out;
  EXPECT_EQ(r.out.find('\r'), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("] slow"), std::string::npos) << r.out;  // Ninja's own lines
  EXPECT_NE(r.out.find("a line of its own\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("demo: built 9/9 in 0:0"), std::string::npos) << r.out;
}

TEST(DemoProgress, OnATerminalABuildIsOneLineRewrittenInPlace) {
  TempDir dir;
  write_build(dir.path(), 4, "0.2");
  const ProcessResult r = progress_of_a_build(dir.path(), true);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Every step redraws the line; the only line ends are those of the
  // step's own output and of the final line.
  EXPECT_GE(count(r.out, "\r\033[Kdemo: building "), 5u) << r.out;
  EXPECT_EQ(count(r.out, "\n"), 2u) << r.out;
  EXPECT_NE(r.out.find("\r\033[Kdemo: built 5/5 in 0:0"), std::string::npos) << r.out;
}

TEST(DemoProgress, ABuildWithNothingToDoSaysNothing) {
  TempDir dir;
  write_build(dir.path(), 1, "0");
  ASSERT_EQ(progress_of_a_build(dir.path(), false).exit_code, 0);
  const ProcessResult again = progress_of_a_build(dir.path(), false);
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_EQ(again.out, "");
  // What Ninja prints for a CMake build with nothing to do, CONFIGURE_DEPENDS
  // globs and all.
  const ProcessResult cmake_noop = run_process(
      {"/bin/bash", "-c",
       "printf '[0/2] Re-checking globbed directories...\\nninja: no work to do.\\n' | bash " +
           (kRepo / "scripts" / "build-progress.sh").string() + " demo"});
  ASSERT_EQ(cmake_noop.exit_code, 0) << cmake_noop.err;
  EXPECT_EQ(cmake_noop.out, "");
}

}  // namespace
}  // namespace traceml::testing
