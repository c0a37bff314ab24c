#include "analysis/h2d_advice.hpp"

#include <cmath>

#include "analysis/number_format.hpp"
#include "analysis/thresholds.hpp"

namespace traceml::analysis {

std::string decimal_bytes(double bytes, double scale) {
  if (std::fabs(scale) < 1e6) return fixed(bytes / 1e3, 1) + " KB";
  if (std::fabs(scale) < 1e9) return fixed(bytes / 1e6, 1) + " MB";
  return fixed(bytes / 1e9, 1) + " GB";
}

std::string count_text(double count) {
  const double whole = std::round(count);
  if (std::fabs(count - whole) < 1e-9) return fixed(whole, 0);
  return fixed(count, 1);
}

std::optional<std::string> pageable_advice(const H2dCopies& c) {
  if (!(c.copies > 0) || !(c.bytes > 0)) return std::nullopt;
  if (c.pageable_bytes / c.bytes < thresholds::kPageableDominantShare) return std::nullopt;
  return count_text(c.pageable_copies) + " of " + count_text(c.copies) + " copies per step (" +
         decimal_bytes(c.pageable_bytes, c.bytes) + " of " + decimal_bytes(c.bytes, c.bytes) +
         ") come from pageable memory: pin the batch (tensor.pin_memory(), in the dataset or a "
         "loader worker) and copy with .to(device, /*non_blocking=*/true).";
}

}  // namespace traceml::analysis
