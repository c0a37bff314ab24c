// fuzz_cli: the command line, the options boundary. The input is an argument
// vector (NUL-separated; `traceml` is argv[0]); it is read exactly as
// `traceml` reads it (cli/command_line.cpp: CLI11, then the command's check
// of ranges and names), and nothing is ever run. Promises: no exception
// escapes (main would turn one from CLI11 or a check into an abort); a usage
// error is exit 2 with a message, help and version exit 0, nothing else
// exits before running; a command line that passes has an action; and
// reading it twice gives the same answer. Under ASan+UBSan, the range checks
// meet every number CLI11 lets through (NaN, 1e308, -0, hex).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <vector>

#include "commands.hpp"

namespace {

[[noreturn]] void broken(const std::string& why) {
  std::fprintf(stderr, "fuzz_cli: %s\n", why.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace traceml::cli;
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
  if (args.size() > 64) return 0;  // a shell's limit is far off; so is anything new
  CommandLine first;
  CommandLine second;
  try {
    first = read_command_line(args);
    second = read_command_line(args);
  } catch (const std::exception& e) {
    broken(std::string("an exception escaped: ") + e.what());
  } catch (...) {
    broken("an exception escaped");
  }
  if (first.exit_code != second.exit_code || first.error != second.error || first.out != second.out)
    broken("two readings of one command line differ");
  if (!first.exit_code) {
    if (!first.action.run) broken("a command line that passed has nothing to run");
    return 0;
  }
  if (*first.exit_code == kExitBadInput) {
    if (first.error.empty()) broken("exit 2 without a message");
  } else if (*first.exit_code == kExitOk) {
    if (!first.error.empty()) broken("exit 0 with an error");
  } else {
    broken("exit " + std::to_string(*first.exit_code) + " before anything ran");
  }
  return 0;
}
