// Each subcommand registers itself on the CLI11 app and leaves behind the
// action to run once parsing succeeded. Actions return the process exit code.
#pragma once

#include <functional>
#include <string>

#include <CLI/CLI.hpp>

namespace traceml::cli {

using Action = std::function<int()>;

/// Exit codes (DECISIONS 6).
inline constexpr int kExitOk = 0;
inline constexpr int kExitGateFailed = 1;
inline constexpr int kExitBadInput = 2;

/// Prints "traceml: error: <message>" on stderr and returns kExitBadInput.
int fail(const std::string& message);
/// Prints "traceml: warning: <message>" on stderr.
void warn(const std::string& message);

/// A summary argument as a file path: a run directory (logs/<run>) stands for
/// its final_summary.json. Returns the path to open, or an error message.
struct SummaryPath {
  std::string path;
  std::string error;
};
SummaryPath resolve_summary_path(const std::string& arg);

void add_report_command(CLI::App& app, Action& action);
void add_view_command(CLI::App& app, Action& action);
void add_compare_command(CLI::App& app, Action& action);
void add_run_command(CLI::App& app, Action& action);
void add_serve_command(CLI::App& app, Action& action);
void add_export_command(CLI::App& app, Action& action);

}  // namespace traceml::cli
