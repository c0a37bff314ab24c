#include "model/record_kinds.hpp"

namespace traceml::model {

const char* kind_name(RecordKind k) {
  const char* name = "unknown";
  for_each_kind([&](const auto& r) {
    if (r.kind == k) name = r.name;
  });
  return name;
}

std::optional<std::string> check(const Record& r) {
  return std::visit([](const auto& x) { return check(x); }, r);
}

}  // namespace traceml::model
