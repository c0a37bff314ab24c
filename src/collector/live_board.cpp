#include "collector/live_board.hpp"

#include <algorithm>

namespace traceml::collector {

namespace {

double seconds(LiveClock::duration d) {
  return std::chrono::duration<double>(d).count();
}

bool stopped(RankCondition c) {
  return c == RankCondition::Stalled || c == RankCondition::Silent;
}

}  // namespace

const char* condition_name(RankCondition c) {
  switch (c) {
    case RankCondition::Waiting:
      return "waiting";
    case RankCondition::Running:
      return "running";
    case RankCondition::Idle:
      return "idle";
    case RankCondition::Stalled:
      return "stalled";
    case RankCondition::Silent:
      return "silent";
    case RankCondition::Ended:
      return "ended";
  }
  return "unknown";
}

LiveBoard::LiveBoard(StallRules rules, double started_unix)
    : rules_(rules), started_(LiveClock::now()), started_unix_(started_unix) {}

LiveBoard::Rank& LiveBoard::rank(int r) {
  const auto i = static_cast<std::size_t>(r);
  if (i >= ranks_.size()) {
    const std::size_t old = ranks_.size();
    ranks_.resize(i + 1);
    for (std::size_t k = old; k < ranks_.size(); ++k)
      ranks_[k].live.global_rank = static_cast<int>(k);
  }
  return ranks_[i];
}

double LiveBoard::unix_at(LiveClock::time_point t) const {
  return started_unix_ + seconds(t - started_);
}

void LiveBoard::connected(int r, std::optional<int> node_rank, LiveClock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  Rank& k = rank(r);
  if (k.last_heard == LiveClock::time_point{}) k.step_advanced = now;
  ++k.open;
  k.last_heard = now;
  k.live.node_rank = node_rank;
}

void LiveBoard::heard(int r, std::int64_t max_step, LiveClock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  Rank& k = rank(r);
  k.last_heard = now;
  if (max_step > k.live.max_step) {
    k.live.max_step = max_step;
    k.step_advanced = now;
  }
}

void LiveBoard::heartbeat(const model::RankPosition& p, LiveClock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  Rank& k = rank(p.global_rank);
  k.last_heard = now;
  // Steps past --trace-max-steps send no record: the heartbeat's count
  // still shows them advancing.
  if (p.steps_done > k.live.steps_done()) k.step_advanced = now;
  k.live.position = p;
}

void LiveBoard::tracer_drops(int r, std::int64_t dropped) {
  std::lock_guard<std::mutex> lk(mu_);
  rank(r).live.records_dropped = dropped;
}

void LiveBoard::closed(int r, LiveClock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  Rank& k = rank(r);
  k.open = std::max(0, k.open - 1);
  if (k.open == 0) settle(k, classify(k, now), now);
}

void LiveBoard::set_median_steps(const std::vector<std::pair<int, double>>& median_s) {
  std::lock_guard<std::mutex> lk(mu_);
  for (const auto& [r, m] : median_s)
    if (r >= 0 && m > 0.0) rank(r).median_step_s = m;
}

RankCondition LiveBoard::classify(Rank& k, LiveClock::time_point now) {
  RankLive& l = k.live;
  if (k.last_heard == LiveClock::time_point{}) return l.condition;  // never connected
  l.quiet_s = seconds(now - k.last_heard);
  l.stuck_s = seconds(now - k.step_advanced);
  const double floor = kSilentIntervals * rules_.interval_s;
  if (k.open == 0) return RankCondition::Ended;
  if (l.quiet_s > floor) return RankCondition::Silent;
  if (k.median_step_s && (!l.position || l.position->recording) &&
      l.stuck_s > std::max(floor, rules_.step_multiple * *k.median_step_s)) {
    // Between steps the program does what it likes (an evaluation pass, a
    // checkpoint, the work after its last step): that is no stall unless
    // another rank waits for it (DECISIONS 15), which update_locked decides.
    if (l.position && l.position->phase == model::LoopPhase::Outside) return RankCondition::Idle;
    return RankCondition::Stalled;
  }
  if (l.max_step == 0 && (!l.position || l.position->steps_done == 0))
    return RankCondition::Waiting;
  return RankCondition::Running;
}

void LiveBoard::settle(Rank& k, RankCondition next, LiveClock::time_point now) {
  if (k.last_heard == LiveClock::time_point{}) return;  // never connected
  RankLive& l = k.live;
  l.condition = next;

  if (stopped(next)) {
    if (!k.stall) {
      if (stalls_.size() >= kMaxStalls) {
        // Counted once a stall, however often the rank is classified.
        if (!k.stall_uncounted) ++stalls_dropped_;
        k.stall_uncounted = true;
        return;
      }
      model::Stall s;
      s.global_rank = l.global_rank;
      s.step = l.current_step();
      if (l.position) s.phase = l.position->phase;
      // From the moment it stopped, not from when the rule noticed it.
      s.start = unix_at(next == RankCondition::Silent ? k.last_heard : k.step_advanced);
      k.stall = stalls_.size();
      stalls_.push_back(s);
    }
    model::Stall& s = stalls_[*k.stall];
    if (next == RankCondition::Silent)
      s.kind = "silent";  // the worse of the two
    else if (s.kind.empty())
      s.kind = "stalled";
    s.duration_s = std::max(0.0, unix_at(now) - s.start);
  } else if (k.stall_uncounted) {
    k.stall_uncounted = false;
  } else if (k.stall) {
    model::Stall& s = stalls_[*k.stall];
    if (next == RankCondition::Ended) {
      // It never resumed: the stall lasted until the rank's end.
      s.duration_s = std::max(0.0, unix_at(now) - s.start);
    } else {
      // It resumed when it was heard from (or advanced) again.
      const auto back = std::min(now, std::max(k.last_heard, k.step_advanced));
      s.duration_s = std::max(0.0, unix_at(back) - s.start);
      s.resumed = true;
    }
    k.stall.reset();
  }
}

std::vector<RankLive> LiveBoard::update(LiveClock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  return update_locked(now);
}

LiveBoard::Snapshot LiveBoard::snapshot(LiveClock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  Snapshot s;
  s.ranks = update_locked(now);
  s.stalls = stalls_;
  return s;
}

std::vector<RankLive> LiveBoard::update_locked(LiveClock::time_point now) {
  std::vector<RankCondition> next;
  next.reserve(ranks_.size());
  bool someone_waits = false;  // a rank stuck in a collective phase
  for (Rank& k : ranks_) {
    next.push_back(classify(k, now));
    someone_waits = someone_waits || (next.back() == RankCondition::Stalled && k.live.position &&
                                      model::collective_phase(k.live.position->phase));
  }
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    // A rank between steps is stalled when the others wait in a collective
    // (it is likely the one they wait for); a stall once open goes on until
    // the rank advances or ends, whoever still waits.
    if (next[i] == RankCondition::Idle && (someone_waits || ranks_[i].stall))
      next[i] = RankCondition::Stalled;
    settle(ranks_[i], next[i], now);
  }
  // Who the others wait for: ranks stuck in a collective phase while exactly
  // one stopped rank is elsewhere (silent, in another phase, or behind).
  std::vector<std::size_t> waiting;
  std::vector<std::size_t> culprits;
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    const RankLive& l = ranks_[i].live;
    if (!stopped(l.condition)) continue;
    const bool in_collective = l.condition == RankCondition::Stalled && l.position &&
                               model::collective_phase(l.position->phase);
    (in_collective ? waiting : culprits).push_back(i);
  }
  if (culprits.size() == 1 && !waiting.empty()) {
    Rank& k = ranks_[culprits.front()];
    if (k.stall) stalls_[*k.stall].others_waiting = static_cast<int>(waiting.size());
  }
  std::vector<RankLive> out;
  out.reserve(ranks_.size());
  for (const Rank& k : ranks_)
    if (k.last_heard != LiveClock::time_point{}) out.push_back(k.live);
  return out;
}

std::vector<model::Stall> LiveBoard::stalls(LiveClock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  update_locked(now);
  return stalls_;
}

std::int64_t LiveBoard::stalls_dropped() {
  std::lock_guard<std::mutex> lk(mu_);
  return stalls_dropped_;
}

}  // namespace traceml::collector
