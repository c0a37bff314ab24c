// The tracer's clocks: a monotonic nanosecond clock for durations (one vDSO
// call, ~20-30 ns) and the conversion of its readings to unix seconds for
// record timestamps, so the hot path never reads the wall clock. In timing/
// because the GPU activity source puts CUPTI's timestamps on this clock; the
// runtime, a layer above, uses it for every scope.
#pragma once

#include <cstdint>
#include <ctime>

namespace traceml::timing {

/// Monotonic nanoseconds; never 0 (0 is the hot path's "not recording").
inline std::int64_t now_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  const std::int64_t t = std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
  return t == 0 ? 1 : t;
}

/// Unix seconds now.
inline double wall_seconds() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return double(ts.tv_sec) + double(ts.tv_nsec) * 1e-9;
}

/// Maps monotonic readings to unix seconds with one offset taken at start, so
/// that timestamps of one rank are consistent even if the wall clock jumps.
class WallMapping {
 public:
  WallMapping() noexcept : offset_s_(wall_seconds() - double(now_ns()) * 1e-9) {}
  [[nodiscard]] double to_unix(std::int64_t mono_ns) const noexcept {
    return offset_s_ + double(mono_ns) * 1e-9;
  }

 private:
  double offset_s_;
};

}  // namespace traceml::timing
