// The STEP TIMING block of the text report: the phase tree of one real rank
// (the representative rank of a multi-rank run), the worst-rank cells, the
// culprit marker and the GPU activity lines under the tree.
#pragma once

#include <string>
#include <vector>

#include "report/summary_view.hpp"
#include "report/text/text_layout.hpp"
#include "report/text/text_verdict.hpp"

namespace traceml::report {

std::vector<std::string> step_timing_block(const SummaryView& run, const Verdict& verdict,
                                           const Painter& p);

}  // namespace traceml::report
