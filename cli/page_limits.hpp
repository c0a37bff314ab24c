// TRACEML_PAGE_TIMEOUT_S and TRACEML_PAGE_MEMORY_MB, read once by each
// command that draws final_summary.html (run, serve, report) and passed down
// as report::PageLimits. A value that is no limit is a usage error: the
// command refuses to start, before it writes anything.
#pragma once

#include <optional>
#include <string>

#include "report/html/page_process.hpp"

namespace traceml::cli {

struct PageLimitsRead {
  report::PageLimits limits;
  /// "NAME='value' is not ...; fix or unset it" (the first bad variable).
  std::optional<std::string> problem;
};

/// The page's limits from this process's environment (report::page_limits_from).
PageLimitsRead read_page_limits();

}  // namespace traceml::cli
