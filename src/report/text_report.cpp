// The text report (final_summary.txt), rendered from final_summary.json alone.
//
// Layout: the seed guide's "Example excerpt" (find-pytorch-input-pipeline-
// bottlenecks), wording: spec §5.8 (the v0.3.7 card) wherever the guide is silent.
// The decisions taken where neither says it exactly:
//
// * Line order: title, meta line, blank, Verdict, Why, Next (right after Why,
//   as in the guide), then the §5.8 "after Next" line (Supporting:, or the
//   all-normal line), Scope (always printed), blank, the
//   STEP TIMING || STEP MEMORY block, blank, the SYSTEM || PROCESS block, blank,
//   the Also block, Full evidence. §5.8's "Peak step memory" line is not printed:
//   the STEP MEMORY block carries the same numbers.
// * Prose (meta, Why, Next, Supporting, Also, Observed anyway) wraps greedily at
//   120 columns (kProseWidth, the widest the blocks get with typical values),
//   never inside a word; continuation lines are indented under the text after
//   the label ("Why: " -> 5 spaces, "Next: " -> 6, "! " -> 2).
// * Side-by-side blocks: the left side is padded to a minimum width (50 for
//   STEP TIMING, 52 for SYSTEM, the guide's columns), widened to its longest
//   line when a value does not fit, so every `||` of a block is in one column.
//   Separators are " || " and " ||  " as in the guide. Trailing blanks are
//   stripped, so a row with an empty right side ends in "||". A block whose
//   partner section is absent from the JSON is printed alone, without `||`;
//   its summary text then wraps at the full width instead of the column's.
//   SYSTEM and PROCESS heads (title, Evidence, blank) are padded to the same
//   height so that their tables start on the same row.
// * Table columns (label, median, worst) have the guide's widths and grow to
//   the longest cell plus one space. "worst" cells name where: `, N{node}` for
//   System, `, R{rank}/N{node}` for Process and Step Memory, from the group
//   row the JSON's worst point names (the percent in "16.0 GB (27%)" is read
//   from that same row, so both numbers describe one node or rank). A row
//   whose median and worst are both null is left out; one null cell is "n/a".
// * STEP TIMING header: multi-rank (step_time.metadata.global_ranks_used > 1)
//   shows `(Median R{r}/N{n})` for the representative rank of step time
//   (global.median.step_time_ms.idx) and the tree shows that rank's own group
//   row, one real rank as the guide asks; when that row is missing the
//   per-metric global medians are used and the header says `(Median)`.
//   Single rank: `(R{r}/N{n})` of the only group row, else `(Average)`; values
//   are global.average. Clock: `GPU Clock` / `CPU Clock` from the window's
//   diagnosis_clock, omitted when absent.
// * Tree: Step Time; Input Wait, Compute (Forward, Backward, Optimizer under
//   it), H2D, Residual. Null rows are skipped; Compute's children are skipped
//   with it (they would have no parent). No tree when Step Time is null or
//   <= 0: the row then reads "n/a". Row: label+glyph padded to 19, value
//   right-aligned in 7 (so values end at column 26), " ms  ", share in 4.
// * Multi-rank worst-rank cells (§5.8 rule): a depth>0 row gets
//   `{worst:>6.1f} ms (R{r})` when it is the straggler's compared metric or
//   its skew is material; the median the rule compares with is the value the
//   row shows. If any row has one, Step Time gets one too, the header gets
//   "worst rank" above them, and the block widens to hold them.
// * Culprit marker `◀ cause` / `◀ {ratio}x` (one space, as the brief shows)
//   is the last thing on its row, so it points at the worst-rank cell when
//   there is one (as §5.8 places it).
// * Straggler Why/Next use the guide's notation: `R0/N0` (node from the rank's
//   group row), `the slow rank` when the rank is unknown, and
//   `All {world_size} ranks then advance at R0's pace.`
// * Degraded verdicts (INSUFFICIENT_STEP_TIME_DATA): no tree; the §5.8
//   "Observed anyway:" line stands alone after Scope, then STEP MEMORY alone,
//   then SYSTEM || PROCESS. No Also block (§5.8 prints it only beside a
//   verdict, and "not the cause of slow steps" needs one).
// * CPU-only runs (gpus_observed == 0): `H2D and step memory not measured (no
//   GPU).` under the tree. The Also block is printed on them too.
// * GPU activity (issue 5; only when the JSON has the added Step Time metrics):
//   under the tree, for the tree's rank, `Collective (NCCL): {ms} per step`,
//   `H2D copies: {n} per step, {bytes}, {p}% pageable` and `GPU idle in
//   steps: {p}%`; a `GPU idle in steps` row under `GPU util` in SYSTEM. Why /
//   Next add the pin-memory advice (H2D-BOUND, H2D STRAGGLER) and the
//   collective sentence (RANK STRAGGLER, RESIDUAL-HEAVY) from the Step Time
//   finding's evidence, at the thresholds the analysis uses.
// * SYSTEM Evidence: LOW/MODERATE GPU util -> `GPU utilization averaged
//   {u:.0f}%.` (u from the diagnosis evidence, else the cluster average);
//   otherwise the diagnosis summary. PROCESS shows its summary as Evidence only
//   for a warn/crit finding (NORMAL would repeat boilerplate).
// * No primary_diagnosis: `Verdict: n/a`. Unknown kinds: the status label,
//   with the primary summary/action as Why/Next.
// * Colour (opt-in): verdict label and severity words by severity, the
//   section status values by their own severity, the culprit marker, the
//   title and the "Next:" label in bold, Scope and Full evidence dim. Colour
//   codes wrap only unpadded tokens, and widths are measured without them,
//   so the visible text never changes.
#include "report/text_report.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdlib>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "analysis/h2d_advice.hpp"
#include "analysis/number_format.hpp"
#include "analysis/thresholds.hpp"
#include "model/text.hpp"
#include "report/summary_json.hpp"

namespace traceml::report {
namespace {

using Json = nlohmann::ordered_json;
using analysis::fixed;

// ---- Layout ----------------------------------------------------------------
/// Prose is wrapped here. It is the report's width: the side-by-side blocks
/// stay under it with typical values (about 110 columns).
constexpr std::size_t kProseWidth = 120;
/// The guide's left column widths: STEP TIMING, then SYSTEM METRICS.
constexpr std::size_t kStepLeftMin = 50;
constexpr std::size_t kMetricsLeftMin = 52;
/// Text in a right-hand block (a section summary) wraps at this width.
constexpr std::size_t kRightWrap = 52;
constexpr const char* kStepSep = " || ";
constexpr const char* kMetricsSep = " ||  ";
/// Tree row: glyph+label field, then the value right-aligned.
constexpr std::size_t kTreeLabelWidth = 19;
constexpr std::size_t kTreeValueWidth = 7;
constexpr std::size_t kTreeShareWidth = 4;
/// Table columns of the guide: (label, median) widths.
constexpr std::size_t kSystemLabelWidth = 18, kSystemMedianWidth = 17;
constexpr std::size_t kProcessLabelWidth = 15, kProcessMedianWidth = 17;
constexpr std::size_t kMemoryLabelWidth = 20, kMemoryMedianWidth = 18;

// ---- Presentation thresholds (spec §5.8) ------------------------------------
// These decide what the card shows, never a diagnosis, so they live with the
// card rather than in analysis/thresholds.hpp.
/// A rank's phase is called out beside the median only when it differs by at
/// least 1 ms and 20 %: smaller gaps are sampling noise, not a slow rank.
constexpr double kMaterialSkewMs = 1.0;
constexpr double kMaterialSkewFraction = 0.20;
/// Below 2x the worst/median ratio says little; the marker then reads "cause".
constexpr double kRatioMarkerMin = 2.0;
/// GPU util under this supports an input/straggler verdict (the GPU idles).
constexpr double kSupportingUtilMax = 50.0;
/// Bytes under 0.1 GB print in MB, or they would read "0.0 GB".
constexpr double kMegabyteCutoff = 1e8;
/// The Also block lists at most this many findings.
constexpr std::size_t kAlsoMax = 2;

constexpr const char* kReset = "\x1b[0m";
constexpr const char* kBold = "\x1b[1m";
constexpr const char* kDim = "\x1b[2m";
constexpr const char* kRed = "\x1b[1;31m";
constexpr const char* kYellow = "\x1b[1;33m";
constexpr const char* kGreen = "\x1b[32m";

// ---- Defensive JSON access ---------------------------------------------------
// Every read goes through these: a missing key, a null or a wrong type is
// "absent", never an exception.

const Json* child(const Json* j, const char* key) {
  if (j == nullptr || !j->is_object()) return nullptr;
  const auto it = j->find(key);
  return it == j->end() ? nullptr : &*it;
}

const Json* path(const Json* j, std::initializer_list<const char*> keys) {
  for (const char* k : keys) {
    j = child(j, k);
    if (j == nullptr) return nullptr;
  }
  return j;
}

std::optional<double> number(const Json* j) {
  if (j == nullptr || !j->is_number()) return std::nullopt;
  const double v = j->get<double>();
  if (!std::isfinite(v)) return std::nullopt;
  return v;
}

std::optional<long long> parse_int(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (end == nullptr || *end != '\0') return std::nullopt;
  return v;
}

/// An integral JSON number (1 and 1.0 alike).
std::optional<long long> integer(const Json* j) {
  if (j == nullptr) return std::nullopt;
  if (j->is_number_integer()) return j->get<long long>();
  const auto v = number(j);
  if (!v || *v != std::floor(*v) || std::fabs(*v) > 9e15) return std::nullopt;
  return static_cast<long long>(*v);
}

std::optional<std::string> text(const Json* j) {
  if (j == nullptr || !j->is_string()) return std::nullopt;
  return j->get<std::string>();
}

std::string text_or_empty(const Json* j) {
  return text(j).value_or(std::string());
}

/// A group-row key: "idx" is a string in schema 1.7; a number is accepted too.
std::optional<std::string> row_key(const Json* j) {
  if (const auto s = text(j)) return s;
  if (const auto i = integer(j)) return std::to_string(*i);
  return std::nullopt;
}

/// A statistic point of a section: global.{stat}.{metric} = {value, idx}.
struct PointView {
  std::optional<double> value;
  std::optional<std::string> idx;
};

PointView point(const Json* section, const char* stat, const char* metric) {
  const Json* p = path(section, {"global", stat, metric});
  return {number(child(p, "value")), row_key(child(p, "idx"))};
}

const Json* group_row(const Json* section, const std::optional<std::string>& key) {
  if (!key) return nullptr;
  return child(path(section, {"groups", "rows"}), key->c_str());
}

std::optional<long long> row_rank(const Json* row, const std::optional<std::string>& key) {
  if (const auto r = integer(path(row, {"identity", "global_rank"}))) return r;
  return key ? parse_int(*key) : std::nullopt;
}

/// "R2/N1" (node omitted when unknown); nullopt when the rank is unknown.
std::optional<std::string> rank_label(const Json* row, const std::optional<std::string>& key) {
  const auto r = row_rank(row, key);
  if (!r) return std::nullopt;
  std::string s = "R" + std::to_string(*r);
  if (const auto n = integer(path(row, {"identity", "node_rank"}))) s += "/N" + std::to_string(*n);
  return s;
}

/// "N1" for a System row (rows are keyed by node label).
std::optional<std::string> node_label(const Json* row, const std::optional<std::string>& key) {
  auto n = integer(path(row, {"identity", "node_rank"}));
  if (!n && key) n = parse_int(*key);
  if (!n) return std::nullopt;
  return "N" + std::to_string(*n);
}

// ---- Text helpers -----------------------------------------------------------

/// Visible columns: ANSI escapes are skipped, each UTF-8 code point counts one
/// (the box-drawing glyphs, `·` and `◀` are single-width).
std::size_t display_width(const std::string& s) {
  std::size_t w = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == 0x1b && i + 1 < s.size() && s[i + 1] == '[') {
      i += 2;
      while (i < s.size() && !(s[i] >= '@' && s[i] <= '~'))
        ++i;
      continue;
    }
    if ((c & 0xC0) != 0x80) ++w;
  }
  return w;
}

/// A small percentage with two significant digits: "0.0055%", "0.26%", "1.2%".
std::string percent_of_step(double pct) {
  if (!(pct > 0.0)) return "0%";
  if (pct >= 1.0) return analysis::fixed(pct, 1) + "%";
  if (pct < 1e-6) return "<0.000001%";
  const int digits = std::min(7, int(std::ceil(-std::log10(pct))) + 1);
  return analysis::fixed(pct, digits) + "%";
}

std::string pad_right(const std::string& s, std::size_t width) {
  const std::size_t w = display_width(s);
  return w >= width ? s : s + std::string(width - w, ' ');
}

std::string pad_left(const std::string& s, std::size_t width) {
  const std::size_t w = display_width(s);
  return w >= width ? s : std::string(width - w, ' ') + s;
}

std::string rstrip(std::string s) {
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return {};
  const auto e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

std::string upper(std::string s) {
  for (char& c : s) {
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 'a' + 'A');
  }
  return s;
}

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (i > 0) out += sep;
    out += parts[i];
  }
  return out;
}

/// Greedy word wrap. The first line starts with `prefix`, later ones with
/// `indent` spaces. Runs of spaces inside the text are kept where no break
/// happens (so "summary  (WARNING)" keeps its two spaces); a word longer than
/// the width gets a line of its own rather than being split.
std::vector<std::string> wrap(const std::string& prefix, const std::string& body, std::size_t width,
                              std::size_t indent) {
  std::string flat = body;
  std::replace_if(
      flat.begin(), flat.end(), [](char c) { return c == '\n' || c == '\r' || c == '\t'; }, ' ');
  std::vector<std::pair<std::size_t, std::string>> words;  // (spaces before, word)
  std::size_t i = 0;
  while (i < flat.size()) {
    std::size_t gap = 0;
    while (i < flat.size() && flat[i] == ' ')
      ++gap, ++i;
    const std::size_t start = i;
    while (i < flat.size() && flat[i] != ' ')
      ++i;
    if (i > start) words.emplace_back(gap, flat.substr(start, i - start));
  }
  std::vector<std::string> lines;
  std::string line = prefix;
  bool has_word = false;
  for (const auto& [gap, word] : words) {
    if (!has_word) {
      line += word;
      has_word = true;
    } else if (display_width(line) + gap + display_width(word) <= width) {
      line += std::string(gap, ' ') + word;
    } else {
      lines.push_back(rstrip(line));
      line = std::string(indent, ' ') + word;
    }
  }
  if (has_word) lines.push_back(rstrip(line));
  return lines;
}

void append(std::vector<std::string>& out, const std::vector<std::string>& more) {
  out.insert(out.end(), more.begin(), more.end());
}

/// Rows of `left` and `right` joined with `sep` at one column for the whole
/// block. A side that is absent (nullopt) leaves the other printed alone.
void append_side_by_side(std::vector<std::string>& out,
                         const std::optional<std::vector<std::string>>& left,
                         const std::optional<std::vector<std::string>>& right, std::size_t left_min,
                         const std::string& sep) {
  if (!left || !right) {
    for (const auto& l : left ? *left : right ? *right : std::vector<std::string>{})
      out.push_back(rstrip(l));
    return;
  }
  std::size_t width = left_min;
  for (const auto& l : *left)
    width = std::max(width, display_width(l));
  const std::size_t rows = std::max(left->size(), right->size());
  for (std::size_t r = 0; r < rows; ++r) {
    const std::string l = r < left->size() ? (*left)[r] : std::string();
    const std::string rt = r < right->size() ? (*right)[r] : std::string();
    out.push_back(rstrip(pad_right(l, width) + sep + rt));
  }
}

// ---- Number formats -----------------------------------------------------------

std::string fmt_ms(double v) {
  return fixed(v, 1) + " ms";
}
std::string fmt_pct(double v) {
  return fixed(v, 0) + "%";
}

std::string fmt_bytes(double b) {
  if (std::fabs(b) < kMegabyteCutoff) return fixed(b / 1e6, 1) + " MB";
  return fixed(b / 1e9, 1) + " GB";
}

/// §5.8 fmt_duration: under a minute with a decimal; else whole seconds
/// (half-even) as "1m 1s" or, from an hour, "1h 0m".
std::string fmt_duration(double s) {
  if (s < 60.0) return fixed(s, 1) + "s";
  // Beyond any real run (a corrupt value): whole hours, without an integer
  // conversion that would overflow.
  if (s >= 1e15) return fixed(s / 3600.0, 0) + "h";
  const long long total = analysis::round_half_even(s);
  if (total < 3600) return std::to_string(total / 60) + "m " + std::to_string(total % 60) + "s";
  return std::to_string(total / 3600) + "h " + std::to_string((total % 3600) / 60) + "m";
}

/// Status label as TraceML prints it: `_` -> space, upper case, one space between words.
std::string status_label(const std::string& s) {
  std::string out;
  bool gap = false;
  for (const char c : upper(s)) {
    if (c == '_' || c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      gap = !out.empty();
      continue;
    }
    if (gap) out += ' ';
    gap = false;
    out += c;
  }
  return out;
}

int severity_rank(const std::string& s) {
  const std::string u = upper(trim(s));
  if (u == "CRIT" || u == "CRITICAL") return 2;
  if (u == "WARN" || u == "WARNING") return 1;
  return 0;
}

/// "CRITICAL" / "WARNING"; empty for info or no severity (nothing is printed).
std::string severity_word(const std::string& s) {
  const std::string u = upper(trim(s));
  if (u == "CRIT" || u == "CRITICAL") return "CRITICAL";
  if (u == "WARN" || u == "WARNING") return "WARNING";
  if (u == "INFO" || u.empty()) return {};
  return u;
}

class Painter {
 public:
  explicit Painter(bool on) : on_(on) {}
  std::string paint(const std::string& s, const char* code) const {
    return on_ && !s.empty() ? code + s + kReset : s;
  }
  std::string by_severity(const std::string& s, const std::string& severity) const {
    switch (severity_rank(severity)) {
      case 2:
        return paint(s, kRed);
      case 1:
        return paint(s, kYellow);
      default:
        return paint(s, kGreen);
    }
  }

 private:
  bool on_;
};

// ---- The summary, read once ---------------------------------------------------

bool is_straggler_kind(const std::string& k) {
  return k == "INPUT_STRAGGLER" || k == "H2D_STRAGGLER" || k == "COMPUTE_STRAGGLER" ||
         k == "STRAGGLER";
}

bool is_phase_share_kind(const std::string& k) {
  return k == "INPUT_BOUND" || k == "H2D_BOUND" || k == "RESIDUAL_HEAVY" || k == "COMPUTE_BOUND";
}

struct Run {
  const Json* root = nullptr;
  const Json* meta = nullptr;
  const Json* primary = nullptr;
  const Json* evidence = nullptr;  ///< primary_diagnosis.evidence
  const Json* system = nullptr;
  const Json* process = nullptr;
  const Json* step_time = nullptr;
  const Json* step_memory = nullptr;
  std::string kind;      ///< primary kind, "" when absent
  std::string severity;  ///< primary severity as written
  bool multi = false;    ///< step_time.metadata.global_ranks_used > 1
  std::optional<long long> gpus;
  std::optional<long long> world;
};

/// A JSON object or nothing: a section of the wrong type counts as absent.
const Json* object_child(const Json* j, const char* key) {
  const Json* c = child(j, key);
  return c != nullptr && c->is_object() ? c : nullptr;
}

Run read_run(const Json& summary) {
  Run run;
  run.root = &summary;
  run.meta = object_child(&summary, "meta");
  run.primary = object_child(&summary, "primary_diagnosis");
  run.evidence = object_child(run.primary, "evidence");
  run.system = object_child(&summary, "system");
  run.process = object_child(&summary, "process");
  run.step_time = object_child(&summary, "step_time");
  run.step_memory = object_child(&summary, "step_memory");
  run.kind = text_or_empty(child(run.primary, "kind"));
  run.severity = text_or_empty(child(run.primary, "severity"));
  const auto used = integer(path(run.step_time, {"metadata", "global_ranks_used"}));
  run.multi = used && *used > 1;
  run.gpus = integer(child(run.meta, "gpus_observed"));
  run.world = integer(child(run.meta, "world_size"));
  return run;
}

bool cpu_only(const Run& run) {
  return run.gpus && *run.gpus == 0;
}

std::optional<long long> steps_analyzed(const Run& run) {
  if (const auto s = integer(path(run.step_time, {"global", "window", "steps_analyzed"}))) return s;
  return integer(child(run.evidence, "steps_analyzed"));
}

std::optional<double> primary_util(const Run& run) {
  return number(child(run.evidence, "gpu_util_avg_percent"));
}

// ---- Header -----------------------------------------------------------------

std::vector<std::string> meta_lines(const Run& run) {
  std::vector<std::string> parts;
  if (const auto name = text(child(run.meta, "run_name")); name && !trim(*name).empty())
    parts.push_back(trim(*name));
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
  if (const auto d = number(child(run.root, "duration_s"))) parts.push_back(fmt_duration(*d));
  return wrap("", join(parts, " · "), kProseWidth, 0);
}

// ---- Verdict, Why, Next -----------------------------------------------------

struct Verdict {
  std::string display;  ///< "INPUT STRAGGLER"; "n/a" without a primary diagnosis
  std::string why;
  std::string next;
  std::optional<std::string> culprit_metric;  ///< tree row the marker goes on
  std::string marker;                         ///< "◀ cause" / "◀ 67x"
  bool degraded = false;
};

std::string verdict_display(const Run& run) {
  const std::string& k = run.kind;
  if (k == "INPUT_BOUND") return "INPUT-BOUND";
  if (k == "H2D_BOUND") return "H2D-BOUND";
  if (k == "COMPUTE_BOUND") return "COMPUTE-BOUND";
  if (k == "RESIDUAL_HEAVY") return "RESIDUAL-HEAVY";
  if (k == "INPUT_STRAGGLER") return "INPUT STRAGGLER";
  if (k == "COMPUTE_STRAGGLER") return "COMPUTE STRAGGLER";
  if (k == "H2D_STRAGGLER") return "H2D STRAGGLER";
  if (k == "STRAGGLER") return "RANK STRAGGLER";
  if (k == "LOW_GPU_UTILIZATION_UNEXPLAINED") return "LOW GPU UTILIZATION -- cause unclear";
  if (k == "NO_CLEAR_PERFORMANCE_BOTTLENECK") return "NO CLEAR BOTTLENECK";
  if (k == "INSUFFICIENT_STEP_TIME_DATA") {
    return text_or_empty(child(run.evidence, "step_time_status")) == "INCOMPLETE DATA"
               ? "STEP TIMING INCOMPLETE"
               : "NOT ENOUGH STEP DATA";
  }
  const std::string status = status_label(text_or_empty(child(run.primary, "status")));
  if (!status.empty()) return status;
  if (!k.empty()) return status_label(k);
  return "n/a";
}

/// The rank a step-time issue of `kind` names first, if any.
std::optional<long long> issue_rank(const Run& run, const std::string& kind) {
  const Json* issues = child(run.step_time, "issues");
  if (issues == nullptr || !issues->is_array()) return std::nullopt;
  for (const Json& issue : *issues) {
    if (text_or_empty(child(&issue, "kind")) != kind) continue;
    const Json* ranks = child(&issue, "ranks");
    if (ranks != nullptr && ranks->is_array() && !ranks->empty()) return integer(&ranks->front());
  }
  return std::nullopt;
}

/// The evidence object of the step-time issue of `kind`, if any: where the
/// GPU activity numbers of a finding live (issue 5; absent in TraceML's files).
const Json* issue_evidence(const Run& run, const std::string& kind) {
  const Json* issues = child(run.step_time, "issues");
  if (issues == nullptr || !issues->is_array()) return nullptr;
  for (const Json& issue : *issues) {
    if (text_or_empty(child(&issue, "kind")) == kind) return object_child(&issue, "evidence");
  }
  return nullptr;
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

/// Straggler evidence: for STRAGGLER, the comparison where the culprit rank
/// loses the most time (TraceML quotes the first comparison, always input
/// wait, even when the excess is elsewhere: DECISIONS 4 lets our text say
/// where the time went); otherwise the comparison merged into the evidence
/// itself (§4.5).
const Json* straggler_comparison(const Run& run) {
  const Json* cs = child(run.evidence, "comparisons");
  if (cs == nullptr || !cs->is_array() || cs->empty() || !cs->front().is_object())
    return run.evidence;
  const auto culprit = issue_rank(run, run.kind);
  const Json* best = nullptr;
  double best_delta = 0.0;
  for (const Json& c : *cs) {
    if (culprit && integer(path(&c, {"worst", "rank"})) != culprit) continue;
    const auto delta = number(child(&c, "delta_ms"));
    if (delta && (best == nullptr || *delta > best_delta)) {
      best = &c;
      best_delta = *delta;
    }
  }
  return best != nullptr ? best : &cs->front();
}

std::string default_straggler_metric(const std::string& kind) {
  if (kind == "H2D_STRAGGLER") return "h2d_ms";
  if (kind == "COMPUTE_STRAGGLER") return "compute_ms";
  return "input_wait_ms";  // INPUT_STRAGGLER, and STRAGGLER whose first comparison is input
}

void straggler_verdict(const Run& run, Verdict& v) {
  const Json* cmp = straggler_comparison(run);
  const std::string metric =
      text(child(cmp, "metric")).value_or(default_straggler_metric(run.kind));
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
    if (const auto n = integer(path(row, {"identity", "node_rank"})))
      who += "/N" + std::to_string(*n);
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
  if (run.kind == "INPUT_STRAGGLER") {
    v.why = who + " waits " + w + " per step for input; the median rank waits " + m + "." + pace;
    v.next =
        "inspect the data loader's workers, the dataset's get() and transforms, and storage on " +
        who + ".";
  } else if (run.kind == "H2D_STRAGGLER") {
    v.why = who + " spends " + w + " per step in host-to-device copies; the median rank spends " +
            m + "." + pace;
    v.next = "inspect PCIe topology / transfer path on " + who + ".";
    if (const auto advice = evidence_pageable_advice(issue_evidence(run, run.kind)))
      v.next = "on " + who + ", " + *advice;
  } else if (run.kind == "STRAGGLER" && phase == "residual") {
    v.why = who + " spends " + w +
            " per step outside the traced phases (residual); the median rank spends " + m + "." +
            pace;
    v.next = "inspect untraced work on " + who +
             ": synchronisation, logging, checkpointing, validation or CPU stalls between phases.";
  } else {
    v.why = who + " spends " + w + " per step in " + phase + "; the median rank spends " + m + "." +
            pace;
    v.next =
        run.kind == "COMPUTE_STRAGGLER"
            ? "inspect " + who + ": thermal/clock throttling, imbalanced work, or a slow device."
            : "inspect " + who + " end-to-end; multiple phases are slow on it.";
  }
  // Issue 5: the ranks that wait for the slow one wait inside the collective.
  if (run.kind == "STRAGGLER") {
    const Json* ev = issue_evidence(run, run.kind);
    const auto share = number(child(ev, "collective_share_of_wait"));
    const auto wait = number(child(ev, "collective_wait_ms"));
    const auto victim = integer(child(ev, "victim_rank"));
    if (share && wait && victim && *share >= analysis::thresholds::kCollectiveExplainsShare) {
      v.why += " Collective (NCCL) time explains " + fixed(*share * 100.0, 0) + "% of the wait: R" +
               std::to_string(*victim) + " spends " + fmt_ms(*wait) +
               " more per step in collectives.";
    }
  }
}

Verdict read_verdict(const Run& run) {
  Verdict v;
  v.display = verdict_display(run);
  const std::string summary = text_or_empty(child(run.primary, "summary"));
  const std::string action = text_or_empty(child(run.primary, "action"));
  v.why = summary;
  v.next = action;
  const std::string& k = run.kind;

  if (is_straggler_kind(k)) {
    straggler_verdict(run, v);
  } else if (is_phase_share_kind(k)) {
    if (k == "INPUT_BOUND") v.culprit_metric = "input_wait_ms";
    if (k == "H2D_BOUND") v.culprit_metric = "h2d_ms";
    if (k == "RESIDUAL_HEAVY") v.culprit_metric = "residual_ms";
    if (k == "COMPUTE_BOUND") v.culprit_metric = "compute_ms";
    v.marker = "◀ cause";
    // COMPUTE_BOUND has no score, so it keeps the section's own wording (§8.2 #11).
    if (const auto score = number(child(run.evidence, "score"))) {
      const std::string s = fixed(*score * 100.0, 0) + "%";
      if (k == "INPUT_BOUND") {
        std::string clock = text_or_empty(child(run.evidence, "diagnosis_clock"));
        if (clock.empty())
          clock = text_or_empty(path(run.step_time, {"global", "window", "diagnosis_clock"}));
        v.why = clock == "cpu"
                    ? "input wait is " + s + " of the typical step (CPU clock)."
                    : "input wait is " + s +
                          " of the typical step; the GPU sits idle while batches arrive.";
        // LibTorch's knobs, not Python's (DECISIONS 13).
        v.next = cpu_only(run) ? "add loader workers (DataLoaderOptions().workers(N)) or prefetch "
                                 "(max_jobs), or check storage read throughput."
                               : "add loader workers (DataLoaderOptions().workers(N)), pin batches "
                                 "(tensor.pin_memory()), or check storage reads.";
      } else if (k == "H2D_BOUND") {
        v.why = "host-to-device copies take " + s + " of the typical step.";
        v.next =
            "pin host batches (tensor.pin_memory()), copy with .to(device, "
            "/*non_blocking=*/true), or batch transfers.";
        if (const auto advice = evidence_pageable_advice(issue_evidence(run, k))) v.next = *advice;
      } else if (k == "RESIDUAL_HEAVY") {
        v.why = s + " of the typical step is time outside the traced phases.";
        v.next = "look for untraced work between steps -- validation, checkpointing, logging.";
        const Json* ev = issue_evidence(run, k);
        const auto share = number(child(ev, "collective_share_of_residual"));
        const auto coll = number(child(ev, "collective_ms"));
        if (share && coll && *share >= analysis::thresholds::kCollectiveExplainsShare) {
          v.why += " Collective (NCCL) kernels ran " + fmt_ms(*coll) + " per step, up to " +
                   fixed(*share * 100.0, 0) + "% of it.";
          v.next =
              "look for collectives outside the traced phases -- metric or loss all-reduces, "
              "barriers -- then validation, checkpointing, logging.";
        }
      }
    }
  } else if (k == "LOW_GPU_UTILIZATION_UNEXPLAINED") {
    if (const auto u = primary_util(run)) {
      v.why = "step timing is balanced, but GPU util averaged " + fixed(*u, 0) +
              "%. The idle time is not explained by " +
              (run.multi ? "input, transfer, or timing skew." : "input or transfer.");
      v.next =
          "look for untraced work between steps -- validation, checkpointing, logging -- or "
          "inefficient kernels (torch.profiler).";
    }
  } else if (k == "NO_CLEAR_PERFORMANCE_BOTTLENECK") {
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
  } else if (k == "INSUFFICIENT_STEP_TIME_DATA") {
    v.degraded = true;
    if (text_or_empty(child(run.evidence, "step_time_status")) == "INCOMPLETE DATA") {
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

/// §5.8 "after Next": the Supporting line, or the all-normal line.
std::vector<std::string> after_next_lines(const Run& run) {
  const auto u = primary_util(run);
  std::string line;
  if ((is_straggler_kind(run.kind) || is_phase_share_kind(run.kind)) && u &&
      *u < kSupportingUtilMax) {
    const std::string pct = fixed(*u, 0) + "%";
    if (is_straggler_kind(run.kind) && run.multi) {
      line = "Supporting: GPU util median " + pct + " -- ranks idle at the step barrier.";
    } else if (run.kind == "INPUT_BOUND") {
      line = "Supporting: GPU util " + pct + " avg -- consistent with input starvation.";
    } else {
      line = "Supporting: GPU util " + pct + " avg.";
    }
  } else if (run.kind == "NO_CLEAR_PERFORMANCE_BOTTLENECK") {
    bool all_info = true;
    for (const Json* s : {run.system, run.process, run.step_time, run.step_memory}) {
      if (severity_rank(text_or_empty(path(s, {"diagnosis", "severity"}))) > 0) all_info = false;
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
std::vector<std::string> observed_anyway_lines(const Run& run) {
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

// ---- STEP TIMING --------------------------------------------------------------

struct TreeRow {
  const char* label;
  const char* metric;
};

std::vector<std::string> step_timing_block(const Run& run, const Verdict& verdict,
                                           const Painter& p) {
  const Json* st = run.step_time;
  // Where the values come from (see the top of the file).
  const Json* values = nullptr;  // an object of metric -> number
  bool median_points = false;    // multi-rank without its representative row
  std::string scope = "Average";
  if (run.multi) {
    auto rep = point(st, "median", "step_time_ms").idx;
    if (is_straggler_kind(run.kind)) {
      // Every rank advances at the straggler's pace, so step times are all but
      // equal and the step-time median may land on the culprit itself (with
      // two ranks it is one of them by a hair). The tree shows a typical rank
      // beside the culprit's worst cells: the comparison's median rank.
      const Json* cmp = straggler_comparison(run);
      const auto culprit = integer(path(cmp, {"worst", "rank"}));
      const auto typical = integer(path(cmp, {"median", "rank"}));
      if (culprit && typical && *typical != *culprit && rep == std::to_string(*culprit))
        rep = std::to_string(*typical);
    }
    const Json* row = group_row(st, rep);
    const Json* metrics = object_child(row, "metrics");
    if (metrics != nullptr) {
      values = metrics;
      const auto label = rank_label(row, rep);
      scope = label ? "Median " + *label : "Median";
    } else {
      median_points = true;
      scope = "Median";
    }
  } else {
    values = path(st, {"global", "average"});
    const Json* rows = path(st, {"groups", "rows"});
    if (rows != nullptr && rows->is_object() && rows->size() == 1) {
      const auto label = rank_label(&rows->begin().value(), rows->begin().key());
      if (label) scope = *label;
    }
  }
  auto value = [&](const char* m) -> std::optional<double> {
    if (median_points) return point(st, "median", m).value;
    return number(child(values, m));
  };

  std::string caption = "STEP TIMING (" + scope + ")";
  const std::string clock = text_or_empty(path(st, {"global", "window", "diagnosis_clock"}));
  if (clock == "gpu") caption += ", GPU Clock";
  if (clock == "cpu") caption += ", CPU Clock";

  struct Line {
    std::string base;
    std::optional<std::string> cell;
    std::string marker;
  };
  std::vector<Line> lines;
  const auto step = value("step_time_ms");
  if (!step || *step <= 0) {
    lines.push_back({pad_right("Step Time", kTreeLabelWidth) + pad_left("n/a", kTreeValueWidth),
                     std::nullopt, ""});
  } else {
    auto share = [&](double v) {
      std::string s = fixed(100.0 * v / *step, 0) + "%";
      if (s == "0%" && v > 0) s = "<1%";
      return s;
    };
    auto base = [&](const std::string& label, double v) {
      return pad_right(label, kTreeLabelWidth) + pad_left(fixed(v, 1), kTreeValueWidth) + " ms  " +
             pad_left(share(v), kTreeShareWidth);
    };
    const bool straggler = is_straggler_kind(run.kind);
    auto worst_cell = [&](const char* m, double shown, bool always) -> std::optional<std::string> {
      if (!run.multi) return std::nullopt;
      const auto w = point(st, "worst", m);
      if (!w.value) return std::nullopt;
      const double gap = std::fabs(*w.value - shown);
      const bool material =
          shown > 0 && gap >= kMaterialSkewMs && gap >= kMaterialSkewFraction * shown;
      if (!always && !material) return std::nullopt;
      std::string cell = pad_left(fixed(*w.value, 1), 6) + " ms";
      if (const auto r = row_rank(group_row(st, w.idx), w.idx))
        cell += " (R" + std::to_string(*r) + ")";
      return cell;
    };
    auto is_culprit = [&](const char* m) {
      return verdict.culprit_metric && *verdict.culprit_metric == m;
    };

    lines.push_back({base("Step Time", *step), std::nullopt, ""});
    const TreeRow depth1[] = {{"Input Wait", "input_wait_ms"},
                              {"Compute", "compute_ms"},
                              {"H2D", "h2d_ms"},
                              {"Residual", "residual_ms"}};
    const TreeRow depth2[] = {
        {"Forward", "forward_ms"}, {"Backward", "backward_ms"}, {"Optimizer", "optimizer_ms"}};
    std::vector<std::pair<TreeRow, double>> present1, present2;
    for (const auto& r : depth1) {
      if (const auto v = value(r.metric)) present1.emplace_back(r, *v);
    }
    for (const auto& r : depth2) {
      if (const auto v = value(r.metric)) present2.emplace_back(r, *v);
    }
    bool any_cell = false;
    auto add = [&](const std::string& glyph, const TreeRow& r, double v) {
      Line l{base(glyph + r.label, v), worst_cell(r.metric, v, straggler && is_culprit(r.metric)),
             is_culprit(r.metric) ? verdict.marker : ""};
      any_cell = any_cell || l.cell.has_value();
      lines.push_back(l);
    };
    for (std::size_t i = 0; i < present1.size(); ++i) {
      const bool last = i + 1 == present1.size();
      add(last ? "└─ " : "├─ ", present1[i].first, present1[i].second);
      if (std::string(present1[i].first.metric) != "compute_ms") continue;
      for (std::size_t j = 0; j < present2.size(); ++j) {
        const bool last_child = j + 1 == present2.size();
        add(std::string(last ? "   " : "│  ") + (last_child ? "└─ " : "├─ "), present2[j].first,
            present2[j].second);
      }
    }
    if (any_cell) lines.front().cell = worst_cell("step_time_ms", *step, true);
  }

  // Assemble: worst-rank cells in one column, markers after them.
  bool any_cell = false;
  std::size_t base_w = 0, cell_w = 0;
  for (const auto& l : lines) {
    base_w = std::max(base_w, display_width(l.base));
    if (l.cell) {
      any_cell = true;
      cell_w = std::max(cell_w, display_width(*l.cell));
    }
  }
  const std::size_t cell_col = std::max(base_w + 4, display_width(caption) + 2);
  std::vector<std::string> out;
  out.push_back(any_cell ? pad_right(caption, cell_col) + "worst rank" : caption);
  for (const auto& l : lines) {
    std::string s = l.base;
    if (any_cell) {
      if (l.cell) s = pad_right(s, cell_col) + *l.cell;
      if (!l.marker.empty()) s = pad_right(s, cell_col + cell_w);
    }
    if (!l.marker.empty()) s += "  " + p.by_severity(l.marker, run.severity);
    out.push_back(s);
  }
  if (cpu_only(run)) out.emplace_back("H2D and step memory not measured (no GPU).");
  if (const auto fetch = value("dataloader_fetch_cpu_ms"))
    out.push_back("DataLoader fetch: " + fmt_ms(*fetch) + " (CPU, supplemental)");
  // Issue 5: what the GPU activity records say, for the same rank as the tree.
  if (const auto coll = value("collective_ms"))
    out.push_back("Collective (NCCL): " + fmt_ms(*coll) + " per step");
  if (const auto copies = value("h2d_copies_per_step")) {
    std::string line = "H2D copies: " + analysis::count_text(*copies) + " per step";
    if (const auto bytes = value("h2d_bytes_per_step"))
      line += ", " + analysis::decimal_bytes(*bytes, *bytes);  // as the pin-memory advice says it
    if (const auto share = value("h2d_pageable_share"))
      line += ", " + fmt_pct(*share * 100.0) + " pageable";
    out.push_back(line);
  }
  if (const auto idle = value("gpu_idle_fraction"))
    out.push_back("GPU idle in steps: " + fmt_pct(*idle * 100.0));
  return out;
}

// ---- Metric tables (STEP MEMORY, SYSTEM, PROCESS) ---------------------------------

enum class Unit { Percent, Fraction, Bytes, Celsius, Watts };

struct MetricRow {
  const char* label;
  const char* metric;
  Unit unit;
  const char* percent_metric;  ///< shown in parentheses after bytes, or nullptr
};

enum class Where { Node, Rank };

std::string format_value(double v, Unit unit) {
  switch (unit) {
    case Unit::Percent:
      return fmt_pct(v);
    case Unit::Fraction:
      return fmt_pct(v * 100.0);
    case Unit::Bytes:
      return fmt_bytes(v);
    case Unit::Celsius:
      return fixed(v, 0) + "C";
    case Unit::Watts:
      return fixed(v, 0) + "W";
  }
  return fixed(v, 1);
}

/// One cell: the point's value (+ the percent of the same group row), and for
/// "worst" where it was.
std::optional<std::string> metric_cell(const Json* section, const char* stat, const MetricRow& m,
                                       Where where) {
  PointView p = point(section, stat, m.metric);
  std::string cell;
  if (p.value) {
    cell = format_value(*p.value, m.unit);
    if (m.percent_metric != nullptr) {
      auto pct = number(path(group_row(section, p.idx), {"metrics", m.percent_metric}));
      if (!pct) {
        const PointView pp = point(section, stat, m.percent_metric);
        if (pp.idx == p.idx) pct = pp.value;
      }
      if (pct) cell += " (" + fmt_pct(*pct) + ")";
    }
  } else if (m.percent_metric != nullptr) {
    p = point(section, stat, m.percent_metric);
    if (!p.value) return std::nullopt;
    cell = fmt_pct(*p.value);
  } else {
    return std::nullopt;
  }
  if (std::string(stat) == "worst") {
    const Json* row = group_row(section, p.idx);
    const auto loc = where == Where::Node ? node_label(row, p.idx) : rank_label(row, p.idx);
    if (loc) cell += ", " + *loc;
  }
  return cell;
}

/// Header + rows; empty when every row is null.
std::vector<std::string> metric_table(const Json* section, const std::vector<MetricRow>& spec,
                                      Where where, const std::string& first_header,
                                      const std::string& median_header,
                                      const std::string& worst_header, std::size_t label_w,
                                      std::size_t median_w) {
  struct Cells {
    std::string label, median, worst;
  };
  std::vector<Cells> rows;
  for (const auto& m : spec) {
    const auto med = metric_cell(section, "median", m, where);
    const auto worst = metric_cell(section, "worst", m, where);
    if (!med && !worst) continue;
    rows.push_back({m.label, med.value_or("n/a"), worst.value_or("n/a")});
  }
  if (rows.empty()) return {};
  label_w = std::max(label_w, display_width(first_header) + 1);
  median_w = std::max(median_w, display_width(median_header) + 1);
  for (const auto& r : rows) {
    label_w = std::max(label_w, display_width(r.label) + 1);
    median_w = std::max(median_w, display_width(r.median) + 1);
  }
  std::vector<std::string> out;
  out.push_back(
      rstrip(pad_right(first_header, label_w) + pad_right(median_header, median_w) + worst_header));
  for (const auto& r : rows)
    out.push_back(pad_right(r.label, label_w) + pad_right(r.median, median_w) + r.worst);
  return out;
}

std::string section_status(const Json* section, const Painter& p) {
  std::string status = status_label(text_or_empty(path(section, {"diagnosis", "status"})));
  if (status.empty()) status = status_label(text_or_empty(path(section, {"diagnosis", "kind"})));
  if (status.empty()) return "n/a";
  return p.by_severity(status, text_or_empty(path(section, {"diagnosis", "severity"})));
}

/// " · 4/4 ranks" from two metadata counts; empty when either is missing.
std::string coverage(const Json* section, const char* observed, const char* expected,
                     const char* noun) {
  const auto o = integer(path(section, {"metadata", observed}));
  const auto e = integer(path(section, {"metadata", expected}));
  if (!o || !e) return {};
  return " · " + std::to_string(*o) + "/" + std::to_string(*e) + " " + noun;
}

/// `wrap_width`: the summary's width (narrow beside STEP TIMING, full alone).
std::vector<std::string> step_memory_block(const Run& run, const Painter& p,
                                           std::size_t wrap_width) {
  const Json* sm = run.step_memory;
  std::vector<std::string> out;
  out.push_back("STEP MEMORY: " + section_status(sm, p) +
                coverage(sm, "global_ranks_used", "global_ranks_seen", "ranks"));
  const std::string kind = text_or_empty(path(sm, {"diagnosis", "kind"}));
  std::vector<std::string> table;
  if (kind != "NO_GPU" && kind != "NO_DATA") {
    table = metric_table(sm,
                         {{"Allocated", "peak_allocated_bytes", Unit::Bytes, nullptr},
                          {"Reserved", "peak_reserved_bytes", Unit::Bytes, nullptr}},
                         Where::Rank, "per-step peak", "median rank", "worst rank",
                         kMemoryLabelWidth, kMemoryMedianWidth);
  }
  out.emplace_back();
  if (!table.empty()) {
    append(out, table);
  } else {
    append(out, wrap("", text_or_empty(path(sm, {"diagnosis", "summary"})), wrap_width, 0));
  }
  return out;
}

struct Block {
  std::vector<std::string> head;   ///< title, Evidence, blank
  std::vector<std::string> table;  ///< header + rows
};

/// `wrap_width`: the Evidence line's width (narrow beside PROCESS, full alone).
Block system_block(const Run& run, const Painter& p, std::size_t wrap_width) {
  const Json* sys = run.system;
  Block b;
  b.head.push_back("SYSTEM METRICS: " + section_status(sys, p) +
                   coverage(sys, "nodes_observed", "nodes_expected", "nodes"));
  const std::string kind = text_or_empty(path(sys, {"diagnosis", "kind"}));
  std::string evidence = text_or_empty(path(sys, {"diagnosis", "summary"}));
  if (kind == "LOW_GPU_UTILIZATION" || kind == "MODERATE_GPU_UTILIZATION") {
    auto u = number(path(sys, {"diagnosis", "evidence", "gpu_util_avg_percent"}));
    if (!u) u = number(path(sys, {"global", "average", "gpu_util_percent"}));
    if (u) evidence = "GPU utilization averaged " + fixed(*u, 0) + "%.";
  }
  append(b.head, wrap("Evidence: ", evidence, wrap_width, 10));
  b.head.emplace_back();
  b.table = metric_table(sys,
                         {{"CPU", "cpu_percent", Unit::Percent, nullptr},
                          {"RAM used", "ram_bytes", Unit::Bytes, "ram_percent"},
                          {"GPU util", "gpu_util_percent", Unit::Percent, nullptr},
                          {"GPU idle in steps", "gpu_idle_fraction", Unit::Fraction, nullptr},
                          {"GPU memory/device", "gpu_mem_bytes", Unit::Bytes, "gpu_mem_percent"},
                          {"GPU temperature", "gpu_temp_c", Unit::Celsius, nullptr},
                          {"GPU power", "gpu_power_w", Unit::Watts, nullptr}},
                         Where::Node, "", "median node avg", "worst node avg", kSystemLabelWidth,
                         kSystemMedianWidth);
  return b;
}

Block process_block(const Run& run, const Painter& p, std::size_t wrap_width) {
  const Json* proc = run.process;
  Block b;
  b.head.push_back("PROCESS METRICS: " + section_status(proc, p) +
                   coverage(proc, "global_ranks_used", "global_ranks_seen", "ranks"));
  if (severity_rank(text_or_empty(path(proc, {"diagnosis", "severity"}))) > 0) {
    append(b.head,
           wrap("Evidence: ", text_or_empty(path(proc, {"diagnosis", "summary"})), wrap_width, 10));
  }
  b.head.emplace_back();
  b.table = metric_table(
      proc,
      {{"CPU capacity", "cpu_capacity_percent", Unit::Percent, nullptr},
       {"RSS used", "ram_bytes", Unit::Bytes, "ram_percent"},
       {"CUDA allocated", "gpu_mem_used_bytes", Unit::Bytes, nullptr},
       {"CUDA reserved", "gpu_mem_reserved_bytes", Unit::Bytes, "gpu_mem_reserved_percent"}},
      Where::Rank, "", "median rank avg", "worst rank avg", kProcessLabelWidth,
      kProcessMedianWidth);
  return b;
}

std::vector<std::string> flatten(const Block& b) {
  std::vector<std::string> out = b.head;
  append(out, b.table);
  return out;
}

// ---- Also -------------------------------------------------------------------

std::vector<std::string> also_lines(const Run& run, const Painter& p) {
  struct Finding {
    int rank;
    std::string summary, severity;
  };
  std::vector<Finding> found;
  for (const Json* s : {run.system, run.process, run.step_memory}) {
    const Json* issues = child(s, "issues");
    if (issues == nullptr || !issues->is_array()) continue;
    for (const auto& issue : *issues) {
      const std::string sev = text_or_empty(child(&issue, "severity"));
      const std::string summary = trim(text_or_empty(child(&issue, "summary")));
      const int rank = severity_rank(sev);
      if (rank > 0 && !summary.empty()) found.push_back({rank, summary, sev});
    }
  }
  std::stable_sort(found.begin(), found.end(),
                   [](const Finding& a, const Finding& b) { return a.rank > b.rank; });
  if (found.size() > kAlsoMax) found.resize(kAlsoMax);
  if (found.empty()) return {};
  std::vector<std::string> out{"Also, not the cause of slow steps:"};
  for (const auto& f : found) {
    append(out,
           wrap("! ",
                f.summary + "  " + p.by_severity("(" + severity_word(f.severity) + ")", f.severity),
                kProseWidth, 2));
  }
  return out;
}

}  // namespace

/// How the traced program ended (the `run` block `traceml run` adds) and
/// what tracing cost (the `tracer` block): one line each, only when present.
std::vector<std::string> run_lines(const Run& run) {
  std::vector<std::string> out;
  if (const Json* r = object_child(run.root, "run")) {
    const std::string status = text_or_empty(child(r, "status"));
    if (!status.empty() && status != "completed") {
      std::string line = "Run: " + upper(status);
      const auto failed = integer(child(r, "failed_rank"));
      const auto code = integer(child(r, "exit_code"));
      if (failed) line += " · rank " + std::to_string(*failed) + " failed";
      if (code) line += " · exit code " + std::to_string(*code);
      line += " · the summary covers what was recorded before it ended";
      out.push_back(line);
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
    if (const Json* ranks = child(t, "ranks"); ranks != nullptr && ranks->is_array()) {
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
    if (received && dropped)
      parts.push_back(std::to_string(*dropped) + " of " + std::to_string(*received + *dropped) +
                      " records dropped");
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
    if (!parts.empty()) out.push_back("Tracer: " + join(parts, " · "));
  }
  return out;
}

std::string render_text(const nlohmann::ordered_json& untrusted, const TextOptions& opts) {
  const TerminalSafeJson safe(untrusted);
  const Json& summary = safe.get();
  const Painter p(opts.color);
  const Run run = read_run(summary);
  const Verdict verdict = read_verdict(run);
  std::vector<std::string> out;

  out.push_back(p.paint("TraceML Run Summary", kBold));
  append(out, meta_lines(run));
  out.emplace_back();

  std::string verdict_line = "Verdict: " + p.by_severity(verdict.display, run.severity);
  if (const std::string sev = severity_word(run.severity); !sev.empty())
    verdict_line += "  " + p.by_severity("(" + sev + ")", run.severity);
  out.push_back(verdict_line);
  if (!trim(verdict.why).empty()) append(out, wrap("Why: ", verdict.why, kProseWidth, 5));
  if (!trim(verdict.next).empty())
    append(out, wrap(p.paint("Next:", kBold) + " ", verdict.next, kProseWidth, 6));
  append(out, after_next_lines(run));
  out.push_back(p.paint("Scope: N = node · R = global rank · G = GPU index", kDim));
  out.emplace_back();

  if (verdict.degraded) {
    const auto observed = observed_anyway_lines(run);
    if (!observed.empty()) {
      append(out, observed);
      out.emplace_back();
    }
  }

  std::optional<std::vector<std::string>> timing, memory;
  if (run.step_time != nullptr && !verdict.degraded) timing = step_timing_block(run, verdict, p);
  if (run.step_memory != nullptr)
    memory = step_memory_block(run, p, timing ? kRightWrap : kProseWidth);
  if (timing || memory) {
    append_side_by_side(out, timing, memory, kStepLeftMin, kStepSep);
    out.emplace_back();
  }

  std::optional<std::vector<std::string>> sys, proc;
  if (run.system != nullptr && run.process != nullptr) {
    Block s = system_block(run, p, kMetricsLeftMin);
    Block q = process_block(run, p, kRightWrap);
    // Both tables start on the same row.
    const std::size_t head = std::max(s.head.size(), q.head.size());
    s.head.resize(head);
    q.head.resize(head);
    sys = flatten(s);
    proc = flatten(q);
  } else if (run.system != nullptr) {
    sys = flatten(system_block(run, p, kProseWidth));
  } else if (run.process != nullptr) {
    proc = flatten(process_block(run, p, kProseWidth));
  }
  if (sys || proc) {
    append_side_by_side(out, sys, proc, kMetricsLeftMin, kMetricsSep);
    out.emplace_back();
  }

  if (!verdict.degraded) {
    const auto also = also_lines(run, p);
    if (!also.empty()) {
      append(out, also);
      out.emplace_back();
    }
  }

  const auto tail = run_lines(run);
  if (!tail.empty()) {
    for (const auto& line : tail)
      out.push_back(p.paint(line, kDim));
    out.emplace_back();
  }
  const std::string hint = opts.evidence_hint.empty() ? "final_summary.json" : opts.evidence_hint;
  out.push_back(p.paint("Full evidence: " + hint, kDim));

  std::string result;
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (i > 0) result += '\n';
    result += rstrip(out[i]);
  }
  return result;
}

std::string summary_text(const nlohmann::ordered_json& summary) {
  if (summary.is_object()) {
    const auto it = summary.find("text");
    if (it != summary.end() && it->is_string() && !it->get<std::string>().empty())
      return model::escape_for_terminal(it->get<std::string>());
  }
  return render_text(summary);
}

}  // namespace traceml::report
