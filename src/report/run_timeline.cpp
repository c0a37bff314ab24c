#include "report/run_timeline.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "report/atomic_file.hpp"
#include "report/json_read.hpp"
#include "report/profile_trace.hpp"

namespace traceml::report {

namespace {

/// The most profiled operators a timeline draws (about 200 bytes each).
constexpr std::size_t kMaxTimelineProfileOps = std::size_t{1} << 21;

std::string range_text(const StepRange& r) {
  return std::to_string(r.first) + ":" + std::to_string(r.last);
}

}  // namespace

std::optional<TimelinePlan> plan_run_timeline(const analysis::StepWindow& w,
                                              const nlohmann::ordered_json* slow_window) {
  if (w.steps.empty()) return std::nullopt;
  const std::int64_t ranks = std::max<std::int64_t>(1, std::int64_t(w.facts.size()));
  const std::int64_t per_rank =
      std::clamp(kTimelineRankSteps / ranks, kTimelineMinSteps, kTimelineMaxSteps);
  const std::size_t n = std::min<std::size_t>(w.steps.size(), std::size_t(per_rank));
  TimelinePlan p;
  p.aligned_steps = std::int64_t(w.steps.size());
  p.latest_steps = std::int64_t(n);
  p.latest = StepRange{w.steps[w.steps.size() - n], w.steps.back()};
  StepRange drawn = p.latest;
  const auto first = json_read::integer(json_read::child(slow_window, "first_step"));
  const auto last = json_read::integer(json_read::child(slow_window, "last_step"));
  if (first && last && *first >= 1 && *first <= *last) {
    p.slow_window = StepRange{*first, *last};
    if (*last < drawn.first - 1) {
      p.ranges.push_back(*p.slow_window);
    } else {
      drawn.first = std::min<std::int64_t>(drawn.first, *first);
      drawn.last = std::max<std::int64_t>(drawn.last, *last);
    }
  }
  p.ranges.push_back(drawn);
  return p;
}

nlohmann::ordered_json timeline_json(const TimelinePlan& plan) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["file"] = kTimelineFileName;
  j["steps"] = ranges_text(plan.ranges);
  j["latest_steps"] = plan.latest_steps;
  j["latest"] = range_text(plan.latest);
  j["slow_window"] = plan.slow_window ? nlohmann::ordered_json(range_text(*plan.slow_window))
                                      : nlohmann::ordered_json();
  j["aligned_steps"] = plan.aligned_steps;
  return j;
}

std::vector<RankProfile> profiles_meeting(const std::string& run_dir,
                                          const std::vector<StepRange>& ranges) {
  std::vector<RankProfile> profiles;
  std::size_t budget = kMaxTimelineProfileOps;
  for (const ProfileFileInfo& p : read_profile_infos(run_dir)) {
    const bool meets = std::any_of(ranges.begin(), ranges.end(), [&p](const StepRange& r) {
      return p.last_step >= r.first && p.first_step <= r.last;
    });
    if (!meets || p.ops == 0 || budget == 0) continue;
    RankProfile rp;
    rp.rank = p.rank;
    rp.ops = read_profile_ops((std::filesystem::path(run_dir) / p.path).string(), budget);
    budget -= rp.ops.size();
    profiles.push_back(std::move(rp));
  }
  return profiles;
}

std::optional<std::string> write_run_timeline(const std::string& run_dir, const model::Telemetry& t,
                                              const TimelinePlan& plan,
                                              const std::string& producer) {
  const std::string path = (std::filesystem::path(run_dir) / kTimelineFileName).string();
  try {
    const std::vector<RankProfile> profiles = profiles_meeting(run_dir, plan.ranges);
    // Straight to the file: the timeline is never held whole in memory.
    write_file_atomic(path, [&](std::ostream& out) {
      write_chrome_trace(t, plan.ranges, producer, out, profiles);
    });
    return std::nullopt;
  } catch (const std::exception& e) {
    std::error_code ec;
    std::filesystem::remove(path, ec);
    return std::string(kTimelineFileName) + " not written: " + e.what();
  }
}

}  // namespace traceml::report
