// Each subcommand registers itself on the CLI11 app and leaves behind the
// action to run once parsing succeeded: a check of the options, then the
// work, which returns the process exit code.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

namespace traceml::cli {

/// What a parsed command line asks for. `check` (when set) says why the
/// options cannot be used, as one line, before anything starts; `run` does
/// the work and returns the exit code. main runs `run` only when `check`
/// passes; fuzz_cli runs `check` alone.
struct Action {
  std::function<std::optional<std::string>()> check;
  std::function<int()> run;
};

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

/// The outcome of reading a command line, before anything runs: either an
/// exit code with what to print (a usage error: one line on stderr and exit
/// 2; --help or --version: the text on stdout and exit 0), or an action that
/// passed its check and is ready to run.
struct CommandLine {
  std::optional<int> exit_code;
  std::string out;    ///< for stdout (help, version)
  std::string usage;  ///< for stderr, before the error (a command's usage)
  std::string error;  ///< the one-line error, without "traceml: error: "
  Action action;
};

/// Parses `args` (args[0] is the program name) as `traceml` does and runs
/// the chosen command's check; never runs the command and never prints.
CommandLine read_command_line(const std::vector<std::string>& args);

void add_report_command(CLI::App& app, Action& action);
void add_view_command(CLI::App& app, Action& action);
void add_compare_command(CLI::App& app, Action& action);
void add_run_command(CLI::App& app, Action& action);
void add_serve_command(CLI::App& app, Action& action);
void add_export_command(CLI::App& app, Action& action);

}  // namespace traceml::cli
