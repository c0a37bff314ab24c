#include "report/compare/compare_stalls.hpp"

#include <vector>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/number_format.hpp"
#include "model/text.hpp"
#include "report/text/text_format.hpp"

namespace traceml::report {

namespace {

using analysis::fixed;

/// What the stalls' steps spent: "waited for input", ...
const char* where(const std::string& metric) {
  if (metric == "input_wait_ms") return "for input";
  if (metric == "h2d_ms") return "in host-to-device copies";
  return "outside the traced phases";
}

const char* phase_name(const std::string& metric) {
  if (metric == "input_wait_ms") return "input wait";
  if (metric == "h2d_ms") return "host-to-device copying";
  return "time outside the traced phases";
}

std::string rank_text(const StallsSeen& s) {
  return s.rank ? " of R" + std::to_string(*s.rank) : std::string();
}

std::string count_text(const StallsSeen& s) {
  return s.steps.size() == 1 ? "one stall" : std::to_string(s.steps.size()) + " stalls";
}

}  // namespace

std::string stalls_text(const StallsSeen& s) {
  const bool input = s.metric == "input_wait_ms";
  if (s.steps.size() == 1)
    return "step " + std::to_string(s.steps[0].first) + rank_text(s) +
           (input ? " waited " : " spent ") + fmt_duration_ms(s.steps[0].second) + " " +
           where(s.metric);
  std::vector<std::string> each;
  for (const auto& [step, ms] : s.steps)
    each.push_back(std::to_string(step) + " (" + fmt_duration_ms(ms) + ")");
  std::string list;
  for (std::size_t i = 0; i < each.size(); ++i)
    list += (i == 0 ? "" : i + 1 == each.size() ? " and " : ", ") + each[i];
  return "steps " + list + rank_text(s) + (input ? " waited " : " spent that long ") +
         where(s.metric);
}

std::string stalls_difference(const StepTimeCompare& s) {
  const auto& a = s.stalls_lhs;
  const auto& b = s.stalls_rhs;
  if (b && !a) return count_text(*b) + " in run B that run A has not (" + stalls_text(*b) + ")";
  if (a && !b) return count_text(*a) + " in run A that run B has not (" + stalls_text(*a) + ")";
  if (a && b) return "stalls in both runs (A: " + stalls_text(*a) + "; B: " + stalls_text(*b) + ")";
  return "";
}

std::string stalls_decide(const StepTimeCompare& s, const std::optional<std::string>& changed_to) {
  const auto& b = s.stalls_rhs;
  if (!b || !changed_to) return "";
  const auto kind = analysis::kind_from_name(b->kind);
  if (!kind || analysis::status_of(*kind) != *changed_to) return "";
  return ", which run B's " +
         std::string(b->steps.size() == 1 ? "stall decides" : "stalls decide") + " (without " +
         (b->steps.size() == 1 ? "it" : "them") + ", " + phase_name(b->metric) + " is " +
         fixed(b->share_without * 100.0, 0) + "% of its step, not " + fixed(b->share * 100.0, 0) +
         "%)";
}

Json stalls_json(const StepTimeCompare& s) {
  const auto one = [](const std::optional<StallsSeen>& x) {
    if (!x) return Json();
    Json steps = Json::array();
    for (const auto& [step, ms] : x->steps)
      steps.push_back(Json{{"step", step}, {"value_ms", ms}});
    return Json{{"kind", x->kind},
                {"metric", x->metric},
                {"rank", x->rank ? Json(*x->rank) : Json()},
                {"steps", std::move(steps)},
                {"share", x->share},
                {"share_without", x->share_without}};
  };
  return Json{{"lhs", one(s.stalls_lhs)}, {"rhs", one(s.stalls_rhs)}};
}

}  // namespace traceml::report
