// What reading a command line promises, checked on one: no exception
// escapes (main would turn one from CLI11 or a check into an abort); a usage
// error is exit 2 with a message, help and version exit 0, nothing else
// exits before running; a line that passes has an action; and reading it
// twice gives the same answer; and the checks, which look at the output
// paths (cli/output_paths.hpp), create nothing: run in an empty working
// directory, it stays empty. Shared by the fuzz target fuzz_cli and the
// corpus replay of tests/cli/command_line_test.
#pragma once

#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "commands.hpp"

namespace traceml::fuzz {

/// `traceml`, then the input's NUL-separated arguments.
inline std::vector<std::string> cli_args_of(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> args = {"traceml"};
  std::string arg;
  for (std::size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      args.push_back(arg);
      arg.clear();
    } else {
      arg += char(data[i]);
    }
  }
  if (!arg.empty()) args.push_back(arg);
  return args;
}

/// Whether `dir` holds anything (or cannot be listed).
inline bool holds_anything(const std::filesystem::path& dir) {
  std::error_code ec;
  const std::filesystem::directory_iterator it(dir, ec);
  return ec || it != std::filesystem::directory_iterator();
}

/// Why reading `args` breaks a promise; std::nullopt when it keeps them.
/// `empty_cwd`, when given, is the working directory, empty before: it must
/// still be empty after.
inline std::optional<std::string> check_cli_args(const std::vector<std::string>& args,
                                                 const std::filesystem::path* empty_cwd = nullptr) {
  using cli::CommandLine;
  CommandLine first;
  CommandLine second;
  try {
    first = cli::read_command_line(args);
    second = cli::read_command_line(args);
  } catch (const std::exception& e) {
    return std::string("an exception escaped: ") + e.what();
  } catch (...) {
    return std::string("an exception escaped");
  }
  if (empty_cwd != nullptr && holds_anything(*empty_cwd))
    return std::string("a check created a file in the working directory");
  if (first.exit_code != second.exit_code || first.error != second.error || first.out != second.out)
    return std::string("two readings of one command line differ");
  if (!first.exit_code) {
    if (!first.action.run) return std::string("a command line that passed has nothing to run");
    return std::nullopt;
  }
  if (*first.exit_code == cli::kExitBadInput) {
    if (first.error.empty()) return std::string("exit 2 without a message");
  } else if (*first.exit_code == cli::kExitOk) {
    if (!first.error.empty()) return std::string("exit 0 with an error");
  } else {
    return "exit " + std::to_string(*first.exit_code) + " before anything ran";
  }
  return std::nullopt;
}

}  // namespace traceml::fuzz
