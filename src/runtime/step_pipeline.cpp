#include "runtime/step_pipeline.hpp"

#include <algorithm>
#include <string>
#include <unordered_map>

namespace traceml::runtime {

model::StepRecord to_step_record(const RawStep& raw, int rank, const timing::WallMapping& wall) {
  return model::cpu_step_record(
      rank, raw.step, wall.to_unix(raw.end_ns), raw.thread, raw.mask, raw.begin_mask,
      [&raw](std::size_t e) { return double(raw.ns[e]) * 1e-6; },
      [&raw](std::size_t e) { return double(raw.begin_ns[e]) * 1e-6; });
}

std::optional<model::StepMemoryRecord> to_step_memory(const RawStep& raw, int rank) {
  if (!raw.memory) return std::nullopt;
  model::StepMemoryRecord m;
  m.global_rank = rank;
  m.step = raw.step;
  m.device = "cuda:" + std::to_string(raw.memory->device);
  m.peak_allocated_bytes = raw.memory->peak_allocated_bytes;
  m.peak_reserved_bytes = raw.memory->peak_reserved_bytes;
  return m;
}

void add_captured_h2d(const model::StepGpuActivity& activity, model::StepEvents& events) {
  if (events.has(model::Event::H2D) || activity.h2d_copies == 0) return;
  events.set(model::Event::H2D, model::Timing{std::nullopt, activity.h2d_ms});
}

StepPipeline::StepPipeline(int rank, const timing::WallMapping& wall, GpuClock* gpu,
                           ActivityStage* activity)
    : rank_(rank), wall_(wall), gpu_(gpu), activity_(activity) {}

void StepPipeline::add(const std::vector<RawStep>& steps, const std::vector<GpuRawStep>& gpu,
                       TimePoint now, const Emit& emit) {
  // GPU records kept from earlier drains (their CPU step was not published
  // yet when the sender drained: the training thread pushes the GPU record,
  // reads memory, then publishes the CPU one) come first.
  std::vector<Held> held;
  held.swap(held_);
  std::unordered_map<std::int64_t, const timing::GpuStepRecord*> by_step;
  std::unordered_map<std::int64_t, int> age;
  for (const auto& h : held) {
    by_step.emplace(h.raw.step, &h.raw.record);
    age[h.raw.step] = h.age;
  }
  for (const auto& g : gpu)
    by_step.emplace(g.step, &g.record);
  for (const RawStep& raw : steps) {
    model::StepRecord record = to_step_record(raw, rank_, wall_);
    std::optional<model::StepMemoryRecord> memory = to_step_memory(raw, rank_);
    const auto it = by_step.find(raw.step);
    if (it == by_step.end() || gpu_ == nullptr) {
      emit(record, memory);
      continue;
    }
    const timing::GpuStepRecord* events = it->second;
    by_step.erase(it);
    if (!gpu_->submit(raw.step, *events, now)) {
      // Too many steps wait for the GPU: the resolver gave the events back,
      // and the step goes out with CPU times (records need not be in order).
      emit(record, memory);
      continue;
    }
    const std::int64_t traced = raw.ns[std::size_t(model::Event::TracedStepTime)];
    waiting_.push_back(
        Waiting{std::move(record), std::move(memory), raw.end_ns - traced, raw.end_ns});
  }
  // A record whose CPU step has not come by the next drains was lost with it
  // (a full ring): its events go back.
  for (const auto& [step, events] : by_step) {
    if (gpu_ == nullptr) continue;
    const auto a = age.find(step);
    const int next_age = a == age.end() ? 1 : a->second + 1;
    if (next_age > kHoldDrains)
      gpu_->release(*events);
    else
      held_.push_back(Held{GpuRawStep{step, *events}, next_age});
  }
  poll(now, emit);
}

void StepPipeline::poll(TimePoint now, const Emit& emit) {
  if (gpu_ == nullptr) return;
  if (!waiting_.empty()) {
    std::vector<timing::GpuStepTimes> times;
    gpu_->poll(now, times);
    take_times(times, now, emit);
  }
  if (activity_ != nullptr) {
    activity_->collect(false);
    attribute_ready(now, false, emit);
  }
}

void StepPipeline::abandon(const Emit& emit) {
  if (gpu_ == nullptr) return;
  for (const Held& h : held_)
    gpu_->release(h.raw.record);
  held_.clear();
  const TimePoint now = std::chrono::steady_clock::now();
  std::vector<timing::GpuStepTimes> times;
  gpu_->poll(now, times);
  take_times(times, now, emit);
  times.clear();
  gpu_->abandon_all(times);
  take_times(times, now, emit);
  if (activity_ != nullptr) {
    activity_->collect(true);
    attribute_ready(now, true, emit);
  }
}

void StepPipeline::take_times(std::vector<timing::GpuStepTimes>& times, TimePoint now,
                              const Emit& emit) {
  // The resolver emits in the order steps were submitted, which is the order
  // of waiting_.
  for (const timing::GpuStepTimes& t : times) {
    if (waiting_.empty()) break;
    Waiting w = std::move(waiting_.front());
    waiting_.pop_front();
    if (t.step == w.record.step) {
      timing::merge_gpu_times(t, w.record.events);
      w.resolved = t.outcome == timing::GpuOutcome::Resolved;
    }
    if (activity_ == nullptr || !w.resolved) {
      emit(w.record, w.memory);
      continue;
    }
    if (!activity_->records_step(w.begin_ns, w.end_ns)) {
      ++steps_unrecorded_;
      emit(w.record, w.memory);
      continue;
    }
    w.since = now;
    for_activity_.push_back(std::move(w));
  }
}

void StepPipeline::attribute_ready(TimePoint now, bool final, const Emit& emit) {
  while (!for_activity_.empty()) {
    Waiting& w = for_activity_.front();
    const std::optional<std::int64_t> through = activity_->delivered_through();
    const bool arrived = final || (through && *through >= w.end_ns);
    // The GPU idle for steps: none waits for it, and the last one it
    // finished did so kIdleFlushWait ago. Or the duty cycle turned the
    // records off after this step and the GPU has passed every step launched
    // before that: nothing more will come to carry the horizon.
    const std::optional<std::int64_t> off =
        arrived || w.flushed ? std::nullopt : activity_->records_off_after(w.end_ns);
    const bool window_done = off && (waiting_.empty() || waiting_.front().begin_ns >= *off);
    if (!arrived && !w.flushed &&
        (window_done || (waiting_.empty() && now - for_activity_.back().since >= kIdleFlushWait))) {
      w.flushed = true;
      activity_->flush_idle();
      continue;  // look again, with what the flush brought
    }
    if (arrived) {
      const model::StepGpuActivity a = activity_->attribute(w.begin_ns, w.end_ns);
      add_captured_h2d(a, w.record.events);
      w.record.gpu_activity = a;
    } else if (now - w.since < kActivityWait) {
      return;  // later steps' records come after this one's
    } else {
      ++activity_timeouts_;  // absent, not zero: nothing is known of its activity
    }
    emit(w.record, w.memory);
    for_activity_.pop_front();
  }
}

}  // namespace traceml::runtime
