#include "report/text/text_run_context.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "analysis/number_format.hpp"
#include "model/position.hpp"
#include "model/run_end_state.hpp"
#include "report/text/text_format.hpp"

namespace traceml::report {

namespace {

using namespace json_read;

/// The Also block lists at most this many findings.
constexpr std::size_t kAlsoMax = 2;

/// The run block's stalls listed one per line; the rest are counted.
constexpr std::size_t kStallsShown = 4;

/// A loop phase's key in the summary ("input_wait") as users read it
/// ("input wait", model::loop_phase_name, as the launcher's stall lines say
/// it); a key this build does not know, its underscores as spaces.
std::string phase_words(const std::string& key) {
  if (const auto p = model::loop_phase_from_key(key)) return model::loop_phase_name(*p);
  std::string words = key;
  std::replace(words.begin(), words.end(), '_', ' ');
  return words;
}

/// "R0 was stalled for 6.0 s at step 812, backward"; a silent rank's step
/// and phase are the last it told: "R1 was silent for 6.2 s (last heard at
/// step 812, input wait)", unless its black box said where it really was.
std::string stall_text(const Json& s) {
  const std::string kind = text_or(child(&s, "kind"), "stalled");
  std::string where = "step " + std::to_string(integer(child(&s, "step")).value_or(0));
  if (const auto phase = text(child(&s, "phase"))) where += ", " + phase_words(*phase);
  const bool heard = kind == "silent" && text_or(child(&s, "position_from")) != "black_box";
  return "R" + std::to_string(integer(child(&s, "rank")).value_or(0)) + " was " + kind + " for " +
         analysis::fixed(number(child(&s, "duration_s")).value_or(0.0), 1) + " s " +
         (heard ? "(last heard at " + where + ")" : "at " + where);
}

/// How a rank that failed ended, where `traceml run` saw it (run.ranks):
/// "killed by SIGKILL in step 1501 (forward) after 1500 completed steps,
/// RSS 7.2 MB"; empty when nothing is known.
std::string death_text(const Json& rank) {
  std::vector<std::string> parts;
  if (const auto sig = text(child(&rank, "signal_name"))) parts.push_back("killed by " + *sig);
  const auto done = integer(child(&rank, "steps_completed"));
  if (done && *done == 0) {
    parts.emplace_back("before its first step");
  } else if (done && *done > 0 && *done < (std::int64_t{1} << 62)) {
    // Outside every step: between two of them (or after the last).
    const std::string phase = text_or(child(&rank, "phase"));
    std::string where = "in step " + std::to_string(*done + 1);
    if (phase == "outside") {
      where = "between steps";
    } else if (!phase.empty() && phase != "step") {
      where += " (" + phase_words(phase) + ")";
    }
    parts.push_back(where + " after " + std::to_string(*done) + " completed step" +
                    (*done == 1 ? "" : "s"));
  }
  std::string out = join(parts, " ");
  if (const auto rss = number(child(&rank, "rss_bytes")))
    out += (out.empty() ? "" : ", ") + std::string("RSS ") + fmt_bytes(*rss);
  return out;
}

std::string waited_text(const Json& s) {
  const auto n = integer(child(&s, "others_waiting"));
  if (!n || *n <= 0) return "";
  return std::to_string(*n) + (*n == 1 ? " rank" : " ranks") + " waited for it";
}

}  // namespace

/// The run's hang: `run.hang`; in a summary written before that key was
/// (none at all, not null), the stall model::hung_stall would have named from
/// `run.stalls` when the run did not complete: of those that never resumed,
/// the first the others waited for, else the first.
const Json* hang_of(const SummaryView& run) {
  const Json* r = object_child(run.root, "run");
  if (r == nullptr) return nullptr;
  if (r->contains("hang")) return object_child(r, "hang");
  if (text_or(child(r, "status"), "completed") == "completed") return nullptr;
  const Json* stalls = array_child(r, "stalls");
  if (stalls == nullptr) return nullptr;
  const Json* hung = nullptr;
  const auto waited = [](const Json* s) {
    return integer(child(s, "others_waiting")).value_or(0) > 0;
  };
  for (const Json& s : *stalls) {
    if (!s.is_object() || flag(child(&s, "resumed")).value_or(true)) continue;
    if (hung == nullptr || (waited(&s) && !waited(hung))) hung = &s;
  }
  return hung;
}

std::optional<HangHeadline> hang_headline(const SummaryView& run) {
  const Json* hang = hang_of(run);
  if (hang == nullptr) return std::nullopt;
  HangHeadline h;
  h.why = stall_text(*hang) + ", when the run was stopped";
  if (const std::string w = waited_text(*hang); !w.empty()) h.why += "; " + w;
  h.why += ".";
  const std::string n = std::to_string(integer(child(hang, "rank")).value_or(0));
  h.next = "Find what R" + n + " was doing there: its output (rank" + n +
           ".log beside this summary, under traceml run) and, while a rank hangs, its threads' "
           "stacks (gdb -p <pid> -batch -ex 'thread apply all bt'). The step verdict below is "
           "what the steps showed before the hang.";
  return h;
}

Partial partial_lines(const SummaryView& run) {
  Partial out;
  const Json* partial = object_child(run.root, "partial");
  if (partial == nullptr) return out;
  const auto world = integer(child(partial, "world_size"));
  std::vector<std::string> ranks;
  if (const Json* held = json_read::array_child(partial, "ranks")) {
    for (const Json& r : *held)
      if (const auto n = integer(&r)) ranks.push_back(std::to_string(*n));
  }
  if (!world || ranks.empty()) return out;
  const std::string of = " of " + std::to_string(*world);
  const auto merge = text(child(partial, "merge_command"));
  const auto refused = integer(child(partial, "connections_refused"));
  std::string line;
  if (ranks.size() == 1) {
    out.verdict_scope = " (R" + ranks.front() + " only)";
    line = "Partial view: rank " + ranks.front() + of +
           (merge ? ", traced on its own." : "; the others sent no telemetry.") +
           " The verdict is this rank's, not the job's: a rank that waits for the others at a "
           "collective looks compute-bound here.";
  } else {
    out.verdict_scope = " (" + std::to_string(ranks.size()) + of + " ranks)";
    line = "Partial view: " + std::to_string(ranks.size()) + of + " ranks sent telemetry (R" +
           join(ranks, ", R") + "). The verdict covers only these ranks.";
  }
  if (refused && *refused > 0)
    line += " " + std::to_string(*refused) +
            (*refused == 1 ? " connection was" : " connections were") +
            " refused (tracer.rejected_by_kind).";
  out.lines = wrap("", line, kProseWidth, 0);
  if (merge) {
    out.lines.emplace_back("Merge the job's ranks for its verdict:");
    // On a line of its own, never wrapped, so that it copies whole.
    out.lines.push_back("  " + *merge);
  }
  return out;
}

std::vector<std::string> meta_lines(const SummaryView& run) {
  std::vector<std::string> parts;
  if (const auto name = text(child(run.meta, "run_name"))) parts.push_back(*name);
  std::optional<long long> g = run.gpus;
  if (run.gpus && run.world && *run.gpus > 0 && *run.world > 0) g = std::min(*run.gpus, *run.world);
  if (g && *g == 0) {
    parts.emplace_back("CPU only (no GPU detected)");
  } else if (g) {
    parts.push_back(*g == 1 ? std::string("1 GPU") : std::to_string(*g) + " GPUs");
  }
  if (run.multi) {
    if (const auto n = integer(child(run.meta, "nodes_observed")))
      parts.push_back(*n == 1 ? std::string("1 node") : std::to_string(*n) + " nodes");
  }
  if (const auto s = steps_analyzed(run))
    parts.push_back(std::to_string(*s) + (*s == 1 ? " step analyzed" : " steps analyzed"));
  // The run's own duration (DECISIONS 16); a file from before it has only
  // TraceML's span of 1 Hz samples.
  auto d = number(child(run.root, "run_duration_s"));
  if (!d) d = number(child(run.root, "duration_s"));
  if (d) parts.push_back(fmt_duration(*d));
  return wrap("", join(parts, " · "), kProseWidth, 0);
}

std::vector<std::string> also_lines(const SummaryView& run, const Painter& p) {
  struct Finding {
    Severity severity;
    std::string summary, raw_severity;
  };
  std::vector<Finding> found;
  for (const Json* s : {run.system, run.process, run.step_memory}) {
    const Json* issues = json_read::array_child(s, "issues");
    if (issues == nullptr) continue;
    for (const auto& issue : *issues) {
      const std::string sev = text_or(child(&issue, "severity"));
      const std::string summary = issue_summary(&issue);
      const Severity severity = severity_of(sev);
      if (severity != Severity::Info && !summary.empty()) found.push_back({severity, summary, sev});
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const Finding& a, const Finding& b) { return a.severity > b.severity; });
  if (found.size() > kAlsoMax) found.resize(kAlsoMax);
  if (found.empty()) return {};
  std::vector<std::string> out{"Also, not the cause of slow steps:"};
  for (const auto& f : found) {
    append(out, wrap("! ",
                     f.summary + "  " +
                         p.by_severity("(" + severity_word(f.raw_severity) + ")", f.severity),
                     kProseWidth, 2));
  }
  return out;
}

std::vector<std::string> run_lines(const SummaryView& run) {
  std::vector<std::string> out;
  if (const Json* r = object_child(run.root, "run")) {
    const std::string status = text_or(child(r, "status"));
    // A word this build does not know (a newer writer's) is shown as it is.
    if (!status.empty() && model::run_status_from_word(status) != model::RunStatus::Completed) {
      std::string line = "Run: " + upper(status);
      const auto failed = integer(child(r, "failed_rank"));
      const auto code = integer(child(r, "exit_code"));
      if (failed) {
        line += " · rank " + std::to_string(*failed) + " failed";
        // Its own exit code, where it is not the launcher's (serve's ranks
        // say theirs in their goodbye).
        if (const Json* ranks = json_read::array_child(r, "ranks"))
          for (const Json& x : *ranks)
            if (integer(child(&x, "rank")) == failed) {
              const auto own = integer(child(&x, "exit_code"));
              if (own && own != code) line += " (it exited with code " + std::to_string(*own) + ")";
              if (const std::string how = death_text(x); !how.empty()) line += ": " + how;
            }
      }
      if (code) line += " · exit code " + std::to_string(*code);
      line += " · the summary covers what was recorded before it ended";
      out.push_back(line);
    }
    if (const Json* stalls = json_read::array_child(r, "stalls")) {
      std::size_t shown = 0;
      for (const Json& s : *stalls) {
        if (shown++ == kStallsShown) break;
        std::string line = "Stall: " + stall_text(s);
        if (const std::string w = waited_text(s); !w.empty()) line += " · " + w;
        const Json* resumed = child(&s, "resumed");
        if (resumed != nullptr && resumed->is_boolean() && !resumed->get<bool>())
          line += " · it never resumed";
        out.push_back(line);
      }
      if (stalls->size() > kStallsShown)
        out.push_back("Stall: ... and " + std::to_string(stalls->size() - kStallsShown) +
                      " more (run.stalls in final_summary.json)");
    }
  }
  if (const Json* t = object_child(run.root, "tracer")) {
    std::optional<double> cost;
    std::optional<double> share;
    int rank_count = 0;
    std::vector<std::string> cpu_only;  // ranks without a GPU clock, when some have one
    int gpu_ranks = 0;
    std::int64_t unresolved = 0;
    std::int64_t activity_lost = 0;
    std::vector<std::string> cut_short;  // ranks whose counters are as of their last report
    if (const Json* ranks = json_read::array_child(t, "ranks")) {
      for (const Json& rank : *ranks) {
        ++rank_count;
        if (const auto c = number(child(&rank, "overhead_ns_per_step")))
          cost = std::max(cost.value_or(0.0), *c);
        if (const auto f = number(child(&rank, "overhead_pct_of_step")))
          share = std::max(share.value_or(0.0), *f);
        if (const Json* g = object_child(&rank, "gpu_clock")) {
          ++gpu_ranks;
          unresolved += integer(child(g, "steps_unresolved")).value_or(0);
        } else if (const auto r = integer(child(&rank, "rank"))) {
          cpu_only.push_back("r" + std::to_string(*r));
        }
        activity_lost += integer(child(&rank, "activity_records_lost")).value_or(0);
        const Json* partial = child(&rank, "counters_partial");
        if (partial != nullptr && partial->is_boolean() && partial->get<bool>())
          if (const auto r = integer(child(&rank, "rank")))
            cut_short.push_back("R" + std::to_string(*r));
      }
    }
    const auto received = integer(child(t, "records_received"));
    const auto dropped = integer(child(t, "records_dropped"));
    std::vector<std::string> parts;
    if (cost) {
      std::string c = analysis::fixed(*cost / 1000.0, 2) + " us per step on the training thread";
      if (share) c += " (" + percent_of_step(*share) + " of a step)";
      parts.push_back(c);
    }
    // Ranks whose counts stopped before their end: a drop count of theirs
    // is at least what they said, and none said is no count at all.
    if (received && dropped && cut_short.empty())
      parts.push_back(std::to_string(*dropped) + " of " + std::to_string(*received + *dropped) +
                      " records dropped");
    else if (received && dropped && *dropped > 0)
      parts.push_back("at least " + std::to_string(*dropped) + " of " +
                      std::to_string(*received + *dropped) + " records dropped");
    else if (received)
      parts.push_back(std::to_string(*received) + " records received");
    // Their last report came before their end: the rest of their counts
    // never reached the collector, so no count of theirs is exact.
    if (!cut_short.empty()) {
      constexpr std::size_t kNamed = 8;
      std::vector<std::string> named(
          cut_short.begin(),
          cut_short.begin() + std::ptrdiff_t(std::min(kNamed, cut_short.size())));
      if (cut_short.size() > kNamed)
        named.back() += " and " + std::to_string(cut_short.size() - kNamed) + " more";
      parts.push_back(join(named, ", ") + (cut_short.size() == 1 ? " ended" : " each ended") +
                      " without a goodbye: " + (cut_short.size() == 1 ? "its" : "their") +
                      " counters are as of the last report");
    }
    if (gpu_ranks > 0) {
      // Why a window can read the CPU clock on a GPU run: a rank without GPU
      // times (spec §4.1.3 takes the GPU clock only when every row has one).
      std::string g = "GPU clock on " + std::to_string(gpu_ranks) + " of " +
                      std::to_string(rank_count) + " ranks";
      if (!cpu_only.empty()) g += " (CPU only: " + join(cpu_only, ", ") + ")";
      if (unresolved > 0) g += ", " + std::to_string(unresolved) + " steps without GPU times";
      parts.push_back(g);
    }
    if (activity_lost > 0)
      parts.push_back(std::to_string(activity_lost) + " GPU activity records lost");
    if (const auto repaired = integer(child(t, "strings_repaired")); repaired && *repaired > 0)
      parts.push_back(std::to_string(*repaired) +
                      " strings repaired (invalid UTF-8 or over 1024 bytes)");
    if (!parts.empty()) append(out, wrap("Tracer: ", join(parts, " · "), kProseWidth, 8));
  }
  return out;
}

}  // namespace traceml::report
