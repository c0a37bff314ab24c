#include "timing/gpu_step.hpp"

namespace traceml::timing {

void merge_gpu_times(const GpuStepTimes& gpu, model::StepEvents& events) {
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    const auto e = model::Event(i);
    const std::optional<double> cpu = events.cpu_ms(e);
    if (cpu && gpu.gpu_ms[i]) events.set(e, model::Timing{cpu, gpu.gpu_ms[i]});
  }
}

}  // namespace traceml::timing
