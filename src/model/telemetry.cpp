#include "model/telemetry.hpp"

#include <algorithm>
#include <cctype>

namespace traceml::model {

const char* event_name(Event e) {
  return kEventNames[static_cast<std::size_t>(e)];
}

std::optional<Event> event_from_name(std::string_view name) {
  for (std::size_t i = 0; i < kEventCount; ++i) {
    if (name == kEventNames[i]) return static_cast<Event>(i);
  }
  return std::nullopt;
}

void StepEvents::set(Event e, Timing t) {
  const auto i = static_cast<std::size_t>(e);
  present_ = std::uint16_t(present_ | bit(e));
  if (t.cpu_ms) {
    cpu_[i] = *t.cpu_ms;
    cpu_present_ = std::uint16_t(cpu_present_ | bit(e));
  } else {
    cpu_present_ = std::uint16_t(cpu_present_ & ~bit(e));
  }
  if (t.gpu_ms) {
    gpu_[i] = *t.gpu_ms;
    present_ = std::uint16_t(present_ | gpu_bit(e));
  } else {
    present_ = std::uint16_t(present_ & ~gpu_bit(e));
  }
}

void StepEvents::set_begin(Event e, std::optional<double> ms) {
  const auto i = static_cast<std::size_t>(e);
  if (ms) {
    begin_[i] = *ms;
    begin_present_ = std::uint8_t(begin_present_ | bit(e));
  } else {
    begin_[i] = 0.0;
    begin_present_ = std::uint8_t(begin_present_ & ~bit(e));
  }
}

Strategy strategy_from_string(const std::string& s) {
  auto b = s.find_first_not_of(" \t\r\n");
  auto en = s.find_last_not_of(" \t\r\n");
  std::string t = b == std::string::npos ? std::string() : s.substr(b, en - b + 1);
  std::transform(t.begin(), t.end(), t.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (t == "fsdp") return Strategy::Fsdp;
  if (t == "single_process") return Strategy::SingleProcess;
  if (t == "distributed_unknown") return Strategy::DistributedUnknown;
  if (t == "unknown") return Strategy::Unknown;
  return Strategy::Ddp;  // "ddp", empty and anything else (spec §4.1.1)
}

const char* strategy_name(Strategy s) {
  switch (s) {
    case Strategy::Ddp:
      return "ddp";
    case Strategy::Fsdp:
      return "fsdp";
    case Strategy::SingleProcess:
      return "single_process";
    case Strategy::DistributedUnknown:
      return "distributed_unknown";
    case Strategy::Unknown:
      return "unknown";
  }
  return "ddp";
}

}  // namespace traceml::model
