// Naming of run directories, shared by `traceml run` and standalone mode so
// that both lay out ./logs the same way and never reuse an existing directory.
#pragma once

#include <ctime>
#include <filesystem>
#include <string>

namespace traceml::store {

/// The default run name: "<program>_<YYYYmmdd_HHMMSS>" in local time.
std::string default_run_name(const std::string& program, std::time_t now);

/// `logs / name`, or the first of `name_2`, `name_3`, ... that does not exist.
std::filesystem::path first_free_run_dir(const std::filesystem::path& logs,
                                         const std::string& name);

}  // namespace traceml::store
