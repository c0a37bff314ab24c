// The System section (spec §4.2 diagnosis, §5.4 payload, §5.6 card): host and
// GPU pressure per node over the latest samples of each node.
//
// The rules run per node and every finding is scoped to its node (and GPU),
// because a cluster-wide average would hide one hot node behind cool ones.
#include <algorithm>
#include <cmath>
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
using model::SystemSample;
using model::Telemetry;

/// Payload metric names (spec §5.4, System), in order, and which end is worse.
const std::vector<std::string> kMetricNames = {
    "cpu_percent",     "ram_bytes",  "ram_percent", "gpu_util_percent",  "gpu_mem_bytes",
    "gpu_mem_percent", "gpu_temp_c", "gpu_power_w", "gpu_headroom_bytes"};
/// Idle GPUs and thin headroom are the bad ends of these two metrics.
const std::vector<WorseEnd> kWorseEnds = {WorseEnd::Higher, WorseEnd::Higher, WorseEnd::Higher,
                                          WorseEnd::Lower,  WorseEnd::Higher, WorseEnd::Higher,
                                          WorseEnd::Higher, WorseEnd::Higher, WorseEnd::Lower};
enum MetricIdx : std::size_t {
  kCpuPercent,
  kRamBytes,
  kRamPercent,
  kGpuUtilPercent,
  kGpuMemBytes,
  kGpuMemPercent,
  kGpuTempC,
  kGpuPowerW,
  kGpuHeadroomBytes,
};

/// Decimal gigabytes: TraceML computes the headroom in GB and scales it back,
/// which can move the last binary digit; we do the same to agree on the value.
constexpr double kBytesPerGb = 1e9;

/// One GPU of one node over the node's window.
struct GpuWindow {
  int index = 0;
  MeanMax util, mem_used, mem_total, temp, power, power_limit;
};

/// One node over its window: its own readings and per-sample GPU rollups.
struct NodeWindow {
  int node_rank = 0;
  std::string label;
  std::vector<const SystemSample*> samples;
  MeanMax cpu, ram_used, ram_total;
  bool gpu_available = false;
  // Per sample: the mean (and max) across that sample's GPUs; then across samples.
  MeanMax util_rollup, mem_rollup, temp_rollup, temp_peak_rollup, power_rollup;
  std::vector<GpuWindow> gpus;  // ascending GPU index
};

/// The per-node signals the rules read (spec §4.2 "Signals").
struct NodeSignals {
  std::optional<double> cpu_avg_percent;
  std::optional<double> ram_peak_percent;
  std::optional<double> gpu_mem_peak_percent;
  std::optional<double> gpu_power_avg_limit_percent;
  std::optional<double> gpu_util_avg_percent;
  std::optional<double> gpu_temp_peak_c;
  std::optional<int> lowest_util_gpu_idx;
  std::optional<int> highest_mem_pressure_gpu_idx;
  std::optional<int> highest_temp_gpu_idx;
  std::optional<int> highest_power_gpu_idx;
};

/// Latest `window` samples of each node, nodes in ascending node rank.
std::vector<NodeWindow> node_windows(const Telemetry& t, std::int64_t window) {
  std::map<int, std::vector<const SystemSample*>> by_node;
  for (const auto& s : t.system)
    by_node[s.node_rank].push_back(&s);
  std::vector<NodeWindow> nodes;
  const auto keep = static_cast<std::size_t>(std::max<std::int64_t>(window, 0));
  for (auto& [rank, samples] : by_node) {
    if (samples.size() > keep) {
      samples.erase(samples.begin(), samples.end() - static_cast<std::ptrdiff_t>(keep));
    }
    if (samples.empty()) continue;
    NodeWindow n;
    n.node_rank = rank;
    n.label = std::to_string(rank);
    n.samples = samples;
    nodes.push_back(std::move(n));
  }
  return nodes;
}

void aggregate(NodeWindow& n) {
  std::map<int, GpuWindow> gpus;
  for (const SystemSample* s : n.samples) {
    n.cpu.add(s->cpu_percent);
    n.ram_used.add(s->ram_used_bytes);
    n.ram_total.add(s->ram_total_bytes);
    if (s->gpus.empty()) continue;
    n.gpu_available = true;
    MeanMax util, mem, temp, power;
    for (const auto& g : s->gpus) {
      util.add(g.util_percent);
      mem.add(g.mem_used_bytes);
      temp.add(g.temperature_c);
      power.add(g.power_w);
      GpuWindow& w = gpus[g.index];
      w.index = g.index;
      w.util.add(g.util_percent);
      w.mem_used.add(g.mem_used_bytes);
      w.mem_total.add(g.mem_total_bytes);
      w.temp.add(g.temperature_c);
      w.power.add(g.power_w);
      w.power_limit.add(g.power_limit_w);
    }
    n.util_rollup.add(util.mean());
    n.mem_rollup.add(mem.mean());
    n.temp_rollup.add(temp.mean());
    n.temp_peak_rollup.add(temp.max());
    n.power_rollup.add(power.mean());
  }
  for (auto& [index, w] : gpus)
    n.gpus.push_back(std::move(w));
}

/// First GPU whose value is strictly beyond every earlier one (TraceML's
/// "first max"/"first min", GPUs in ascending index).
template <typename ValueOf>
std::pair<std::optional<double>, std::optional<int>> first_extreme(const NodeWindow& n,
                                                                   ValueOf value_of, bool highest) {
  std::optional<double> best;
  std::optional<int> idx;
  for (const auto& g : n.gpus) {
    const std::optional<double> v = value_of(g);
    if (!v) continue;
    if (!best || (highest ? *v > *best : *v < *best)) {
      best = v;
      idx = g.index;
    }
  }
  return {best, idx};
}

NodeSignals signals_of(const NodeWindow& n) {
  NodeSignals s;
  s.cpu_avg_percent = n.cpu.mean();
  s.ram_peak_percent = bounded_percent(n.ram_used.max(), n.ram_total.max());
  const auto [mem_frac, mem_idx] = first_extreme(
      n, [](const GpuWindow& g) { return bounded_fraction(g.mem_used.max(), g.mem_total.max()); },
      true);
  if (mem_frac) s.gpu_mem_peak_percent = *mem_frac * 100.0;
  s.highest_mem_pressure_gpu_idx = mem_idx;
  const auto [power_frac, power_idx] = first_extreme(
      n, [](const GpuWindow& g) { return bounded_fraction(g.power.mean(), g.power_limit.max()); },
      true);
  if (power_frac) s.gpu_power_avg_limit_percent = *power_frac * 100.0;
  s.highest_power_gpu_idx = power_idx;
  s.gpu_util_avg_percent = n.util_rollup.mean();
  s.gpu_temp_peak_c = n.temp_peak_rollup.max();
  s.lowest_util_gpu_idx = first_extreme(
                              n, [](const GpuWindow& g) { return g.util.mean(); }, false)
                              .second;
  s.highest_temp_gpu_idx = first_extreme(
                               n, [](const GpuWindow& g) { return g.temp.max(); }, true)
                               .second;
  return s;
}

Json opt_json(const std::optional<int>& v) {
  return v ? Json(*v) : Json(nullptr);
}

std::string gpu_suffix(const std::optional<int>& idx) {
  return idx ? " on gpu" + std::to_string(*idx) : std::string();
}

Issue make_issue(K kind, Severity sev, std::string summary, const char* action, const char* metric,
                 const char* phase, double score, const std::optional<int>& gpu_idx,
                 Json evidence) {
  Issue i = issue_of(kind, sev, std::move(summary), action);
  i.metric = metric;
  i.phase = phase;
  i.score = score;
  if (gpu_idx) i.ranks.push_back(*gpu_idx);
  i.evidence = std::move(evidence);
  return i;
}

/// The node's findings, in rule order, before scoping.
std::vector<Issue> node_rules(const NodeSignals& s) {
  std::vector<Issue> out;
  if (const auto& pct = s.gpu_mem_peak_percent) {
    const auto& idx = s.highest_mem_pressure_gpu_idx;
    const Json ev = {{"gpu_mem_peak_percent", *pct}, {"gpu_idx", opt_json(idx)}};
    if (*pct >= th::kSystemGpuMemVeryHigh) {
      out.push_back(make_issue(
          K::VeryHighGpuMemory, Severity::Crit,
          "GPU memory was very high, peaking at " + fixed(*pct, 1) + "%" + gpu_suffix(idx) + ".",
          "Reduce GPU memory pressure before scaling this run.", "gpu_mem_peak_percent",
          "gpu_memory", *pct, idx, ev));
    }
  }
  if (const auto& temp = s.gpu_temp_peak_c; temp && *temp >= th::kSystemGpuTempHigh) {
    const auto& idx = s.highest_temp_gpu_idx;
    out.push_back(make_issue(
        K::HighGpuTemperature, Severity::Crit,
        "GPU temperature was high, peaking at " + fixed(*temp, 1) + " C" + gpu_suffix(idx) + ".",
        "Check cooling and thermal throttling risk.", "gpu_temp_peak_c", "gpu_temperature", *temp,
        idx, Json{{"gpu_temp_peak_c", *temp}, {"gpu_idx", opt_json(idx)}}));
  }
  if (const auto& pct = s.gpu_mem_peak_percent;
      pct && *pct >= th::kSystemGpuMemHigh && *pct < th::kSystemGpuMemVeryHigh) {
    const auto& idx = s.highest_mem_pressure_gpu_idx;
    out.push_back(make_issue(
        K::HighGpuMemory, Severity::Warn,
        "GPU memory was high, peaking at " + fixed(*pct, 1) + "%" + gpu_suffix(idx) + ".",
        "Watch GPU memory headroom for larger batches or models.", "gpu_mem_peak_percent",
        "gpu_memory", *pct, idx, Json{{"gpu_mem_peak_percent", *pct}, {"gpu_idx", opt_json(idx)}}));
  }
  if (const auto& pct = s.gpu_power_avg_limit_percent; pct && *pct >= th::kSystemGpuPowerHigh) {
    const auto& idx = s.highest_power_gpu_idx;
    out.push_back(make_issue(
        K::HighGpuPower, Severity::Warn,
        "GPU power was high, averaging " + fixed(*pct, 1) + "% of limit" + gpu_suffix(idx) + ".",
        "Review power headroom if this run is unstable.", "gpu_power_avg_limit_percent",
        "gpu_power", *pct, idx,
        Json{{"gpu_power_avg_limit_percent", *pct}, {"gpu_idx", opt_json(idx)}}));
  }
  if (const auto& pct = s.ram_peak_percent; pct && *pct >= th::kSystemRamHigh) {
    out.push_back(
        make_issue(K::HighHostMemory, Severity::Warn,
                   "Host RAM usage was high, peaking at " + fixed(*pct, 1) + "% of total.",
                   "Reduce host memory pressure or inspect data workers.", "ram_peak_percent",
                   "ram", *pct, std::nullopt, Json{{"ram_peak_percent", *pct}}));
  }
  if (const auto& pct = s.cpu_avg_percent; pct && *pct >= th::kSystemCpuHigh) {
    out.push_back(make_issue(
        K::HighCpu, Severity::Warn, "CPU usage was high, averaging " + fixed(*pct, 1) + "%.",
        "Inspect CPU-side preprocessing or host contention.", "cpu_avg_percent", "cpu", *pct,
        std::nullopt, Json{{"cpu_avg_percent", *pct}}));
  }
  if (const auto& util = s.gpu_util_avg_percent) {
    // Below 30 % the GPU mostly idled; up to and including 70 % it was only partly used.
    const bool low = *util < th::kGpuUtilLow;
    if (low || *util <= th::kGpuUtilModerateMax) {
      const char* band = low ? "low" : "moderate";
      // The util rules carry no GPU in `ranks`: the finding is the node's average.
      out.push_back(make_issue(
          low ? K::LowGpuUtilization : K::ModerateGpuUtilization, Severity::Info,
          std::string("GPU utilization was ") + band + ", averaging " + fixed(*util, 1) + "%.",
          "Use training diagnostics to identify why the GPU was not fully utilized.",
          "gpu_util_avg_percent", "gpu_utilization", 100.0 - *util, std::nullopt,
          Json{{"gpu_util_avg_percent", *util},
               {"gpu_utilization_band", band},
               {"lowest_util_gpu_idx", opt_json(s.lowest_util_gpu_idx)}}));
    }
  }
  return out;
}

/// "abc..." -> "abc" (Python's rstrip('.')).
std::string strip_dots(std::string s) {
  while (!s.empty() && s.back() == '.')
    s.pop_back();
  return s;
}

/// Names the node (and GPU) in the issue's evidence and summary (spec §4.2 "Scoping").
void scope_to_node(Issue& i, const NodeWindow& n) {
  Json scope = {{"level", "node"}, {"node", n.label}, {"node_rank", n.node_rank}};
  if (!i.ranks.empty()) {
    const int gpu = i.ranks.front();
    scope["level"] = "gpu";
    scope["gpu_idx"] = gpu;
    const std::string existing = " on gpu" + std::to_string(gpu);
    const std::string scoped = " on " + n.label + " gpu" + std::to_string(gpu);
    const auto at = i.summary.find(existing);
    if (at != std::string::npos) {
      i.summary.replace(at, existing.size(), scoped);
    } else {
      i.summary = strip_dots(i.summary) + scoped + ".";
    }
  } else {
    i.summary = strip_dots(i.summary) + " on " + n.label + ".";
  }
  i.evidence["scope"] = std::move(scope);
  i.evidence["samples_used"] = static_cast<std::int64_t>(n.samples.size());
}

int system_priority(const std::string& kind) {
  static const std::vector<K> order = {K::VeryHighGpuMemory, K::HighGpuTemperature,
                                       K::HighGpuMemory,     K::HighGpuPower,
                                       K::HighHostMemory,    K::HighCpu,
                                       K::LowGpuUtilization, K::ModerateGpuUtilization};
  const auto k = kind_from_name(kind);
  const auto it = k ? std::find(order.begin(), order.end(), *k) : order.end();
  return it == order.end() ? 999 : static_cast<int>(it - order.begin());
}

/// Node identity: the rank that samples the host is local rank 0 of the node.
/// Among several claimants the lowest global rank wins; a later record of the
/// same rank replaces an earlier one.
Identity node_identity(const Telemetry& t, int node_rank) {
  const model::RankIdentity* best = nullptr;
  for (const auto& r : t.ranks) {
    if (r.node_rank != node_rank || r.local_rank != 0) continue;
    if (!best || r.global_rank <= best->global_rank) best = &r;
  }
  Identity id;
  id.node_rank = node_rank;
  if (best) {
    id.global_rank = best->global_rank;
    id.local_rank = best->local_rank;
    id.hostname = best->hostname;
    id.local_world_size = best->local_world_size;
    id.world_size = best->world_size;
  }
  return id;
}

/// ceil(world_size / local_world_size) when every identity that has both
/// agrees on one value, else the number of nodes seen; at least 1.
std::int64_t expected_nodes(const Telemetry& t, std::size_t observed) {
  std::set<std::int64_t> candidates;
  if (observed > 0) {
    for (const auto& r : t.ranks) {
      if (r.world_size && r.local_world_size && *r.world_size > 0 && *r.local_world_size > 0) {
        candidates.insert((static_cast<std::int64_t>(*r.world_size) + *r.local_world_size - 1) /
                          *r.local_world_size);
      }
    }
  }
  if (candidates.size() == 1) return std::max<std::int64_t>(1, *candidates.begin());
  return std::max<std::int64_t>(1, static_cast<std::int64_t>(observed));
}

std::vector<std::optional<double>> node_metrics(const NodeWindow& n) {
  std::vector<std::optional<double>> m(kMetricNames.size());
  m[kCpuPercent] = n.cpu.mean();
  m[kRamBytes] = n.ram_used.mean();
  m[kRamPercent] = bounded_percent(n.ram_used.mean(), n.ram_total.max());
  m[kGpuUtilPercent] = n.util_rollup.mean();
  // Mean over GPUs of each GPU's mean use. (TraceML falls back to the mean of the
  // per-sample means, but that is absent whenever this one is.)
  MeanMax gpu_mem;
  double used_sum = 0.0, total_sum = 0.0;
  std::optional<double> headroom_gb;
  for (const auto& g : n.gpus) {
    gpu_mem.add(g.mem_used.mean());
    if (g.mem_used.mean() && g.mem_total.max()) {
      used_sum += *g.mem_used.mean();
      total_sum += *g.mem_total.max();
    }
    if (g.mem_total.max() && g.mem_used.max()) {
      const double h = std::max(0.0, *g.mem_total.max() - *g.mem_used.max()) / kBytesPerGb;
      if (!headroom_gb || h < *headroom_gb) headroom_gb = h;
    }
  }
  m[kGpuMemBytes] = gpu_mem.mean();
  m[kGpuMemPercent] =
      bounded_percent(used_sum, total_sum > 0.0 ? std::optional<double>(total_sum) : std::nullopt);
  m[kGpuTempC] = n.temp_rollup.mean();
  m[kGpuPowerW] = n.power_rollup.mean();
  if (headroom_gb) m[kGpuHeadroomBytes] = *headroom_gb * kBytesPerGb;
  return m;
}

std::string pct0(const std::optional<double>& v) {
  return v ? fixed(*v, 0) + "%" : "n/a";
}
std::string temp1(const std::optional<double>& v) {
  return v ? fixed(*v, 1) + "C" : "n/a";
}
std::string node_idx(const std::optional<std::string>& idx) {
  return idx ? "n" + *idx : "n/a";
}

std::string card_stats(const Section& s, const std::vector<NodeWindow>& nodes,
                       const std::vector<NodeSignals>& signals) {
  if (nodes.size() <= 1) {
    if (nodes.empty()) return "unavailable";
    const NodeWindow& n = nodes.front();
    const NodeSignals& sig = signals.front();
    std::string out = "CPU " + pct0(sig.cpu_avg_percent) + " | RAM " + pct0(sig.ram_peak_percent);
    if (n.gpu_available) {
      out += " | GPU util " + pct0(sig.gpu_util_avg_percent) + " | GPU memory " +
             pct0(sig.gpu_mem_peak_percent) + " | GPU temp " + temp1(sig.gpu_temp_peak_c);
    }
    return out;
  }
  const auto med_worst = [&](const char* label, std::size_t m, bool temp) {
    auto* fmt = temp ? &temp1 : &pct0;
    return std::string(label) + " med/worst " + fmt(s.median[m].value) + "/" +
           fmt(s.worst[m].value) + " " + node_idx(s.worst[m].idx);
  };
  std::string out =
      med_worst("CPU", kCpuPercent, false) + " | " + med_worst("RAM", kRamPercent, false);
  const bool any_gpu =
      std::any_of(nodes.begin(), nodes.end(), [](const NodeWindow& n) { return n.gpu_available; });
  if (any_gpu) {
    out += " | " + med_worst("GPU util", kGpuUtilPercent, false) + " | " +
           med_worst("GPU temp", kGpuTempC, true);
  }
  return out;
}

}  // namespace

Section analyze_system(const Telemetry& t, const Options& o) {
  Section s =
      section_of("system", "node_rank", kMetricNames,
                 {{"memory", "bytes"}, {"temperature", "C"}, {"power", "W"}, {"util", "%"}});

  std::vector<NodeWindow> nodes = node_windows(t, o.window);
  std::vector<NodeSignals> signals;
  std::int64_t samples = 0;
  std::optional<double> first_ts, last_ts;
  bool cluster_gpu_signal = false;
  for (auto& n : nodes) {
    aggregate(n);
    signals.push_back(signals_of(n));
    samples += static_cast<std::int64_t>(n.samples.size());
    for (const SystemSample* x : n.samples) {
      if (!first_ts || x->ts < *first_ts) first_ts = x->ts;
      if (!last_ts || x->ts > *last_ts) last_ts = x->ts;
    }
    // Cluster-level GPU memory and power shares are never computed (no per-GPU
    // view across nodes), so "any GPU signal" means utilisation or temperature.
    cluster_gpu_signal = cluster_gpu_signal || n.util_rollup.mean().has_value() ||
                         n.temp_peak_rollup.max().has_value();
  }

  // ---- metadata and window ----
  const auto observed = static_cast<std::int64_t>(nodes.size());
  const std::int64_t expected = expected_nodes(t, nodes.size());
  Metadata& md = s.metadata;
  md.mode =
      observed <= 0 ? "no_data" : (expected <= 1 && observed <= 1 ? "single_node" : "multi_node");
  md.duration_s = sample_span(first_ts, last_ts);
  md.samples = samples;
  md.nodes_expected = expected;
  md.nodes_observed = observed;
  md.nodes_coverage = std::to_string(observed) + "/" + std::to_string(expected);
  md.nodes_partial = observed < expected;
  std::int64_t gpus = 0;
  for (const auto& n : nodes)
    gpus += static_cast<std::int64_t>(n.gpus.size());
  md.gpus_observed = gpus;
  s.window = sample_window(samples);

  // ---- diagnosis ----
  struct Scoped {
    Issue issue;
    int node_rank;
  };
  std::vector<Scoped> scoped;
  for (std::size_t k = 0; k < nodes.size(); ++k) {
    for (Issue& i : node_rules(signals[k])) {
      scope_to_node(i, nodes[k]);
      scoped.push_back({std::move(i), nodes[k].node_rank});
    }
  }
  // Priority first, then severity and score; an exact tie goes to the lowest
  // node compared as a number (TraceML compares labels as strings).
  std::stable_sort(scoped.begin(), scoped.end(), [](const Scoped& a, const Scoped& b) {
    const int pa = system_priority(a.issue.kind), pb = system_priority(b.issue.kind);
    if (pa != pb) return pa < pb;
    if (const int c = severity_then_score(a.issue, b.issue)) return c < 0;
    return a.node_rank < b.node_rank;
  });
  for (auto& x : scoped)
    s.issues.push_back(std::move(x.issue));
  if (s.issues.empty()) {
    s.issues.push_back(sample_neutral_issue(
        samples, {{"samples_used", samples}, {"scope", {{"level", "cluster"}}}},
        "No system telemetry was recorded.", "Collect system telemetry for host-level context.",
        cluster_gpu_signal ? "CPU, RAM, and GPU showed no system pressure."
                           : "CPU and RAM showed no system pressure."));
  }

  // ---- payload ----
  for (const auto& n : nodes) {
    s.rows.push_back(GroupRow{n.label, node_identity(t, n.node_rank), node_metrics(n)});
  }
  fill_row_statistics(s, kWorseEnds);

  const std::string coverage = *md.nodes_coverage;
  s.card = "TraceML System Summary | duration " + duration_text(md.duration_s) + " | nodes " +
           coverage + " | samples " + std::to_string(samples) +
           "\nSystem\n- Diagnosis: " + s.diagnosis().status + "\n- Scope: nodes " + coverage +
           " | samples " + std::to_string(samples) + "\n- Stats: " + card_stats(s, nodes, signals) +
           "\n- Why: " + s.diagnosis().summary;
  return s;
}

}  // namespace traceml::analysis
