#include "report/text/text_verdict.hpp"

#include <string>
#include <vector>

#include "analysis/diagnosis_kind.hpp"
#include "analysis/h2d_advice.hpp"
#include "analysis/number_format.hpp"
#include "analysis/slow_window.hpp"
#include "analysis/thresholds.hpp"
#include "model/text.hpp"
#include "report/text/text_format.hpp"
#include "report/text/text_layout.hpp"
#include "report/text/text_timeline.hpp"

namespace traceml::report {

namespace {

using analysis::fixed;
using Kind = analysis::DiagnosisKind;
namespace ev = analysis::evidence;
using namespace json_read;

// Presentation thresholds (spec §5.8): they decide what the card shows, never
// a diagnosis, so they live with the card rather than in analysis/thresholds.hpp.
/// Below 2x the worst/median ratio says little; the marker then reads "cause".
constexpr double kRatioMarkerMin = 2.0;
/// GPU util under this supports an input/straggler verdict (the GPU idles).
constexpr double kSupportingUtilMax = 50.0;

/// Whether the primary diagnosis was decided on an INCOMPLETE_DATA Step Time.
bool step_time_incomplete(const SummaryView& run) {
  return text_or(child(run.evidence, ev::kStepTimeStatus)) ==
         analysis::status_of(Kind::IncompleteData);
}

std::string verdict_display(const SummaryView& run) {
  if (const auto id = analysis::kind_from_name(run.kind)) {
    // The primary's evidence names the Step Time status it was decided on.
    const bool incomplete = step_time_incomplete(run);
    return analysis::verdict_label(
        *id, incomplete ? std::optional<Kind>(Kind::IncompleteData) : std::nullopt);
  }
  const std::string status = status_label(text_or(child(run.primary, "status")));
  if (!status.empty()) return status;
  if (!run.kind.empty()) return status_label(run.kind);
  return "n/a";
}

/// The pin-memory advice from a finding's H2D activity evidence, if its
/// copies come mostly from pageable memory.
std::optional<std::string> evidence_pageable_advice(const Json* evidence) {
  const auto copies = number(child(evidence, "h2d_copies_per_step"));
  const auto pageable_copies = number(child(evidence, "h2d_pageable_copies_per_step"));
  const auto bytes = number(child(evidence, "h2d_bytes_per_step"));
  const auto pageable_bytes = number(child(evidence, "h2d_pageable_bytes_per_step"));
  if (!copies || !pageable_copies || !bytes || !pageable_bytes) return std::nullopt;
  return analysis::pageable_advice({*copies, *pageable_copies, *bytes, *pageable_bytes});
}

std::string default_straggler_metric(Kind kind) {
  // STRAGGLER names its cause in its comparisons; its first is input.
  const char* metric = analysis::culprit_metric(kind);
  return metric != nullptr ? metric : "input_wait_ms";
}

void straggler_verdict(const SummaryView& run, Kind kind, Verdict& v) {
  const Json* cmp = straggler_comparison(run);
  const std::string metric = text(child(cmp, ev::kMetric)).value_or(default_straggler_metric(kind));
  v.culprit_metric = metric;
  const auto ratio = number(child(cmp, "ratio"));
  v.marker = ratio && *ratio >= kRatioMarkerMin ? "◀ " + fixed(*ratio, 0) + "x" : "◀ cause";

  const auto rank = integer(path(cmp, {"worst", "rank"}));
  std::string who = "the slow rank";
  if (rank) {
    const std::optional<std::string> key = std::to_string(*rank);
    const Json* row = group_row(run.step_time, key);
    if (path(row, {"identity", "node_rank"}) == nullptr)
      row = group_row(run.step_time, point(run.step_time, "worst", metric.c_str()).idx);
    // The rank is the comparison's own; only the node comes from the row.
    who = "R" + std::to_string(*rank);
    if (const auto n = row_node(row)) who += "/N" + std::to_string(*n);
  }
  const auto worst = number(path(cmp, {"worst", "value_ms"}));
  const auto median = number(path(cmp, {"median", "value_ms"}));
  const std::string w = worst ? fmt_ms(*worst) : "? ms";
  const std::string m = median ? fmt_ms(*median) : "? ms";
  const std::string pace = run.world && rank
                               ? " All " + std::to_string(*run.world) + " ranks then advance at R" +
                                     std::to_string(*rank) + "'s pace."
                               : "";
  std::string phase = text(child(cmp, "phase")).value_or("");
  if (phase.empty()) {
    phase = metric.size() > 3 && metric.compare(metric.size() - 3, 3, "_ms") == 0
                ? metric.substr(0, metric.size() - 3)
                : metric;
  }
  if (kind == Kind::InputStraggler) {
    v.why = who + " waits " + w + " per step for input; the median rank waits " + m + "." + pace;
    v.next =
        "inspect the data loader's workers, the dataset's get() and transforms, and storage on " +
        who + ".";
  } else if (kind == Kind::H2dStraggler) {
    v.why = who + " spends " + w + " per step in host-to-device copies; the median rank spends " +
            m + "." + pace;
    v.next = "inspect PCIe topology / transfer path on " + who + ".";
    if (const auto advice = evidence_pageable_advice(issue_evidence(run, run.kind)))
      v.next = "on " + who + ", " + *advice;
  } else if (kind == Kind::Straggler && phase == "residual") {
    v.why = who + " spends " + w +
            " per step outside the traced phases (residual); the median rank spends " + m + "." +
            pace;
    v.next = "inspect untraced work on " + who +
             ": synchronisation, logging, checkpointing, validation or CPU stalls between phases.";
  } else {
    v.why = who + " spends " + w + " per step in " + phase + "; the median rank spends " + m + "." +
            pace;
    v.next =
        kind == Kind::ComputeStraggler
            ? "inspect " + who + ": thermal/clock throttling, imbalanced work, or a slow device."
            : "inspect " + who + " end-to-end; multiple phases are slow on it.";
  }
  // Issue 5: the ranks that wait for the slow one wait inside the collective.
  if (kind == Kind::Straggler) {
    const Json* ev = issue_evidence(run, run.kind);
    const auto share = number(child(ev, "collective_share_of_wait"));
    const auto wait = number(child(ev, "collective_wait_ms"));
    const auto victim = integer(child(ev, "victim_rank"));
    if (share && wait && victim && analysis::collective_explains(*share)) {
      v.why += " Collective (NCCL) time explains " + fixed(*share * 100.0, 0) + "% of the wait: R" +
               std::to_string(*victim) + " spends " + fmt_ms(*wait) +
               " more per step in collectives.";
    }
  }
}

/// DECISIONS 23: the words for a phase share that a few stalls hold (the
/// finding's `stalls` evidence, analysis/step_time_stalls.hpp).
struct StallWords {
  std::string why;           ///< ", but one stall holds most of it: ... Without it, ..."
  std::string what;          ///< "step 52" / "steps 52 and 180", for Next
  bool still_bound = false;  ///< the share stays a finding without them
  bool one = true;           ///< one stall, not several
};

std::optional<StallWords> stall_words(const SummaryView& run, Kind k) {
  const Json* st = child(issue_evidence(run, run.kind), ev::kStalls);
  const Json* steps = child(st, "steps");
  const auto without = number(child(st, "share_without"));
  const auto median_value = number(child(st, "median_value_ms"));
  const auto median_step = number(child(st, "median_step_time_ms"));
  if (steps == nullptr || !steps->is_array() || steps->empty() || !without || !median_value ||
      !median_step)
    return std::nullopt;
  std::vector<std::string> ids, lengths;
  std::optional<long long> rank;
  for (const Json& s : *steps) {
    const auto id = integer(child(&s, "step"));
    const auto ms = number(child(&s, ev::kValueMs));
    if (!id || !ms) return std::nullopt;
    if (!rank) rank = integer(child(&s, ev::kRank));
    ids.push_back(std::to_string(*id));
    lengths.push_back(fmt_duration_ms(*ms));
  }
  const bool one = ids.size() == 1;
  StallWords w;
  const std::string whose = run.multi && rank ? "R" + std::to_string(*rank) + "'s " : "";
  w.what = whose + (one ? "step " + ids[0] : "steps " + join(ids, ", "));
  w.one = one;
  const bool input = k == Kind::InputBound;
  const char* where = input                 ? "for input"
                      : k == Kind::H2dBound ? "in host-to-device copies"
                                            : "outside the traced phases";
  std::string held;
  if (one) {
    held = w.what + (input ? " waited " : " spent ") + lengths[0] + " " + where;
  } else {
    std::string each;
    for (std::size_t i = 0; i < ids.size(); ++i)
      each += (i == 0                ? ""
               : i + 1 == ids.size() ? " and "
                                     : ", ") +
              ids[i] + " (" + lengths[i] + ")";
    held = whose + "steps " + each + (input ? " waited " : " spent that long ") + where;
  }
  const char* phase = k == Kind::InputBound ? "waits " : k == Kind::H2dBound ? "copies for " : "";
  std::string median = "the median step takes " + fmt_ms(*median_step);
  if (k != Kind::ResidualHeavy)
    median += " and " + std::string(phase) + fmt_ms(*median_value);
  else
    median += ", " + fmt_ms(*median_value) + " of it outside the phases";
  const std::string name = k == Kind::InputBound ? "input wait"
                           : k == Kind::H2dBound ? "host-to-device copying"
                                                 : "time outside the traced phases";
  w.still_bound = *without >= analysis::thresholds::kOverheadShareWarn;
  w.why = std::string(one ? ", but one stall holds most of it: "
                          : ", but " + std::to_string(ids.size()) + " stalls hold most of it: ") +
          held + "; " + median + ". Without " + (one ? "it" : "them") + ", " + name + " is " +
          fixed(*without * 100.0, 0) + "% of the step.";
  return w;
}

}  // namespace

Verdict read_verdict(const SummaryView& run) {
  Verdict v;
  v.display = verdict_display(run);
  const std::string summary = text_or(child(run.primary, "summary"));
  const std::string action = text_or(child(run.primary, "action"));
  v.why = summary;
  v.next = action;
  const auto id = analysis::kind_from_name(run.kind);
  if (!id) return v;
  const Kind k = *id;

  if (analysis::is_straggler(k)) {
    straggler_verdict(run, k, v);
  } else if (analysis::is_phase_share(k)) {
    v.culprit_metric = analysis::culprit_metric(k);
    v.marker = "◀ cause";
    // COMPUTE_BOUND has no score, so it keeps the section's own wording (§8.2 #11).
    if (const auto score = number(child(run.evidence, "score"))) {
      const std::string s = fixed(*score * 100.0, 0) + "%";
      if (k == Kind::InputBound) {
        std::string clock = text_or(child(run.evidence, "diagnosis_clock"));
        if (clock.empty())
          clock = text_or(path(run.step_time, {"global", "window", "diagnosis_clock"}));
        v.why = clock == "cpu"
                    ? "input wait is " + s + " of the typical step (CPU clock)."
                    : "input wait is " + s +
                          " of the typical step; the GPU sits idle while batches arrive.";
        // LibTorch's knobs, not Python's (DECISIONS 13).
        v.next = cpu_only(run) ? "add loader workers (DataLoaderOptions().workers(N)) or prefetch "
                                 "(max_jobs), or check storage read throughput."
                               : "add loader workers (DataLoaderOptions().workers(N)), pin batches "
                                 "(tensor.pin_memory()), or check storage reads.";
        if (const auto st = stall_words(run, k)) {
          v.why = "input wait is " + s + " of the mean step (" + (clock == "cpu" ? "CPU" : "GPU") +
                  " clock)" + st->why;
          v.next = "find what held " + st->what +
                   " (storage or network, a checkpoint, another process on the node): more "
                   "loader workers do not fix " +
                   (st->one ? "a one-off stall" : "one-off stalls") +
                   (st->still_bound ? "; for the rest, " + v.next : ".");
        }
      } else if (k == Kind::H2dBound) {
        v.why = "host-to-device copies take " + s + " of the typical step.";
        v.next =
            "pin host batches (tensor.pin_memory()), copy with .to(device, "
            "/*non_blocking=*/true), or batch transfers.";
        if (const auto advice = evidence_pageable_advice(issue_evidence(run, run.kind)))
          v.next = *advice;
        if (const auto st = stall_words(run, k)) {
          v.why = "host-to-device copies take " + s + " of the mean step" + st->why;
          v.next = "find what held " + st->what +
                   "'s copies (another process on the GPU, host memory pressure, an unusually "
                   "large batch)" +
                   (st->still_bound ? "; for the rest, " + v.next : ".");
        }
      } else if (k == Kind::ResidualHeavy) {
        v.why = s + " of the typical step is time outside the traced phases.";
        v.next = "look for untraced work between steps -- validation, checkpointing, logging.";
        if (const auto st = stall_words(run, k)) {
          v.why = s + " of the mean step is time outside the traced phases" + st->why;
          v.next = "find what ran outside the phases in " + st->what +
                   " (a checkpoint, validation, logging, a collection pause)" +
                   (st->still_bound ? "; for the rest, " + v.next : ".");
        }
        const Json* ev = issue_evidence(run, run.kind);
        const auto share = number(child(ev, "collective_share_of_residual"));
        const auto coll = number(child(ev, "collective_ms"));
        if (share && coll && analysis::collective_explains(*share)) {
          v.why += " Collective (NCCL) kernels ran " + fmt_ms(*coll) + " per step, up to " +
                   fixed(*share * 100.0, 0) + "% of it.";
          v.next =
              "look for collectives outside the traced phases -- metric or loss all-reduces, "
              "barriers -- then validation, checkpointing, logging.";
        }
      }
    }
  } else if (k == Kind::LowGpuUtilizationUnexplained) {
    if (const auto u = primary_util(run)) {
      v.why = "step timing is balanced, but GPU util averaged " + fixed(*u, 0) +
              "%. The idle time is not explained by " +
              (run.multi ? "input, transfer, or timing skew." : "input or transfer.");
      v.next =
          "look for untraced work between steps -- validation, checkpointing, logging -- or "
          "inefficient kernels (torch.profiler).";
    }
  } else if (k == Kind::NoClearPerformanceBottleneck) {
    const auto med = point(run.step_time, "median", "step_time_ms").value;
    const auto worst = point(run.step_time, "worst", "step_time_ms").value;
    if (run.multi && med && worst && *med > 0) {
      v.why = "step timing is balanced and ranks are even (worst step time +" +
              fixed(100.0 * (*worst - *med) / *med, 1) + "% vs median).";
    } else {
      v.why = "step timing is balanced -- no input, transfer, or residual issue.";
    }
    v.next =
        "training is compute-dominated; for more speed profile kernels (torch.profiler / Nsight).";
  } else if (k == Kind::InsufficientStepTimeData) {
    v.degraded = true;
    if (step_time_incomplete(run)) {
      std::vector<std::string> names;
      const Json* missing = path(run.step_time, {"diagnosis", "evidence", "missing_signals"});
      if (missing != nullptr && missing->is_array()) {
        for (const auto& n : *missing) {
          if (n.is_string()) names.push_back(n.get<std::string>());
        }
      }
      v.why = names.empty()
                  ? "some timing signals were never measured, so phases don't add up to "
                    "a reliable step time."
                  : "some timing signals were never measured (missing: " + join(names, ", ") +
                        "), so phases don't add up to a reliable step time.";
      v.next =
          "check the integration wiring for the missing phases; per-signal coverage is listed in "
          "the JSON step_time section.";
    } else {
      const auto steps = steps_analyzed(run);
      v.why = steps && *steps != 0 ? "only " + std::to_string(*steps) +
                                         " completed steps were captured; a stable diagnosis "
                                         "needs a larger sample."
                                   : "no completed steps were captured.";
      v.next =
          "run more steps, or check that traceml::StepScope marks each step of the training loop.";
    }
  }
  return v;
}

std::vector<std::string> profile_lines(const SummaryView& run, const std::string& run_dir) {
  constexpr std::size_t kShown = 8;
  std::vector<std::string> out;
  const Json* list = array_child(run.root, "profiles");
  if (list == nullptr || list->empty()) return out;
  out.push_back("Profiles: LibTorch's operators on the steps asked (open in ui.perfetto.dev):");
  const std::string dir = run_dir.empty() ? std::string("RUN_DIR") : run_dir;
  const auto count = [](const Json& p, const char* key) {
    const auto v = integer(child(&p, key));
    return v ? std::to_string(*v) : std::string("?");
  };
  std::size_t shown = 0;
  for (const Json& p : *list) {
    if (shown++ == kShown) break;
    std::string line = std::string(6, ' ') + "R" + count(p, "rank") + " steps " +
                       count(p, "first_step") + "-" + count(p, "last_step") + ": ";
    // From a file: never let it drive the terminal.
    const std::string error = model::escape_for_terminal(text_or(child(&p, "error")), true);
    if (integer(child(&p, "ops")).value_or(0) == 0 && !error.empty()) {
      // A failed capture: why (a program without the hook, a profiler already on).
      out.push_back(line + "none (" + error + ")");
      continue;
    }
    line += dir + "/" + model::escape_for_terminal(text_or(child(&p, "path")), true) + " (" +
            count(p, "ops") + " ops";
    if (integer(child(&p, "ops_cut")).value_or(0) > 0)
      line += ", " + count(p, "ops_cut") + " left out at the size limit";
    if (!error.empty()) line += "; " + error;
    if (const std::string reason = model::escape_for_terminal(text_or(child(&p, "reason")), true);
        !reason.empty())
      line += "; asked by --profile auto: " + reason;
    if (const std::string kineto =
            model::escape_for_terminal(text_or(child(&p, "kineto_trace")), true);
        !kineto.empty())
      line += "; LibTorch's own trace: " + dir + "/" + kineto;
    out.push_back(line + ")");
  }
  if (list->size() > kShown)
    out.push_back(std::string(6, ' ') + "... and " + std::to_string(list->size() - kShown) +
                  " more (final_summary.json: profiles)");
  return out;
}

/// §5.8 "after Next": the Supporting line, or the all-normal line.
std::vector<std::string> after_next_lines(const SummaryView& run) {
  const auto u = primary_util(run);
  std::string line;
  if ((analysis::is_straggler(run.kind) || analysis::is_phase_share(run.kind)) && u &&
      *u < kSupportingUtilMax) {
    const std::string pct = fixed(*u, 0) + "%";
    if (analysis::is_straggler(run.kind) && run.multi) {
      line = "Supporting: GPU util median " + pct + " -- ranks idle at the step barrier.";
    } else if (run.kind == analysis::to_string(Kind::InputBound)) {
      line = "Supporting: GPU util " + pct + " avg -- consistent with input starvation.";
    } else {
      line = "Supporting: GPU util " + pct + " avg.";
    }
  } else if (run.kind == analysis::to_string(Kind::NoClearPerformanceBottleneck)) {
    bool all_info = true;
    for (const Json* s : {run.system, run.process, run.step_time, run.step_memory}) {
      if (severity_of(diagnosis_field(s, "severity")) != Severity::Info) all_info = false;
    }
    if (all_info) {
      line = std::string("System, process, and memory: all normal") +
             (run.multi ? " on every rank" : "") + ".";
      if (u) line += " GPU util " + fixed(*u, 0) + "% avg.";
    }
  }
  return line.empty() ? std::vector<std::string>{} : wrap("", line, kProseWidth, 0);
}

/// §5.8 degraded line: what the host showed even without a step diagnosis.
std::vector<std::string> observed_anyway_lines(const SummaryView& run) {
  std::vector<std::string> parts;
  if (cpu_only(run)) {
    parts.emplace_back("no GPU detected");
  } else {
    auto u = number(path(run.system, {"global", "average", "gpu_util_percent"}));
    if (!u) u = primary_util(run);
    if (u) parts.push_back("GPU util " + fixed(*u, 0) + "% avg");
  }
  if (const auto c = number(path(run.system, {"global", "average", "cpu_percent"})))
    parts.push_back("CPU util " + fixed(*c, 0) + "% avg");
  if (parts.empty()) return {};
  return wrap("Observed anyway: ", join(parts, " · "), kProseWidth, 17);
}

std::optional<SlowWindowNext> slow_window_next(const SummaryView& run, const std::string& run_dir) {
  const std::optional<SlowWindow> sw = slow_window(run);
  if (!sw || sw->slower_pct < analysis::kSlowWindowNotable * 100.0) return std::nullopt;
  const std::optional<std::string> key = std::to_string(sw->rank);
  const std::string who = rank_label(group_row(run.step_time, key), key).value_or("R" + *key);
  const std::string first = std::to_string(sw->first_step);
  const std::string last = std::to_string(sw->last_step);
  SlowWindowNext n;
  // Twice as slow and more reads better as a multiple than as a percentage.
  const std::string slower =
      sw->slower_pct >= 100.0
          ? "take " + fixed(1.0 + sw->slower_pct / 100.0, 0) + "x its median step"
          : "are " + fixed(sw->slower_pct, 0) + "% slower than its median step";
  n.sentence = "The slowest " + std::to_string(sw->steps) + " steps of " + who + ", " + first +
               "-" + last + ", " + slower + "; draw them:";
  n.command = "traceml export " + (run_dir.empty() ? std::string("RUN_DIR") : run_dir) +
              " --format chrome-trace --steps " + first + ":" + last + " --out slow_steps.json";
  // The run's own timeline draws them already (every run writes one).
  if (const auto t = timeline_shown(run, run_dir);
      t && timeline_draws(*t, sw->first_step, sw->last_step)) {
    n.sentence = n.sentence.substr(0, n.sentence.size() - std::string("draw them:").size()) +
                 "the run's timeline draws them:";
    n.command = t->file + " (open it in ui.perfetto.dev)";
  }
  // A profile of the rank that meets the window already shows its operators.
  if (const Json* list = array_child(run.root, "profiles"))
    for (const Json& p : *list)
      if (integer(child(&p, "rank")) == std::optional<std::int64_t>(sw->rank) &&
          integer(child(&p, "ops")).value_or(0) > 0 &&
          integer(child(&p, "first_step")).value_or(0) <= sw->last_step &&
          integer(child(&p, "last_step")).value_or(0) >= sw->first_step)
        return n;
  n.profile = "their operators, on the next run: traceml run --profile-steps " + first + ":" +
              last + " --profile-ranks " + *key + " ... (docs/profiling.md)";
  return n;
}

}  // namespace traceml::report
