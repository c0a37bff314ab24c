// What the runtime promises about the environment it starts in, checked on
// one environment: resolve_config never throws, and whatever the variables
// hold (any bytes, any length) the configuration it gives is usable: the
// identity in range, the sampler's period in range, a host, token, strategy
// and run name that follow the rules of model/env_values.hpp, and at most
// one short, printable line per problem. A rank is a user's training
// process, started by any launcher: a bad variable must cost it a warning,
// never a crash or a directory outside the logs directory. Shared by the fuzz
// target fuzz_config and the corpus replay of tests/runtime/config_test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "model/env_contract.hpp"
#include "model/env_values.hpp"
#include "model/limits.hpp"
#include "model/text.hpp"
#include "runtime/config.hpp"

namespace traceml::fuzz {

/// Every variable resolve_config reads, in the order a selector byte picks
/// them; the last two selectors set init()'s Options::strategy and
/// Options::run_name instead.
inline const std::vector<std::string>& config_variables() {
  static const std::vector<std::string> names = {"RANK",
                                                 "SLURM_PROCID",
                                                 "OMPI_COMM_WORLD_RANK",
                                                 "PMI_RANK",
                                                 "WORLD_SIZE",
                                                 "SLURM_NTASKS",
                                                 "OMPI_COMM_WORLD_SIZE",
                                                 "PMI_SIZE",
                                                 "LOCAL_RANK",
                                                 "SLURM_LOCALID",
                                                 "OMPI_COMM_WORLD_LOCAL_RANK",
                                                 "LOCAL_WORLD_SIZE",
                                                 "SLURM_NTASKS_PER_NODE",
                                                 "OMPI_COMM_WORLD_LOCAL_SIZE",
                                                 "GROUP_RANK",
                                                 "NODE_RANK",
                                                 "SLURM_NODEID",
                                                 model::env::kDisabled,
                                                 model::env::kStrategy,
                                                 model::env::kInterval,
                                                 model::env::kTraceMaxSteps,
                                                 model::env::kAggregatorPort,
                                                 model::env::kAggregatorHost,
                                                 model::env::kRunToken,
                                                 model::env::kLogsDir,
                                                 model::env::kSessionId,
                                                 model::env::kLauncherPipes,
                                                 model::env::kBlackBoxFd,
                                                 model::env::kCuptiDuty,
                                                 model::env::kCupti,
                                                 model::env::kCuptiPerThreadBuffers,
                                                 model::env::kCuptiApiRecords,
                                                 model::env::kClock,
                                                 model::env::kDebug,
                                                 model::env::kPageTimeout,
                                                 model::env::kPageMemory,
                                                 model::env::kProfileSteps,
                                                 model::env::kProfileRanks};
  return names;
}

struct ConfigInput {
  std::map<std::string, std::string> env;
  Options options;
};

/// The input as records separated by NUL bytes (an environment value holds
/// none): a record's first byte picks a variable (config_variables(), then
/// the two Options), the rest is its value; a later record for the same
/// variable wins.
inline ConfigInput config_input_of(const std::uint8_t* data, std::size_t size) {
  ConfigInput in;
  const auto& names = config_variables();
  std::size_t at = 0;
  while (at < size) {
    std::size_t end = at;
    while (end < size && data[end] != 0)
      ++end;
    if (end > at) {
      const std::size_t pick = data[at] % (names.size() + 2);
      std::string value(reinterpret_cast<const char*>(data) + at + 1, end - at - 1);
      if (pick < names.size()) {
        in.env[names[pick]] = std::move(value);
      } else if (pick == names.size()) {
        in.options.strategy = std::move(value);
      } else {
        in.options.run_name = std::move(value);
      }
    }
    at = end + 1;
  }
  return in;
}

/// Why the configuration of this environment breaks a promise; std::nullopt
/// when it keeps every one.
inline std::optional<std::string> check_config(const ConfigInput& in) {
  const runtime::EnvLookup env = [&](const char* name) -> std::optional<std::string> {
    const auto it = in.env.find(name);
    if (it == in.env.end()) return std::nullopt;
    return it->second;
  };
  runtime::Config c;
  try {
    c = runtime::resolve_config(in.options, env, "host-a");
    const runtime::Config again = runtime::resolve_config(in.options, env, "host-a");
    if (again.problems != c.problems || again.strategy != c.strategy ||
        again.run_name != c.run_name || again.token != c.token)
      return std::string("two resolutions of one environment differ");
  } catch (const std::exception& e) {
    return std::string("resolve_config threw: ") + e.what();
  } catch (...) {
    return std::string("resolve_config threw");
  }
  const auto& id = c.identity;
  const auto max = runtime::kMaxWorldSize;
  if (id.global_rank < 0 || id.global_rank > max) return std::string("rank out of range");
  if (!id.world_size || *id.world_size < 1 || *id.world_size > max)
    return std::string("world size out of range");
  if (!id.local_rank || *id.local_rank < 0 || *id.local_rank > max)
    return std::string("local rank out of range");
  if (!id.local_world_size || *id.local_world_size < 1 || *id.local_world_size > max)
    return std::string("local world size out of range");
  if (!id.node_rank || *id.node_rank < 0 || *id.node_rank > max)
    return std::string("node rank out of range");
  if (!(c.interval_sec >= runtime::kMinIntervalSec && c.interval_sec <= runtime::kMaxIntervalSec))
    return std::string("sampler period out of range");
  if (c.max_steps && *c.max_steps < 1) return std::string("max steps below 1");
  if (c.profile_steps &&
      (c.profile_steps->first < 1 || c.profile_steps->last < c.profile_steps->first ||
       c.profile_steps->last - c.profile_steps->first >= model::kMaxProfileSteps))
    return std::string("a profile range outside 1 <= A <= B, at most kMaxProfileSteps steps");
  if (c.collector_port.has_value() != c.collector_host.has_value())
    return std::string("a collector port without a host, or the reverse");
  if (c.collector_port && *c.collector_port == 0) return std::string("collector port 0");
  if (c.collector_host && model::host_problem(*c.collector_host))
    return "collector host " + *model::host_problem(*c.collector_host);
  if (!c.token.empty() && model::token_problem(c.token))
    return "token " + *model::token_problem(c.token);
  if (model::strategy_problem(c.strategy))
    return "strategy " + *model::strategy_problem(c.strategy);
  if (c.run_name && model::run_name_problem(*c.run_name))
    return "run name " + *model::run_name_problem(*c.run_name);
  // One line per variable or option at most, each short and printable.
  if (c.problems.size() > config_variables().size() + 3) return std::string("too many problems");
  for (const std::string& p : c.problems) {
    if (p.size() > 400) return "a problem of " + std::to_string(p.size()) + " bytes";
    if (!model::valid_utf8(p)) return std::string("a problem that is not valid UTF-8");
    for (const unsigned char ch : p)
      if (ch < 0x20 || ch == 0x7f) return std::string("a problem with a control character");
  }
  return std::nullopt;
}

inline std::optional<std::string> check_config_input(const std::uint8_t* data, std::size_t size) {
  return check_config(config_input_of(data, size));
}

}  // namespace traceml::fuzz
