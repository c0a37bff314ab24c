#include "runtime/debug_report.hpp"

#include <algorithm>
#include <sstream>

#include "runtime/cupti_stage.hpp"

namespace traceml::runtime {

std::vector<std::string> cuda_libraries_in_maps(const std::string& maps) {
  static const char* const kPrefixes[] = {"libcudart", "libcupti", "libnvidia-ml", "libcuda.so",
                                          "libnccl"};
  std::vector<std::string> out;
  std::istringstream in(maps);
  for (std::string line; std::getline(in, line);) {
    // address perms offset dev inode path: the path is the text from the first '/'.
    const auto slash = line.find('/');
    if (slash == std::string::npos) continue;
    const std::string path = line.substr(slash);
    const std::string name = path.substr(path.rfind('/') + 1);
    const bool wanted = std::any_of(std::begin(kPrefixes), std::end(kPrefixes),
                                    [&](const char* p) { return name.rfind(p, 0) == 0; });
    if (wanted && std::find(out.begin(), out.end(), path) == out.end()) out.push_back(path);
  }
  return out;
}

std::vector<std::string> debug_lines(const std::optional<GpuClockDebug>& gpu,
                                     const CuptiStage* cupti, const std::string& cupti_why,
                                     const std::vector<std::string>& libraries) {
  std::vector<std::string> lines;
  if (!gpu) {
    lines.emplace_back("gpu clock: off");
  } else {
    const GpuClockCounters& c = gpu->counters;
    lines.push_back(
        "gpu clock: device " + (gpu->device ? std::to_string(*gpu->device) : std::string("none")) +
        ", steps resolved " + std::to_string(c.steps_resolved) + ", expired " +
        std::to_string(c.steps_expired) + ", failed " + std::to_string(c.steps_failed) +
        ", rejected " + std::to_string(c.steps_rejected) + ", abandoned " +
        std::to_string(c.steps_abandoned) + ", scopes skipped " + std::to_string(c.scopes_skipped) +
        ", event pool exhausted " + std::to_string(c.pool_exhausted));
  }
  if (cupti == nullptr) {
    lines.push_back("cupti: off" + (cupti_why.empty() ? std::string() : " (" + cupti_why + ")"));
  } else {
    const timing::CuptiActivitySource& s = cupti->source();
    const timing::ActivityAttributor& a = cupti->attributor();
    const auto version = s.cupti_version();
    lines.push_back(std::string("cupti: on, version ") +
                    (version ? std::to_string(*version) : std::string("unknown")) +
                    ", per-thread buffers " + timing::to_string(s.per_thread_buffers()) +
                    ", timestamps " + (s.uses_timestamp_callback() ? "ours" : "offset") +
                    ", api records " +
                    (s.launch_api_records().runtime > 0
                         ? "launches only (" + std::to_string(s.launch_api_records().runtime) +
                               " runtime and " + std::to_string(s.launch_api_records().driver) +
                               " driver APIs kept, " +
                               std::to_string(s.launch_api_records().turned_off) + " turned off)"
                         : std::string("every runtime and driver call")) +
                    ", dropped by cupti " + std::to_string(s.cupti_dropped()) +
                    ", buffers refused " + std::to_string(s.buffers_refused()) + ", untimed " +
                    std::to_string(s.untimed()) + ", lost " + std::to_string(s.lost()));
    lines.push_back("attribution: attributed " + std::to_string(a.attributed()) + ", late " +
                    std::to_string(a.late()) + ", unmatched " + std::to_string(a.unmatched()) +
                    ", outside steps " + std::to_string(a.outside_steps()) + ", dropped " +
                    std::to_string(a.dropped()) + ", still held " + std::to_string(a.stored()) +
                    ", records lost in all " + std::to_string(cupti->records_lost()));
    if (auto duty = cupti->duty_summary()) lines.push_back(*duty);
  }
  std::string libs;
  for (const std::string& l : libraries)
    libs += (libs.empty() ? "" : ", ") + l;
  lines.push_back("cuda libraries loaded: " + (libs.empty() ? std::string("none") : libs));
  return lines;
}

}  // namespace traceml::runtime
