// The runtime's GPU side that init(), the sampler and the hot path share:
// the hooks traceml/torch.hpp installs, the GPU clock, CUPTI's duty cycle and
// its lending to LibTorch's profiler, and the device's settling before a
// capture. Each pointer is set once and never freed. Internal to runtime.
#pragma once

#include <atomic>
#include <optional>
#include <string>

#include "model/telemetry.hpp"
#include "runtime/gpu_clock.hpp"
#include "runtime/thread_recorder.hpp"
#include "timing/cuda_api.hpp"
#include "timing/cupti_duty_cycle.hpp"
#include "traceml/hooks.hpp"

namespace traceml::runtime {

/// The allocator reader and stream hook traceml/torch.hpp installed (null:
/// none; detail::set_gpu_hooks sets them).
extern std::atomic<detail::GpuMemoryReader> g_memory_reader;
extern std::atomic<detail::CurrentCudaStream> g_current_stream;
/// The GPU clock, when this process found CUDA; created at the first init and
/// never freed (a scope begun before shutdown may end after it).
extern std::atomic<GpuClock*> g_gpu_clock;
/// CUPTI's duty cycle (TRACEML_CUPTI_DUTY), when one runs; like the GPU
/// clock never freed, since a step begun before shutdown may still ask it.
extern std::atomic<timing::CuptiDutyCycle*> g_cupti_duty;
/// The same, or one that always records when no duty cycle was asked: a
/// profile capture lends CUPTI to LibTorch's profiler through it. Set when
/// traceml's CUPTI records start; never freed.
extern std::atomic<timing::CuptiDutyCycle*> g_cupti_lender;
/// traceml's CUPTI records are on with nothing to lend them through (out of
/// memory): no capture may take CUPTI from them.
extern std::atomic<bool> g_cupti_unlendable;
/// The CUDA runtime the GPU clock found, for settle_gpu(); set once, before
/// any capture can take CUPTI.
extern std::optional<timing::CudaApi> g_cuda_api;

/// ProfileCapture's CuptiLender: the duty cycle to lend CUPTI through, or
/// null with the reason in `refusal`.
timing::CuptiDutyCycle* cupti_lender(std::string& refusal);
/// The stream hook the builders call: whatever traceml/torch.hpp installed.
void* current_stream(int device);
/// Before a profile capture takes CUPTI from traceml's records: the timed
/// device finishes its work (false: it could not, or must not now).
bool settle_gpu() noexcept;
/// The process's GPU memory now, as the framework's allocator sees it.
std::optional<model::ProcessGpu> process_gpu_memory() noexcept;
/// The step's peak GPU memory, the peaks then reset (the hot path, at a step's end).
std::optional<StepMemoryPeak> read_step_memory() noexcept;

}  // namespace traceml::runtime
