#include "report/text/text_timeline.hpp"

#include <cstdio>

#include "model/text.hpp"
#include "report/json_read.hpp"
#include "report/text/text_layout.hpp"

namespace traceml::report {

namespace {

using namespace json_read;

/// "A:B" as two step numbers (1 <= A <= B).
std::optional<std::pair<std::int64_t, std::int64_t>> range_of(const Json* j) {
  const std::string s = text_or(j);
  long long a = 0, b = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%lld:%lld%c", &a, &b, &tail) != 2 || a < 1 || b < a)
    return std::nullopt;
  return std::make_pair(std::int64_t(a), std::int64_t(b));
}

std::string dashed(const std::pair<std::int64_t, std::int64_t>& r) {
  return std::to_string(r.first) + "-" + std::to_string(r.second);
}

}  // namespace

std::optional<TimelineShown> timeline_shown(const SummaryView& run, const std::string& run_dir) {
  const Json* t = object_child(run.root, "timeline");
  if (t == nullptr || run_dir.empty()) return std::nullopt;
  const auto latest = range_of(child(t, "latest"));
  const auto steps = integer(child(t, "latest_steps"));
  const std::string file = model::escape_for_terminal(text_or(child(t, "file")), true);
  if (!latest || !steps || *steps < 1 || file.empty()) return std::nullopt;
  TimelineShown s;
  s.file = run_dir + "/" + file;
  s.latest_first = latest->first;
  s.latest_last = latest->second;
  s.latest_steps = *steps;
  s.slow_window = range_of(child(t, "slow_window"));
  return s;
}

bool timeline_draws(const TimelineShown& t, std::int64_t first, std::int64_t last) {
  const bool in_latest = first >= t.latest_first && last <= t.latest_last;
  const bool in_slow =
      t.slow_window && first >= t.slow_window->first && last <= t.slow_window->second;
  return in_latest || in_slow;
}

std::vector<std::string> timeline_lines(const SummaryView& run, const std::string& run_dir,
                                        std::size_t width) {
  const auto t = timeline_shown(run, run_dir);
  if (!t) return {};
  const std::pair<std::int64_t, std::int64_t> latest{t->latest_first, t->latest_last};
  std::string body = t->file + " (ui.perfetto.dev): the latest " + std::to_string(t->latest_steps) +
                     (t->latest_steps == 1 ? " step, " : " steps, ") + dashed(latest);
  if (t->slow_window && !(t->slow_window->first >= t->latest_first))
    body += ", and the slow window, " + dashed(*t->slow_window);
  body += ". Other steps:";
  std::vector<std::string> out = wrap("Timeline: ", body, width, 10);
  out.push_back(std::string(10, ' ') + "traceml export " + run_dir +
                " --format chrome-trace --steps A:B --out steps.json");
  return out;
}

}  // namespace traceml::report
