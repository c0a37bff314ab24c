// Keys of final_summary.json that more than one module spells: the analysis
// writes them, the renderers and compare read them. A key read in one place
// only stays a literal beside its reader.
#pragma once

namespace traceml::analysis::summary_keys {

// Top-level blocks.
inline constexpr const char* kSchemaVersion = "schema_version";
inline constexpr const char* kGeneratedAt = "generated_at";
inline constexpr const char* kDurationS = "duration_s";
inline constexpr const char* kPrimaryDiagnosis = "primary_diagnosis";
inline constexpr const char* kStepTime = "step_time";
inline constexpr const char* kStepMemory = "step_memory";
inline constexpr const char* kProcess = "process";
inline constexpr const char* kSystem = "system";

// Inside a section.
inline constexpr const char* kDiagnosis = "diagnosis";
inline constexpr const char* kStatus = "status";
inline constexpr const char* kGlobal = "global";
inline constexpr const char* kWindow = "window";
inline constexpr const char* kDiagnosisClock = "diagnosis_clock";
inline constexpr const char* kMedian = "median";
inline constexpr const char* kWorst = "worst";

// Step time averages (step_time.global.average).
inline constexpr const char* kStepTimeMs = "step_time_ms";
inline constexpr const char* kStepTimeCpuMs = "step_time_cpu_ms";
inline constexpr const char* kStepTimeGpuMs = "step_time_gpu_ms";
inline constexpr const char* kDataloaderFetchCpuMs = "dataloader_fetch_cpu_ms";
inline constexpr const char* kInputWaitMs = "input_wait_ms";
inline constexpr const char* kH2dMs = "h2d_ms";
inline constexpr const char* kComputeMs = "compute_ms";
inline constexpr const char* kResidualMs = "residual_ms";
inline constexpr const char* kForwardMs = "forward_ms";
inline constexpr const char* kBackwardMs = "backward_ms";
inline constexpr const char* kOptimizerMs = "optimizer_ms";

// Step memory points (step_memory.global.{median,worst}).
inline constexpr const char* kPeakReservedBytes = "peak_reserved_bytes";

// Process and system averages.
inline constexpr const char* kCpuPercent = "cpu_percent";
inline constexpr const char* kCpuCapacityPercent = "cpu_capacity_percent";
inline constexpr const char* kRamBytes = "ram_bytes";
inline constexpr const char* kGpuUtilPercent = "gpu_util_percent";
inline constexpr const char* kGpuMemPercent = "gpu_mem_percent";

}  // namespace traceml::analysis::summary_keys
