// The Step Memory section (spec §4.4, §5.4): per-step allocator peaks of every
// rank, aligned on the steps all ranks reported, diagnosed for device pressure,
// cross-rank imbalance and creep. analyze_step_memory (summary.hpp) returns the
// section; this header also exposes the primary diagnosis behind it, whose
// confidence and note only reach the JSON for a neutral state.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "analysis/section.hpp"
#include "analysis/summary.hpp"
#include "model/telemetry.hpp"

namespace traceml::analysis {

/// TraceML's StepMemoryDiagnosis: the first issue, or a neutral state
/// (NO_GPU, NO_DATA, BALANCED) when no rule fired.
struct StepMemoryPrimary {
  DiagnosisKind kind = DiagnosisKind::NoData;  ///< its status is status_of(kind)
  Severity severity = Severity::Info;
  std::string reason;
  std::string action;
  std::string metric;  ///< "peak_allocated" | "peak_reserved"
  std::int64_t steps_used = 0;
  std::optional<int> worst_rank;
  std::optional<std::string> note;  ///< the creep note, for creep kinds
  double confidence = 0.0;
};

struct StepMemoryAnalysis {
  StepMemoryPrimary primary;
  Section section;  ///< what analyze_step_memory returns
};

/// The whole Step Memory analysis; analyze_step_memory(t, o) is its `.section`.
StepMemoryAnalysis step_memory_analysis(const model::Telemetry& t, const Options& o);

}  // namespace traceml::analysis
