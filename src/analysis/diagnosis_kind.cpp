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
  const char* culprit_metric = nullptr;
  const char* label = nullptr;  ///< the verdict's headline; null: the status
};

// In enum order (checked below), so that a row is found by index.
constexpr std::array<KindRow, kDiagnosisKindCount> kKinds = {{
    {K::NoData, "NO_DATA", "NO DATA"},
    {K::Balanced, "BALANCED", "BALANCED"},
    {K::Normal, "NORMAL", "NORMAL"},
    {K::Warmup, "WARMUP", "WARMUP"},
    {K::IncompleteData, "INCOMPLETE_DATA", "INCOMPLETE DATA"},
    {K::InputStraggler, "INPUT_STRAGGLER", "INPUT STRAGGLER", "input_wait_ms"},
    {K::H2dStraggler, "H2D_STRAGGLER", "H2D STRAGGLER", "h2d_ms"},
    {K::ComputeStraggler, "COMPUTE_STRAGGLER", "COMPUTE STRAGGLER", "compute_ms"},
    {K::Straggler, "STRAGGLER", "STRAGGLER", nullptr, "RANK STRAGGLER"},
    {K::InputBound, "INPUT_BOUND", "INPUT-BOUND", "input_wait_ms"},
    {K::H2dBound, "H2D_BOUND", "H2D-BOUND", "h2d_ms"},
    {K::ResidualHeavy, "RESIDUAL_HEAVY", "RESIDUAL-HEAVY", "residual_ms"},
    {K::ComputeBound, "COMPUTE_BOUND", "COMPUTE-BOUND", "compute_ms"},
    {K::VeryHighGpuMemory, "VERY_HIGH_GPU_MEMORY", "VERY HIGH GPU MEM"},
    {K::HighGpuTemperature, "HIGH_GPU_TEMPERATURE", "HIGH GPU TEMP"},
    {K::HighGpuMemory, "HIGH_GPU_MEMORY", "HIGH GPU MEM"},
    {K::HighGpuPower, "HIGH_GPU_POWER", "HIGH GPU PWR"},
    {K::HighHostMemory, "HIGH_HOST_MEMORY", "HIGH RAM"},
    {K::HighCpu, "HIGH_CPU", "HIGH CPU"},
    {K::LowGpuUtilization, "LOW_GPU_UTILIZATION", "LOW GPU UTIL"},
    {K::ModerateGpuUtilization, "MODERATE_GPU_UTILIZATION", "MODERATE GPU UTIL"},
    {K::VeryHighProcessGpuMemory, "VERY_HIGH_PROCESS_GPU_MEMORY", "VERY HIGH PROCESS GPU MEMORY"},
    {K::HighProcessGpuMemory, "HIGH_PROCESS_GPU_MEMORY", "HIGH PROCESS GPU MEMORY"},
    {K::GpuMemoryReservedOverhang, "GPU_MEMORY_RESERVED_OVERHANG",
     "HIGH CUDA ALLOCATOR RESERVED/ALLOCATED RATIO"},
    {K::RankGpuMemoryImbalance, "RANK_GPU_MEMORY_IMBALANCE", "RANK GPU MEMORY IMBALANCE"},
    {K::HighProcessRss, "HIGH_PROCESS_RSS", "HIGH PROCESS RSS"},
    {K::HighProcessCpu, "HIGH_PROCESS_CPU", "HIGH PROCESS CPU"},
    {K::NoGpu, "NO_GPU", "NO GPU"},
    {K::HighPressure, "HIGH_PRESSURE", "HIGH PRESSURE"},
    {K::Imbalance, "IMBALANCE", "IMBALANCE"},
    {K::CreepConfirmed, "CREEP_CONFIRMED", "MEMORY CREEP"},
    {K::CreepEarly, "CREEP_EARLY", "MEMORY RISING"},
    {K::InsufficientStepTimeData, "INSUFFICIENT_STEP_TIME_DATA", "INSUFFICIENT STEP-TIME DATA",
     nullptr, "NOT ENOUGH STEP DATA"},
    {K::LowGpuUtilizationUnexplained, "LOW_GPU_UTILIZATION_UNEXPLAINED", "LOW GPU UTILIZATION",
     nullptr, "LOW GPU UTILIZATION -- cause unclear"},
    {K::NoClearPerformanceBottleneck, "NO_CLEAR_PERFORMANCE_BOTTLENECK",
     "NO CLEAR PERFORMANCE BOTTLENECK", nullptr, "NO CLEAR BOTTLENECK"},
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
  const KindRow& r = row(k);
  return r.label != nullptr ? r.label : r.status;
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
