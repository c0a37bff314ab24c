// fuzz_frame: the collector's network boundary. The input is what a peer
// could send on a connection: cut into frames by FrameDecoder, each payload
// through every record decoder and the Hello decode/check; the input itself
// is also tried as a bare payload. A broken promise (frame_invariants.hpp)
// aborts, so that libFuzzer keeps the input.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "frame_invariants.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (const auto why = traceml::fuzz::check_frame_input(data, size)) {
    std::fprintf(stderr, "fuzz_frame: %s\n", why->c_str());
    std::abort();
  }
  return 0;
}
