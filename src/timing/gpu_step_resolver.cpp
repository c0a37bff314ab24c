#include "timing/gpu_step_resolver.hpp"

namespace traceml::timing {
namespace {

/// The k-th event of a record in recording order: interval k/2's start or end.
EventId event_at(const GpuStepRecord& r, std::size_t k) {
  const GpuInterval& iv = r.intervals[k / 2];
  return k % 2 == 0 ? iv.start : iv.end;
}

bool has_bit(std::uint8_t mask, std::size_t e) {
  return ((mask >> e) & 1u) != 0;
}

}  // namespace

GpuStepResolver::GpuStepResolver(const CudaApi& api, EventPool& pool, GpuResolverSettings settings)
    : api_(api), pool_(pool), settings_(settings) {}

GpuStepResolver::~GpuStepResolver() {
  for (const Pending& p : pending_)
    release_events(p.record);
}

bool GpuStepResolver::submit(std::int64_t step, const GpuStepRecord& record, TimePoint now) {
  if (pending_.size() >= settings_.max_pending_steps) {
    release_events(record);
    bump(rejected_);
    return false;
  }
  pending_.push_back(Pending{step, record, 0, now});
  return true;
}

GpuStepResolver::Progress GpuStepResolver::advance(Pending& p) const {
  // Each poll resumes at the first event not yet seen complete: a completed
  // event stays completed until it is recorded again, which only its owner
  // (us) allows, so a slow step costs one query per poll, not one per event.
  const std::size_t total = std::size_t(p.record.count) * 2;
  while (p.checked < total) {
    const int rc = api_.event_query(pool_.event(event_at(p.record, p.checked)));
    if (rc == kCudaErrorNotReady) return Progress::Running;
    if (rc != kCudaSuccess) return Progress::Error;
    ++p.checked;
  }
  return Progress::Complete;
}

std::optional<GpuStepTimes> GpuStepResolver::times_of(const Pending& p) const {
  GpuStepTimes out;
  out.step = p.step;
  const GpuStepRecord& r = p.record;
  std::array<double, model::kEventCount> sum{};
  std::array<bool, model::kEventCount> seen{};
  for (std::size_t i = 0; i < r.count; ++i) {
    const GpuInterval& iv = r.intervals[i];
    float ms = 0.0f;
    if (api_.event_elapsed_time(&ms, pool_.event(iv.start), pool_.event(iv.end)) != kCudaSuccess)
      return std::nullopt;
    sum[std::size_t(iv.region)] += double(ms);
    seen[std::size_t(iv.region)] = true;
  }
  // A step is timed on the GPU when its own scope is; then an event with no
  // scope in it measured nothing (0.0), as the CPU side says for input wait.
  const auto traced = std::size_t(model::Event::TracedStepTime);
  const bool timed = seen[traced] && !has_bit(r.skipped_mask, traced);
  for (std::size_t e = 0; e < model::kEventCount; ++e) {
    if (has_bit(r.skipped_mask, e)) continue;
    if (seen[e]) {
      out.gpu_ms[e] = sum[e];
    } else if (timed) {
      out.gpu_ms[e] = 0.0;
    }
  }
  return out;
}

void GpuStepResolver::release_events(const GpuStepRecord& r) {
  for (std::size_t i = 0; i < r.count; ++i) {
    pool_.release(r.intervals[i].start);
    pool_.release(r.intervals[i].end);
  }
}

void GpuStepResolver::pop_front(TimePoint now) {
  release_events(pending_.front().record);
  pending_.pop_front();
  // The deadline of the next step runs from now: until this moment the GPU
  // was still busy with the earlier one.
  if (!pending_.empty()) pending_.front().head_since = now;
}

std::size_t GpuStepResolver::poll(TimePoint now, std::vector<GpuStepTimes>& out) {
  std::size_t emitted = 0;
  while (!pending_.empty()) {
    Pending& p = pending_.front();
    GpuStepTimes t;
    t.step = p.step;
    switch (advance(p)) {
      case Progress::Running:
        if (now - p.head_since < settings_.deadline) return emitted;
        t.outcome = GpuOutcome::Expired;
        bump(expired_);
        break;
      case Progress::Error:
        t.outcome = GpuOutcome::Failed;
        bump(failed_);
        break;
      case Progress::Complete:
        if (auto resolved = times_of(p)) {
          t = *resolved;
          bump(resolved_);
        } else {
          t.outcome = GpuOutcome::Failed;
          bump(failed_);
        }
        break;
    }
    out.push_back(t);
    ++emitted;
    pop_front(now);
  }
  return emitted;
}

std::size_t GpuStepResolver::abandon_all(std::vector<GpuStepTimes>& out) {
  const std::size_t n = pending_.size();
  for (const Pending& p : pending_) {
    GpuStepTimes t;
    t.step = p.step;
    t.outcome = GpuOutcome::Abandoned;
    out.push_back(t);
    release_events(p.record);
    bump(abandoned_);
  }
  pending_.clear();
  return n;
}

}  // namespace traceml::timing
