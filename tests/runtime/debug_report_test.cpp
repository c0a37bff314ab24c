// TRACEML_DEBUG's report (runtime/debug_report.hpp): the lines the GPU check
// reads, and the CUDA libraries found in a process's memory map.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "runtime/debug_report.hpp"

namespace traceml::runtime {
namespace {

TEST(DebugReport, CudaLibrariesAreTheDistinctMappedPaths) {
  const std::string maps =
      "7f00-7f10 r--p 00000000 08:01 1 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
      "7f10-7f20 r-xp 00000000 08:01 2 /opt/venv/nvidia/cuda_runtime/lib/libcudart.so.13\n"
      "7f20-7f30 r--p 00001000 08:01 2 /opt/venv/nvidia/cuda_runtime/lib/libcudart.so.13\n"
      "7f30-7f40 r-xp 00000000 08:01 3 /usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06\n"
      "7f40-7f50 r-xp 00000000 08:01 4 /opt/venv/nvidia/cu13/lib/libcupti.so.13\n"
      "7f50-7f60 r-xp 00000000 08:01 5 /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
      "7f60-7f70 r-xp 00000000 08:01 6 /opt/venv/nvidia/nccl/lib/libnccl.so.2\n"
      "7f70-7f80 rw-p 00000000 00:00 0 [heap]\n"
      "7f80-7f90 r-xp 00000000 08:01 7 /usr/lib/libcudnn.so.9\n";
  EXPECT_EQ(cuda_libraries_in_maps(maps),
            (std::vector<std::string>{"/opt/venv/nvidia/cuda_runtime/lib/libcudart.so.13",
                                      "/usr/lib/x86_64-linux-gnu/libcuda.so.580.65.06",
                                      "/opt/venv/nvidia/cu13/lib/libcupti.so.13",
                                      "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
                                      "/opt/venv/nvidia/nccl/lib/libnccl.so.2"}));
  EXPECT_TRUE(cuda_libraries_in_maps("").empty());
}

TEST(DebugReport, LinesSayWhatTheGpuPathsDid) {
  GpuClockDebug gpu;
  gpu.device = 1;
  gpu.counters.steps_resolved = 98;
  gpu.counters.steps_expired = 2;
  const auto lines = debug_lines(gpu, nullptr, "TRACEML_CUPTI=0", {"/x/libcudart.so.13"});
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0],
            "gpu clock: device 1, steps resolved 98, expired 2, failed 0, rejected 0, abandoned 0, "
            "scopes skipped 0, event pool exhausted 0");
  EXPECT_EQ(lines[1], "cupti: off (TRACEML_CUPTI=0)");
  EXPECT_EQ(lines[2], "cuda libraries loaded: /x/libcudart.so.13");
  const auto cpu = debug_lines(std::nullopt, nullptr, "", {});
  EXPECT_EQ(cpu, (std::vector<std::string>{"gpu clock: off", "cupti: off",
                                           "cuda libraries loaded: none"}));
}

}  // namespace
}  // namespace traceml::runtime
