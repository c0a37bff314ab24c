#include "runtime/cupti_stage.hpp"

#include <algorithm>
#include <vector>

namespace traceml::runtime {

std::unique_ptr<CuptiStage> CuptiStage::start(std::string& why) noexcept {
  try {
    const timing::CuptiApiLoad load = timing::load_cupti_api();
    if (!load.api) {
      why = load.reason;
      return nullptr;
    }
    auto stage = std::make_unique<CuptiStage>(*load.api);
    if (const std::optional<std::string> failed = stage->start_source()) {
      why = *failed;
      return nullptr;
    }
    return stage;
  } catch (...) {
    why = "out of memory";
    return nullptr;
  }
}

void CuptiStage::collect(bool final) {
  // CUPTI hands a buffer back once its records are complete, and a buffer
  // holds records in launch order: after one arrives, every launch up to its
  // latest has been delivered. The final collect stops CUPTI, which hands back
  // everything.
  if (final) source_.stop();
  std::vector<timing::ApiLaunch> launches;
  std::vector<timing::GpuActivity> activities;
  source_.collect(launches, activities,
                  final ? timing::FlushMode::Forced : timing::FlushMode::Completed);
  for (const auto& l : launches)
    through_ = std::max(through_.value_or(l.cpu_ns), l.cpu_ns);
  attributor_.add(launches, activities);
}

}  // namespace traceml::runtime
