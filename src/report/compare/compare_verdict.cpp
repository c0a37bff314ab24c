// The compare verdict (spec §6.3; DECISIONS 11, 12), decided from the typed
// sections: every finding that applies, by priority; the first is the verdict.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <string>
#include <vector>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/number_format.hpp"
#include "analysis/summary_keys.hpp"
#include "analysis/thresholds.hpp"
#include "report/compare/compare.hpp"
#include "report/compare/compare_noise.hpp"
#include "report/compare/compare_stalls.hpp"
#include "report/text/text_format.hpp"

namespace traceml::report {

namespace {

namespace th = analysis::thresholds;
namespace key = analysis::summary_keys;
using analysis::fixed;
using VS = VerdictStatus;

/// A mean step time that moved this much (percent) while the median step
/// held was moved by a few steps, and the verdict says so rather than call
/// it noise alone.
constexpr double kOutlierMovedPct = 50.0;

int status_rank(const std::optional<std::string>& s) {
  return s ? analysis::status_rank(*s) : 0;
}

std::string title_case(const std::string& status) {
  std::string s = status;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    s[i] = static_cast<char>(i == 0 ? std::toupper(c) : std::tolower(c));
  }
  return s;
}

/// "A", "A and B", "A, B and C".
std::string joined(const std::vector<std::string>& parts) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return out;
}

/// The diagnoses that --fail-on-diagnosis-change watches (primary, step time,
/// step memory) and that changed, as clauses: "the primary and step time
/// diagnoses changed from INPUT-BOUND to COMPUTE-BOUND". Diagnoses that
/// changed the same way share a clause.
std::vector<std::string> diagnosis_changes(const DiagnosisChange& primary,
                                           const DiagnosisChange& step,
                                           const DiagnosisChange& memory) {
  struct Change {
    std::vector<std::string> names;
    std::string from;
    std::string to;
  };
  std::vector<Change> changes;
  for (const auto& [name, diag] :
       {std::pair<const char*, const DiagnosisChange*>{"primary", &primary},
        std::pair<const char*, const DiagnosisChange*>{"step time", &step},
        std::pair<const char*, const DiagnosisChange*>{"step memory", &memory}}) {
    if (!diag->changed()) continue;
    const std::string from = diag->lhs.value_or("n/a");
    const std::string to = diag->rhs.value_or("n/a");
    const auto same = std::find_if(changes.begin(), changes.end(),
                                   [&](const Change& c) { return c.from == from && c.to == to; });
    if (same != changes.end())
      same->names.push_back(name);
    else
      changes.push_back(Change{{name}, from, to});
  }
  std::vector<std::string> out;
  for (const Change& c : changes)
    out.push_back("the " + joined(c.names) + (c.names.size() > 1 ? " diagnoses" : " diagnosis") +
                  " changed from " + c.from + " to " + c.to);
  return out;
}

}  // namespace

Comparability comparability_of(MetricState s) {
  constexpr Comparability kOf[] = {Comparability::Comparable, Comparability::MissingOneSide,
                                   Comparability::MissingBoth};
  return kOf[static_cast<int>(s)];
}

const char* comparability_name(Comparability c) {
  constexpr const char* kNames[] = {"comparable", "missing_one_side", "missing_both", "partial",
                                    "insufficient"};
  return kNames[static_cast<int>(c)];
}

const char* verdict_name(VerdictStatus s) {
  constexpr const char* kNames[] = {"IMPROVEMENT", "REGRESSION", "EQUIVALENT", "MIXED",
                                    "INCONCLUSIVE"};
  return kNames[static_cast<int>(s)];
}

bool MetricDelta::is_text() const {
  return std::string(unit) == "text";
}

MetricState MetricDelta::state() const {
  const bool a = lhs.has_value();
  const bool b = rhs.has_value();
  return a && b   ? MetricState::Comparable
         : a || b ? MetricState::MissingOneSide
                  : MetricState::MissingBoth;
}

const MetricDelta& CompareSection::metric(const char* metric_key) const {
  const auto it = std::find_if(metrics.begin(), metrics.end(), [metric_key](const MetricDelta& m) {
    return std::string(m.key) == metric_key;
  });
  // Only compare_compute names metrics, and only ones it computes.
  if (it == metrics.end()) std::abort();
  return *it;
}

CompareVerdict decide_verdict(const CompareReport& report, const CompareOptions& options) {
  const StepTimeCompare& step_sec = report.step_time;
  const CompareSection& mem_sec = report.step_memory;
  const MetricDelta& step = step_sec.metric(key::kStepTimeMs);
  const MetricDelta& mem = mem_sec.metric(key::kPeakReservedBytes);
  const MetricState step_state = step.state();
  const MetricState mem_state = mem.state();
  const bool step_ok = step_state == MetricState::Comparable;
  const bool mem_ok = mem_state == MetricState::Comparable;
  // DECISIONS 11: when neither run measured step memory (every CPU run) the
  // runs are compared on step time and the diagnoses; TraceML stops at
  // "partially comparable" there.
  const bool mem_unmeasured = mem_state == MetricState::MissingBoth;
  const Comparability availability = step_ok && (mem_ok || mem_unmeasured)
                                         ? Comparability::Comparable
                                     : step_ok || mem_ok ? Comparability::Partial
                                                         : Comparability::Insufficient;
  const auto& step_pct = step.pct_change;
  const auto& mem_pct = mem.pct_change;
  const std::string& label = step.label;
  const bool step_diag_changed = step_sec.diagnosis.changed();
  const bool residual_ok = step_sec.metric(key::kResidualMs).state() == MetricState::Comparable;
  // DECISIONS 12: a step-time change counts only beyond run-to-run noise
  // (unless --strict, or when the summaries carry nothing to judge noise by).
  const NoiseDecision& noise = step_sec.noise;
  const bool noise_aware = !options.strict && noise.available;
  const double step_gate = th::kCompareStepTimePct;
  const double mem_gate = th::kCompareMemoryPct;
  const bool step_up = step_pct && *step_pct >= step_gate;
  const bool step_down = step_pct && *step_pct <= -step_gate;
  const bool step_slower = step_up && (!noise_aware || change_counts(noise, true));
  const bool step_faster = step_down && (!noise_aware || change_counts(noise, false));
  const bool step_in_noise = (step_up && !step_slower) || (step_down && !step_faster);

  std::vector<Finding> f;
  const char* kNull = nullptr;
  auto add = [&f](VS status, int pri, const char* domain, const char* metric, const char* severity,
                  std::string why) {
    f.push_back(Finding{status, pri, domain,
                        metric ? std::optional<std::string>(metric) : std::nullopt, severity,
                        std::move(why)});
  };
  if (availability == Comparability::Insufficient) {
    add(VS::Inconclusive, 1, "compare", kNull, "info",
        step_state == MetricState::MissingOneSide || mem_state == MetricState::MissingOneSide
            ? "Primary compare sections are not comparable; signals are missing on run A or run B."
            : "Primary compare sections are not comparable.");
  }
  if (availability == Comparability::Partial)
    add(VS::Inconclusive, 2, "compare", kNull, "info",
        "Primary compare sections are only partially comparable.");
  if (step_diag_changed && !residual_ok)
    add(VS::Inconclusive, 3, "step_time", "diagnosis", "info",
        "Step time diagnosis changed, but supporting metrics are partial.");
  if (mem_pct) {
    if (step_faster && *mem_pct >= mem_gate)
      add(VS::Mixed, 4, "compare", kNull, "warning",
          label + " improved, but step memory worsened.");
    else if (step_slower && *mem_pct <= -mem_gate)
      add(VS::Mixed, 4, "compare", kNull, "warning",
          "Step memory improved, but " + label + " worsened.");
  }
  // DECISIONS 23: stalls one run has and the other has not are named
  // wherever the step time's change is told.
  const std::string stalls = stalls_difference(step_sec);
  const std::string with_stalls = stalls.empty() ? "" : " The runs differ by " + stalls + ".";
  if (step_slower)
    add(VS::Regression, 5, "step_time", key::kStepTimeMs, "warning",
        label + " increased by " + fixed(*step_pct, 1) + "%." + with_stalls);
  if (step_faster)
    add(VS::Improvement, 6, "step_time", key::kStepTimeMs, "info",
        label + " decreased by " + fixed(std::fabs(*step_pct), 1) + "%." + with_stalls);
  if (mem_pct && *mem_pct >= mem_gate)
    add(VS::Regression, 7, "step_memory", key::kPeakReservedBytes, "warning",
        "Step memory increased by " + fixed(*mem_pct, 1) + "%.");
  if (mem_pct && *mem_pct <= -mem_gate)
    add(VS::Improvement, 8, "step_memory", key::kPeakReservedBytes, "info",
        "Step memory decreased by " + fixed(std::fabs(*mem_pct), 1) + "%.");
  const auto& sa = step_sec.diagnosis.lhs;
  const auto& sb = step_sec.diagnosis.rhs;
  bool step_worse = false;
  if (sa && sb && status_rank(sb) > status_rank(sa)) {
    step_worse = true;
    add(VS::Regression, 9, "step_time", "diagnosis", "warning",
        "Step time diagnosis worsened from " + *sa + " to " + *sb + ".");
  }
  const auto& ma = mem_sec.diagnosis.lhs;
  const auto& mb = mem_sec.diagnosis.rhs;
  if (!step_worse && ma && mb && status_rank(mb) > status_rank(ma))
    add(VS::Regression, 10, "step_memory", "diagnosis", "warning",
        "Step memory diagnosis worsened from " + *ma + " to " + *mb + ".");
  // An EQUIVALENT finding says what stayed stable and never hides what
  // changed: a diagnosis may change without getting worse (INPUT-BOUND to
  // COMPUTE-BOUND), and the step time or memory may have moved in another
  // finding. TraceML's one sentence ("Primary training signals stayed
  // stable.") is kept for the case where it is true.
  const std::vector<std::string> diag_changes =
      diagnosis_changes(report.primary_diagnosis, step_sec.diagnosis, mem_sec.diagnosis);
  const std::string but =
      diag_changes.empty()
          ? ""
          : ", but " + joined(diag_changes) + stalls_decide(step_sec, step_sec.diagnosis.rhs);
  const bool memory_note = mem_unmeasured && availability == Comparability::Comparable;
  if (step_in_noise) {
    // The change is of the mean; the noise test is of the typical step. A
    // mean that moved far while the median step did not is said to be so,
    // with what moved it.
    const bool median_held = noise.median_delta_ms.has_value() && !noise.beyond_band;
    std::string why = label + " mean changed by " + signed_fixed(*step_pct) + "%";
    if (!stalls.empty())
      why += ", moved by " + stalls + "; " +
             (median_held ? "the median step did not change" : "within run-to-run noise") + " (" +
             noise_evidence(noise) + ")";
    else if (median_held && std::fabs(*step_pct) >= kOutlierMovedPct)
      why += ", moved by a few outlying steps: the median step did not change (" +
             noise_evidence(noise) + ")";
    else
      why += ", within run-to-run noise (" + noise_evidence(noise) + ")";
    add(VS::Equivalent, 11, "step_time", key::kStepTimeMs, "info", why + but + ".");
  } else if (availability != Comparability::Insufficient) {
    const bool mem_moved = mem_pct && std::fabs(*mem_pct) >= mem_gate;
    std::vector<std::string> stable;
    if (step_ok && !step_slower && !step_faster) stable.emplace_back("step time");
    if (mem_ok && !mem_moved) stable.emplace_back("step memory");
    if (diag_changes.empty()) stable.emplace_back("diagnoses");
    std::string why = joined(stable) + " stayed stable";
    why[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(why[0])));
    if (!memory_note && !step_slower && !step_faster && !mem_moved && diag_changes.empty())
      why = "Primary training signals stayed stable";
    // Nothing stable: the findings above already say what changed.
    if (!stable.empty())
      add(VS::Equivalent, 11, "compare", kNull, "info",
          why + but +
              (memory_note ? "; step memory was not measured in either run." : std::string(".")));
  }
  if (f.empty())
    add(VS::Inconclusive, 99, "compare", kNull, "info", "No compare verdict could be derived.");
  std::stable_sort(f.begin(), f.end(),
                   [](const Finding& x, const Finding& y) { return x.priority < y.priority; });

  const Finding& p = f.front();
  CompareVerdict v;
  v.status = p.status;
  v.severity = p.severity;
  v.summary = p.status == VS::Inconclusive && p.why.find("partial") != std::string::npos
                  ? std::string("Partially comparable")
                  : title_case(verdict_name(p.status));
  v.why = p.why;
  v.action = p.status == VS::Regression || p.status == VS::Mixed
                 ? "Inspect the changed section before drawing strong conclusions."
             : p.status == VS::Inconclusive
                 ? "Re-run or compare with matching TraceML summary coverage before drawing "
                   "strong conclusions."
                 : "No immediate action is required from this comparison.";
  v.primary_domain = p.domain;
  v.primary_metric = p.metric;
  v.findings = f;

  v.overall = availability;
  v.step_time = comparability_of(step_state);
  if (step_diag_changed && !residual_ok && step_ok) {
    v.step_time = Comparability::Partial;
    v.overall = Comparability::Partial;
  }
  if (v.overall != Comparability::Comparable) v.overall_reason = p.why;
  v.step_memory = comparability_of(mem_state);
  if (mem_unmeasured && step_ok) v.step_memory_measured = false;
  v.noise_aware = noise_aware;
  for (std::size_t i = 0; i < f.size() && v.top_changes.size() < 3; ++i) {
    if (f[i].status == VS::Equivalent && i != 0) continue;
    v.top_changes.push_back(TopChange{
        f[i].domain, f[i].metric, f[i].why,
        f[i].status == VS::Regression || f[i].status == VS::Improvement ? "material" : "context"});
  }
  return v;
}

}  // namespace traceml::report
