// traceml/torch.hpp: LibTorch helpers (link traceml::torch).
//
// The only traceml header that includes LibTorch. traceml.hpp alone is enough
// to mark steps and phases; include this one for a timed host-to-device copy of
// a batch:
//
//   #include <traceml/torch.hpp>
//   for (auto& batch : traceml::wrap_dataloader(*loader)) {
//     traceml::StepScope step;
//     auto on_device = traceml::to_device(batch, device, /*non_blocking=*/true);
//     ...
//   }
//
// traceml::wrap_dataloader (traceml.hpp) already times fetches from
// torch::data loaders; no LibTorch-specific loader wrapper is needed.
//
// Works with LibTorch 1.13 and 2.x, with or without CUDA.
#pragma once

#include <torch/data/example.h>
#include <torch/types.h>

#include <utility>

#include <traceml/traceml.hpp>

// TRACEML_TORCH_CUDA (1 or 0) says whether the LibTorch build has CUDA. The
// traceml::torch target defines it from LibTorch's CMake targets; without it,
// we guess from the headers. c10/cuda's headers alone do not tell: a CPU-only
// LibTorch ships them too, and they need the CUDA toolkit's headers to compile.
#if !defined(TRACEML_TORCH_CUDA)
#if __has_include(<c10/cuda/CUDACachingAllocator.h>) && __has_include(<cuda_runtime_api.h>)
#define TRACEML_TORCH_CUDA 1
#else
#define TRACEML_TORCH_CUDA 0
#endif
#endif

#if TRACEML_TORCH_CUDA
#include <c10/cuda/CUDACachingAllocator.h>
#endif

namespace traceml {

/// Copies a tensor to `device` and times the copy as the step's H2D phase.
/// With non_blocking (from pinned memory to a GPU) the copy is only queued, so
/// the CPU time recorded is the launch; the GPU clock measures the transfer.
inline torch::Tensor to_device(const torch::Tensor& tensor, const torch::Device& device,
                               bool non_blocking = false) {
  PhaseScope h2d(Phase::H2D);
  return tensor.to(device, non_blocking);
}

/// Copies a batch's data and target to `device` as one H2D phase.
inline torch::data::Example<> to_device(const torch::data::Example<>& batch,
                                        const torch::Device& device, bool non_blocking = false) {
  PhaseScope h2d(Phase::H2D);
  torch::Tensor data = batch.data.to(device, non_blocking);
  torch::Tensor target = batch.target.to(device, non_blocking);
  return torch::data::Example<>(std::move(data), std::move(target));
}

/// Reports the CUDA caching allocator's per-step peak memory (allocated and
/// reserved) with each step, for the STEP MEMORY section. Call once after
/// traceml::init(). A no-op when LibTorch has no CUDA (nothing to measure:
/// the section then says memory was not measured).
inline void enable_cuda_memory_tracking() {
#if TRACEML_TORCH_CUDA
  // TODO(GPU clock): hand the runtime a per-step reader of
  // c10::cuda::CUDACachingAllocator's device stats (peak allocated / reserved,
  // reset after each step). Until the runtime has the hook, this does nothing.
#endif
}

}  // namespace traceml
