// The one error the launcher's parts throw when ranks cannot be started; a
// header of its own so that those parts (program_path, rank_process,
// interrupt_signals) do not include launch.hpp, which includes them.
#pragma once

#include <stdexcept>

namespace traceml::launcher {

/// The ranks cannot be started (program not found or not executable, fork
/// failed). what() is one line that says how to fix it.
class LaunchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace traceml::launcher
