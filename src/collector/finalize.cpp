// A run directory's artifacts from its run database: the same analysis and
// report as `traceml report --telemetry`, plus the `tracer` block.
#include "collector/finalize.hpp"

#include "store/run_outcome.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <vector>

#include "analysis/step_median.hpp"
#include "analysis/step_window.hpp"
#include "analysis/summary.hpp"
#include "collector/run_state.hpp"
#include "model/schema.hpp"
#include "report/profile_trace.hpp"
#include "report/run_timeline.hpp"
#include "report/summary_json.hpp"
#include "traceml/version.hpp"

namespace traceml::collector {

namespace {

/// The distinct steps the telemetry holds of each of `ranks`, in one pass.
std::map<int, std::int64_t> steps_held(const model::Telemetry& t, const std::set<int>& ranks) {
  std::map<int, std::vector<std::int64_t>> ids;
  for (const auto& c : t.steps.chunks())
    for (std::size_t i = 0; i < c->size(); ++i)
      if (ranks.count(c->rank(i)) != 0) ids[c->rank(i)].push_back(c->step(i));
  std::map<int, std::int64_t> held;
  for (auto& [rank, v] : ids) {
    std::sort(v.begin(), v.end());
    held[rank] = std::unique(v.begin(), v.end()) - v.begin();
  }
  return held;
}

/// `record`'s value fields under their schema names, in the schema's order:
/// a record the summary shows as it is.
template <class R>
report::Json value_fields_json(const R& record) {
  report::Json j = report::Json::object();
  model::schema::for_each_value_field<R>(
      [&](const auto& field) { j[field.name] = record.*(field.member); });
  return j;
}

report::Json opt_json(const std::optional<double>& v) {
  return v ? report::Json(*v) : report::Json();
}

}  // namespace

std::set<int> ranks_with_steps(const model::StepLog& steps) {
  std::set<int> out;
  for (const auto& c : steps.chunks()) {
    bool any = false;
    int last = 0;
    // A rank's rows come in runs (a step block each): one insert a run.
    for (std::size_t i = 0; i < c->size(); ++i) {
      const int r = c->rank(i);
      if (any && r == last) continue;
      out.insert(r);
      any = true;
      last = r;
    }
  }
  return out;
}

double end_of_run(const model::Telemetry& t) {
  double end = 0.0;
  if (t.totals) return std::max(end, t.totals->latest_ts.value_or(end));
  for (const auto& c : t.steps.chunks())
    for (std::size_t i = 0; i < c->size(); ++i)
      end = std::max(end, c->ts(i));
  for (const auto& r : t.system)
    end = std::max(end, r.ts);
  for (const auto& r : t.process)
    end = std::max(end, r.ts);
  return end;
}

report::Json stall_json(const model::Stall& s) {
  report::Json st = report::Json::object();
  st["rank"] = s.global_rank;
  st["kind"] = s.kind;
  st["step"] = s.step;
  st["phase"] = s.phase ? report::Json(model::loop_phase_key(*s.phase)) : report::Json();
  st["start"] = s.start;
  st["duration_s"] = s.duration_s;
  st["resumed"] = s.resumed;
  st["others_waiting"] = s.others_waiting ? report::Json(*s.others_waiting) : report::Json();
  st["position_from"] = s.from_black_box ? "black_box" : "heartbeat";
  return st;
}

report::Json run_block(const store::RunOutcome& o) {
  report::Json j = report::Json::object();
  j["status"] = model::word(o.status);
  j["exit_code"] = o.exit_code;
  j["failed_rank"] = o.failed_rank ? report::Json(*o.failed_rank) : report::Json();
  report::Json ranks = report::Json::array();
  for (const store::RankExit& e : o.ranks) {
    report::Json r = report::Json::object();
    r["rank"] = e.global_rank;
    r["exit_code"] = e.exit_code;
    r["signal"] = e.signal ? report::Json(*e.signal) : report::Json();
    r["stopped_by_launcher"] = e.stopped_by_launcher;
    // Added keys (issue 33): how it ended, said precisely.
    r["signal_name"] = e.signal ? report::Json(model::signal_name(*e.signal)) : report::Json();
    r["steps_completed"] = e.steps_completed ? report::Json(*e.steps_completed) : report::Json();
    r["phase"] = e.phase ? report::Json(model::loop_phase_key(*e.phase)) : report::Json();
    r["rss_bytes"] = e.rss_bytes ? report::Json(*e.rss_bytes) : report::Json();
    ranks.push_back(r);
  }
  j["ranks"] = ranks;
  report::Json stalls = report::Json::array();
  for (const model::Stall& s : o.stalls)
    stalls.push_back(stall_json(s));
  j["stalls"] = std::move(stalls);
  // The run ended while a rank hung: that is its headline (DECISIONS 15).
  const model::Stall* hung =
      o.status == model::RunStatus::Completed ? nullptr : model::hung_stall(o.stalls);
  j["hang"] = hung != nullptr ? stall_json(*hung) : report::Json();
  return j;
}

report::Json tracer_block(const store::RunData& data,
                          const std::optional<store::RejectionCounts>& rejections) {
  const std::map<int, double> step_ms = analysis::median_step_ms(data.telemetry);
  // The ranks whose counters are partial, and what the run holds of them.
  std::set<int> partial_ranks;
  for (const store::RankDelivery& d : data.deliveries)
    if (d.tracer && !d.clean_end) partial_ranks.insert(d.global_rank);
  const std::map<int, std::int64_t> held = partial_ranks.empty()
                                               ? std::map<int, std::int64_t>{}
                                               : steps_held(data.telemetry, partial_ranks);
  report::Json ranks = report::Json::array();
  std::int64_t received = 0;
  std::int64_t dropped = 0;
  for (const store::RankDelivery& d : data.deliveries) {
    report::Json r = report::Json::object();
    r["rank"] = d.global_rank;
    const model::TracerStats* t = d.tracer ? &*d.tracer : nullptr;
    // Without the rank's own report its counters are unknown (null), not 0.
    // A rank that did not end cleanly (killed, its connection lost) sent its
    // counters last an interval or more before its end, and the collector
    // holds more of it than they say: they are raised to what it holds, so
    // that they never contradict it, and marked as lower bounds.
    const bool partial = t != nullptr && !d.clean_end;
    std::optional<std::int64_t> steps;
    std::optional<std::int64_t> sent;
    if (t) {
      steps = t->steps_recorded;
      sent = t->records_sent;
    }
    if (partial) {
      const auto h = held.find(d.global_rank);
      steps = std::max(*steps, h != held.end() ? h->second : std::int64_t{0});
      sent = std::max(*sent, d.records_received);
    }
    r["steps_recorded"] = steps ? report::Json(*steps) : report::Json();
    r["records_sent"] = sent ? report::Json(*sent) : report::Json();
    r["records_received"] = d.records_received;
    r["records_dropped"] = t ? report::Json(t->records_dropped) : report::Json();
    r["clean_end"] = d.clean_end;
    if (partial) r["counters_partial"] = true;  // an added key, only when true
    // A pointer, not a copied optional: GCC 12 warns (maybe-uninitialized) on
    // the copy once tracer_block's callers inline differently.
    const double* overhead =
        t != nullptr && t->overhead_ns_per_step ? &*t->overhead_ns_per_step : nullptr;
    r["overhead_ns_per_step"] = overhead != nullptr ? report::Json(*overhead) : report::Json();
    std::optional<double> share;
    const auto it = step_ms.find(d.global_rank);
    if (overhead != nullptr && it != step_ms.end() && it->second > 0.0)
      share = 100.0 * *overhead / (it->second * 1e6);  // ns over ms, in percent
    r["overhead_pct_of_step"] = opt_json(share);
    // Only ranks that timed on a GPU carry these (added keys, absent on CPU runs).
    if (t && t->gpu) r["gpu_clock"] = value_fields_json(*t->gpu);
    if (t && t->activity_lost) r["activity_records_lost"] = *t->activity_lost;
    ranks.push_back(std::move(r));
    received += d.records_received;
    if (t) dropped += t->records_dropped;
  }
  report::Json j = report::Json::object();
  j["ranks"] = std::move(ranks);
  j["records_received"] = received;
  j["records_dropped"] = dropped;
  // The rows are only the first refusals of a run that has counts; a file
  // from before the counts has a row for each.
  j["rejected_connections"] = rejections ? store::total_rejections(*rejections)
                                         : static_cast<std::int64_t>(data.rejected.size());
  if (rejections && !rejections->empty()) {
    report::Json kinds = report::Json::object();
    for (const auto& [kind, count] : *rejections)
      kinds[kind] = count;
    j["rejected_by_kind"] = std::move(kinds);
  }
  // Only when the reader had to repair text (an added key, absent otherwise).
  if (data.strings_repaired > 0) j["strings_repaired"] = data.strings_repaired;
  return j;
}

std::optional<report::Json> partial_block(const store::RunData& data, const std::string& run_dir,
                                          std::int64_t refused) {
  const model::Telemetry& t = data.telemetry;
  const auto world = t.run.world_size;
  if (!world || *world <= 1) return std::nullopt;
  std::set<int> seen;
  for (const model::RankIdentity& id : t.ranks)
    seen.insert(id.global_rank);
  for (const model::ProcessSample& s : t.process)
    seen.insert(s.global_rank);
  for (const int r : ranks_with_steps(t.steps))
    seen.insert(r);
  if (seen.empty() || std::int64_t(seen.size()) >= *world) return std::nullopt;
  report::Json j = report::Json::object();
  j["world_size"] = *world;
  j["ranks"] = std::vector<int>(seen.begin(), seen.end());
  j["ranks_missing"] = *world - std::int64_t(seen.size());
  if (refused > 0) j["connections_refused"] = refused;
  // A rank traced on its own names its directory <name>_rank<N>; the other
  // ranks' directories are the same name with their numbers. Their default
  // names carry the second each rank started in, which may differ between
  // ranks: the command matches any second of the minute.
  // Only for names a shell takes as they are, and worlds whose list of
  // directories stays far below the shell's argument limit.
  static const std::regex rank_dir("^([A-Za-z0-9_./-]+)_rank([0-9]+)$");
  constexpr std::int64_t kMaxMergeWorld = 4096;
  static const std::regex stamped("^(.*_[0-9]{8}_[0-9]{4})([0-9]{2})$");
  const std::string hint = report::run_dir_hint_for(run_dir);
  std::smatch m;
  if (seen.size() == 1 && *world <= kMaxMergeWorld && std::regex_match(hint, m, rank_dir) &&
      m[2].str() == std::to_string(*seen.begin())) {
    const std::string name = m[1].str();
    std::smatch when;
    const std::string others = std::regex_match(name, when, stamped) ? when[1].str() + "??" : name;
    j["merge_command"] =
        "traceml report " + others + "_rank{0.." + std::to_string(*world - 1) + "} --out " + name;
  }
  return j;
}

report::FinalSummary finalize_run(const std::string& run_dir, std::int64_t window,
                                  const report::PageLimits& page_limits) {
  const std::string db = (std::filesystem::path(run_dir) / store::kRunDbFileName).string();
  RunState state(window);
  const std::int64_t repaired = store::read_run_db(db, state);
  store::RunData data = state.take();
  data.strings_repaired = repaired;
  return finalize_run(run_dir, data, window, page_limits);
}

report::FinalSummary finalize_run(const std::string& run_dir, const store::RunData& data,
                                  std::int64_t window, const report::PageLimits& page_limits) {
  return finalize_run(run_dir, data, summarize_run(data, window), page_limits);
}

analysis::Summary summarize_run(const store::RunData& data, std::int64_t window) {
  analysis::Options opts;
  opts.window = window;
  return analysis::summarize(data.telemetry, opts);
}

report::FinalSummary finalize_run(const std::string& run_dir, const store::RunData& data,
                                  const analysis::Summary& s,
                                  const report::PageLimits& page_limits) {
  const std::string db = (std::filesystem::path(run_dir) / store::kRunDbFileName).string();
  const std::optional<store::RunOutcome> outcome = store::read_run_outcome(db);
  const std::optional<store::RejectionCounts> rejections = store::read_rejection_counts(db);
  // The timeline is written while the page draws (write_run_report); the
  // summary names it once it exists.
  std::optional<report::TimelinePlan> timeline;
  if (s.step_window) {
    const auto slow = s.step_time.global_extra.find("slow_window");
    timeline = report::plan_run_timeline(*s.step_window,
                                         slow != s.step_time.global_extra.end() ? &*slow : nullptr);
  }
  report::FinalSummary f = report::build_final_summary(
      s, report::iso8601_utc(end_of_run(data.telemetry)), report::evidence_hint_for(run_dir),
      tracer_block(data, rejections),
      outcome ? std::optional<report::Json>(run_block(*outcome)) : std::nullopt,
      report::run_dir_hint_for(run_dir), report::html_hint_for(run_dir),
      partial_block(data, run_dir,
                    rejections ? store::total_rejections(*rejections)
                               : static_cast<std::int64_t>(data.rejected.size())),
      report::profiles_json(report::read_profile_infos(run_dir)),
      timeline ? std::optional<report::Json>(report::timeline_json(*timeline)) : std::nullopt);
  report::ExtraWriter write_timeline;
  if (!timeline) {
    // A run without an aligned step draws none: an older report's would be
    // another run's.
    std::error_code ec;
    std::filesystem::remove(std::filesystem::path(run_dir) / report::kTimelineFileName, ec);
  }
  if (timeline)
    write_timeline = [&] {
      return report::write_run_timeline(run_dir, data.telemetry, *timeline,
                                        std::string("traceml ") + traceml::version());
    };
  report::write_run_report(f, run_dir, &data.telemetry, page_limits, write_timeline);
  return f;
}

}  // namespace traceml::collector
