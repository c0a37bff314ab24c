// The one table of diagnosis kinds (libkineto's ActivityType.h manner: the
// enum, and one row per kind with everything said about it).
#include "analysis/diagnosis_kind.hpp"

#include <array>
#include <utility>

#include "analysis/thresholds.hpp"

namespace traceml::analysis {

namespace {

using K = DiagnosisKind;

struct KindRow {
  K kind;
  const char* name;    ///< `kind` in JSON
  const char* status;  ///< `status` in JSON
  const char* label;   ///< the verdict's headline
  const char* culprit_metric;
};

// In enum order (checked below), so that a row is found by index.
constexpr std::array<KindRow, kDiagnosisKindCount> kKinds = {{
    {K::NoData, "NO_DATA", "NO DATA", "NO DATA", nullptr},
    {K::Balanced, "BALANCED", "BALANCED", "BALANCED", nullptr},
    {K::Normal, "NORMAL", "NORMAL", "NORMAL", nullptr},
    {K::Warmup, "WARMUP", "WARMUP", "WARMUP", nullptr},
    {K::IncompleteData, "INCOMPLETE_DATA", "INCOMPLETE DATA", "INCOMPLETE DATA", nullptr},
    {K::InputStraggler, "INPUT_STRAGGLER", "INPUT STRAGGLER", "INPUT STRAGGLER", "input_wait_ms"},
    {K::H2dStraggler, "H2D_STRAGGLER", "H2D STRAGGLER", "H2D STRAGGLER", "h2d_ms"},
    {K::ComputeStraggler, "COMPUTE_STRAGGLER", "COMPUTE STRAGGLER", "COMPUTE STRAGGLER",
     "compute_ms"},
    {K::Straggler, "STRAGGLER", "STRAGGLER", "RANK STRAGGLER", nullptr},
    {K::InputBound, "INPUT_BOUND", "INPUT-BOUND", "INPUT-BOUND", "input_wait_ms"},
    {K::H2dBound, "H2D_BOUND", "H2D-BOUND", "H2D-BOUND", "h2d_ms"},
    {K::ResidualHeavy, "RESIDUAL_HEAVY", "RESIDUAL-HEAVY", "RESIDUAL-HEAVY", "residual_ms"},
    {K::ComputeBound, "COMPUTE_BOUND", "COMPUTE-BOUND", "COMPUTE-BOUND", "compute_ms"},
    {K::VeryHighGpuMemory, "VERY_HIGH_GPU_MEMORY", "VERY HIGH GPU MEM", "VERY HIGH GPU MEM",
     nullptr},
    {K::HighGpuTemperature, "HIGH_GPU_TEMPERATURE", "HIGH GPU TEMP", "HIGH GPU TEMP", nullptr},
    {K::HighGpuMemory, "HIGH_GPU_MEMORY", "HIGH GPU MEM", "HIGH GPU MEM", nullptr},
    {K::HighGpuPower, "HIGH_GPU_POWER", "HIGH GPU PWR", "HIGH GPU PWR", nullptr},
    {K::HighHostMemory, "HIGH_HOST_MEMORY", "HIGH RAM", "HIGH RAM", nullptr},
    {K::HighCpu, "HIGH_CPU", "HIGH CPU", "HIGH CPU", nullptr},
    {K::LowGpuUtilization, "LOW_GPU_UTILIZATION", "LOW GPU UTIL", "LOW GPU UTIL", nullptr},
    {K::ModerateGpuUtilization, "MODERATE_GPU_UTILIZATION", "MODERATE GPU UTIL",
     "MODERATE GPU UTIL", nullptr},
    {K::VeryHighProcessGpuMemory, "VERY_HIGH_PROCESS_GPU_MEMORY", "VERY HIGH PROCESS GPU MEMORY",
     "VERY HIGH PROCESS GPU MEMORY", nullptr},
    {K::HighProcessGpuMemory, "HIGH_PROCESS_GPU_MEMORY", "HIGH PROCESS GPU MEMORY",
     "HIGH PROCESS GPU MEMORY", nullptr},
    {K::GpuMemoryReservedOverhang, "GPU_MEMORY_RESERVED_OVERHANG",
     "HIGH CUDA ALLOCATOR RESERVED/ALLOCATED RATIO", "HIGH CUDA ALLOCATOR RESERVED/ALLOCATED RATIO",
     nullptr},
    {K::RankGpuMemoryImbalance, "RANK_GPU_MEMORY_IMBALANCE", "RANK GPU MEMORY IMBALANCE",
     "RANK GPU MEMORY IMBALANCE", nullptr},
    {K::HighProcessRss, "HIGH_PROCESS_RSS", "HIGH PROCESS RSS", "HIGH PROCESS RSS", nullptr},
    {K::HighProcessCpu, "HIGH_PROCESS_CPU", "HIGH PROCESS CPU", "HIGH PROCESS CPU", nullptr},
    {K::NoGpu, "NO_GPU", "NO GPU", "NO GPU", nullptr},
    {K::HighPressure, "HIGH_PRESSURE", "HIGH PRESSURE", "HIGH PRESSURE", nullptr},
    {K::Imbalance, "IMBALANCE", "IMBALANCE", "IMBALANCE", nullptr},
    {K::CreepConfirmed, "CREEP_CONFIRMED", "MEMORY CREEP", "MEMORY CREEP", nullptr},
    {K::CreepEarly, "CREEP_EARLY", "MEMORY RISING", "MEMORY RISING", nullptr},
    {K::InsufficientStepTimeData, "INSUFFICIENT_STEP_TIME_DATA", "INSUFFICIENT STEP-TIME DATA",
     "NOT ENOUGH STEP DATA", nullptr},
    {K::LowGpuUtilizationUnexplained, "LOW_GPU_UTILIZATION_UNEXPLAINED", "LOW GPU UTILIZATION",
     "LOW GPU UTILIZATION -- cause unclear", nullptr},
    {K::NoClearPerformanceBottleneck, "NO_CLEAR_PERFORMANCE_BOTTLENECK",
     "NO CLEAR PERFORMANCE BOTTLENECK", "NO CLEAR BOTTLENECK", nullptr},
}};

constexpr bool in_enum_order() {
  for (std::size_t i = 0; i < kKinds.size(); ++i) {
    if (static_cast<std::size_t>(kKinds[i].kind) != i) return false;
  }
  return true;
}
static_assert(in_enum_order(), "kKinds rows must follow DiagnosisKind's order");
static_assert(static_cast<std::size_t>(K::NoClearPerformanceBottleneck) + 1 == kDiagnosisKindCount,
              "kDiagnosisKindCount must count every DiagnosisKind");

const KindRow& row(K k) {
  return kKinds[static_cast<std::size_t>(k)];
}

}  // namespace

const char* to_string(DiagnosisKind k) {
  return row(k).name;
}

const char* status_of(DiagnosisKind k) {
  return row(k).status;
}

const char* label_of(DiagnosisKind k) {
  return row(k).label;
}

std::optional<DiagnosisKind> kind_from_name(std::string_view name) {
  for (const KindRow& r : kKinds) {
    if (name == r.name) return r.kind;
  }
  return std::nullopt;
}

bool is_straggler(DiagnosisKind k) {
  return k == K::InputStraggler || k == K::H2dStraggler || k == K::ComputeStraggler ||
         k == K::Straggler;
}

bool is_phase_share(DiagnosisKind k) {
  return k == K::InputBound || k == K::H2dBound || k == K::ResidualHeavy || k == K::ComputeBound;
}

bool is_insufficient_step_time(DiagnosisKind k) {
  return k == K::NoData || k == K::Warmup || k == K::IncompleteData;
}

bool is_gpu_utilization(DiagnosisKind k) {
  return k == K::LowGpuUtilization || k == K::ModerateGpuUtilization;
}

bool is_straggler(std::string_view name) {
  const auto k = kind_from_name(name);
  return k && is_straggler(*k);
}

bool is_phase_share(std::string_view name) {
  const auto k = kind_from_name(name);
  return k && is_phase_share(*k);
}

const char* culprit_metric(DiagnosisKind k) {
  return row(k).culprit_metric;
}

const char* verdict_label(DiagnosisKind primary, std::optional<DiagnosisKind> step_time) {
  if (primary == K::InsufficientStepTimeData && step_time == K::IncompleteData) {
    return "STEP TIMING INCOMPLETE";
  }
  return label_of(primary);
}

bool collective_explains(double share) {
  return share >= thresholds::kCollectiveExplainsShare;
}

int status_rank(std::string_view status) {
  // How much a Step Time or Step Memory status says is wrong, as compare
  // orders two runs' statuses: none, balanced, a share of the step or an
  // early rise, a slow rank or an imbalance, the worst findings.
  static constexpr std::pair<K, int> kRanks[] = {
      {K::NoData, 0},         {K::Warmup, 0},           {K::IncompleteData, 0},
      {K::Balanced, 1},       {K::InputBound, 2},       {K::H2dBound, 2},
      {K::ComputeBound, 2},   {K::CreepEarly, 2},       {K::ResidualHeavy, 3},
      {K::InputStraggler, 3}, {K::ComputeStraggler, 3}, {K::H2dStraggler, 3},
      {K::Imbalance, 3},      {K::Straggler, 4},        {K::HighPressure, 4},
      {K::CreepConfirmed, 4}};
  for (const auto& [kind, rank] : kRanks) {
    if (status == status_of(kind)) return rank;
  }
  return 0;
}

}  // namespace traceml::analysis
