// Step alignment shared by Step Time and Step Memory (spec §4.1.2, §4.4
// "Inputs"): each rank's records by step, a resent step replacing the earlier
// one, only its latest steps kept, and the steps every rank reported. Both
// sections compare ranks on the same steps; one engine keeps them agreeing on
// which steps those are.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace traceml::analysis {

/// One usable record of a rank: its step, and its index in the record vector
/// it came from (Telemetry::steps, Telemetry::step_memory).
struct StepRow {
  std::int64_t step = 0;
  std::size_t row = 0;
};

/// Sorts one rank's rows by step, keeping arrival order among equal steps,
/// then keeps only the last arrival of each step (a resent step replaces the
/// earlier one).
void sort_and_dedupe(std::vector<StepRow>& rows);

/// How many distinct steps the ranks' lists (sorted and deduplicated, none
/// empty, at least one) hold in all.
std::int64_t distinct_steps(const std::vector<std::vector<StepRow>>& ranks);

/// Where a list of `n` rows starts when only its latest `keep` count (all of
/// them when `keep` < 0).
std::size_t latest_start(std::size_t n, std::int64_t keep);

/// The steps of `ranks[order[0]]` that every `ranks[order[k]]` also holds,
/// ascending, counting only the rows of list k from `first[k]` on. `order`
/// lists every rank once; the first seeds the intersection.
std::vector<std::int64_t> common_steps(const std::vector<std::vector<StepRow>>& ranks,
                                       const std::vector<std::size_t>& first,
                                       const std::vector<std::size_t>& order);

/// Keeps the latest `n` of ascending `steps`.
void keep_latest(std::vector<std::int64_t>& steps, std::size_t n);

}  // namespace traceml::analysis
