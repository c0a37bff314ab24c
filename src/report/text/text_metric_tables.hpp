// The metric tables of the text report: STEP MEMORY, SYSTEM METRICS and
// PROCESS METRICS (status line, Evidence, and a label / median / worst table
// whose worst cells name the node or rank).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "report/summary_view.hpp"
#include "report/text/text_layout.hpp"

namespace traceml::report {

/// `wrap_width`: the summary's width (narrow beside STEP TIMING, full alone).
std::vector<std::string> step_memory_block(const SummaryView& run, const Painter& p,
                                           std::size_t wrap_width);

/// A block whose head (title, Evidence, blank) can be padded to its
/// neighbour's height, so that both tables start on the same row.
struct Block {
  std::vector<std::string> head;   ///< title, Evidence, blank
  std::vector<std::string> table;  ///< header + rows
};

/// `wrap_width`: the Evidence line's width (narrow beside PROCESS, full alone).
Block system_block(const SummaryView& run, const Painter& p, std::size_t wrap_width);
Block process_block(const SummaryView& run, const Painter& p, std::size_t wrap_width);

std::vector<std::string> flatten(const Block& b);

}  // namespace traceml::report
