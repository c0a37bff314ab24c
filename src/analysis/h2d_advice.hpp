// What to say when a rank's host-to-device copies come mostly from pageable
// memory (issue 5): the sentence of the H2D diagnoses' action, with the rank's
// numbers. Shared by the Step Time rules and the text report, so that both say
// the same thing from the same numbers.
#pragma once

#include <optional>
#include <string>

namespace traceml::analysis {

/// Per-step averages of one rank's H2D copies (from its GPU activity records).
struct H2dCopies {
  double copies = 0.0;
  double pageable_copies = 0.0;
  double bytes = 0.0;
  double pageable_bytes = 0.0;
};

/// "3 of 4 copies per step (96.0 MB of 128.0 MB) come from pageable memory: pin
/// the batch (pin_memory in the DataLoader options, or tensor.pin_memory()) and
/// copy with non_blocking=true." when at least kPageableDominantShare of the
/// bytes are pageable; nullopt otherwise (or when nothing was copied).
std::optional<std::string> pageable_advice(const H2dCopies& c);

/// Decimal bytes with one decimal, the unit chosen by `scale` so that two
/// numbers printed side by side share it: "96.0 MB" (KB below 1e6, GB from 1e9).
std::string decimal_bytes(double bytes, double scale);

/// A per-step count: "3" when integral (to 1e-9), else one decimal ("2.5").
std::string count_text(double count);

}  // namespace traceml::analysis
