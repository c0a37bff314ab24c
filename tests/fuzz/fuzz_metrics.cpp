// fuzz_metrics: the metrics endpoint's two boundaries (metrics_invariants.hpp):
// the bytes a peer sends to `--metrics-port`, and the values of a run that
// its exposition text must carry in Prometheus' format. A broken promise
// aborts, so that libFuzzer keeps the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "metrics_invariants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (const auto why = traceml::fuzz::check_metrics_input(data, size)) {
    std::fprintf(stderr, "fuzz_metrics: %s\n", why->c_str());
    std::abort();
  }
  return 0;
}
