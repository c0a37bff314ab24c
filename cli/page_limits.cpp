#include "page_limits.hpp"

#include <cstdlib>
#include <vector>

#include "model/env_contract.hpp"

namespace traceml::cli {

namespace {

std::optional<std::string> env(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr) return std::nullopt;
  return std::string(v);
}

}  // namespace

PageLimitsRead read_page_limits() {
  PageLimitsRead out;
  std::vector<std::string> problems;
  out.limits = report::page_limits_from(env(model::env::kPageTimeout), env(model::env::kPageMemory),
                                        problems);
  if (!problems.empty()) out.problem = problems.front() + "; fix or unset it";
  return out;
}

}  // namespace traceml::cli
