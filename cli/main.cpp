// traceml: the command-line entry point. Reading the command line is
// command_line.cpp; every subcommand is a thin call into the library.
#include <exception>
#include <iostream>

#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace traceml::cli;
  const CommandLine line = read_command_line(std::vector<std::string>(argv, argv + argc));
  if (line.exit_code) {
    std::cout << line.out;
    std::cerr << line.usage;
    if (!line.error.empty()) return fail(line.error);
    return *line.exit_code;
  }
  try {
    return line.action.run ? line.action.run() : kExitOk;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
