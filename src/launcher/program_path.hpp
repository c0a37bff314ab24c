// Finds the file a rank will execute, the way a shell does, so that a typo is
// reported once by the launcher instead of once per rank after they started.
#pragma once

#include <string>

#include "launcher/launch_error.hpp"

namespace traceml::launcher {

/// The path to execute for `program`: itself when it contains '/', else the
/// first executable regular file named so in a PATH directory. Throws
/// LaunchError "PROGRAM: program not found (give a path, or put it on PATH)"
/// or "PROGRAM: not executable".
std::string resolve_program(const std::string& program);

}  // namespace traceml::launcher
