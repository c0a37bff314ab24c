// fuzz_black_box: a rank's black box as the launcher reads it after the rank
// ended (store/black_box.hpp). The region is memory the rank wrote, so any
// bytes may be there: a rank that scribbled over it, or died mid-write. The
// input is laid over a zeroed region from its start (the header, then the
// first slots). Promises checked, each aborting when broken:
// - reading touches nothing outside the region (ASan) and no integer
//   overflows (UBSan), whatever the header's counters and clock hold;
// - it returns at most one step per slot, each carrying the region's rank,
//   and a memory record only for a step it returned;
// - steps_completed() is within [0, 2^62], and the checks the collector
//   applies (model::check) run on every record without failing.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <set>
#include <string>

#include "model/black_box.hpp"
#include "model/record_kinds.hpp"
#include "store/black_box.hpp"

namespace {

[[noreturn]] void broken(const std::string& why) {
  std::fprintf(stderr, "fuzz_black_box: %s\n", why.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace traceml;
  // Zeroed, as memfd pages are; the input then stands for what the rank wrote.
  static auto* bytes = static_cast<unsigned char*>(std::calloc(1, model::kBlackBoxBytes));
  std::memset(bytes, 0, model::kBlackBoxBytes);
  std::memcpy(bytes, data, std::min(size, model::kBlackBoxBytes));
  const auto* region = reinterpret_cast<const model::BlackBoxRegion*>(bytes);
  const store::BlackBoxReading r = store::read_black_box(*region);
  if (r.steps.size() > model::kBlackBoxSlots) broken("more steps than slots");
  if (r.memory.size() > r.steps.size()) broken("more memory records than steps");
  std::set<std::int64_t> steps;
  for (const model::StepRecord& s : r.steps) {
    if (s.global_rank != r.global_rank) broken("a step of another rank");
    steps.insert(s.step);
    (void)model::check(s);
  }
  for (const model::StepMemoryRecord& m : r.memory) {
    if (steps.count(m.step) == 0) broken("a memory record without its step");
    (void)model::check(m);
  }
  const std::int64_t done = r.steps_completed();
  if (done < 0 || done > (std::int64_t{1} << 62)) broken("steps_completed out of range");
  return 0;
}
