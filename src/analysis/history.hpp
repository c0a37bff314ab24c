// What of a run's records the analysis can read, for a store that keeps a run
// bounded while it arrives (collector::RunState): which records are rows, and
// how many of each rank's latest steps the alignment looks at. Rows outside
// that history change no section, as long as the run's totals
// (model::RunTotals) are kept with the records.
#pragma once

#include <cstdint>

#include "model/telemetry.hpp"

namespace traceml::analysis {

/// A step record Step Time reads: one with at least one event.
bool is_step_row(const model::StepRecord& r);

/// A step-memory record Step Memory reads: one with both peaks.
bool is_step_memory_row(const model::StepMemoryRecord& r);

/// How many of a rank's latest distinct steps Step Time aligns (window >= 1).
std::int64_t step_history(std::int64_t window);

/// How many of a rank's latest distinct steps Step Memory aligns (window >= 1).
std::int64_t step_memory_history(std::int64_t window);

}  // namespace traceml::analysis
