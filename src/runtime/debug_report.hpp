// TRACEML_DEBUG=1: what the GPU paths did, printed by each rank at shutdown
// as lines "traceml: debug: ..." on stderr. For the GPU check
// (tests/gpu/check.sh), whose one run on a GPU must answer every question:
// did the GPU clock resolve steps, was CUPTI on and how, were records lost,
// and which CUDA libraries the process really loaded.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "runtime/gpu_clock.hpp"

namespace traceml::runtime {

class CuptiStage;

/// The CUDA libraries in a /proc/<pid>/maps text: the distinct paths whose
/// file name starts with libcudart, libcupti, libnvidia-ml, libcuda.so or
/// libnccl, in the order first mapped.
std::vector<std::string> cuda_libraries_in_maps(const std::string& maps);

/// What the GPU clock saw (absent: no GPU clock).
struct GpuClockDebug {
  std::optional<int> device;
  GpuClockCounters counters;
};

/// The debug lines, without the "traceml: debug: " prefix: the GPU clock's
/// counters, CUPTI's (null: not capturing, with `cupti_why` when known), and
/// the loaded CUDA libraries.
std::vector<std::string> debug_lines(const std::optional<GpuClockDebug>& gpu,
                                     const CuptiStage* cupti, const std::string& cupti_why,
                                     const std::vector<std::string>& libraries);

}  // namespace traceml::runtime
