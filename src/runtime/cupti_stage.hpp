// The ActivityStage over CUPTI: the live activity source (timing/
// cupti_activity_source) feeding the attributor (timing/gpu_activity) that
// splits the records into steps. Runs on the sender thread; with a duty
// cycle (timing/cupti_duty_cycle) the training threads switch the records.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/step_pipeline.hpp"
#include "timing/cupti_activity_source.hpp"
#include "timing/cupti_duty_cycle.hpp"
#include "timing/gpu_activity.hpp"

namespace traceml::runtime {

class CuptiStage : public ActivityStage {
 public:
  /// Loads CUPTI and starts capturing kernels, copies and the API calls that
  /// launched them, on a duty cycle when one is given. Null, with `why` set
  /// to one line, when it cannot.
  static std::unique_ptr<CuptiStage> start(std::string& why,
                                           timing::CuptiSourceSettings settings = {},
                                           std::optional<timing::DutyCycle> duty = {}) noexcept;

  explicit CuptiStage(const timing::CuptiApi& api, timing::CuptiSourceSettings settings = {})
      : source_(api, settings) {}
  /// Detaches the duty cycle, which may outlive the stage (release_duty_cycle).
  ~CuptiStage() override;
  CuptiStage(const CuptiStage&) = delete;
  CuptiStage& operator=(const CuptiStage&) = delete;

  /// Starts the source, and the duty cycle when one is given (its first
  /// window opens now); why it could not, in one line.
  [[nodiscard]] std::optional<std::string> start_source(
      std::optional<timing::DutyCycle> duty = {}) noexcept;

  void collect(bool final) override;
  [[nodiscard]] std::optional<std::int64_t> delivered_through() const override { return through_; }
  model::StepGpuActivity attribute(std::int64_t begin_ns, std::int64_t end_ns) override {
    return attributor_.attribute(begin_ns, end_ns);
  }
  bool records_step(std::int64_t begin_ns, std::int64_t end_ns) override;
  [[nodiscard]] std::optional<std::int64_t> records_off_after(std::int64_t end_ns) const override {
    return duty_ != nullptr ? duty_->records_off_after(end_ns) : std::nullopt;
  }

  /// Every activity that reached no step: dropped by CUPTI or by us, late
  /// (its step was settled before it came), unmatched (its launch never
  /// came) or launched outside any step.
  [[nodiscard]] std::int64_t records_lost() const override {
    return source_.cupti_dropped() + source_.lost() + attributor_.dropped() + attributor_.late() +
           attributor_.unmatched() + attributor_.outside_steps();
  }
  void flush_idle() override;
  [[nodiscard]] const timing::CuptiActivitySource& source() const { return source_; }
  [[nodiscard]] const timing::ActivityAttributor& attributor() const { return attributor_; }

  /// The duty cycle (DutyCycle::always() when none was asked; null only
  /// out of memory): the training threads call its at_step_begin() unless
  /// it always records, and a profile capture lends CUPTI through it.
  [[nodiscard]] timing::CuptiDutyCycle* duty_cycle() const { return duty_; }
  /// Hands the duty cycle's ownership to the caller, who keeps it for the
  /// life of the process: a training thread may still be inside its
  /// at_step_begin() when tracing stops (once detached it does nothing).
  timing::CuptiDutyCycle* release_duty_cycle() { return owned_duty_.release(); }
  /// Steps whose records the duty cycle had on, and those it had off (asked
  /// by the pipeline once per step): the sample size of the evidence.
  [[nodiscard]] std::int64_t steps_recorded() const { return steps_recorded_; }
  [[nodiscard]] std::int64_t steps_unrecorded() const { return steps_unrecorded_; }
  /// "duty cycle 8/128: ..." for the debug report, or how often CUPTI was
  /// lent to LibTorch's profiler; absent with neither.
  [[nodiscard]] std::optional<std::string> duty_summary() const;

 private:
  timing::CuptiActivitySource source_;
  timing::ActivityAttributor attributor_;
  std::unique_ptr<timing::CuptiDutyCycle> owned_duty_;
  timing::CuptiDutyCycle* duty_ = nullptr;
  std::int64_t steps_recorded_ = 0;
  std::int64_t steps_unrecorded_ = 0;
  void take(timing::FlushMode mode);

  std::optional<std::int64_t> through_;  // every launch up to it has been delivered
};

}  // namespace traceml::runtime
