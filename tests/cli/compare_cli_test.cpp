// `traceml compare` as CI meets it: exit codes 0 / 1 / 2, the one-line
// errors, the `gate:` line printed last, --format json and the JUnit file.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include <nlohmann/json.hpp>

#include "../support/cli_expect.hpp"
#include "../support/subprocess.hpp"

namespace fs = std::filesystem;
using traceml::testing::expect_one_error_line;
using traceml::testing::last_line;
using traceml::testing::ProcessResult;
using traceml::testing::read_file;
using traceml::testing::run_process;
using traceml::testing::TempDir;

namespace {

const std::string kCli = TRACEML_CLI_PATH;
const fs::path kSummaries = fs::path(TRACEML_TEST_DATA_DIR) / "golden" / "expected";
// ddp_input_straggler -> ddp4_balanced: GPU step time -31.0 %, peak reserved
// +113.3 %: verdict MIXED; the step diagnosis changes (INPUT STRAGGLER -> BALANCED).
const std::string kA = (kSummaries / "ddp_input_straggler" / "final_summary.json").string();
const std::string kB = (kSummaries / "ddp4_balanced" / "final_summary.json").string();

/// Minimal XML well-formedness: a declaration, then tags that nest and close
/// in order, attribute values quoted, and no raw '<' or '&' outside markup
/// and entities.
bool well_formed_xml(const std::string& x, std::string& why) {
  if (x.rfind("<?xml ", 0) != 0) return why = "no declaration", false;
  std::vector<std::string> stack;
  std::size_t i = x.find("?>") + 2;
  while (i < x.size()) {
    if (x[i] == '&') {
      const auto semi = x.find(';', i);
      const std::string ent = x.substr(i, semi == std::string::npos ? 0 : semi - i + 1);
      if (ent != "&amp;" && ent != "&lt;" && ent != "&gt;" && ent != "&quot;" && ent != "&apos;")
        return why = "bad entity at " + std::to_string(i), false;
      i = semi + 1;
    } else if (x[i] == '<') {
      const auto end = x.find('>', i);
      if (end == std::string::npos) return why = "unclosed tag", false;
      std::string tag = x.substr(i + 1, end - i - 1);
      if (std::count(tag.begin(), tag.end(), '"') % 2 != 0) return why = "quote in " + tag, false;
      if (tag.find('<') != std::string::npos) return why = "raw < in " + tag, false;
      const bool closing = tag[0] == '/';
      const bool empty = tag.back() == '/';
      const std::string name =
          tag.substr(closing ? 1 : 0, tag.find_first_of(" /", 1) - (closing ? 1 : 0));
      if (closing) {
        if (stack.empty() || stack.back() != name) return why = "mismatched </" + name + ">", false;
        stack.pop_back();
      } else if (!empty) {
        stack.push_back(name);
      }
      i = end + 1;
    } else {
      ++i;
    }
  }
  if (!stack.empty()) return why = "unclosed <" + stack.back() + ">", false;
  return true;
}

class CompareCli : public ::testing::Test {
 protected:
  TempDir dir_;
  std::string out() const { return (dir_.path() / "cmp").string(); }
  ProcessResult compare(std::vector<std::string> extra, const std::string& a = kA,
                        const std::string& b = kB) {
    std::vector<std::string> argv = {kCli, "compare", a, b, "--output", out()};
    argv.insert(argv.end(), extra.begin(), extra.end());
    return run_process(argv);
  }
  std::string write(const std::string& name, const std::string& content) {
    const fs::path p = dir_.path() / name;
    std::ofstream(p, std::ios::binary) << content;
    return p.string();
  }
};

TEST_F(CompareCli, NoGateExitsZeroAndWritesBothFiles) {
  // A trailing .json on --output is stripped.
  const auto r = run_process({kCli, "compare", kA, kB, "--output", out() + ".json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const std::string txt = read_file(out() + ".txt");
  EXPECT_EQ(r.out.substr(0, txt.size()), txt);
  EXPECT_NE(txt.find("|  Verdict: MIXED"), std::string::npos);
  EXPECT_EQ(last_line(r.out), "Compare TXT:  " + out() + ".txt");
  EXPECT_EQ(r.out.find("gate:"), std::string::npos);
  const auto j = nlohmann::ordered_json::parse(read_file(out() + ".json"));
  EXPECT_EQ(j["schema_version"], 2);
  EXPECT_EQ(j["verdict"]["status"], "MIXED");
  EXPECT_EQ(j["text"].get<std::string>() + "\n", txt);
}

TEST_F(CompareCli, GatesFailWithExitOneAndReasonLast) {
  const auto r = compare({"--fail-on-regression"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(last_line(r.out),
            "gate: FAIL (verdict MIXED: GPU Step Time improved, but step memory worsened.)");
  // Peak reserved 15.0 GB -> 32.0 GB: +113.3 %.
  const auto m = compare({"--max-memory-regression", "10"});
  EXPECT_EQ(m.exit_code, 1);
  EXPECT_EQ(last_line(m.out),
            "gate: FAIL (peak reserved memory changed by +113.3% (limit +10.0%))");
  const auto d = compare({"--fail-on-diagnosis-change"});
  EXPECT_EQ(d.exit_code, 1);
  EXPECT_EQ(last_line(d.out).rfind("gate: FAIL (primary diagnosis INPUT STRAGGLER -> ", 0), 0u)
      << d.out;
}

TEST_F(CompareCli, GatesPassWithExitZero) {
  // Step time fell by 31.0 %: the 5 % step gate passes.
  const auto r = compare({"--max-step-time-regression", "5"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(last_line(r.out), "gate: PASS");
  // Reversed, B is 44.9 % slower (the improvement as a regression).
  const auto rev = compare({"--max-step-time-regression", "5"}, kB, kA);
  EXPECT_EQ(rev.exit_code, 1);
  EXPECT_EQ(
      last_line(rev.out).rfind("gate: FAIL (step time changed by +44.9% (limit +5.0%), beyond "
                               "run-to-run noise (median shift +45.1 ms exceeds the IQR band "
                               "3.2 ms; Mann-Whitney U p<0.001 < alpha 0.05, n=300/120 steps",
                               0),
      0u)
      << rev.out;
  // Same file twice: EQUIVALENT, every gate passes.
  const auto same = compare({"--fail-on-regression", "--max-step-time-regression", "0",
                             "--max-memory-regression", "0", "--fail-on-diagnosis-change"},
                            kA, kA);
  EXPECT_EQ(same.exit_code, 0) << same.out;
  EXPECT_EQ(last_line(same.out), "gate: PASS");
}

TEST_F(CompareCli, FormatJsonIsParseableAndCarriesTheGate) {
  const auto r = compare({"--format", "json", "--fail-on-regression"});
  EXPECT_EQ(r.exit_code, 1);
  const auto j = nlohmann::ordered_json::parse(r.out);
  EXPECT_EQ(j["verdict"]["status"], "MIXED");
  EXPECT_EQ(j["gate"]["status"], "FAIL");
  EXPECT_EQ(j["gate"]["checks"][0]["name"], "fail-on-regression");
  EXPECT_EQ(last_line(r.err).rfind("gate: FAIL (", 0), 0u);
  // The file holds the compare result alone.
  EXPECT_FALSE(nlohmann::ordered_json::parse(read_file(out() + ".json")).contains("gate"));
  const auto plain = compare({"--format", "json"});
  EXPECT_EQ(plain.exit_code, 0);
  EXPECT_FALSE(nlohmann::ordered_json::parse(plain.out).contains("gate"));
}

TEST_F(CompareCli, JunitFileIsWellFormed) {
  const std::string junit = (dir_.path() / "junit.xml").string();
  const auto r = compare({"--junit", junit, "--fail-on-regression", "--max-step-time-regression",
                          "5", "--max-memory-regression", "10", "--fail-on-diagnosis-change"});
  EXPECT_EQ(r.exit_code, 1);
  const std::string x = read_file(junit);
  std::string why;
  EXPECT_TRUE(well_formed_xml(x, why)) << why << "\n" << x;
  // Declaration, <testsuites>, <testsuite>, 3 failed cases of 4 lines (with
  // <failure>), 1 passed case of 3, 2 closing tags.
  EXPECT_EQ(std::count(x.begin(), x.end(), '\n'), 20) << x;
  EXPECT_NE(x.find(R"(tests="4" failures="3")"), std::string::npos) << x;
  EXPECT_NE(x.find(R"(<testcase classname="traceml.compare" name="max-step-time-regression">)"),
            std::string::npos);
  // "->" in the diagnosis message is escaped.
  EXPECT_NE(x.find("INPUT STRAGGLER -&gt; "), std::string::npos) << x;
  EXPECT_FALSE(well_formed_xml("<?xml version=\"1.0\"?>\n<a><b></a></b>", why));
  EXPECT_FALSE(well_formed_xml("<?xml version=\"1.0\"?>\n<a>x & y</a>", why));
}

TEST_F(CompareCli, NoArgumentsPrintsUsage) {
  const auto r = run_process({kCli, "compare"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.out, "");
  // A line of usage and where the options are (issue 47), not all of them.
  EXPECT_EQ(r.err.rfind("usage: traceml compare A B [--output BASE] [gates]\n       run 'traceml "
                        "compare --help' for the options\n",
                        0),
            0u)
      << r.err;
  EXPECT_EQ(last_line(r.err), "traceml: error: 'compare' needs arguments (usage above)");
}

TEST_F(CompareCli, RunDirectoriesStandForTheirSummaries) {
  for (const auto& [dir, from] :
       {std::pair<const char*, std::string>{"run_a", kA}, {"run_b", kB}}) {
    fs::create_directories(dir_.path() / dir);
    fs::copy_file(from, dir_.path() / dir / "final_summary.json");
  }
  const auto r = compare({}, (dir_.path() / "run_a").string(), (dir_.path() / "run_b").string());
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::ordered_json::parse(read_file(out() + ".json"));
  EXPECT_EQ(j["lhs"]["label"], "run_a");
  EXPECT_EQ(j["rhs"]["path"], (dir_.path() / "run_b" / "final_summary.json").string());
  EXPECT_EQ(j["verdict"]["status"], "MIXED");
}

TEST_F(CompareCli, BadInputExitsTwoWithOneLine) {
  expect_one_error_line(compare({}, (dir_.path() / "missing.json").string()),
                        "missing.json: summary file not found");
  expect_one_error_line(compare({}, kA, write("bad.json", "{not json")), "not valid JSON");
  expect_one_error_line(compare({}, write("arr.json", "[1]"), kB), "must be a JSON object");
  expect_one_error_line(compare({}, write("nov.json", R"({"system":{}})"), kB),
                        "no 'schema_version'");
  expect_one_error_line(
      compare({}, write("nosec.json", R"({"schema_version":1.7,"system":{}})"), kB),
      "missing required section 'process'");
  expect_one_error_line(compare({}, kA, dir_.path().string()),
                        "a directory without final_summary.json; pass a run directory");
  // Found by fuzz_summary: a number beyond double's range escaped the loader
  // as an exception whose message named no file, and a deeply nested
  // schema_version crashed compare (stack overflow).
  expect_one_error_line(compare({}, kA, write("huge.json", R"({"schema_version":1e999})")),
                        "huge.json: not valid JSON (");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_one_error_line(
      compare({},
              write("deep.json", R"({"schema_version":)" + deep +
                                     R"(,"system":{},"process":{},"step_time":{},)"
                                     R"("step_memory":{}})"),
              kB),
      "deep.json: JSON nested more than 64 levels deep");
  expect_one_error_line(compare({"--max-step-time-regression", "-1"}),
                        "--max-step-time-regression");
  expect_one_error_line(compare({"--format", "xml"}), "--format");
  expect_one_error_line(run_process({kCli, "compare", kA}), "B");
  // A compare result is not a summary.
  ASSERT_EQ(compare({}).exit_code, 0);
  expect_one_error_line(compare({}, out() + ".json", kB), "compare result");
}

}  // namespace
