// Where the runtime's settings come from: init()'s Options over the
// environment of traceml run, torchrun, Slurm or Open MPI.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "../fuzz/config_invariants.hpp"
#include "../support/subprocess.hpp"
#include "runtime/config.hpp"

namespace traceml::runtime {
namespace {

EnvLookup env_of(std::map<std::string, std::string> vars) {
  return [vars](const char* name) -> std::optional<std::string> {
    const auto it = vars.find(name);
    if (it == vars.end()) return std::nullopt;
    return it->second;
  };
}

TEST(Config, ASingleProcessWithoutLauncherIsStandalone) {
  const Config c = resolve_config({}, env_of({}), "node-a");
  EXPECT_TRUE(c.enabled);
  EXPECT_TRUE(c.standalone());
  EXPECT_EQ(c.identity.global_rank, 0);
  EXPECT_EQ(c.identity.world_size, 1);
  EXPECT_EQ(c.identity.local_rank, 0);
  EXPECT_EQ(c.identity.node_rank, 0);
  EXPECT_EQ(c.identity.hostname, "node-a");
  EXPECT_EQ(c.strategy, "single_process");
  EXPECT_DOUBLE_EQ(c.interval_sec, 1.0);
  EXPECT_FALSE(c.max_steps);
  EXPECT_EQ(c.logs_dir, "logs");
  EXPECT_TRUE(c.problems.empty());
}

TEST(Config, TracemlRunEnvironment) {
  const Config c = resolve_config({},
                                  env_of({{"RANK", "5"},
                                          {"WORLD_SIZE", "8"},
                                          {"LOCAL_RANK", "1"},
                                          {"LOCAL_WORLD_SIZE", "4"},
                                          {"GROUP_RANK", "1"},
                                          {"TRACEML_AGGREGATOR_HOST", "10.0.0.1"},
                                          {"TRACEML_AGGREGATOR_PORT", "29765"},
                                          {"TRACEML_RUN_TOKEN", "secret"},
                                          {"TRACEML_TRACE_MAX_STEPS", "100"},
                                          {"TRACEML_INTERVAL", "0.5"}}),
                                  "h");
  EXPECT_FALSE(c.standalone());
  EXPECT_EQ(c.identity.global_rank, 5);
  EXPECT_EQ(c.identity.world_size, 8);
  EXPECT_EQ(c.identity.local_rank, 1);
  EXPECT_EQ(c.identity.local_world_size, 4);
  EXPECT_EQ(c.identity.node_rank, 1);
  EXPECT_EQ(c.collector_host, "10.0.0.1");
  EXPECT_EQ(c.collector_port, 29765);
  EXPECT_EQ(c.token, "secret");
  EXPECT_EQ(c.max_steps, 100);
  EXPECT_DOUBLE_EQ(c.interval_sec, 0.5);
  EXPECT_EQ(c.strategy, "ddp");
}

TEST(Config, SlurmAndOpenMpiRanksAreRecognised) {
  const Config slurm = resolve_config({},
                                      env_of({{"SLURM_PROCID", "3"},
                                              {"SLURM_NTASKS", "4"},
                                              {"SLURM_LOCALID", "1"},
                                              {"SLURM_NTASKS_PER_NODE", "2(x2)"},
                                              {"SLURM_NODEID", "1"}}),
                                      "h");
  EXPECT_EQ(slurm.identity.global_rank, 3);
  EXPECT_EQ(slurm.identity.world_size, 4);
  EXPECT_EQ(slurm.identity.local_rank, 1);
  EXPECT_EQ(slurm.identity.local_world_size, 2);
  EXPECT_EQ(slurm.identity.node_rank, 1);
  EXPECT_TRUE(slurm.problems.empty());

  const Config mpi = resolve_config({},
                                    env_of({{"OMPI_COMM_WORLD_RANK", "6"},
                                            {"OMPI_COMM_WORLD_SIZE", "8"},
                                            {"OMPI_COMM_WORLD_LOCAL_RANK", "2"},
                                            {"OMPI_COMM_WORLD_LOCAL_SIZE", "4"}}),
                                    "h");
  EXPECT_EQ(mpi.identity.global_rank, 6);
  EXPECT_EQ(mpi.identity.local_rank, 2);
  EXPECT_EQ(mpi.identity.node_rank, 1);  // 6 / 4: no node variable in Open MPI
}

TEST(Config, OptionsWinOverTheEnvironment) {
  Options o;
  o.trace_max_steps = 7;
  o.sample_interval_sec = 2.0;
  o.strategy = "fsdp";
  o.logs_dir = "/tmp/x";
  o.run_name = "mine";
  const Config c = resolve_config(o,
                                  env_of({{"TRACEML_TRACE_MAX_STEPS", "100"},
                                          {"TRACEML_INTERVAL", "0.5"},
                                          {"TRACEML_STRATEGY", "ddp"},
                                          {"TRACEML_LOGS_DIR", "elsewhere"},
                                          {"TRACEML_SESSION_ID", "theirs"}}),
                                  "h");
  EXPECT_EQ(c.max_steps, 7);
  EXPECT_DOUBLE_EQ(c.interval_sec, 2.0);
  EXPECT_EQ(c.strategy, "fsdp");
  EXPECT_EQ(c.logs_dir, "/tmp/x");
  EXPECT_EQ(c.run_name, "mine");
}

TEST(Config, DisabledByOptionOrEnvironment) {
  Options off;
  off.enabled = false;
  EXPECT_FALSE(resolve_config(off, env_of({}), "h").enabled);
  for (const char* v : {"1", "true", "YES"})
    EXPECT_FALSE(resolve_config({}, env_of({{"TRACEML_DISABLED", v}}), "h").enabled) << v;
  for (const char* v : {"0", "false", ""})
    EXPECT_TRUE(resolve_config({}, env_of({{"TRACEML_DISABLED", v}}), "h").enabled) << v;
}

TEST(Config, EmptyValuesMeanUnset) {
  // traceml run sets TRACEML_TRACE_MAX_STEPS="" when there is no limit.
  const Config c = resolve_config({}, env_of({{"TRACEML_TRACE_MAX_STEPS", ""}, {"RANK", ""}}), "h");
  EXPECT_FALSE(c.max_steps);
  EXPECT_EQ(c.identity.global_rank, 0);
  EXPECT_TRUE(c.problems.empty());
}

TEST(Config, UnusableValuesAreReportedAndFallBack) {
  const Config c = resolve_config({},
                                  env_of({{"RANK", "two"},
                                          {"TRACEML_AGGREGATOR_PORT", "70000"},
                                          {"TRACEML_INTERVAL", "-1"},
                                          {"TRACEML_TRACE_MAX_STEPS", "0"}}),
                                  "h");
  EXPECT_EQ(c.identity.global_rank, 0);
  EXPECT_TRUE(c.standalone());
  EXPECT_DOUBLE_EQ(c.interval_sec, 1.0);
  EXPECT_FALSE(c.max_steps);
  ASSERT_EQ(c.problems.size(), 4u);
  EXPECT_EQ(c.problems[0], "RANK='two' is not an integer in [0, 16777216]");
  EXPECT_EQ(c.problems[1], "TRACEML_INTERVAL='-1' is not a number in [0.01, 3600]");
}

TEST(Config, IntervalOutsideItsRangeIsRefusedFromEitherSource) {
  // 1e10 s once overflowed the sampler's wait and made it spin inside the
  // training process; 0.001 s would cost a visible share of a core.
  for (const char* bad : {"1e10", "0.001", "nan", "inf", "1e400"}) {
    const Config c = resolve_config({}, env_of({{"TRACEML_INTERVAL", bad}}), "h");
    EXPECT_DOUBLE_EQ(c.interval_sec, kDefaultIntervalSec) << bad;
    ASSERT_EQ(c.problems.size(), 1u) << bad;
  }
  Options o;
  o.sample_interval_sec = 1e10;
  const Config c = resolve_config(o, env_of({{"TRACEML_INTERVAL", "0.5"}}), "h");
  EXPECT_DOUBLE_EQ(c.interval_sec, 0.5);  // the environment's valid value, not the bad option
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_EQ(c.problems[0],
            "Options::sample_interval_sec=10000000000 is not in [0.01, 3600] seconds");
  o.sample_interval_sec = 3600;
  EXPECT_DOUBLE_EQ(resolve_config(o, env_of({}), "h").interval_sec, 3600.0);
}

TEST(Config, LauncherPipesComeFromTheLauncher) {
  EXPECT_EQ(resolve_config({}, env_of({}), "h").launcher_pipes, "");
  EXPECT_EQ(resolve_config({}, env_of({{"TRACEML_LAUNCHER_PIPES", "12,13"}}), "h").launcher_pipes,
            "12,13");
}

// A value that is set but unusable is one short, printable line, whatever it
// holds: a newline or an escape sequence in RANK must not break the warning
// or drive the terminal, and a megabyte of it must not flood stderr.
TEST(Config, AnUnusableValueIsQuotedOnOneShortLine) {
  const Config c = resolve_config(
      {}, env_of({{"RANK", "1\n\x1b[31mRED"}, {"LOCAL_RANK", std::string(1 << 20, '7') + "x"}}),
      "node-a");
  ASSERT_EQ(c.problems.size(), 2u);
  EXPECT_EQ(c.problems[0], "RANK='1\\x0a\\x1b[31mRED' is not an integer in [0, 16777216]");
  EXPECT_LT(c.problems[1].size(), 200u) << c.problems[1];
  EXPECT_NE(c.problems[1].find("7777...' is not an integer"), std::string::npos) << c.problems[1];
  EXPECT_EQ(c.identity.global_rank, 0);
}

// TRACEML_SESSION_ID names the standalone run's directory inside the logs
// directory: the rule of `traceml run --run-name` holds, so that "../x" or
// "a/b" cannot put it elsewhere. A refused name falls back to the default
// (<program>_<timestamp>), as every unusable value does.
TEST(Config, ARunNameThatIsNotOnePathSegmentIsRefused) {
  for (const char* name : {"../escaped", "a/b", "..", ".", "sp ace", "tab\t"}) {
    const Config c = resolve_config({}, env_of({{"TRACEML_SESSION_ID", name}}), "node-a");
    EXPECT_FALSE(c.run_name) << name;
    ASSERT_EQ(c.problems.size(), 1u) << name;
    EXPECT_NE(c.problems[0].find("must be one path segment"), std::string::npos) << c.problems[0];
  }
  Options bad;
  bad.run_name = "../up";
  const Config c = resolve_config(bad, env_of({{"TRACEML_SESSION_ID", "from_env"}}), "node-a");
  EXPECT_EQ(c.run_name, "from_env");
  ASSERT_EQ(c.problems.size(), 1u);
  EXPECT_EQ(c.problems[0].rfind("Options::run_name='../up' must be one path segment", 0), 0u)
      << c.problems[0];
  EXPECT_EQ(resolve_config({}, env_of({{"TRACEML_SESSION_ID", "job_7.b-2"}}), "n").run_name,
            "job_7.b-2");
}

TEST(Config, AStrategyHostOrTokenThatBreaksItsRuleIsRefused) {
  const Config c = resolve_config({},
                                  env_of({{"WORLD_SIZE", "2"},
                                          {"TRACEML_STRATEGY", "dd\xffp"},
                                          {"TRACEML_AGGREGATOR_PORT", "29765"},
                                          {"TRACEML_AGGREGATOR_HOST", "evil host"},
                                          {"TRACEML_RUN_TOKEN",
                                           "tok\x07"
                                           "en"}}),
                                  "node-a");
  EXPECT_EQ(c.strategy, "ddp");  // the default for WORLD_SIZE 2
  EXPECT_EQ(c.collector_host, "127.0.0.1");
  EXPECT_EQ(c.token, "");
  ASSERT_EQ(c.problems.size(), 3u);
  EXPECT_NE(c.problems[0].find("TRACEML_STRATEGY='dd\xef\xbf\xbdp' must be one word"),
            std::string::npos)
      << c.problems[0];
  EXPECT_NE(c.problems[1].find("must be a host name or an IP address"), std::string::npos);
  EXPECT_NE(c.problems[2].find("TRACEML_RUN_TOKEN='tok\\x07en' holds a control character"),
            std::string::npos)
      << c.problems[2];
  const Config ok = resolve_config({},
                                   env_of({{"TRACEML_STRATEGY", "fsdp"},
                                           {"TRACEML_AGGREGATOR_PORT", "1"},
                                           {"TRACEML_AGGREGATOR_HOST", "[fe80::1%eth0]"}}),
                                   "node-a");
  EXPECT_TRUE(ok.problems.empty()) << ok.problems[0];
  EXPECT_EQ(ok.strategy, "fsdp");
  EXPECT_EQ(ok.collector_host, "[fe80::1%eth0]");
}

// The GPU paths' variables and the clock's are read here with the others, so
// that each bad value is one line of init()'s one warning (and the default),
// in one style, and runtime.cpp reads no variable itself.
TEST(Config, TheGpuPathsClockAndDebugVariablesHaveDefaults) {
  const Config c = resolve_config({}, env_of({}), "node-a");
  EXPECT_TRUE(c.cupti);
  EXPECT_EQ(c.cupti_settings.per_thread_buffers, false);
  EXPECT_FALSE(c.cupti_settings.launch_api_records_only);
  EXPECT_FALSE(c.clock);
  EXPECT_FALSE(c.debug);
}

TEST(Config, TheGpuPathsClockAndDebugVariablesAreRead) {
  const Config c = resolve_config({},
                                  env_of({{"TRACEML_CUPTI", "0"},
                                          {"TRACEML_CUPTI_PER_THREAD_BUFFERS", "1"},
                                          {"TRACEML_CUPTI_API_RECORDS", "launches"},
                                          {"TRACEML_CLOCK", "steady"},
                                          {"TRACEML_DEBUG", "1"}}),
                                  "node-a");
  EXPECT_TRUE(c.problems.empty()) << c.problems[0];
  EXPECT_FALSE(c.cupti);
  EXPECT_EQ(c.cupti_settings.per_thread_buffers, true);
  EXPECT_TRUE(c.cupti_settings.launch_api_records_only);
  EXPECT_EQ(c.clock, "steady");
  EXPECT_TRUE(c.debug);
  const Config d =
      resolve_config({}, env_of({{"TRACEML_CUPTI_PER_THREAD_BUFFERS", "default"}}), "node-a");
  EXPECT_FALSE(d.cupti_settings.per_thread_buffers);  // CUPTI's own choice
}

TEST(Config, EachBadGpuClockOrDebugValueIsOneProblemAndTheDefault) {
  const std::map<std::string, std::string> bad = {
      {"TRACEML_CUPTI", "off"},
      {"TRACEML_CUPTI_PER_THREAD_BUFFERS", "2"},
      {"TRACEML_CUPTI_API_RECORDS", "some"},
      {"TRACEML_CLOCK", "fast"},
      {"TRACEML_DEBUG", "yes"},
  };
  const std::map<std::string, std::string> line = {
      {"TRACEML_CUPTI", "TRACEML_CUPTI='off' is not 0 or 1"},
      {"TRACEML_CUPTI_PER_THREAD_BUFFERS",
       "TRACEML_CUPTI_PER_THREAD_BUFFERS='2' is not 0, 1 or default"},
      {"TRACEML_CUPTI_API_RECORDS", "TRACEML_CUPTI_API_RECORDS='some' is not all or launches"},
      {"TRACEML_CLOCK", "TRACEML_CLOCK='fast' is not auto, tsc or steady"},
      {"TRACEML_DEBUG", "TRACEML_DEBUG='yes' is not 0 or 1"},
  };
  const Config fallback = resolve_config({}, env_of({}), "node-a");
  for (const auto& [name, value] : bad) {
    const Config c = resolve_config({}, env_of({{name, value}}), "node-a");
    ASSERT_EQ(c.problems.size(), 1u) << name;
    EXPECT_EQ(c.problems[0], line.at(name));
    EXPECT_EQ(c.cupti, fallback.cupti) << name;
    EXPECT_EQ(c.cupti_settings.per_thread_buffers, fallback.cupti_settings.per_thread_buffers)
        << name;
    EXPECT_EQ(c.cupti_settings.launch_api_records_only,
              fallback.cupti_settings.launch_api_records_only)
        << name;
    EXPECT_EQ(c.clock, fallback.clock) << name;
    EXPECT_EQ(c.debug, fallback.debug) << name;
  }
}

TEST(Config, ProfileStepsForTheRanksNamed) {
  const Config all = resolve_config({}, env_of({{"TRACEML_PROFILE_STEPS", "5:8"}}), "n");
  ASSERT_TRUE(all.profile_steps);
  EXPECT_EQ(all.profile_steps->first, 5);
  EXPECT_EQ(all.profile_steps->last, 8);
  EXPECT_TRUE(all.problems.empty());
  const auto rank = [](const char* r, const char* ranks) {
    return resolve_config({},
                          env_of({{"RANK", r},
                                  {"WORLD_SIZE", "4"},
                                  {"TRACEML_PROFILE_STEPS", "5:8"},
                                  {"TRACEML_PROFILE_RANKS", ranks}}),
                          "n");
  };
  EXPECT_TRUE(rank("3", "1,3").profile_steps);
  EXPECT_FALSE(rank("2", "1,3").profile_steps);
  EXPECT_TRUE(rank("2", "all").profile_steps);
  EXPECT_TRUE(rank("2", "1,3").problems.empty());  // not named: no profile, nothing wrong
}

TEST(Config, AProfileThatCannotBeTakenIsSaidAndNotAsked) {
  const auto with = [](std::map<std::string, std::string> vars) {
    return resolve_config({}, env_of(std::move(vars)), "n");
  };
  const Config bad = with({{"TRACEML_PROFILE_STEPS", "8:5"}});
  EXPECT_FALSE(bad.profile_steps);
  ASSERT_EQ(bad.problems.size(), 1u);
  EXPECT_NE(bad.problems[0].find("TRACEML_PROFILE_STEPS must be A:B"), std::string::npos);
  const Config ranks = with({{"TRACEML_PROFILE_STEPS", "5:8"}, {"TRACEML_PROFILE_RANKS", "x"}});
  EXPECT_FALSE(ranks.profile_steps);
  EXPECT_EQ(ranks.problems.size(), 1u);
  const Config alone = with({{"TRACEML_PROFILE_RANKS", "0"}});
  ASSERT_EQ(alone.problems.size(), 1u);
  EXPECT_NE(alone.problems[0].find("without TRACEML_PROFILE_STEPS"), std::string::npos);
  // Past --trace-max-steps traceml no longer looks at steps: it could not
  // switch the profiler off.
  const Config late = with({{"TRACEML_PROFILE_STEPS", "5:20"}, {"TRACEML_TRACE_MAX_STEPS", "10"}});
  EXPECT_FALSE(late.profile_steps);
  ASSERT_EQ(late.problems.size(), 1u);
  EXPECT_NE(late.problems[0].find("ends after step 10"), std::string::npos) << late.problems[0];
  EXPECT_TRUE(
      with({{"TRACEML_PROFILE_STEPS", "5:10"}, {"TRACEML_TRACE_MAX_STEPS", "10"}}).profile_steps);
}

TEST(Config, LocalRankZeroSpeaksForItsNode) {
  EXPECT_TRUE(resolve_config({}, env_of({}), "node-a").speaks_for_its_node());
  const Config second = resolve_config(
      {}, env_of({{"RANK", "3"}, {"LOCAL_RANK", "1"}, {"WORLD_SIZE", "4"}}), "node-a");
  EXPECT_FALSE(second.speaks_for_its_node());
  const Config first = resolve_config(
      {}, env_of({{"RANK", "2"}, {"LOCAL_RANK", "0"}, {"WORLD_SIZE", "4"}}), "node-a");
  EXPECT_TRUE(first.speaks_for_its_node());
}

// fuzz_config picks variables from config_variables(): a variable that
// resolve_config reads and the list lacks would never be fuzzed. The names
// read are recorded with every variable unset (each fallback is asked) and
// with every one set (the host is asked only with a port).
TEST(ConfigFuzzCorpus, TheFuzzTargetKnowsEveryVariableTheRuntimeReads) {
  std::set<std::string> read;
  for (const char* value : {static_cast<const char*>(nullptr), "1"}) {
    resolve_config(
        {},
        [&](const char* name) {
          read.insert(name);
          return value != nullptr ? std::optional<std::string>(value) : std::nullopt;
        },
        "node-a");
  }
  const auto& listed = fuzz::config_variables();
  EXPECT_EQ(read, std::set<std::string>(listed.begin(), listed.end()));
}

// fuzz_config's promises (tests/fuzz/config_invariants.hpp) on its corpus and
// on a fixed-seed stream of random environments, so that every build checks
// them, not only the sanitizer stage's fuzzing.
TEST(ConfigFuzzCorpus, EveryEnvironmentGivesAUsableConfiguration) {
  const auto dir = std::filesystem::path(TRACEML_TEST_DATA_DIR) / "fuzz" / "corpus" / "fuzz_config";
  int seeds = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string bytes = testing::read_file(entry.path());
    const auto why =
        fuzz::check_config_input(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    EXPECT_FALSE(why) << entry.path() << ": " << *why;
    ++seeds;
  }
  EXPECT_GE(seeds, 7);
  std::mt19937 gen(20261205);
  const std::string alphabet = "0123456789-+.e()x/:[]% _abcTRUE\n\t\x1b\x7f\xc3\xff";
  for (int i = 0; i < 3000; ++i) {
    std::string bytes;
    const int records = int(gen() % 12);
    for (int r = 0; r < records; ++r) {
      bytes += char(gen() % (fuzz::config_variables().size() + 2));
      const int len = int(gen() % 24);
      for (int k = 0; k < len; ++k)
        bytes += alphabet[gen() % alphabet.size()];
      bytes += '\0';
    }
    const auto why =
        fuzz::check_config_input(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
    ASSERT_FALSE(why) << "random environment " << i << ": " << *why;
  }
}

TEST(Config, ThePagesLimitsAreReadHereAndABadOneFallsBackWithAWarning) {
  const Config d = resolve_config({}, env_of({}), "h");
  EXPECT_EQ(d.page_time, std::chrono::seconds(60));
  EXPECT_EQ(d.page_memory_bytes, std::uint64_t(2048) << 20);
  const Config set = resolve_config(
      {}, env_of({{"TRACEML_PAGE_TIMEOUT_S", "2.5"}, {"TRACEML_PAGE_MEMORY_MB", "64"}}), "h");
  EXPECT_EQ(set.page_time, std::chrono::milliseconds(2500));
  EXPECT_EQ(set.page_memory_bytes, std::uint64_t(64) << 20);
  EXPECT_TRUE(set.problems.empty());
  // The runtime never stops training over a setting: the default, and one line.
  const Config bad = resolve_config(
      {}, env_of({{"TRACEML_PAGE_TIMEOUT_S", "forever"}, {"TRACEML_PAGE_MEMORY_MB", "-1"}}), "h");
  EXPECT_EQ(bad.page_time, std::chrono::seconds(60));
  EXPECT_EQ(bad.page_memory_bytes, std::uint64_t(2048) << 20);
  EXPECT_EQ(bad.problems,
            (std::vector<std::string>{
                "TRACEML_PAGE_TIMEOUT_S='forever' is not a number of seconds in (0, 86400]",
                "TRACEML_PAGE_MEMORY_MB='-1' is not a whole number of MiB in [1, 1073741824]"}));
}

}  // namespace
}  // namespace traceml::runtime
