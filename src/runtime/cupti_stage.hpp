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
  static std::unique_ptr<CuptiStage> start(std::string& why) noexcept;

  explicit CuptiStage(const timing::CuptiApi& api) : source_(api) {}
  /// Starts the source; why it could not, in one line.
  [[nodiscard]] std::optional<std::string> start_source() noexcept { return source_.start(); }

  void collect(bool final) override;
  [[nodiscard]] std::optional<std::int64_t> delivered_through() const override { return through_; }
  model::StepGpuActivity attribute(std::int64_t begin_ns, std::int64_t end_ns) override {
    return attributor_.attribute(begin_ns, end_ns);
  }

  [[nodiscard]] std::int64_t records_lost() const override {
    return source_.cupti_dropped() + source_.lost() + attributor_.dropped();
  }
  [[nodiscard]] const timing::CuptiActivitySource& source() const { return source_; }
  [[nodiscard]] const timing::ActivityAttributor& attributor() const { return attributor_; }

 private:
  timing::CuptiActivitySource source_;
  timing::ActivityAttributor attributor_;
  std::optional<std::int64_t> through_;  // latest launch delivered
};

}  // namespace traceml::runtime
