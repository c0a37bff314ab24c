// What ranks that ended left, for the collector (collector_impl.hpp): the
// black boxes of this node's ranks, read only where telemetry may be
// missing, and other nodes' relays of theirs; the steps the connections did
// not bring are handed on like received records, each once.
#include "collector/collector_impl.hpp"

namespace traceml::collector {

std::optional<std::string> Collector::Impl::relay_frame(Connection& c,
                                                        const transport::Frame& frame) {
  if (frame.type == transport::FrameType::Bye) {
    c.said_bye = true;
    return std::nullopt;
  }
  if (frame.type == transport::FrameType::Hello)
    return std::string("a second Hello on one connection");
  if (++c.relayed_records > kMaxRelayedPerRank * c.relay_ranks)
    return "a relay hands over at most " + std::to_string(kMaxRelayedPerRank) +
           " records per rank of its node";
  auto record = transport::decode(frame);
  if (!record)
    return std::string("malformed ") + transport::frame_type_name(frame.type) + " payload";
  return std::visit([&](auto& r) { return relay_take(c, std::move(r)); }, *record);
}

template <typename R>
std::optional<std::string> Collector::Impl::relay_take(Connection& c, R&& r) {
  using T = std::decay_t<R>;
  if constexpr (!std::is_same_v<T, model::StepRecord> &&
                !std::is_same_v<T, model::StepMemoryRecord> && !std::is_same_v<T, model::RankEnd>) {
    return std::string("a frame relays do not send: ") + model::row_of<T>().name;
  } else {
    for_each_text(r, [this](std::string& text) { repair(text); });
    if (r.global_rank < c.rank || r.global_rank >= c.rank + c.relay_ranks || model::check(r))
      return invalid();
    store::BlackBoxReading& box = c.relayed[r.global_rank];
    box.global_rank = r.global_rank;
    if constexpr (std::is_same_v<T, model::StepRecord>) {
      box.steps.push_back(std::move(r));
    } else if constexpr (std::is_same_v<T, model::StepMemoryRecord>) {
      box.memory.push_back(std::move(r));
    } else {
      box.attached = r.steps_completed.has_value();
      box.steps_done = r.steps_completed.value_or(0);
      box.phase = static_cast<model::LoopPhase>(r.phase.value_or(0));
      box.stream = model::stream_from_hex(r.stream).value_or(0);
      box.exited_cleanly = r.exit_code == 0 && !r.signal;
      c.rank_ends[r.global_rank] = std::move(r);
    }
    return std::nullopt;
  }
}

void Collector::Impl::relay_closed(Connection& c) {
  std::lock_guard<std::mutex> lk(recovered_mu);
  for (auto& [rank, box] : c.relayed)
    recovered.push_back(std::move(box));
  for (auto& [rank, end] : c.rank_ends)
    rank_ends[rank] = std::move(end);
  if (c.said_bye) nodes_relayed.insert(*c.node_rank);
}

std::vector<int> Collector::Impl::nodes_unrelayed() {
  std::vector<int> out;
  std::lock_guard<std::mutex> lk(recovered_mu);
  for (int node = 1; node < options.nnodes; ++node)
    if (nodes_relayed.count(node) == 0) out.push_back(node);
  return out;
}

bool Collector::Impl::all_arrived(int rank) {
  std::lock_guard<std::mutex> lk(state_mu);
  const auto it = ranks.find(rank);
  return it != ranks.end() && it->second.clean_end && it->second.tracer &&
         it->second.tracer->records_dropped == 0;
}

void Collector::Impl::take_recovered(CollectionReport& rep) {
  std::vector<store::BlackBoxReading> readings;
  {
    std::lock_guard<std::mutex> lk(recovered_mu);
    readings.swap(recovered);
  }
  for (store::BlackBoxReading& box : readings) {
    const int rank = box.global_rank;
    // The box of another process than the one the collector heard last
    // (a rank started again) is not compared with it: not taken.
    const auto stream = seen_stream.find(rank);
    const bool other_process =
        stream != seen_stream.end() && stream->second != 0 && box.stream != stream->second;
    // Its steps, read now that they may be needed: for a rank that did not
    // exit cleanly (its position is taken from every step it journaled),
    // and for one whose telemetry may be missing; not for a rank that said
    // goodbye having dropped nothing (all it recorded arrived).
    if (box.source && (!box.exited_cleanly || (!other_process && !all_arrived(rank)))) {
      const bool cleanly = box.exited_cleanly;
      box = box.source->read();
      box.exited_cleanly = cleanly;
    }
    if (box.attached && !box.exited_cleanly) {
      // Where the rank was when it ended: the step after its last
      // completed one, in the phase its training thread last entered. A
      // rank that exited 0 ended where its program meant to: a silence
      // before is its telemetry's, and its end is no hang's position.
      std::lock_guard<std::mutex> lk(state_mu);
      box_positions[rank] = {box.steps_completed() + 1, box.phase};
    }
    if (other_process || box.source) continue;
    SeenSteps& have = seen[rank];
    std::int64_t taken = 0;
    std::set<std::int64_t> steps;
    for (model::StepRecord& s : box.steps) {
      if (have.has(s.step) || model::check(s)) continue;
      have.mark(s.step);
      steps.insert(s.step);
      pending.emplace_back(std::move(s));
      ++taken;
    }
    for (model::StepMemoryRecord& m : box.memory)
      if (steps.count(m.step) != 0 && !model::check(m)) pending.emplace_back(std::move(m));
    if (taken == 0) continue;
    rep.steps_recovered[rank] = taken;
    {
      // A rank that never connected has no delivery to add them to.
      std::lock_guard<std::mutex> lk(state_mu);
      if (const auto it = ranks.find(rank); it != ranks.end())
        it->second.records_received += std::int64_t(pending.size());
    }
    hand_on();
  }
}

}  // namespace traceml::collector
