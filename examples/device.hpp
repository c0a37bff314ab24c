// The examples' --device flag: a LibTorch device name, checked before training
// starts so that a typo or a missing GPU is a usage error (exit 2), not a crash.
#pragma once

#include <torch/cuda.h>
#include <torch/types.h>

#include <exception>
#include <string>

#include "flags.hpp"

namespace examples {

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
