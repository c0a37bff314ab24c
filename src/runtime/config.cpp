#include "runtime/config.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "model/env_contract.hpp"
#include "model/env_values.hpp"
#include "model/run_end_state.hpp"
#include "report/html/page_process.hpp"

namespace traceml::runtime {
namespace {

bool truthy(const std::string& v) {
  std::string s;
  for (char c : v)
    s += char(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s == "1" || s == "true" || s == "yes";
}

std::optional<std::int64_t> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || end == text.c_str()) return std::nullopt;
  // Slurm writes SLURM_NTASKS_PER_NODE as "2(x3)": the leading count is the one.
  if (*end != '\0' && *end != '(') return std::nullopt;
  return v;
}

std::optional<double> parse_double(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double v = std::strtod(text.c_str(), &end);
  if (errno != 0 || *end != '\0' || !std::isfinite(v)) return std::nullopt;
  return v;
}

std::string format_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.12g", v);
  return buf;
}

/// One problem line: the variable or option, its value quoted, and why it
/// cannot be used.
std::string refused(const char* name, const std::string& value, const std::string& why) {
  return std::string(name) + "='" + model::quote_value(value) + "' " + why;
}

/// `value` when `problem_of` accepts it; a set value it refuses is a problem.
template <typename Rule>
std::optional<std::string> following(const char* name, std::optional<std::string> value,
                                     Rule problem_of, std::vector<std::string>& problems) {
  if (!value) return std::nullopt;
  if (const auto why = problem_of(*value)) {
    problems.push_back(refused(name, *value, *why));
    return std::nullopt;
  }
  return value;
}

class Reader {
 public:
  Reader(const EnvLookup& env, std::vector<std::string>& problems)
      : env_(env), problems_(problems) {}

  /// The first of `names` that is set, as an int in [lo, hi]; a set but
  /// unusable value is a problem and falls through to the next name.
  std::optional<std::int64_t> integer(std::initializer_list<const char*> names, std::int64_t lo,
                                      std::int64_t hi) {
    for (const char* name : names) {
      const auto raw = env_(name);
      if (!raw || raw->empty()) continue;  // set but empty means unset (traceml run does that)
      const auto v = parse_int(*raw);
      if (v && *v >= lo && *v <= hi) return v;
      problems_.push_back(
          refused(name, *raw,
                  "is not an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"));
    }
    return std::nullopt;
  }
  std::optional<std::string> text(const char* name) {
    auto v = env_(name);
    if (v && v->empty()) return std::nullopt;
    return v;
  }
  /// Text that `problem_of` accepts; a set value it refuses is a problem.
  template <typename Rule>
  std::optional<std::string> checked(const char* name, Rule problem_of) {
    return following(name, text(name), problem_of, problems_);
  }
  /// One of `words`; a set value that is none of them is a problem.
  std::optional<std::string> word(const char* name, std::initializer_list<const char*> words) {
    return checked(name, [&](const std::string& v) -> std::optional<std::string> {
      std::string list;
      std::size_t i = 0;
      for (const char* w : words) {
        if (v == w) return std::nullopt;
        list += i == 0 ? "" : i + 1 == words.size() ? " or " : ", ";
        list += w;
        ++i;
      }
      return "is not " + list;
    });
  }
  /// A number in [lo, hi]; a set but unusable value is a problem.
  std::optional<double> number(const char* name, double lo, double hi) {
    const auto raw = env_(name);
    if (!raw || raw->empty()) return std::nullopt;
    const auto v = parse_double(*raw);
    if (v && *v >= lo && *v <= hi) return v;
    problems_.push_back(refused(
        name, *raw, "is not a number in [" + format_number(lo) + ", " + format_number(hi) + "]"));
    return std::nullopt;
  }

 private:
  const EnvLookup& env_;
  std::vector<std::string>& problems_;
};

constexpr std::int64_t kMaxRank = kMaxWorldSize;

/// TRACEML_PROFILE_STEPS when it names this rank (TRACEML_PROFILE_RANKS)
/// and ends while traceml still records (TRACEML_TRACE_MAX_STEPS).
template <class Reader>
std::optional<model::ProfileSteps> profile_steps_of(Reader& r, int rank,
                                                    std::optional<std::int64_t> max_steps,
                                                    std::vector<std::string>& problems) {
  const auto steps_text = r.text(model::env::kProfileSteps);
  const auto ranks_text = r.text(model::env::kProfileRanks);
  if (!steps_text) {
    if (ranks_text)
      problems.push_back(std::string(model::env::kProfileRanks) + " without " +
                         model::env::kProfileSteps + " (it only narrows a profile)");
    return std::nullopt;
  }
  std::string why;
  const auto steps = model::parse_profile_steps(*steps_text, why);
  if (!steps) {
    problems.push_back(std::string(model::env::kProfileSteps) + " " + why);
    return std::nullopt;
  }
  const auto ranks = model::parse_profile_ranks(ranks_text.value_or("all"), why);
  if (!ranks) {
    problems.push_back(std::string(model::env::kProfileRanks) + " " + why);
    return std::nullopt;
  }
  if (max_steps && steps->last > *max_steps) {
    problems.push_back(std::string(model::env::kProfileSteps) + "=" + *steps_text +
                       ": it ends after step " + std::to_string(*max_steps) +
                       ", where traceml stops recording (" + model::env::kTraceMaxSteps + ")");
    return std::nullopt;
  }
  if (!ranks->empty() && !std::binary_search(ranks->begin(), ranks->end(), rank))
    return std::nullopt;
  return steps;
}

}  // namespace

EnvLookup process_env() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Config resolve_config(const Options& options, const EnvLookup& env, const std::string& hostname) {
  Config c;
  Reader r(env, c.problems);

  const auto disabled = r.text(model::env::kDisabled);
  c.enabled = options.enabled && !(disabled && truthy(*disabled));

  model::RankIdentity& id = c.identity;
  id.global_rank =
      int(r.integer({"RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK", "PMI_RANK"}, 0, kMaxRank)
              .value_or(0));
  const auto world =
      r.integer({"WORLD_SIZE", "SLURM_NTASKS", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}, 1, kMaxRank);
  id.world_size = int(world.value_or(1));
  id.local_rank =
      int(r.integer({"LOCAL_RANK", "SLURM_LOCALID", "OMPI_COMM_WORLD_LOCAL_RANK"}, 0, kMaxRank)
              .value_or(world ? id.global_rank : 0));
  id.local_world_size =
      int(r.integer({"LOCAL_WORLD_SIZE", "SLURM_NTASKS_PER_NODE", "OMPI_COMM_WORLD_LOCAL_SIZE"}, 1,
                    kMaxRank)
              .value_or(*id.world_size));
  auto node = r.integer({"GROUP_RANK", "NODE_RANK", "SLURM_NODEID"}, 0, kMaxRank);
  if (!node && *id.local_world_size > 0) node = id.global_rank / *id.local_world_size;
  id.node_rank = int(node.value_or(0));
  if (!hostname.empty()) id.hostname = hostname;

  if (auto given =
          following("Options::strategy", options.strategy, model::strategy_problem, c.problems)) {
    c.strategy = *given;
  } else if (auto s = r.checked(model::env::kStrategy, model::strategy_problem)) {
    c.strategy = *s;
  } else {
    c.strategy = model::strategy_name(model::default_strategy(id.world_size));
  }

  const auto interval_ok = [](double v) { return v >= kMinIntervalSec && v <= kMaxIntervalSec; };
  const std::optional<double> given = options.sample_interval_sec;
  if (given && interval_ok(*given)) {
    c.interval_sec = *given;
  } else {
    if (given)
      c.problems.push_back("Options::sample_interval_sec=" + format_number(*given) +
                           " is not in [" + format_number(kMinIntervalSec) + ", " +
                           format_number(kMaxIntervalSec) + "] seconds");
    if (auto v = r.number(model::env::kInterval, kMinIntervalSec, kMaxIntervalSec))
      c.interval_sec = *v;
  }
  if (options.trace_max_steps && *options.trace_max_steps > 0) {
    c.max_steps = options.trace_max_steps;
  } else {
    c.max_steps = r.integer({model::env::kTraceMaxSteps}, 1, std::int64_t(1) << 62);
  }

  const auto port = r.integer({model::env::kAggregatorPort}, 1, 65535);
  if (port) {
    c.collector_port = std::uint16_t(*port);
    c.collector_host =
        r.checked(model::env::kAggregatorHost, model::host_problem).value_or("127.0.0.1");
  }
  c.token = r.checked(model::env::kRunToken, model::token_problem).value_or("");
  c.logs_dir = options.logs_dir ? *options.logs_dir : r.text(model::env::kLogsDir).value_or("logs");
  c.run_name =
      following("Options::run_name", options.run_name, model::run_name_problem, c.problems);
  if (!c.run_name) c.run_name = r.checked(model::env::kSessionId, model::run_name_problem);
  c.launcher_pipes = r.text(model::env::kLauncherPipes).value_or("");
  if (const auto fd = r.integer({model::env::kBlackBoxFd}, 3, 1 << 20)) c.black_box_fd = int(*fd);
  if (const auto duty = r.text(model::env::kCuptiDuty)) {
    std::string why;
    c.cupti_duty = timing::parse_duty_cycle(*duty, why);
    if (!why.empty()) c.problems.push_back(refused(model::env::kCuptiDuty, *duty, why));
  }
  c.profile_steps = profile_steps_of(r, id.global_rank, c.max_steps, c.problems);
  c.cupti = r.word(model::env::kCupti, {"0", "1"}).value_or("1") == "1";
  // One stream of CUPTI buffers is the default (runtime/cupti_stage.cpp says
  // why); "default" leaves CUPTI's own choice, for the GPU check's variants.
  if (const auto v = r.word(model::env::kCuptiPerThreadBuffers, {"0", "1", "default"})) {
    if (*v == "default") {
      c.cupti_settings.per_thread_buffers.reset();
    } else {
      c.cupti_settings.per_thread_buffers = *v == "1";
    }
  }
  c.cupti_settings.launch_api_records_only =
      r.word(model::env::kCuptiApiRecords, {"all", "launches"}) == "launches";
  c.clock = r.word(model::env::kClock, {"auto", "tsc", "steady"});
  c.debug = r.word(model::env::kDebug, {"0", "1"}) == "1";
  // The page's limits, by the rule `traceml report` reads them with.
  const report::PageLimits page = report::page_limits_from(
      r.text(model::env::kPageTimeout), r.text(model::env::kPageMemory), c.problems);
  c.page_time = page.time;
  c.page_memory_bytes = page.memory_bytes;
  return c;
}

}  // namespace traceml::runtime
