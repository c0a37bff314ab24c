// fuzz_cli: the command line, the options boundary. The input is an argument
// vector (NUL-separated; `traceml` is argv[0]), read exactly as `traceml`
// reads it (cli/command_line.cpp: CLI11, then the command's check of ranges
// and names); nothing is ever run. A broken promise (cli_invariants.hpp)
// aborts, so that libFuzzer keeps the input. Under ASan+UBSan the range
// checks meet every number CLI11 lets through (NaN, 1e308, -0, hex).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "cli_invariants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto args = traceml::fuzz::cli_args_of(data, size);
  if (args.size() > 64) return 0;  // a shell's limit is far off; so is anything new
  if (const auto why = traceml::fuzz::check_cli_args(args)) {
    std::fprintf(stderr, "fuzz_cli: %s\n", why->c_str());
    std::abort();
  }
  return 0;
}
