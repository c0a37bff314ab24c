// What the sender's two files share (sender.cpp: recording and sending;
// sender_end.cpp: the end of the stream): the wake-up both sleep on and the
// frame arithmetic over the pending buffer. Private to the runtime.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "model/record_kinds.hpp"
#include "runtime/sender.hpp"
#include "transport/frame.hpp"
#include "transport/record_codec.hpp"

namespace traceml::runtime::sender_detail {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

/// What the sender sleeps on: process-wide and never freed, since a training
/// thread may signal it while the runtime shuts down (one sender a process).
struct WakeSignal {
  std::mutex mu;
  std::condition_variable cv;
  std::atomic<bool> requested{false};
};
WakeSignal& wake_signal();

/// The whole length (header and payload) of the frame that starts at `h`.
inline std::size_t frame_bytes_at(const std::uint8_t* h) {
  return transport::kHeaderBytes + (std::size_t(h[0]) | std::size_t(h[1]) << 8 |
                                    std::size_t(h[2]) << 16 | std::size_t(h[3]) << 24);
}

/// Whether the frame that starts at `h` holds a record (counted sent and
/// dropped, numbered along the stream), not the rank's own state or Bye:
/// what add_record queues, not add_control.
inline bool holds_record(const std::uint8_t* h) {
  return model::frame_holds_record(h[4]);
}

inline milliseconds remaining(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
  return std::max(left, milliseconds(0));
}

}  // namespace traceml::runtime::sender_detail

namespace traceml::runtime {

template <typename R>
void Sender::add_control(const R& r) {
  add_frame(transport::frame_type_of<R>(), transport::encode(r));
}

}  // namespace traceml::runtime
