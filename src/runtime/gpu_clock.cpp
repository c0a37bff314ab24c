#include "runtime/gpu_clock.hpp"

namespace traceml::runtime {

std::optional<int> choose_gpu_device(int device_count, std::optional<int> local_rank,
                                     std::optional<int> current,
                                     const std::function<bool(int)>& in_use) {
  if (device_count <= 0) return std::nullopt;
  if (local_rank && *local_rank >= 0) {
    const int own = *local_rank % device_count;
    if (in_use(own)) return own;
  }
  if (current && *current >= 0 && *current < device_count && in_use(*current)) return current;
  return std::nullopt;
}

GpuClock::GpuClock(const timing::CudaApi& api, int device_count, std::optional<int> local_rank,
                   timing::CurrentStream stream, timing::GpuResolverSettings settings)
    : api_(api),
      device_count_(device_count),
      local_rank_(local_rank),
      stream_(stream),
      pool_(api_),
      resolver_(api_, pool_, settings) {}

GpuClock::~GpuClock() {
  std::vector<timing::GpuStepTimes> ignored;
  resolver_.abandon_all(ignored);
  std::vector<GpuRawStep> queued;
  drain(queued);
  for (const auto& q : queued)
    release(q.record);
  threads_.clear();  // builders give back what they hold
}

GpuThread* GpuClock::attach_thread() noexcept {
  try {
    std::lock_guard<std::mutex> lock(mu_);
    int device = device_.load(std::memory_order_relaxed);
    if (device < 0) {
      const auto in_use = [this](int d) {
        // Without the driver's query we could not tell without creating a
        // context, so no device counts as used: the rank stays on the CPU clock.
        int active = 0;
        return api_.primary_context_active != nullptr &&
               api_.primary_context_active(d, &active) == 0 && active != 0;
      };
      // cudaGetDevice reads the thread's setting; it creates no context.
      int current_device = -1;
      std::optional<int> current;
      if (api_.get_device(&current_device) == timing::kCudaSuccess) current = current_device;
      const std::optional<int> chosen =
          choose_gpu_device(device_count_, local_rank_, current, in_use);
      if (!chosen) return nullptr;
      device = *chosen;
      device_.store(device, std::memory_order_release);
    }
    threads_.push_back(std::make_unique<GpuThread>(api_, pool_, device, stream_));
    return threads_.back().get();
  } catch (...) {
    return nullptr;  // out of memory: this thread stays on the CPU clock
  }
}

bool GpuClock::publish(GpuThread& t, std::int64_t step,
                       const timing::GpuStepRecord& record) noexcept {
  if (t.ring.push(GpuRawStep{step, record})) return true;
  release(record);
  publish_dropped_.fetch_add(1, std::memory_order_relaxed);
  return false;
}

void GpuClock::drain(std::vector<GpuRawStep>& out) {
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& t : threads_)
    t->ring.drain([&](const GpuRawStep& s) { out.push_back(s); });
}

bool GpuClock::submit(std::int64_t step, const timing::GpuStepRecord& record,
                      std::chrono::steady_clock::time_point now) {
  return resolver_.submit(step, record, now);
}

void GpuClock::poll(std::chrono::steady_clock::time_point now,
                    std::vector<timing::GpuStepTimes>& out) {
  // Queries from this thread must never invalidate a CUDA graph that the
  // program captures in global mode: relaxed mode, once per thread.
  thread_local bool relaxed = false;
  if (!relaxed && api_.thread_exchange_capture_mode != nullptr) {
    int mode = timing::kCudaStreamCaptureModeRelaxed;
    relaxed = api_.thread_exchange_capture_mode(&mode) == timing::kCudaSuccess;
  }
  // Event queries and elapsed times act on the thread's current device: make
  // it the timed one, once per thread (the program already uses that device,
  // so its primary context exists and nothing is created).
  thread_local int selected = -1;
  const int device = device_.load(std::memory_order_acquire);
  if (device >= 0 && selected != device && api_.set_device != nullptr &&
      api_.set_device(device) == timing::kCudaSuccess)
    selected = device;
  resolver_.poll(now, out);
}

void GpuClock::abandon_all(std::vector<timing::GpuStepTimes>& out) {
  resolver_.abandon_all(out);
}

void GpuClock::release(const timing::GpuStepRecord& record) noexcept {
  for (std::size_t i = 0; i < record.count; ++i) {
    pool_.release(record.intervals[i].start);
    pool_.release(record.intervals[i].end);
  }
}

std::optional<int> GpuClock::device() const noexcept {
  const int d = device_.load(std::memory_order_acquire);
  if (d < 0) return std::nullopt;
  return d;
}

GpuClockCounters GpuClock::counters() const {
  GpuClockCounters c;
  c.steps_resolved = resolver_.resolved();
  c.steps_expired = resolver_.expired();
  c.steps_failed = resolver_.failed();
  c.steps_rejected = resolver_.rejected() + publish_dropped_.load(std::memory_order_relaxed);
  c.steps_abandoned = resolver_.abandoned();
  c.pool_exhausted = pool_.exhausted();
  std::lock_guard<std::mutex> lock(mu_);
  for (const auto& t : threads_)
    c.scopes_skipped += t->builder.skipped_scopes();
  return c;
}

}  // namespace traceml::runtime
