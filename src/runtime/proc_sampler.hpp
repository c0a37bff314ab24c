// Process and host metrics from /proc, taken on the sampler thread: process
// CPU % (can exceed 100 with several cores) and RSS for every rank; host CPU %
// and RAM for local rank 0 (the node's system sample). CPU percentages are
// rates between two readings, so the sampler keeps the previous one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "model/telemetry.hpp"

namespace traceml::runtime {

/// Cumulative CPU counters of /proc/stat's first line, in clock ticks.
struct HostCpuTicks {
  std::uint64_t busy = 0;
  std::uint64_t total = 0;
};

/// Parses the "cpu ..." line of /proc/stat; std::nullopt when malformed.
std::optional<HostCpuTicks> parse_proc_stat_cpu(const std::string& text);
/// utime + stime (clock ticks) of a /proc/<pid>/stat line; std::nullopt when malformed.
std::optional<std::uint64_t> parse_pid_stat_cpu_ticks(const std::string& text);
/// A /proc/meminfo value ("MemTotal", "MemAvailable") in bytes.
std::optional<double> parse_meminfo_bytes(const std::string& text, const std::string& key);

class ProcSampler {
 public:
  /// Takes the baseline readings the first rates are computed against.
  ProcSampler();
  model::ProcessSample sample_process(int global_rank, double ts);
  model::SystemSample sample_system(int node_rank, double ts);

 private:
  std::optional<std::uint64_t> last_process_ticks_;
  std::int64_t last_process_ns_ = 0;
  std::optional<HostCpuTicks> last_host_;
  double ticks_per_second_;
  double page_bytes_;
};

}  // namespace traceml::runtime
