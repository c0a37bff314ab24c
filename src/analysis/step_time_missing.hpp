// Step Time's missing signals (spec §4.1.13): the timing signals some
// expected rank never measured, when the rules needed them, and the
// INCOMPLETE_DATA issue that names them. Private to the analysis module.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "analysis/section.hpp"
#include "analysis/step_time_context.hpp"
#include "analysis/step_time_straggler.hpp"

namespace traceml::analysis::step_time {

/// Spec §4.1.13: which timing signals some rank never measured.
struct Missing {
  std::vector<std::string> names;
  Json coverage = Json::object();
};

/// The signals a rule needed that fewer than every expected rank measured,
/// in the order of spec §4.1.13, with their "measured/expected" coverage.
Missing missing_signals(const StepWindow& w, const Context& c,
                        const std::optional<Straggler>& straggler);

/// INCOMPLETE_DATA naming `miss` (non-empty); its evidence the names and
/// their coverage, its ranks left to the caller.
Issue incomplete_data_issue(const Missing& miss);

}  // namespace traceml::analysis::step_time
