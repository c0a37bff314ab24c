// fuzz_config: the runtime's environment boundary. Every rank of every
// launcher starts resolve_config on variables that anybody may set: the input
// is an environment (config_invariants.hpp says how the bytes become one),
// and a broken promise aborts, so that libFuzzer keeps the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "config_invariants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (const auto why = traceml::fuzz::check_config_input(data, size)) {
    std::fprintf(stderr, "fuzz_config: %s\n", why->c_str());
    std::abort();
  }
  return 0;
}
