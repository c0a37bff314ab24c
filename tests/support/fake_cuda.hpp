// A fake of the CUDA runtime entry points (timing::CudaApi) for tests of the
// GPU clock, as libkineto fakes CUPTI: events are numbers, and the test
// decides when each recorded event completes and at what GPU time.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <mutex>
#include <set>
#include <vector>

#include "timing/cuda_api.hpp"

namespace traceml::testing_support {

using timing::CudaApi;
using timing::kCudaErrorNotReady;
using timing::kCudaSuccess;

/// The fake CUDA runtime. The entry points are plain C function pointers, so
/// they reach the fake through one global; each test owns its FakeCuda.
class FakeCuda {
 public:
  FakeCuda() { current_ = this; }
  ~FakeCuda() { current_ = nullptr; }
  FakeCuda(const FakeCuda&) = delete;
  FakeCuda& operator=(const FakeCuda&) = delete;

  CudaApi api() const {
    CudaApi a;
    a.get_device_count = [](int* n) {
      *n = 1;
      return kCudaSuccess;
    };
    a.get_device = [](int* d) {
      *d = f().current_device;
      return kCudaSuccess;
    };
    a.event_create_with_flags = [](void** ev, unsigned flags) { return f().create(ev, flags); };
    a.event_record = [](void* ev, void* stream) { return f().record(ev, stream); };
    a.event_query = [](void* ev) { return f().query(ev); };
    a.event_elapsed_time = [](float* ms, void* s, void* e) { return f().elapsed(ms, s, e); };
    a.event_destroy = [](void* ev) { return f().destroy(ev); };
    a.get_error_string = [](int) { return "fake error"; };
    a.get_last_error = [] {
      ++f().last_error_reads;
      return kCudaSuccess;
    };
    a.stream_is_capturing = [](void*, int* status) {
      *status = f().capturing ? 1 : 0;
      return kCudaSuccess;
    };
    a.set_device = [](int device) {
      f().set_device_calls.push_back(device);
      return kCudaSuccess;
    };
    a.primary_context_active = [](int device, int* active) {
      *active = f().active_devices.count(device) > 0 ? 1 : 0;
      return 0;
    };
    return a;
  }

  // --- what the test controls ---
  /// What cudaGetDevice says the training thread's current device is.
  int current_device = 0;
  /// Whether the stream is being captured into a CUDA graph.
  bool capturing = false;
  /// How often cudaGetLastError was called (we clear our own failures).
  int last_error_reads = 0;
  /// The devices cudaSetDevice was called with, in order.
  std::vector<int> set_device_calls;
  /// Devices whose primary context is active (the program has used them).
  std::set<int> active_devices{0};
  /// The event recorded by the k-th cudaEventRecord call (0-based) completes
  /// at GPU time `t_ms`. It must not have been recorded again since.
  void complete(std::size_t k, double t_ms) {
    State& s = state_of(k);
    s.complete = true;
    s.t_ms = t_ms;
  }
  /// Completes records [first, first + n) at times t0, t0 + step, ...
  void complete_run(std::size_t first, std::size_t n, double t0, double step) {
    for (std::size_t i = 0; i < n; ++i)
      complete(first + i, t0 + double(i) * step);
  }
  /// Completes every event at the time of its latest record k: t0 + k * step.
  void complete_latest(double t0, double step) {
    for (std::size_t k = 0; k < records_.size(); ++k) {
      State& s = events_.at(records_[k]);
      if (s.last_record != k) continue;  // recorded again later
      s.complete = true;
      s.t_ms = t0 + double(k) * step;
    }
  }
  /// cudaEventQuery on the k-th record's event returns `error`.
  void fail_query(std::size_t k, int error) { state_of(k).query_error = error; }
  /// cudaEventElapsedTime returns `error` from now on.
  int elapsed_error = kCudaSuccess;
  /// cudaEventRecord returns `error` from now on.
  int record_error = kCudaSuccess;

  // --- what the test observes ---
  std::size_t records() const { return records_.size(); }
  int created() const { return created_; }
  int destroyed() const { return destroyed_; }
  int queries() const { return queries_; }
  unsigned last_flags() const { return last_flags_; }
  void* last_stream() const { return last_stream_; }

 private:
  struct State {
    bool complete = false;
    double t_ms = 0.0;
    int query_error = kCudaSuccess;
    std::size_t last_record = 0;
  };
  static FakeCuda& f() { return *current_; }
  State& state_of(std::size_t k) {
    EXPECT_LT(k, records_.size());
    State& s = events_.at(records_.at(k));
    EXPECT_EQ(s.last_record, k) << "event of record " << k << " was recorded again";
    return s;
  }

  int create(void** ev, unsigned flags) {
    std::lock_guard<std::mutex> lock(mu_);  // the pool may create from several threads
    ++created_;
    last_flags_ = flags;
    *ev = reinterpret_cast<void*>(std::uintptr_t(created_));
    events_[*ev] = State{true, 0.0, kCudaSuccess, 0};  // a new event queries as complete
    return kCudaSuccess;
  }
  int record(void* ev, void* stream) {
    if (record_error != kCudaSuccess) return record_error;
    last_stream_ = stream;
    events_.at(ev) = State{false, 0.0, kCudaSuccess, records_.size()};
    records_.push_back(ev);
    return kCudaSuccess;
  }
  int query(void* ev) {
    ++queries_;
    const State& s = events_.at(ev);
    if (s.query_error != kCudaSuccess) return s.query_error;
    return s.complete ? kCudaSuccess : kCudaErrorNotReady;
  }
  int elapsed(float* ms, void* start, void* end) {
    if (elapsed_error != kCudaSuccess) return elapsed_error;
    const State& s = events_.at(start);
    const State& e = events_.at(end);
    if (!s.complete || !e.complete) return kCudaErrorNotReady;
    *ms = float(e.t_ms - s.t_ms);
    return kCudaSuccess;
  }
  int destroy(void* ev) {
    ++destroyed_;
    events_.erase(ev);
    return kCudaSuccess;
  }

  static inline FakeCuda* current_ = nullptr;
  std::mutex mu_;
  std::map<void*, State> events_;
  std::vector<void*> records_;
  int created_ = 0;
  int destroyed_ = 0;
  int queries_ = 0;
  unsigned last_flags_ = 99;
  void* last_stream_ = reinterpret_cast<void*>(1);
};

}  // namespace traceml::testing_support
