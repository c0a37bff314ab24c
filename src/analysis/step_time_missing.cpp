// A signal counts as missing only when a rule could not decide without it:
// every rank reporting nothing about a phase is not an error by itself.
#include "analysis/step_time_missing.hpp"

#include <array>
#include <set>

#include "analysis/diagnosis_kind.hpp"

namespace traceml::analysis::step_time {

Missing missing_signals(const StepWindow& w, const Context& c,
                        const std::optional<Straggler>& straggler) {
  Missing out;
  const std::size_t ranks = w.expected_ranks;
  if (ranks == 0) return out;
  const std::array<SM, 5> order = {SM::InputWait, SM::Forward, SM::Backward, SM::OptimizerStep,
                                   SM::TracedStepTime};
  std::set<SM> needed;
  auto need_all = [&] { needed.insert(order.begin(), order.end()); };
  if (w.facts.size() < ranks) need_all();
  if (!c.input_share) needed.insert({SM::InputWait, SM::TracedStepTime});
  if (!c.compute_share || !c.residual_share) need_all();
  if (ranks > 1 && !straggler && c.straggler_cohort.size() < 2) {
    needed.insert({SM::Backward, SM::InputWait, SM::TracedStepTime});
    if (w.strategy == model::Strategy::Fsdp) needed.insert(SM::Forward);
  }
  for (SM m : order) {
    if (!needed.count(m)) continue;
    std::size_t count = 0;
    for (const auto& f : w.facts)
      count += f[m].has_value() ? 1 : 0;
    if (count < ranks) {
      out.names.emplace_back(step_metric_name(m));
      out.coverage[step_metric_name(m)] = std::to_string(count) + "/" + std::to_string(ranks);
    }
  }
  return out;
}

Issue incomplete_data_issue(const Missing& miss) {
  std::string names;
  for (const auto& n : miss.names)
    names += (names.empty() ? "" : ", ") + n;
  Issue i = issue_of(
      K::IncompleteData, Severity::Info,
      "Missing timing signals prevent a reliable diagnosis: " + names + ".",
      "Instrument the missing phases (auto mode or the matching wrap_* helpers) to restore "
      "coverage.");
  i.evidence = Json{{ev::kMissingSignals, miss.names}, {ev::kSignalCoverage, miss.coverage}};
  return i;
}

}  // namespace traceml::analysis::step_time
