// The diagnosis vocabulary: every kind the analysis can produce, with its
// JSON name, its status and the headline a renderer shows for it, in one
// table (diagnosis_kind.cpp), plus the evidence keys the analysis writes and
// renderers read. Kinds travel as strings in final_summary.json; renderers
// read them back with kind_from_name and ask the predicates here instead of
// keeping their own lists, so a new kind is one table row.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace traceml::analysis {

enum class DiagnosisKind : std::uint8_t {
  // Neutral states shared by several sections.
  NoData,
  Balanced,
  Normal,
  // Step Time (spec §4.1).
  Warmup,
  IncompleteData,
  InputStraggler,
  H2dStraggler,
  ComputeStraggler,
  Straggler,
  InputBound,
  H2dBound,
  ResidualHeavy,
  ComputeBound,
  // System (spec §4.2).
  VeryHighGpuMemory,
  HighGpuTemperature,
  HighGpuMemory,
  HighGpuPower,
  HighHostMemory,
  HighCpu,
  LowGpuUtilization,
  ModerateGpuUtilization,
  // Process (spec §4.3).
  VeryHighProcessGpuMemory,
  HighProcessGpuMemory,
  GpuMemoryReservedOverhang,
  RankGpuMemoryImbalance,
  HighProcessRss,
  HighProcessCpu,
  // Step Memory (spec §4.4).
  NoGpu,
  HighPressure,
  Imbalance,
  CreepConfirmed,
  CreepEarly,
  // The run-level primary diagnosis (spec §4.5).
  InsufficientStepTimeData,
  LowGpuUtilizationUnexplained,
  NoClearPerformanceBottleneck,
};
inline constexpr std::size_t kDiagnosisKindCount = 35;

/// The stable machine key written as `kind` ("INPUT_BOUND").
const char* to_string(DiagnosisKind k);
/// The display status written as `status` ("INPUT-BOUND").
const char* status_of(DiagnosisKind k);
/// The headline a renderer's verdict shows for the kind ("RANK STRAGGLER",
/// "NO CLEAR BOTTLENECK"); the status where the verdict has no word of its own.
const char* label_of(DiagnosisKind k);
/// The kind whose `to_string` is `name`; nullopt for any other string.
std::optional<DiagnosisKind> kind_from_name(std::string_view name);

/// A rank comparison (spec §4.1.10): INPUT_/H2D_/COMPUTE_STRAGGLER, STRAGGLER.
bool is_straggler(DiagnosisKind k);
/// A share of the typical step (spec §4.1.11 rules 2–5): INPUT_BOUND,
/// H2D_BOUND, RESIDUAL_HEAVY, COMPUTE_BOUND.
bool is_phase_share(DiagnosisKind k);
/// Step Time gave no verdict (spec §4.5 step 2): NO_DATA, WARMUP, INCOMPLETE_DATA.
bool is_insufficient_step_time(DiagnosisKind k);
/// The system utilisation findings that §4.5 step 3 consults.
bool is_gpu_utilization(DiagnosisKind k);
/// The same questions about a kind read back from JSON (unknown names: false).
bool is_straggler(std::string_view name);
bool is_phase_share(std::string_view name);

/// The step-time payload metric a finding points at ("input_wait_ms" for
/// INPUT_BOUND and INPUT_STRAGGLER, ...): the row a renderer marks as the
/// cause. Null for STRAGGLER (its cause is in its comparisons) and for kinds
/// that name no step-time metric. COMPUTE_STRAGGLER names `compute_ms`; the
/// primary's comparison may name the phase (`forward_ms`) instead.
const char* culprit_metric(DiagnosisKind k);

/// The verdict headline of a run's primary diagnosis: `label_of(primary)`,
/// except that an INSUFFICIENT_STEP_TIME_DATA caused by INCOMPLETE_DATA says
/// "STEP TIMING INCOMPLETE" rather than "NOT ENOUGH STEP DATA".
const char* verdict_label(DiagnosisKind primary, std::optional<DiagnosisKind> step_time);

/// Whether collective (NCCL) time explains a straggler's wait cost or the
/// residual: its share (`collective_share_of_wait`,
/// `collective_share_of_residual`) is at least thresholds::kCollectiveExplainsShare.
/// The analysis words its summary by this; a renderer asks the same question
/// here rather than deciding it again.
bool collective_explains(double share);

/// How much a Step Time or Step Memory `status` says is wrong, 0 (no data)
/// to 4 (a rank straggler, high pressure, memory creep), for comparing two
/// runs' statuses (spec §6); 0 for any other string.
int status_rank(std::string_view status);

/// Keys of the `evidence` objects the analysis writes and renderers read.
namespace evidence {
// Step Time issues: rank straggler (spec §4.1.11 rule 1).
inline constexpr const char* kComponent = "component";
inline constexpr const char* kCulpritRank = "culprit_rank";
inline constexpr const char* kVictimRank = "victim_rank";
inline constexpr const char* kVisibleMetric = "visible_metric";
inline constexpr const char* kVisibleCulpritMs = "visible_culprit_ms";
inline constexpr const char* kVisibleVictimMs = "visible_victim_ms";
inline constexpr const char* kVisibleCostMs = "visible_cost_ms";
inline constexpr const char* kStepTimeMs = "step_time_ms";
inline constexpr const char* kComponentExcessesMs = "component_excesses_ms";
inline constexpr const char* kComponentCoverage = "component_coverage";
inline constexpr const char* kCollectiveCulpritMs = "collective_culprit_ms";
inline constexpr const char* kCollectiveVictimMs = "collective_victim_ms";
inline constexpr const char* kCollectiveWaitMs = "collective_wait_ms";
inline constexpr const char* kCollectiveShareOfWait = "collective_share_of_wait";
// Step Time issues: phase shares (rules 2–4).
inline constexpr const char* kInputWaitMs = "input_wait_ms";
inline constexpr const char* kTracedStepTimeMs = "traced_step_time_ms";
inline constexpr const char* kInputBoundShare = "input_bound_share";
inline constexpr const char* kDiagnosisClock = "diagnosis_clock";
inline constexpr const char* kH2dMs = "h2d_ms";
inline constexpr const char* kH2dShare = "h2d_share";
inline constexpr const char* kCollectiveMs = "collective_ms";
inline constexpr const char* kCollectiveShareOfResidual = "collective_share_of_residual";
// H2D copies of the named rank, per step (H2D_BOUND, H2D_STRAGGLER).
inline constexpr const char* kH2dCopiesPerStep = "h2d_copies_per_step";
inline constexpr const char* kH2dPageableCopiesPerStep = "h2d_pageable_copies_per_step";
inline constexpr const char* kH2dBytesPerStep = "h2d_bytes_per_step";
inline constexpr const char* kH2dPageableBytesPerStep = "h2d_pageable_bytes_per_step";
inline constexpr const char* kH2dPageableShare = "h2d_pageable_share";
// Step Time neutral issues (spec §4.0, §4.1.12–13).
inline constexpr const char* kMissingSignals = "missing_signals";
inline constexpr const char* kSignalCoverage = "signal_coverage";
inline constexpr const char* kStepsUsed = "steps_used";
inline constexpr const char* kWorstRank = "worst_rank";
inline constexpr const char* kTrend = "trend";
// A phase share that a few stalls hold (DECISIONS 23; an added key).
inline constexpr const char* kStalls = "stalls";
// The primary diagnosis (spec §4.5).
inline constexpr const char* kType = "type";
inline constexpr const char* kBasis = "basis";
inline constexpr const char* kStepsAnalyzed = "steps_analyzed";
inline constexpr const char* kGpuUtilAvgPercent = "gpu_util_avg_percent";
inline constexpr const char* kStepTimeStatus = "step_time_status";
inline constexpr const char* kComparisons = "comparisons";
inline constexpr const char* kMetric = "metric";
inline constexpr const char* kPhase = "phase";
inline constexpr const char* kMedian = "median";
inline constexpr const char* kWorst = "worst";
inline constexpr const char* kRank = "rank";
inline constexpr const char* kValueMs = "value_ms";
inline constexpr const char* kDeltaMs = "delta_ms";
inline constexpr const char* kRatio = "ratio";
inline constexpr const char* kScore = "score";
inline constexpr const char* kScoreBasis = "score_basis";
inline constexpr const char* kScoreDenominator = "score_denominator";
inline constexpr const char* kScoreNumeratorMs = "score_numerator_ms";
inline constexpr const char* kScoreDenominatorMs = "score_denominator_ms";
}  // namespace evidence

}  // namespace traceml::analysis
