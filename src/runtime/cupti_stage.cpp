#include "runtime/cupti_stage.hpp"

#include <algorithm>
#include <vector>

#include "timing/clock.hpp"

namespace traceml::runtime {

std::unique_ptr<CuptiStage> CuptiStage::start(std::string& why,
                                              timing::CuptiSourceSettings settings,
                                              std::optional<timing::DutyCycle> duty) noexcept {
  try {
    const timing::CuptiApiLoad load = timing::load_cupti_api();
    if (!load.api) {
      why = load.reason;
      return nullptr;
    }
    auto stage = std::make_unique<CuptiStage>(*load.api, settings);
    if (const std::optional<std::string> failed = stage->start_source(duty)) {
      why = *failed;
      return nullptr;
    }
    return stage;
  } catch (...) {
    why = "out of memory";
    return nullptr;
  }
}

CuptiStage::~CuptiStage() {
  if (duty_ != nullptr) duty_->detach();
}

std::optional<std::string> CuptiStage::start_source(
    std::optional<timing::DutyCycle> duty) noexcept {
  if (auto why = source_.start()) return why;
  // Without a duty cycle, one that always records: it lends CUPTI to
  // LibTorch's profiler for a capture, and knows which steps were lent.
  try {
    owned_duty_ = std::make_unique<timing::CuptiDutyCycle>(
        duty.value_or(timing::DutyCycle::always()), source_, timing::now_ns());
    duty_ = owned_duty_.get();
  } catch (...) {  // none: the records stay on, and no capture may take CUPTI
  }
  return std::nullopt;
}

bool CuptiStage::records_step(std::int64_t begin_ns, std::int64_t end_ns) {
  if (duty_ == nullptr) return true;
  const bool recorded = duty_->covers(begin_ns, end_ns);
  ++(recorded ? steps_recorded_ : steps_unrecorded_);
  return recorded;
}

std::optional<std::string> CuptiStage::duty_summary() const {
  if (duty_ == nullptr) return std::nullopt;
  const timing::DutyCycle& c = duty_->cycle();
  const std::int64_t lends = duty_->lends();
  const std::string lent = lends == 1 ? std::string("once") : std::to_string(lends) + " times";
  if (c.is_always()) {
    if (lends == 0) return std::nullopt;
    return "CUPTI lent to LibTorch's profiler " + lent + ": steps recorded " +
           std::to_string(steps_recorded_) + ", steps not recorded " +
           std::to_string(steps_unrecorded_) + ", switches refused " +
           std::to_string(duty_->failed_switches());
  }
  return "duty cycle " + std::to_string(c.window) + "/" + std::to_string(c.period) +
         (lends > 0 ? " (lent to LibTorch's profiler " + lent + ")" : std::string()) +
         ": windows " + std::to_string(duty_->windows()) + ", steps recorded " +
         std::to_string(steps_recorded_) + ", steps not recorded " +
         std::to_string(steps_unrecorded_) + ", switches refused " +
         std::to_string(duty_->failed_switches());
}

void CuptiStage::take(timing::FlushMode mode) {
  std::vector<timing::ApiLaunch> launches;
  std::vector<timing::GpuActivity> activities;
  source_.collect(launches, activities, mode);
  attributor_.add(launches, activities);
  // How far the records have come: the latest launch whose work came back.
  // Not the latest API call: CUPTI hands buffers back in no order across
  // threads (per-thread buffers, CUDA 13's default, or buffers filled at
  // different rates), and calls that launch nothing (our own cudaEventQuery,
  // c10d's watchdog) come back long before the training thread's copies.
  if (const auto owner = attributor_.latest_owning_launch())
    through_ = std::max(through_.value_or(*owner), *owner);
}

void CuptiStage::collect(bool final) {
  // The final collect stops CUPTI, which hands back everything; no training
  // thread switches the records after that.
  if (final) {
    if (duty_ != nullptr) duty_->detach();
    source_.stop();
  }
  take(final ? timing::FlushMode::Forced : timing::FlushMode::Completed);
}

void CuptiStage::flush_idle() {
  // No step's work is on the GPU: a forced flush hands back every record of
  // work launched before now, and loses only work that no step waits for.
  const std::int64_t now = timing::now_ns();
  take(timing::FlushMode::Forced);
  through_ = std::max(through_.value_or(now), now);
}

}  // namespace traceml::runtime
