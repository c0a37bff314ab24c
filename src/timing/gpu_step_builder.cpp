#include "timing/gpu_step_builder.hpp"

namespace traceml::timing {

GpuStepBuilder::GpuStepBuilder(const CudaApi& api, EventPool& pool, int device,
                               CurrentStream current_stream)
    : api_(api), pool_(pool), device_(device), current_stream_(current_stream) {}

GpuStepBuilder::~GpuStepBuilder() {
  discard_step();
  while (depth_ > 0) {
    const Open& o = open_[--depth_];
    if (o.start) pool_.release(*o.start);
  }
}

std::optional<EventId> GpuStepBuilder::record() noexcept {
  int current = -1;
  if (api_.get_device(&current) != kCudaSuccess || current != device_) {
    wrong_device_.store(wrong_device_.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
    return std::nullopt;
  }
  void* stream = current_stream_ != nullptr ? current_stream_(device_) : nullptr;
  // A stream being captured into a CUDA graph: recording would add our event
  // to the graph (and it could never be queried). The scope goes untimed.
  int capturing = 0;
  if (api_.stream_is_capturing != nullptr &&
      (api_.stream_is_capturing(stream, &capturing) != kCudaSuccess || capturing != 0)) {
    clear_error();
    return std::nullopt;
  }
  const std::optional<EventId> id = pool_.acquire();
  if (!id) {
    clear_error();  // creating an event may have failed
    return std::nullopt;
  }
  if (api_.event_record(pool_.event(*id), stream) != kCudaSuccess) {
    clear_error();
    pool_.release(*id);
    return std::nullopt;
  }
  return id;
}

void GpuStepBuilder::clear_error() noexcept {
  // Our failure must not surface as the program's: CUDA keeps a per-thread
  // last error that LibTorch checks after its next launch.
  if (api_.get_last_error != nullptr) (void)api_.get_last_error();
}

void GpuStepBuilder::skip(model::Event region) noexcept {
  step_.skipped_mask = std::uint8_t(step_.skipped_mask | 1u << unsigned(region));
  skipped_.store(skipped_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
}

void GpuStepBuilder::scope_begin(std::int64_t key) noexcept {
  // Past the nesting limit the scope is not tracked; its scope_end finds no
  // entry and marks the region skipped.
  if (depth_ == open_.size()) return;
  open_[depth_++] = Open{key, record()};
}

void GpuStepBuilder::scope_end(model::Event region, std::int64_t key) noexcept {
  // Scopes opened after this one and never closed cannot be timed: drop them.
  while (depth_ > 0 && open_[depth_ - 1].key > key) {
    const Open& orphan = open_[--depth_];
    if (orphan.start) pool_.release(*orphan.start);
  }
  if (depth_ == 0 || open_[depth_ - 1].key != key) {
    skip(region);  // its begin was not tracked
    return;
  }
  const std::optional<EventId> start = open_[--depth_].start;
  if (!start) {
    skip(region);
    return;
  }
  // The last slot is kept for the step's own scope, which ends last: a step
  // with many phases loses the GPU time of the phases that do not fit, never
  // its own step time (without which the row cannot be read on the GPU clock).
  const std::size_t room =
      region == model::Event::TracedStepTime ? step_.intervals.size() : step_.intervals.size() - 1;
  if (step_.count >= room) {
    pool_.release(*start);
    skip(region);
    return;
  }
  const std::optional<EventId> end = record();
  if (!end) {
    pool_.release(*start);
    skip(region);
    return;
  }
  step_.intervals[step_.count++] = GpuInterval{*start, *end, region};
}

GpuStepRecord GpuStepBuilder::finish_step() noexcept {
  GpuStepRecord out = step_;
  step_ = GpuStepRecord{};
  return out;
}

void GpuStepBuilder::discard_step() noexcept {
  for (std::size_t i = 0; i < step_.count; ++i) {
    pool_.release(step_.intervals[i].start);
    pool_.release(step_.intervals[i].end);
  }
  step_ = GpuStepRecord{};
}

}  // namespace traceml::timing
