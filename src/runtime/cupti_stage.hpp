// The ActivityStage over CUPTI: the live activity source (timing/
// cupti_activity_source) feeding the attributor (timing/gpu_activity) that
// splits the records into steps. Runs on the sender thread.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "runtime/step_pipeline.hpp"
#include "timing/cupti_activity_source.hpp"
#include "timing/gpu_activity.hpp"

namespace traceml::runtime {

class CuptiStage : public ActivityStage {
 public:
  /// Loads CUPTI and starts capturing kernels, copies and the API calls that
  /// launched them. Null, with `why` set to one line, when it cannot.
  static std::unique_ptr<CuptiStage> start(std::string& why,
                                           timing::CuptiSourceSettings settings = {}) noexcept;

  explicit CuptiStage(const timing::CuptiApi& api, timing::CuptiSourceSettings settings = {})
      : source_(api, settings) {}
  /// Starts the source; why it could not, in one line.
  [[nodiscard]] std::optional<std::string> start_source() noexcept { return source_.start(); }

  void collect(bool final) override;
  [[nodiscard]] std::optional<std::int64_t> delivered_through() const override { return through_; }
  model::StepGpuActivity attribute(std::int64_t begin_ns, std::int64_t end_ns) override {
    return attributor_.attribute(begin_ns, end_ns);
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

 private:
  timing::CuptiActivitySource source_;
  timing::ActivityAttributor attributor_;
  void take(timing::FlushMode mode);

  std::optional<std::int64_t> through_;  // every launch up to it has been delivered
};

}  // namespace traceml::runtime
