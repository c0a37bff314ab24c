// The examples' --device flag: a LibTorch device name, checked before training
// starts so that a typo or a missing GPU is a usage error (exit 2), not a crash.
// Also what the examples' datasets need to build on every LibTorch.
#pragma once

#include <torch/cuda.h>
#include <torch/data/datasets/base.h>
#include <torch/types.h>

#include <cstddef>
#include <exception>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "flags.hpp"

namespace examples {

/// What a LibTorch dataset's size() returns, taken from the base class so that
/// an override matches on every LibTorch without naming c10::optional:
/// std::optional<std::size_t> since PyTorch 2.4 (where c10::optional became an
/// alias of it, deprecated since 2.8), c10::optional, a type of its own, before
/// (LibTorch 1.13).
using DatasetSize =
    decltype(std::declval<
                 const torch::data::datasets::BatchDataset<struct AnyDataset, std::vector<int>>&>()
                 .size());
static_assert(std::is_same_v<DatasetSize::value_type, std::size_t>,
              "a dataset's size() is an optional std::size_t");

inline torch::Device parse_device(const Flags& flags, const std::string& name) {
  try {
    const torch::Device device(name);
    if (device.is_cuda() && !torch::cuda::is_available()) {
      flags.fail("--device " + name + ": this LibTorch build or machine has no CUDA");
    }
    return device;
  } catch (const std::exception&) {
    flags.fail("--device " + name + ": not a device (cpu, cuda, cuda:N)");
  }
}

}  // namespace examples
