#include "collector/profile_requests.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "analysis/order_statistics.hpp"
#include "model/limits.hpp"

namespace traceml::collector {
namespace {

/// A rank whose newest step is this far behind the newest of any rank has
/// ended or hangs: it is not judged.
constexpr std::int64_t kJudgedLag = 100;

/// One step of a rank as `auto` judges it.
struct Judged {
  std::int64_t step = 0;
  double ms = 0.0;   ///< the step the user sees: traced time and input wait
  double own = 0.0;  ///< the same less the backward pass
};

bool profiled(const model::Telemetry& t, int rank, std::int64_t step) {
  for (const model::ProfiledSteps& p : t.profiled_steps)
    if (p.global_rank == rank && step >= p.first_step && step <= p.last_step) return true;
  return false;
}

std::map<int, std::vector<Judged>> judged_steps(const model::Telemetry& t) {
  std::map<int, std::vector<Judged>> out;
  const auto traced = static_cast<std::size_t>(model::Event::TracedStepTime);
  const auto input = static_cast<std::size_t>(model::Event::InputWait);
  const auto backward = static_cast<std::size_t>(model::Event::Backward);
  for (const auto& c : t.steps.chunks()) {
    for (std::size_t i = 0; i < c->size(); ++i) {
      const unsigned mask = c->cpu_mask(i);
      if (((mask >> traced) & 1u) == 0 || profiled(t, c->rank(i), c->step(i))) continue;
      double ms = c->cpu(i, traced);
      if (!std::isfinite(ms)) continue;
      if (((mask >> input) & 1u) != 0 && std::isfinite(c->cpu(i, input)) && c->cpu(i, input) > 0.0)
        ms += c->cpu(i, input);
      double own = ms;
      if (((mask >> backward) & 1u) != 0 && std::isfinite(c->cpu(i, backward)))
        own -= std::max(0.0, c->cpu(i, backward));
      out[c->rank(i)].push_back({c->step(i), ms, own});
    }
  }
  for (auto& [rank, steps] : out)
    std::sort(steps.begin(), steps.end(),
              [](const Judged& a, const Judged& b) { return a.step < b.step; });
  return out;
}

template <typename F>
double median_over(const std::vector<Judged>& v, std::size_t from, std::size_t to, F&& value) {
  std::vector<double> x;
  x.reserve(to - from);
  for (std::size_t i = from; i < to; ++i)
    x.push_back(value(v[i]));
  return analysis::median_of(x);
}

std::string ms_text(double ms) {
  char buf[32];
  std::snprintf(buf, sizeof buf, ms >= 100.0 ? "%.0f ms" : "%.1f ms", ms);
  return buf;
}

}  // namespace

std::vector<SlowTurn> slow_turns(const model::Telemetry& latest, std::size_t* judged) {
  std::vector<SlowTurn> out;
  const std::map<int, std::vector<Judged>> all = judged_steps(latest);
  // A rank that ended (or hangs) long ago is not judged: its newest step
  // is far behind the others'.
  std::int64_t newest = 0;
  for (const auto& [rank, steps] : all)
    newest = std::max(newest, steps.back().step);  // no empty list in `all`
  if (judged != nullptr) *judged = 0;
  for (const auto& [rank, steps] : all) {
    if (steps.size() < kAutoRecentSteps + kAutoBaselineSteps ||
        steps.back().step < newest - kJudgedLag)
      continue;
    if (judged != nullptr) ++*judged;
    const std::size_t cut = steps.size() - kAutoRecentSteps;
    const auto step_ms = [](const Judged& j) { return j.ms; };
    const auto own_ms = [](const Judged& j) { return j.own; };
    const double base = median_over(steps, 0, cut, step_ms);
    const double recent = median_over(steps, cut, steps.size(), step_ms);
    if (!(recent >= base * (1.0 + kAutoSlower) && recent - base >= kAutoMinRiseMs)) continue;
    SlowTurn t;
    t.rank = rank;
    t.step = steps.back().step;
    t.base_ms = base;
    t.recent_ms = recent;
    t.own_rise_ms =
        median_over(steps, cut, steps.size(), own_ms) - median_over(steps, 0, cut, own_ms);
    out.push_back(t);
  }
  return out;
}

std::vector<SlowTurn> causes(std::vector<SlowTurn> turns, std::size_t judged) {
  const auto rise = [](const SlowTurn& t) { return t.recent_ms - t.base_ms; };
  std::stable_sort(turns.begin(), turns.end(),
                   [&](const SlowTurn& a, const SlowTurn& b) { return rise(a) > rise(b); });
  std::vector<SlowTurn> out;
  for (const SlowTurn& t : turns)
    if (t.own_rise_ms >= 0.5 * rise(t) && out.size() < kAutoPerCheck) out.push_back(t);
  if (out.empty() && !turns.empty() && turns.size() >= judged) out.push_back(turns.front());
  return out;
}

std::optional<ProfileAsk> ProfileRequests::ready(int rank, std::uint64_t connection) {
  std::lock_guard<std::mutex> lk(mu_);
  ready_[rank] = connection;
  if (!asking_.steps || asked_steps_.count(rank) != 0) return std::nullopt;
  if (!asking_.ranks.empty() &&
      std::find(asking_.ranks.begin(), asking_.ranks.end(), rank) == asking_.ranks.end())
    return std::nullopt;
  asked_steps_[rank] = connection;
  ProfileAsk a;
  a.connection = connection;
  a.request.global_rank = rank;
  a.request.first_step = asking_.steps->first;
  a.request.steps = asking_.steps->second - asking_.steps->first + 1;
  return a;
}

void ProfileRequests::closed(int rank, std::uint64_t connection) {
  std::lock_guard<std::mutex> lk(mu_);
  const auto it = ready_.find(rank);
  if (it != ready_.end() && it->second == connection) ready_.erase(it);
  // Serve's request may have been lost with it: asked again on the next
  // (a rank that armed those steps already takes them again as armed).
  const auto asked = asked_steps_.find(rank);
  if (asked != asked_steps_.end() && asked->second == connection) asked_steps_.erase(asked);
}

bool ProfileRequests::may_ask(int rank, double now_s) const {
  if (auto_asked_ >= kAutoRunCap || ready_.count(rank) == 0) return false;
  const auto last = last_auto_.find(rank);
  return last == last_auto_.end() || now_s - last->second >= kAutoRankGapS;
}

ProfileAsk ProfileRequests::ask(int rank, double now_s, std::int64_t after_step,
                                std::string reason) {
  ++auto_asked_;
  last_auto_[rank] = now_s;
  ProfileAsk a;
  a.connection = ready_[rank];
  a.request.global_rank = rank;
  a.request.first_step = 0;  // its next steps
  a.request.steps = std::min(asking_.auto_steps, model::kMaxProfileSteps);
  pending_[rank] = Pending{std::move(reason), after_step, a.request.steps};
  return a;
}

std::vector<ProfileAsk> ProfileRequests::check(const model::Telemetry& latest,
                                               const std::vector<model::Stall>& stalls,
                                               double now_s) {
  std::vector<ProfileAsk> out;
  if (!automatic()) return out;
  // Outside the lock: the rows are the caller's copy.
  std::size_t judged = 0;
  std::vector<SlowTurn> turns = slow_turns(latest, &judged);
  const std::vector<SlowTurn> slow = causes(std::move(turns), judged);
  std::lock_guard<std::mutex> lk(mu_);
  for (const SlowTurn& t : slow) {
    if (!may_ask(t.rank, now_s)) continue;
    out.push_back(ask(t.rank, now_s, t.step,
                      "its steps turned slow: a median of " + ms_text(t.recent_ms) +
                          " over steps " +
                          std::to_string(t.step - std::int64_t(kAutoRecentSteps) + 1) + " to " +
                          std::to_string(t.step) + " against " + ms_text(t.base_ms) + " before"));
  }
  for (const model::Stall& s : stalls) {
    // A stall is acted on once: asked, or passed over for the rank's gap or
    // the run's cap; a rank not ready yet (reconnecting), or a full check,
    // leaves it for the next check.
    if (!s.resumed || stalls_seen_.count({s.global_rank, s.start}) != 0) continue;
    if (out.size() >= kAutoPerCheck || ready_.count(s.global_rank) == 0) continue;
    stalls_seen_.insert({s.global_rank, s.start});
    if (!may_ask(s.global_rank, now_s)) continue;
    char secs[32];
    std::snprintf(secs, sizeof secs, "%.1f s", s.duration_s);
    out.push_back(ask(
        s.global_rank, now_s, std::max<std::int64_t>(0, s.step - 1),
        "it resumed after a stall of " + std::string(secs) + " in step " + std::to_string(s.step)));
  }
  return out;
}

std::string ProfileRequests::profile_came(int rank, std::int64_t first, std::int64_t last) {
  std::lock_guard<std::mutex> lk(mu_);
  if (asking_.steps && first == asking_.steps->first && last == asking_.steps->second)
    if (const auto asked = asked_steps_.find(rank); asked != asked_steps_.end())
      asked->second = 0;  // answered: not asked again
  const auto it = pending_.find(rank);
  if (it == pending_.end() || first <= it->second.after_step ||
      last - first + 1 != it->second.steps)
    return {};
  std::string reason = std::move(it->second.reason);
  pending_.erase(it);
  return reason;
}

int ProfileRequests::auto_asked() {
  std::lock_guard<std::mutex> lk(mu_);
  return auto_asked_;
}

}  // namespace traceml::collector
