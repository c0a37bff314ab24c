#include "live/live_view.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include <fmt/format.h>

#include "live/screen.hpp"
#include "model/text.hpp"

namespace traceml::live {

namespace {

using collector::RankCondition;

/// A formatted cell, cut at 63 characters as the 64-byte buffer it was once
/// printed into cut it: a rank's absurd 1e300 ms stays a short cell.
template <typename... T>
std::string cell(fmt::format_string<T...> f, T&&... args) {
  char buf[63];
  return std::string(buf, fmt::format_to_n(buf, sizeof buf, f, std::forward<T>(args)...).out);
}

std::string rank_name(const collector::RankLive& r) {
  return "R" + std::to_string(r.global_rank) +
         (r.node_rank ? "/N" + std::to_string(*r.node_rank) : std::string());
}

std::string duration_text(double s) {
  if (s < 120.0) return cell("{:.0f} s", s);
  if (s < 7200.0) return cell("{:.0f} min", s / 60.0);
  return cell("{:.1f} h", s / 3600.0);
}

std::string clock_text(double s) {
  const auto t = static_cast<long long>(std::max(0.0, s));
  return fmt::format("{}:{:02}:{:02}", t / 3600, (t / 60) % 60, t % 60);
}

/// Where a rank was: "step 812, backward" or "before step 813".
std::string where_text(std::int64_t step, std::optional<model::LoopPhase> phase) {
  if (!phase) return "step " + std::to_string(step);
  if (*phase == model::LoopPhase::Outside) return "before step " + std::to_string(step);
  return "step " + std::to_string(step) + ", " + model::loop_phase_name(*phase);
}

// ---- drawing ----

struct Paint {
  bool on;
  std::string operator()(const std::string& s, const char* code) const {
    return on ? std::string("\x1b[") + code + "m" + s + "\x1b[0m" : s;
  }
};

/// The phase split as a bar of `width` letters: I input, H h2d, F forward,
/// B backward, O optimizer, '.' residual.
std::string phase_bar(const RankRow& r, int width, const Paint& paint) {
  const double parts[6] = {r.input_ms,    r.h2d_ms,       r.forward_ms,
                           r.backward_ms, r.optimizer_ms, r.residual_ms};
  static const char letters[6] = {'I', 'H', 'F', 'B', 'O', '.'};
  static const char* colors[6] = {"33", "35", "34", "36", "32", "2"};
  double total = 0.0;
  for (double p : parts)
    total += p;
  if (total <= 0.0) return std::string(std::size_t(width), ' ');
  // Largest-remainder rounding: the cells add up to the width exactly.
  int cells[6];
  double rest[6];
  int used = 0;
  for (int i = 0; i < 6; ++i) {
    const double exact = parts[i] / total * width;
    cells[i] = int(std::floor(exact));
    rest[i] = exact - cells[i];
    used += cells[i];
  }
  while (used < width) {
    const int i = int(std::max_element(rest, rest + 6) - rest);
    ++cells[i];
    rest[i] = -1.0;
    ++used;
  }
  std::string out;
  for (int i = 0; i < 6; ++i)
    if (cells[i] > 0) out += paint(std::string(std::size_t(cells[i]), letters[i]), colors[i]);
  return out;
}

std::string pct(double part, double whole) {
  return whole > 0.0 ? cell("{:>3.0f}%", 100.0 * part / whole) : "   -";
}

/// A rank's line: name, state, steps, last and median step, the split.
std::string rank_line(const RankRow& r, const Paint& paint, int bar_width) {
  const collector::RankLive& l = r.live;
  const std::string cond = condition_text(l);
  if (!cond.empty()) {
    // Dim for a rank that is done or between steps; red for one that stopped.
    const char* color =
        l.condition == RankCondition::Ended || l.condition == RankCondition::Idle ? "2" : "1;31";
    return paint(cond, color);
  }
  std::string line = rank_name(l);
  line.resize(std::max<std::size_t>(line.size() + 1, 9), ' ');
  line += cell("step {:>7.0f}", double(l.steps_done()));
  line += r.last_ms ? cell("  last {:>8.1f} ms", *r.last_ms) : std::string("  last        - ms");
  line += r.median_ms ? cell("  med {:>8.1f} ms", *r.median_ms) : std::string("  med        - ms");
  const double whole = r.median_ms.value_or(0.0) > 0.0 ? r.split_ms() : 0.0;
  line += "  [" + phase_bar(r, bar_width, paint) + "]";
  line += "  in " + pct(r.input_ms, whole) + "  h2d " + pct(r.h2d_ms, whole) + "  resid " +
          pct(r.residual_ms, whole);
  if (r.gpu_clock) line += paint(" gpu", "2");
  return line;
}

/// How bad a rank's state is, for choosing the rows that fit.
int severity(const RankRow& r) {
  switch (r.live.condition) {
    case RankCondition::Silent:
      return 3;
    case RankCondition::Stalled:
      return 2;
    case RankCondition::Waiting:
      return 1;
    default:
      return 0;
  }
}

}  // namespace

std::string condition_text(const collector::RankLive& r) {
  const std::string name = rank_name(r);
  const std::optional<model::LoopPhase> phase =
      r.position ? std::optional<model::LoopPhase>(r.position->phase) : std::nullopt;
  const std::int64_t step = r.current_step();
  switch (r.condition) {
    case RankCondition::Silent:
      return name + " silent " + duration_text(r.quiet_s) + " (last: " + where_text(step, phase) +
             ")";
    case RankCondition::Stalled:
      return name + " stalled " + duration_text(r.stuck_s) + " (at " + where_text(step, phase) +
             ")";
    case RankCondition::Idle:
      return name + " idle " + duration_text(r.stuck_s) + " after step " +
             std::to_string(step - 1) + ", between steps";
    case RankCondition::Waiting:
      return name + " connected, no step yet";
    case RankCondition::Ended:
      return name + " ended after step " + std::to_string(step - 1);
    case RankCondition::Running:
      break;
  }
  return {};
}

std::string waiting_text(const LiveModel& m) {
  for (const model::Stall& s : m.stalls) {
    if (s.resumed || !s.others_waiting) continue;
    std::string waiters;
    std::string phase;
    for (const RankRow& r : m.ranks) {
      const auto& l = r.live;
      if (l.global_rank == s.global_rank || l.condition != RankCondition::Stalled || !l.position ||
          !model::collective_phase(l.position->phase))
        continue;
      waiters += (waiters.empty() ? "R" : ", R") + std::to_string(l.global_rank);
      phase = model::loop_phase_name(l.position->phase);
    }
    if (!waiters.empty())
      return waiters + " wait in " + phase + ", likely for R" + std::to_string(s.global_rank);
  }
  return {};
}

std::string hang_text(const LiveModel& m) {
  const std::optional<int> hung = collector::hung_rank(m.stalls, m.ranks);
  if (!hung) return {};
  std::string text;
  for (const RankRow& r : m.ranks)
    if (r.live.global_rank == *hung) text = condition_text(r.live);
  if (const std::string waiting = waiting_text(m); !waiting.empty()) text += "; " + waiting;
  return text;
}

LiveModel build_model(const collector::LiveSnapshot& snapshot, const std::string& run_name,
                      int world_size, double elapsed_s, double now_unix) {
  LiveModel m;
  m.run_name = run_name;
  m.world_size = world_size > 0 ? world_size : snapshot.world_size.value_or(0);
  m.elapsed_s = elapsed_s;
  m.stalls = snapshot.stalls;
  m.ranks = snapshot.ranks;
  m.dropped = snapshot.records_dropped();
  if (snapshot.verdict) m.verdict = snapshot.verdict->text();
  if (now_unix > 0.0 && snapshot.taken_unix > 0.0)
    m.age_s = std::max(0.0, now_unix - snapshot.taken_unix);
  return m;
}

std::vector<std::string> render_view(const LiveModel& m, int width, int height, bool color) {
  const Paint paint{color};
  const auto w = static_cast<std::size_t>(std::max(width, 20));
  std::vector<std::string> head;
  head.push_back(
      paint("traceml live", "1") + "  " + model::escape_for_terminal(m.run_name, true) + "  " +
      std::to_string(m.ranks.size()) + "/" + std::to_string(m.world_size) + " ranks  " +
      clock_text(m.elapsed_s) +
      (m.dropped > 0 ? paint("  dropped " + std::to_string(m.dropped), "33") : "") +
      (m.age_s > kStaleAfterS ? paint("  values " + duration_text(m.age_s) + " old", "33") : ""));
  const std::string verdict = m.verdict.empty() ? std::string("waiting for steps")
                                                : model::escape_for_terminal(m.verdict, true);
  // A rank that hangs now is the headline (DECISIONS 15), whom the others
  // wait for with it; the verdict follows as what the steps showed before.
  const std::string hang = hang_text(m);
  if (!hang.empty()) {
    head.push_back(paint("HANG: " + hang, "1;31"));
    head.push_back(paint("before the hang: ", "1") + verdict);
  } else {
    head.push_back(paint("verdict so far: ", "1") + verdict);
  }
  std::vector<std::string> tail;
  if (const std::string waiting = waiting_text(m); !waiting.empty() && hang.empty())
    tail.push_back(paint(waiting, "1;31"));
  std::size_t ongoing = 0;
  for (const RankRow& r : m.ranks)
    if (severity(r) >= 2) ++ongoing;
  tail.push_back(paint("stalls: " + std::to_string(m.stalls.size()) +
                           (ongoing > 0 ? " (" + std::to_string(ongoing) + " now)" : "") +
                           "   bar: I input  H h2d  F fwd  B bwd  O opt  . residual   Ctrl-C "
                           "stops the run",
                       "2"));
  // Rows that fit; the worst first when they do not all fit.
  const int room = std::max(1, height - int(head.size() + tail.size()));
  std::vector<const RankRow*> rows;
  for (const RankRow& r : m.ranks)
    rows.push_back(&r);
  std::size_t hidden = 0;
  if (int(rows.size()) > room) {
    std::stable_sort(rows.begin(), rows.end(), [](const RankRow* a, const RankRow* b) {
      if (severity(*a) != severity(*b)) return severity(*a) > severity(*b);
      return a->median_ms.value_or(0.0) > b->median_ms.value_or(0.0);
    });
    const auto shown = static_cast<std::size_t>(std::max(0, room - 1));
    hidden = rows.size() - shown;
    rows.resize(shown);
    std::sort(rows.begin(), rows.end(), [](const RankRow* a, const RankRow* b) {
      return a->live.global_rank < b->live.global_rank;
    });
  }
  // The bar takes what the line leaves, between 10 and 30 cells.
  const int bar = std::clamp(int(w) - 88, 10, 30);
  std::vector<std::string> out = head;
  for (const RankRow* r : rows)
    out.push_back(rank_line(*r, paint, bar));
  if (hidden > 0)
    out.push_back(
        paint("  ... " + std::to_string(hidden) + " more ranks (the slowest shown)", "2"));
  out.insert(out.end(), tail.begin(), tail.end());
  for (std::string& line : out)
    line = fit_line(line, w);
  return out;
}

std::string progress_line(const LiveModel& m) {
  std::int64_t lo = -1;
  std::int64_t hi = 0;
  std::vector<double> medians;
  for (const RankRow& r : m.ranks) {
    const std::int64_t s = r.live.max_step;
    lo = lo < 0 ? s : std::min(lo, s);
    hi = std::max(hi, s);
    if (r.median_ms) medians.push_back(*r.median_ms);
  }
  std::string line = "traceml: " + clock_text(m.elapsed_s) + "  " + std::to_string(m.ranks.size()) +
                     "/" + std::to_string(m.world_size) + " ranks  steps ";
  line += lo == hi ? std::to_string(hi) : std::to_string(lo) + "-" + std::to_string(hi);
  if (!medians.empty()) {
    const auto [mn, mx] = std::minmax_element(medians.begin(), medians.end());
    line += *mn == *mx ? cell("  step {:.1f} ms", *mn)
                       : cell("  step {:.1f}", *mn) + cell("-{:.1f} ms", *mx);
  }
  const std::string verdict = m.verdict.empty() ? std::string("waiting for steps")
                                                : model::escape_for_terminal(m.verdict, true);
  const std::string hang = hang_text(m);
  const std::optional<int> hung =
      hang.empty() ? std::nullopt : collector::hung_rank(m.stalls, m.ranks);
  if (hung)
    line += "  HANG: " + hang + "  before the hang: " + verdict;
  else
    line += "  verdict so far: " + verdict;
  std::vector<std::string> stopped;
  for (const RankRow& r : m.ranks) {
    if (hung && r.live.global_rank == *hung) continue;  // said first
    const std::string c = condition_text(r.live);
    if (r.live.condition == RankCondition::Silent || r.live.condition == RankCondition::Stalled)
      stopped.push_back(c);
  }
  if (!stopped.empty()) {
    line += "  |";
    for (const std::string& s : stopped)
      line += " " + s + ";";
    line.pop_back();
  }
  if (const std::string waiting = waiting_text(m); !waiting.empty() && !hung)
    line += "; " + waiting;
  if (m.dropped > 0) line += "  dropped " + std::to_string(m.dropped);
  if (m.age_s > kStaleAfterS) line += "  values " + duration_text(m.age_s) + " old";
  return line;
}

}  // namespace traceml::live
