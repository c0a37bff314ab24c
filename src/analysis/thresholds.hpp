// Every threshold of the diagnosis engine, in one place (spec §4). The values
// are TraceML's, so that both tools reach the same verdict on the same numbers;
// the comments say what each one guards against.
#pragma once

#include <cstddef>
#include <cstdint>

namespace traceml::analysis::thresholds {

// ---- Step Time (spec §4.1.11) --------------------------------------------
/// A straggler costs its victim at least this fraction of a step (warn) ...
inline constexpr double kStragglerScoreWarn = 0.10;
/// ... or this much (crit).
inline constexpr double kStragglerScoreCrit = 0.20;
/// One measured component must explain this fraction of the visible wait cost
/// before the straggler is attributed to it (else it is a plain STRAGGLER).
inline constexpr double kStragglerCauseCoverageMin = 0.80;
/// Input, H2D or residual share of the step that makes it a finding (warn) ...
inline constexpr double kOverheadShareWarn = 0.10;
/// ... and a critical one.
inline constexpr double kOverheadShareCrit = 0.20;
/// Compute share at which a step is called compute-bound.
inline constexpr double kComputeBoundShareWarn = 0.90;
/// Fewer aligned steps than this is WARMUP: no diagnosis at all.
inline constexpr std::int64_t kMinStepsForWarningDiag = 2;
/// Fewer aligned steps than this caps every finding at warn.
inline constexpr std::int64_t kMinStepsForConfidentDiag = 20;
/// Summary window: the latest this many aligned steps are analysed.
inline constexpr std::int64_t kSummaryWindowRows = 10000;

// ---- One-off stalls (ours, DECISIONS 23; not in TraceML) --------------------
/// A phase share is "held by stalls" when leaving out at most this many
/// steps of each rank (its largest values of the phase) takes away at least
/// kStallsHoldShare of it: the verdict's kind stays TraceML's (a mean), but
/// the text names those steps instead of calling the mean "the typical step".
inline constexpr std::size_t kStallStepsMax = 3;
inline constexpr double kStallsHoldShare = 0.50;
/// A step named as a stall takes at least this many times its rank's median
/// step: an ordinary slow step is not one.
inline constexpr double kStallStepFactor = 10.0;

// ---- GPU activity (ours, issue 5: CUPTI records; not in TraceML) -----------
/// H2D copies "come from pageable memory" once at least this share of their
/// bytes does: the driver then stages most of the batch through a bounce
/// buffer, and pinning it is the first fix to try.
inline constexpr double kPageableDominantShare = 0.50;
/// Collective kernels "explain" a straggler's wait cost, or the residual, when
/// they account for at least this share of it: then most of the time is spent
/// inside NCCL, and the text says so.
inline constexpr double kCollectiveExplainsShare = 0.50;

// ---- Trend (spec §4.1.14; shared with step-memory creep) -------------------
inline constexpr std::int64_t kTrendMinAlignedSteps = 100;
inline constexpr std::int64_t kTrendMinPoints = 200;
inline constexpr std::int64_t kTrendHistoryLimit = 10000;
inline constexpr double kTrendWarmupFrac = 0.10;
inline constexpr double kTrendBaselineStart = 0.15, kTrendBaselineEnd = 0.25;
inline constexpr double kTrendMidStart = 0.45, kTrendMidEnd = 0.55;
inline constexpr double kTrendRecentStart = 0.90, kTrendRecentEnd = 1.00;
/// A relative change of this much between baseline and recent is a trend.
inline constexpr double kTrendChange = 0.08;
/// BALANCED runs mention a rising step time only when residual or input is
/// already close to the finding threshold.
inline constexpr double kTrendBalancedShareHint = 0.09;

// ---- System (spec §4.2) ---------------------------------------------------
inline constexpr double kSystemCpuHigh = 80.0;
inline constexpr double kSystemRamHigh = 80.0;
inline constexpr double kSystemGpuMemHigh = 80.0;
inline constexpr double kSystemGpuMemVeryHigh = 90.0;
inline constexpr double kSystemGpuTempHigh = 85.0;
inline constexpr double kSystemGpuPowerHigh = 80.0;
/// GPU utilisation below this is low ...
inline constexpr double kGpuUtilLow = 30.0;
/// ... up to and including this is moderate; above is healthy.
inline constexpr double kGpuUtilModerateMax = 70.0;

// ---- Process (spec §4.3) --------------------------------------------------
inline constexpr double kProcessCpuCapacityHigh = 80.0;
inline constexpr double kProcessRssHigh = 80.0;
inline constexpr double kProcessGpuMemHigh = 80.0;
inline constexpr double kProcessGpuMemVeryHigh = 90.0;
/// Reserved/allocated ratio of the CUDA caching allocator that counts as overhang ...
inline constexpr double kOverhangRatioHigh = 2.0;
/// ... but only once reserved memory is a real share of the device.
inline constexpr double kOverhangReservedPercentMin = 30.0;
inline constexpr double kRankImbalanceWarn = 20.0, kRankImbalanceWarnPressure = 30.0;
inline constexpr double kRankImbalanceCrit = 30.0, kRankImbalanceCritPressure = 50.0;

// ---- Step Memory (spec §4.4) ----------------------------------------------
inline constexpr std::int64_t kStepMemoryMinSteps = 50;
inline constexpr double kMemoryPressureWarn = 0.92;
inline constexpr double kMemoryPressureCrit = 0.97;
inline constexpr double kMemoryImbalanceSkewWarn = 0.20, kMemoryImbalancePressureWarn = 0.30;
inline constexpr double kMemoryImbalanceSkewCrit = 0.30, kMemoryImbalancePressureCrit = 0.50;
/// Creep score: every 100 MiB of growth adds one point.
inline constexpr double kCreepScoreDeltaScale = 104857600.0;
/// Growth of 1 GiB across the window confirms a creep.
inline constexpr double kCreepConfirmedDelta = 1073741824.0;
inline constexpr std::int64_t kCreepMinPoints = 50;
/// Creep bands start at the first aligned step: the window is already the
/// latest steps of the run, so there is no warm-up left to drop.
inline constexpr double kCreepWarmupFrac = 0.0;
/// Creep score weights of the relative growth of the worst-rank and median
/// series: 10 % growth of the worst rank weighs as much as 100 MiB of growth.
inline constexpr double kCreepWorstGrowthWeight = 10.0;
inline constexpr double kCreepMedianGrowthWeight = 6.0;

// ---- Compare (spec §6.3) -------------------------------------------------
/// A common-clock step time change of at least this many percent (either way,
/// inclusive) is a regression or an improvement; smaller is run-to-run jitter.
inline constexpr double kCompareStepTimePct = 3.0;
/// Peak reserved memory moves with allocator caching, so only a change of at
/// least this many percent (inclusive) counts.
inline constexpr double kCompareMemoryPct = 10.0;
/// pct_change is undefined when the baseline is (numerically) zero.
inline constexpr double kComparePctBaselineEps = 1e-12;
/// The IQR of a normal distribution in standard deviations: turns a reported
/// std into the same noise band as a reported p25/p75 spread.
inline constexpr double kNormalIqrPerStd = 1.349;
/// The significance level of compare's rank test (DECISIONS 12), as in Google
/// Benchmark's compare.py: a step-time change counts only when the
/// Mann-Whitney U test gives p below it.
inline constexpr double kCompareAlpha = 0.05;

}  // namespace traceml::analysis::thresholds
