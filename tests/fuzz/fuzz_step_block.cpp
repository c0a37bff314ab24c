// fuzz_step_block: the run database's step blocks (schema version 2), what
// `traceml report RUN_DIR` decodes from a file anyone may have edited. The
// input is the block's `rows` (2 bytes, little-endian) and `global_rank`
// (1 byte), then its bytes. Promises checked, each aborting when broken:
// - the decoder reads nothing outside the block (ASan) and fails only with
//   StepBlockError, whose record is 0 or one it was reading;
// - every record it returns passes model::check_step and has the block's rank;
// - what it returns, encoded again, decodes to the same records, and encoding
//   those gives the same bytes (the encoder is deterministic).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include "model/record_checks.hpp"
#include "store/step_block.hpp"

namespace {

using traceml::model::StepRecord;
using traceml::store::StepBlockDecoder;
using traceml::store::StepBlockEncoder;
using traceml::store::StepBlockError;

[[noreturn]] void broken(const std::string& why) {
  std::fprintf(stderr, "fuzz_step_block: %s\n", why.c_str());
  std::abort();
}

/// Bitwise equality: NaN cannot pass check_step, and -0.0 must stay -0.0.
bool same_bits(double a, double b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

bool same(const StepRecord& a, const StepRecord& b) {
  if (a.global_rank != b.global_rank || a.step != b.step || !same_bits(a.ts, b.ts)) return false;
  if (a.events.event_mask() != b.events.event_mask() ||
      a.events.cpu_mask() != b.events.cpu_mask() || a.events.gpu_mask() != b.events.gpu_mask())
    return false;
  for (std::size_t e = 0; e < traceml::model::kEventCount; ++e) {
    if (((a.events.cpu_mask() >> e) & 1u) &&
        !same_bits(a.events.cpu_values()[e], b.events.cpu_values()[e]))
      return false;
    if (((a.events.gpu_mask() >> e) & 1u) &&
        !same_bits(a.events.gpu_values()[e], b.events.gpu_values()[e]))
      return false;
    if (((a.events.begin_mask() >> e) & 1u) &&
        !same_bits(a.events.begin_values()[e], b.events.begin_values()[e]))
      return false;
  }
  if (a.events.begin_mask() != b.events.begin_mask() || a.thread != b.thread) return false;
  if (a.gpu_activity.has_value() != b.gpu_activity.has_value()) return false;
  if (!a.gpu_activity) return true;
  const auto &x = *a.gpu_activity, &y = *b.gpu_activity;
  return same_bits(x.h2d_ms, y.h2d_ms) && same_bits(x.h2d_bytes, y.h2d_bytes) &&
         x.h2d_copies == y.h2d_copies && x.h2d_pageable_copies == y.h2d_pageable_copies &&
         same_bits(x.h2d_pageable_bytes, y.h2d_pageable_bytes) &&
         same_bits(x.collective_ms, y.collective_ms) && same_bits(x.busy_ms, y.busy_ms);
}

/// Decodes a block; false when the decoder refused it.
bool decode(std::string_view bytes, int rank, std::int64_t rows, std::vector<StepRecord>& out) {
  try {
    StepBlockDecoder d(bytes, rank, rows);
    StepRecord r;
    while (d.next(r)) {
      out.push_back(r);
      if (static_cast<std::int64_t>(out.size()) > rows) broken("more records than 'rows'");
    }
  } catch (const StepBlockError& e) {
    if (e.record() < 0 || e.record() > static_cast<std::int64_t>(out.size()) + 1)
      broken("an error names record " + std::to_string(e.record()) + " after reading " +
             std::to_string(out.size()));
    return false;
  } catch (const std::exception& e) {
    broken(std::string("an exception other than StepBlockError: ") + e.what());
  }
  if (static_cast<std::int64_t>(out.size()) != rows) broken("fewer records than 'rows'");
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 3) return 0;
  const std::int64_t rows = data[0] | (std::int64_t{data[1]} << 8);
  const int rank = data[2];
  // The block in a buffer of its own size, so that ASan sees any read past it.
  const std::vector<char> block(data + 3, data + size);
  std::vector<StepRecord> first;
  if (!decode(std::string_view(block.data(), block.size()), rank, rows, first)) return 0;
  StepBlockEncoder encoder;
  for (const StepRecord& r : first) {
    if (r.global_rank != rank) broken("a record with another rank than its block's");
    if (const auto problem = traceml::model::check_step(r))
      broken("a record check_step refuses: " + *problem);
    encoder.add(r);
  }
  std::vector<StepRecord> second;
  if (!decode(encoder.bytes(), rank, rows, second)) broken("re-encoded records do not decode");
  StepBlockEncoder again;
  for (std::size_t i = 0; i < first.size(); ++i) {
    if (!same(first[i], second[i])) broken("a record changed on its way back");
    again.add(second[i]);
  }
  if (again.bytes() != encoder.bytes()) broken("encoding the same records gave other bytes");
  return 0;
}
