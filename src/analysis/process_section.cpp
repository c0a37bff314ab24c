// The Process section (spec §4.3 diagnosis, §5.4 payload, §5.6 card): CPU, RSS
// and framework GPU memory of the traced processes, over the latest samples
// of each global rank.
#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "analysis/neutral_issue.hpp"
#include "analysis/number_format.hpp"
#include "analysis/sample_statistics.hpp"
#include "analysis/summary.hpp"
#include "analysis/thresholds.hpp"

namespace traceml::analysis {
namespace {

namespace th = thresholds;
using K = DiagnosisKind;
using model::ProcessSample;
using model::Telemetry;

/// Payload metric names (spec §5.4, Process), in order, and which end is worse.
const std::vector<std::string> kMetricNames = {"cpu_percent",
                                               "cpu_capacity_percent",
                                               "ram_bytes",
                                               "ram_percent",
                                               "gpu_mem_used_bytes",
                                               "gpu_mem_reserved_bytes",
                                               "gpu_mem_reserved_percent",
                                               "gpu_mem_headroom_bytes"};
/// Only headroom is worse when low.
const std::vector<WorseEnd> kWorseEnds = {WorseEnd::Higher, WorseEnd::Higher, WorseEnd::Higher,
                                          WorseEnd::Higher, WorseEnd::Higher, WorseEnd::Higher,
                                          WorseEnd::Higher, WorseEnd::Lower};

/// Decimal gigabytes, as the card prints RSS.
constexpr double kBytesPerGb = 1e9;

/// Readings of a set of process samples (one rank, or every rank together).
struct ProcessWindow {
  std::int64_t samples = 0;
  std::optional<double> first_ts, last_ts;
  MeanMax cpu, ram, ram_total, used, reserved, total;
  std::optional<int> cores;  // logical cores, max over samples
  /// Max over samples of reserved/allocated, where allocated > 0.
  std::optional<double> overhang_ratio;

  void add(const ProcessSample& p) {
    ++samples;
    if (!first_ts || p.ts < *first_ts) first_ts = p.ts;
    if (!last_ts || p.ts > *last_ts) last_ts = p.ts;
    cpu.add(p.cpu_percent);
    if (p.cpu_cores && (!cores || *p.cpu_cores > *cores)) cores = p.cpu_cores;
    ram.add(p.rss_bytes);
    ram_total.add(p.ram_total_bytes);
    if (!p.gpu) return;
    used.add(p.gpu->allocated_bytes);
    reserved.add(p.gpu->reserved_bytes);
    total.add(p.gpu->total_bytes);
    if (p.gpu->allocated_bytes && *p.gpu->allocated_bytes > 0.0 && p.gpu->reserved_bytes) {
      const double r = *p.gpu->reserved_bytes / *p.gpu->allocated_bytes;
      if (!overhang_ratio || r > *overhang_ratio) overhang_ratio = r;
    }
  }
};

/// avg / (100 × cores) × 100: the share of the whole host's logical cores.
std::optional<double> capacity_percent(const std::optional<double>& avg,
                                       const std::optional<int>& cores) {
  if (!avg || !cores || *cores <= 0) return std::nullopt;
  return std::max(0.0, *avg / (100.0 * static_cast<double>(*cores))) * 100.0;
}

using RankWindows = std::map<int, ProcessWindow>;  // ascending global rank

/// The first rank (ascending) whose value is strictly beyond every earlier one.
template <typename ValueOf>
std::pair<std::optional<double>, std::optional<int>> first_extreme(const RankWindows& ranks,
                                                                   ValueOf value_of, bool highest) {
  std::optional<double> best;
  std::optional<int> rank;
  for (const auto& [r, w] : ranks) {
    const std::optional<double> v = value_of(w);
    if (!v) continue;
    if (!best || (highest ? *v > *best : *v < *best)) {
      best = v;
      rank = r;
    }
  }
  return {best, rank};
}

/// (max − min) / max × 100 over ranks with a value; needs two ranks.
template <typename ValueOf>
std::optional<double> imbalance_percent(const RankWindows& ranks, ValueOf value_of) {
  std::vector<double> v;
  for (const auto& [r, w] : ranks) {
    if (const auto x = value_of(w)) v.push_back(*x);
  }
  if (v.size() < 2) return std::nullopt;
  const double hi = *std::max_element(v.begin(), v.end());
  const double lo = *std::min_element(v.begin(), v.end());
  if (hi <= 0.0) return 0.0;
  return std::max(0.0, (hi - lo) / hi) * 100.0;
}

/// The signals the rules read (spec §4.3 "Signals").
struct ProcessSignals {
  std::optional<double> cpu_avg_percent;
  std::optional<int> cpu_logical_core_count;
  std::optional<double> cpu_capacity_percent;
  std::optional<double> ram_peak_percent;
  std::optional<double> gpu_mem_used_peak_percent;
  std::optional<double> gpu_mem_reserved_peak_percent;
  std::optional<double> overhang_ratio;
  std::optional<int> highest_overhang_rank;
  std::optional<int> highest_rss_rank;
  std::optional<int> highest_used_rank;
  std::optional<int> highest_reserved_rank;
  std::optional<int> least_headroom_rank;
  std::optional<double> rank_gpu_used_imbalance_percent;
  std::optional<double> rank_gpu_reserved_imbalance_percent;
};

ProcessSignals signals_of(const ProcessWindow& all, const RankWindows& ranks) {
  ProcessSignals s;
  s.cpu_avg_percent = all.cpu.mean();
  s.cpu_logical_core_count = all.cores;
  s.cpu_capacity_percent = capacity_percent(all.cpu.mean(), all.cores);
  s.ram_peak_percent = bounded_percent(all.ram.max(), all.ram_total.max());
  s.gpu_mem_used_peak_percent = bounded_percent(all.used.max(), all.total.max());
  s.gpu_mem_reserved_peak_percent = bounded_percent(all.reserved.max(), all.total.max());
  // A rank's own sample-wise ratio, or (no sample had both) its peak ratio.
  const auto overhang = first_extreme(
      ranks,
      [](const ProcessWindow& w) {
        return w.overhang_ratio ? w.overhang_ratio
                                : bounded_fraction(w.reserved.max(), w.used.max());
      },
      true);
  s.overhang_ratio = overhang.first;
  s.highest_overhang_rank = overhang.second;
  s.highest_rss_rank = first_extreme(
                           ranks, [](const ProcessWindow& w) { return w.ram.max(); }, true)
                           .second;
  s.highest_used_rank = first_extreme(
                            ranks, [](const ProcessWindow& w) { return w.used.max(); }, true)
                            .second;
  s.highest_reserved_rank =
      first_extreme(
          ranks, [](const ProcessWindow& w) { return w.reserved.max(); }, true)
          .second;
  s.least_headroom_rank = first_extreme(
                              ranks,
                              [](const ProcessWindow& w) -> std::optional<double> {
                                if (!w.total.max() || !w.reserved.max()) return std::nullopt;
                                return std::max(*w.total.max() - *w.reserved.max(), 0.0);
                              },
                              false)
                              .second;
  s.rank_gpu_used_imbalance_percent =
      imbalance_percent(ranks, [](const ProcessWindow& w) { return w.used.max(); });
  s.rank_gpu_reserved_imbalance_percent =
      imbalance_percent(ranks, [](const ProcessWindow& w) { return w.reserved.max(); });
  return s;
}

Json opt_json(const std::optional<double>& v) {
  return v ? Json(*v) : Json(nullptr);
}
Json opt_json(const std::optional<int>& v) {
  return v ? Json(*v) : Json(nullptr);
}

Issue make_issue(K kind, Severity sev, std::string summary, const char* action, std::string metric,
                 const char* phase, double score, std::vector<int> ranks, Json evidence) {
  Issue i = issue_of(kind, sev, std::move(summary), action);
  i.metric = std::move(metric);
  i.phase = phase;
  i.score = score;
  i.ranks = std::move(ranks);
  i.evidence = std::move(evidence);
  return i;
}

std::vector<int> present(std::initializer_list<std::optional<int>> ranks) {
  std::vector<int> out;
  for (const auto& r : ranks) {
    if (r) out.push_back(*r);
  }
  return out;
}

/// The imbalance rule (spec §4.3): ranks differ in GPU memory AND the worst of
/// them is close enough to its device's capacity for the difference to matter.
std::optional<Issue> imbalance_rule(const ProcessSignals& s, const RankWindows& ranks) {
  // The reserved family when it has an imbalance, else the allocated one.
  const bool reserved = s.rank_gpu_reserved_imbalance_percent.has_value();
  const auto& imb =
      reserved ? s.rank_gpu_reserved_imbalance_percent : s.rank_gpu_used_imbalance_percent;
  if (!imb) return std::nullopt;
  const auto peak_of = [reserved](const ProcessWindow& w) {
    return reserved ? w.reserved.max() : w.used.max();
  };
  const char* pressure_metric =
      reserved ? "gpu_mem_reserved_peak_percent" : "gpu_mem_used_peak_percent";
  auto [pressure_frac, pressure_rank] = first_extreme(
      ranks, [&](const ProcessWindow& w) { return bounded_fraction(peak_of(w), w.total.max()); },
      true);
  std::optional<double> pressure;
  if (pressure_frac) {
    pressure = *pressure_frac * 100.0;
  } else {
    // No rank knew its own device total: fall back to the whole-run share.
    pressure = reserved ? s.gpu_mem_reserved_peak_percent : s.gpu_mem_used_peak_percent;
  }
  if (!pressure) return std::nullopt;
  Severity sev;
  if (*imb >= th::kRankImbalanceCrit && *pressure >= th::kRankImbalanceCritPressure) {
    sev = Severity::Crit;
  } else if (*imb >= th::kRankImbalanceWarn && *pressure >= th::kRankImbalanceWarnPressure) {
    sev = Severity::Warn;
  } else {
    return std::nullopt;
  }
  const Json ev = {
      {"rank_gpu_used_imbalance_percent", opt_json(s.rank_gpu_used_imbalance_percent)},
      {"rank_gpu_reserved_imbalance_percent", opt_json(s.rank_gpu_reserved_imbalance_percent)},
      {"gpu_mem_reserved_peak_percent", opt_json(s.gpu_mem_reserved_peak_percent)},
      {"gpu_mem_used_peak_percent", opt_json(s.gpu_mem_used_peak_percent)},
      {"rank_gpu_memory_pressure_percent", *pressure},
      {"rank_gpu_memory_pressure_metric", pressure_metric},
      {"rank_gpu_memory_pressure_rank", opt_json(pressure_rank)},
      {"highest_used_rank", opt_json(s.highest_used_rank)},
      {"highest_reserved_rank", opt_json(s.highest_reserved_rank)},
      {"least_headroom_rank", opt_json(s.least_headroom_rank)}};
  return make_issue(
      K::RankGpuMemoryImbalance, sev,
      "Process GPU memory differed by " + fixed(*imb, 1) + "% across ranks; worst rank reached " +
          fixed(*pressure, 1) + "% of device capacity.",
      "Inspect per-rank workload and memory behavior.",
      reserved ? "rank_gpu_reserved_imbalance_percent" : "rank_gpu_used_imbalance_percent",
      "gpu_memory", *imb,
      // Duplicates are kept on purpose: [0, 0] says one rank is both.
      present({reserved ? s.highest_reserved_rank : s.highest_used_rank, s.least_headroom_rank}),
      ev);
}

/// Every finding, in rule (priority) order.
std::vector<Issue> process_rules(const ProcessSignals& s, const RankWindows& ranks) {
  std::vector<Issue> out;
  // GPU memory: the reserved share when known (what the allocator holds), else allocated.
  const bool reserved = s.gpu_mem_reserved_peak_percent.has_value();
  const auto& p = reserved ? s.gpu_mem_reserved_peak_percent : s.gpu_mem_used_peak_percent;
  const auto& p_rank = reserved ? s.highest_reserved_rank : s.highest_used_rank;
  const std::string p_metric =
      reserved ? "gpu_mem_reserved_peak_percent" : "gpu_mem_used_peak_percent";
  const std::string on_rank = p_rank ? " on rank " + std::to_string(*p_rank) : "";
  const Json p_evidence = {
      {"gpu_mem_used_peak_percent", opt_json(s.gpu_mem_used_peak_percent)},
      {"gpu_mem_reserved_peak_percent", opt_json(s.gpu_mem_reserved_peak_percent)},
      {"rank", opt_json(p_rank)}};
  if (p && *p >= th::kProcessGpuMemVeryHigh) {
    out.push_back(make_issue(
        K::VeryHighProcessGpuMemory, Severity::Crit,
        "Process GPU memory was very high, peaking at " + fixed(*p, 1) + "%" + on_rank + ".",
        "Reduce traced process GPU memory pressure.", p_metric, "gpu_memory", *p, present({p_rank}),
        p_evidence));
  } else if (p && *p >= th::kProcessGpuMemHigh) {
    out.push_back(
        make_issue(K::HighProcessGpuMemory, Severity::Warn,
                   "Process GPU memory was high, peaking at " + fixed(*p, 1) + "%" + on_rank + ".",
                   "Watch traced process GPU memory headroom.", p_metric, "gpu_memory", *p,
                   present({p_rank}), p_evidence));
  }
  // Reserved far above allocated only matters once reserved is a real share of the device.
  if (s.overhang_ratio && *s.overhang_ratio >= th::kOverhangRatioHigh &&
      s.gpu_mem_reserved_peak_percent &&
      *s.gpu_mem_reserved_peak_percent >= th::kOverhangReservedPercentMin) {
    out.push_back(make_issue(
        K::GpuMemoryReservedOverhang, Severity::Warn,
        "PyTorch CUDA allocator reserved memory was " + fixed(*s.overhang_ratio, 2) +
            "x allocated tensor memory.",
        "Inspect CUDA allocator caching, fragmentation, variable tensor shapes, or retained "
        "tensors.",
        "gpu_mem_reserved_peak_bytes", "gpu_memory", *s.overhang_ratio,
        present({s.highest_overhang_rank}),
        Json{{"gpu_mem_reserved_overhang_ratio", *s.overhang_ratio},
             {"gpu_mem_reserved_peak_percent", *s.gpu_mem_reserved_peak_percent},
             {"highest_overhang_rank", opt_json(s.highest_overhang_rank)}}));
  }
  if (auto imbalance = imbalance_rule(s, ranks)) out.push_back(std::move(*imbalance));
  if (const auto& pct = s.ram_peak_percent; pct && *pct >= th::kProcessRssHigh) {
    out.push_back(make_issue(
        K::HighProcessRss, Severity::Warn,
        "Process RSS was high, peaking at " + fixed(*pct, 1) + "%.",
        "Reduce traced process host memory pressure.", "ram_peak_percent", "ram", *pct,
        present({s.highest_rss_rank}),
        Json{{"ram_peak_percent", *pct}, {"highest_rss_rank", opt_json(s.highest_rss_rank)}}));
  }
  if (const auto& pct = s.cpu_capacity_percent; pct && *pct >= th::kProcessCpuCapacityHigh) {
    out.push_back(make_issue(K::HighProcessCpu, Severity::Warn,
                             "Process CPU averaged " + fixed(*pct, 1) + "% of capacity.",
                             "Inspect data loading, preprocessing, or host contention.",
                             "cpu_capacity_percent", "cpu", *pct, {},
                             Json{{"cpu_avg_percent", opt_json(s.cpu_avg_percent)},
                                  {"cpu_logical_core_count", opt_json(s.cpu_logical_core_count)},
                                  {"cpu_capacity_percent", *pct}}));
  }
  return out;
}

int process_priority(const std::string& kind) {
  static const std::vector<K> order = {
      K::VeryHighProcessGpuMemory, K::HighProcessGpuMemory, K::GpuMemoryReservedOverhang,
      K::RankGpuMemoryImbalance,   K::HighProcessRss,       K::HighProcessCpu};
  const auto k = kind_from_name(kind);
  const auto it = k ? std::find(order.begin(), order.end(), *k) : order.end();
  return it == order.end() ? 999 : static_cast<int>(it - order.begin());
}

/// The rank's identity as reported at handshake; a later record replaces an earlier one.
Identity rank_identity(const Telemetry& t, int global_rank) {
  Identity id;
  id.global_rank = global_rank;
  for (const auto& r : t.ranks) {
    if (r.global_rank != global_rank) continue;
    id.local_rank = r.local_rank;
    id.node_rank = r.node_rank;
    id.hostname = r.hostname;
    id.local_world_size = r.local_world_size;
    id.world_size = r.world_size;
  }
  return id;
}

/// Several node ranks, or a world larger than one node, is a multi-node run.
std::string mode_of(const std::vector<GroupRow>& rows) {
  if (rows.empty()) return "no_data";
  std::set<int> nodes;
  for (const auto& r : rows) {
    if (r.identity.node_rank) nodes.insert(*r.identity.node_rank);
  }
  if (nodes.size() > 1) return "multi_node";
  for (const auto& r : rows) {
    const Identity& id = r.identity;
    if (id.world_size && id.local_world_size && *id.world_size > *id.local_world_size) {
      return "multi_node";
    }
  }
  return "single_node";
}

std::vector<std::optional<double>> rank_metrics(const ProcessWindow& w) {
  const auto total = w.total.max();
  const auto reserved = w.reserved.mean();
  std::optional<double> headroom;
  if (total && reserved) headroom = std::max(*total - *reserved, 0.0);
  return {w.cpu.mean(),
          capacity_percent(w.cpu.mean(), w.cores),
          w.ram.mean(),
          bounded_percent(w.ram.mean(), w.ram_total.max()),
          w.used.mean(),
          reserved,
          bounded_percent(reserved, total),
          headroom};
}

std::string card_stats(const ProcessWindow& all, std::size_t ranks, const ProcessSignals& s) {
  std::string out = "global ranks " + std::to_string(ranks);
  if (const auto cpu = all.cpu.mean()) out += " | CPU avg " + fixed(*cpu, 0) + "%";
  if (const auto peak = all.ram.max()) {
    out += " | RSS peak " + fixed(*peak / kBytesPerGb, 1);
    if (const auto total = all.ram_total.max()) out += " / " + fixed(*total / kBytesPerGb, 1);
    out += " GB";
  }
  // TraceML picks `reserved or used`: a reserved peak of exactly 0 % falls
  // through to the used value but keeps the reserved label (spec §8.2 quirk 14,
  // kept as is).
  const auto& res = s.gpu_mem_reserved_peak_percent;
  const auto gpu = res && *res != 0.0 ? res : s.gpu_mem_used_peak_percent;
  if (gpu)
    out += std::string(res ? " | GPU reserved peak " : " | GPU used peak ") + fixed(*gpu, 0) + "%";
  return out;
}

}  // namespace

Section analyze_process(const Telemetry& t, const Options& o) {
  Section s =
      section_of("process", "global_rank", kMetricNames, {{"memory", "bytes"}, {"cpu", "%"}});

  // Latest `window` samples of each rank.
  std::map<int, std::vector<const ProcessSample*>> by_rank;
  for (const auto& p : t.process)
    by_rank[p.global_rank].push_back(&p);
  const auto keep = static_cast<std::size_t>(std::max<std::int64_t>(o.window, 0));
  ProcessWindow all;
  RankWindows ranks;
  for (auto& [rank, samples] : by_rank) {
    const std::size_t from = samples.size() > keep ? samples.size() - keep : 0;
    for (std::size_t k = from; k < samples.size(); ++k) {
      all.add(*samples[k]);
      ranks[rank].add(*samples[k]);
    }
  }
  const ProcessSignals signals = signals_of(all, ranks);

  // ---- diagnosis ----
  if (all.samples > 0) s.issues = process_rules(signals, ranks);
  // Severity, then score, like every other section (DECISIONS.md quirk 8; TraceML
  // orders by rule priority first). Rule priority breaks the remaining ties.
  std::stable_sort(s.issues.begin(), s.issues.end(), [](const Issue& a, const Issue& b) {
    if (const int c = severity_then_score(a, b)) return c < 0;
    return process_priority(a.kind) < process_priority(b.kind);
  });
  if (s.issues.empty()) {
    const bool gpu = signals.gpu_mem_used_peak_percent || signals.gpu_mem_reserved_peak_percent;
    s.issues.push_back(sample_neutral_issue(
        all.samples, {{"samples_used", all.samples}}, "No traced process telemetry was recorded.",
        "Collect process telemetry for workload-local context.",
        gpu ? "Process CPU, RSS, and GPU memory showed no pressure."
            : "Process CPU and RSS showed no pressure."));
  }

  // ---- payload ----
  for (const auto& [rank, w] : ranks) {
    s.rows.push_back(GroupRow{std::to_string(rank), rank_identity(t, rank), rank_metrics(w)});
  }
  fill_row_statistics(s, kWorseEnds);

  Metadata& md = s.metadata;
  md.mode = mode_of(s.rows);
  md.duration_s = sample_span(all.first_ts, all.last_ts);
  md.samples = all.samples;
  md.global_ranks_seen = static_cast<std::int64_t>(ranks.size());
  md.global_ranks_used = static_cast<std::int64_t>(ranks.size());
  s.window = sample_window(all.samples);

  s.card = "TraceML Process Summary | duration " + duration_text(md.duration_s) + " | samples " +
           std::to_string(all.samples) + "\nProcess\n- Diagnosis: " + s.diagnosis().status +
           "\n- Stats: " + card_stats(all, ranks.size(), signals) +
           "\n- Why: " + s.diagnosis().summary;
  return s;
}

}  // namespace traceml::analysis
