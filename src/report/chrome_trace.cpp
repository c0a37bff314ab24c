// Chrome trace event JSON of a run's steps (report/chrome_trace.hpp,
// docs/timeline.md). Written as a stream: a range of a large run holds
// millions of events, and a JSON tree of them would hold several times their
// size. Times are whole nanoseconds from an origin before the first slice, so
// that a phase placed inside its step can never poke out of it by rounding
// (the trace viewers drop slices that do not nest).
#include "report/chrome_trace.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "analysis/step_window.hpp"

namespace traceml::report {

namespace {

using model::Event;

/// Each traced thread of a rank has two tracks: its CPU clock's steps and
/// its GPU clock's.
int cpu_track(int thread) {
  return 2 * thread + 1;
}
int gpu_track(int thread) {
  return 2 * thread + 2;
}
/// Process id of node n's system samples: above every rank a run can have in
/// practice (a collision would only merge two tracks' names).
constexpr std::int64_t kSystemPid = 1000000000;

/// The phases inside the traced step, in the order a training step runs them.
constexpr Event kBodyPhases[] = {Event::H2D, Event::Forward, Event::Backward, Event::OptimizerStep};

constexpr const char* kRecordedNote =
    "each phase is drawn from where it first began on its step, as the rank recorded it, for "
    "its summed duration (a phase entered more than once on a step is one slice, cut where the "
    "next phase begins); a step spans its traced step and any phase begun before it (the input "
    "wait, usually) and ends at its recorded timestamp. The GPU clock's tracks have durations "
    "only: their phases are placed back to back.";

constexpr const char* kInferredNote =
    "these steps were recorded without their phases' begin times (by a traceml before telemetry "
    "format 2 and protocol 3): inside a step the phases are placed one after the other in the "
    "order a step runs them (input_wait, then the traced step: h2d, forward, backward, "
    "optimizer_step, then what no phase covers), and a step ends at its recorded timestamp. "
    "Durations are exact; positions inside a step are not.";

constexpr const char* kMixedNote =
    "some steps carry their phases' recorded begin times and are drawn from them "
    "(args.positions \"recorded\"); the others were recorded without (by a traceml before "
    "telemetry format 2 and protocol 3) and their phases are placed back to back in the order a "
    "step runs them (args.positions \"inferred\"): durations exact, positions not.";

std::string json_text(const std::string& s) {
  // Most names are ours ("step 812", "backward"): printable ASCII without a
  // quote or a backslash goes as it is, without a JSON value built and
  // dumped for each of a timeline's million slices.
  const bool plain = std::all_of(
      s.begin(), s.end(), [](char c) { return c >= 0x20 && c < 0x7f && c != '"' && c != '\\'; });
  if (plain) return '"' + s + '"';
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

/// Nanoseconds as the trace's microseconds, exactly ("12.345").
std::string micros(std::int64_t ns) {
  const bool negative = ns < 0;
  const std::uint64_t v = negative ? std::uint64_t(0) - std::uint64_t(ns) : std::uint64_t(ns);
  std::string s = (negative ? "-" : "") + std::to_string(v / 1000);
  const auto frac = v % 1000;
  if (frac != 0) {
    char buf[4] = {char('0' + frac / 100), char('0' + frac / 10 % 10), char('0' + frac % 10), 0};
    s += '.';
    s += buf;
    while (s.back() == '0')
      s.pop_back();
  }
  return s;
}

std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

/// The most nanoseconds a time or duration of the trace holds either way
/// (18 years). A slice's edge is a sum of at most four of them and its
/// duration a difference of two edges: 8 x 2^59 stays inside int64, where a
/// duration near the largest double (valid telemetry) would overflow, and
/// llround of a value beyond int64 has no meaning.
constexpr double kMaxNs = 576460752303423488.0;  // 2^59

std::int64_t saturated_ns(double ns) {
  if (std::isnan(ns)) return 0;
  return std::llround(std::clamp(ns, -kMaxNs, kMaxNs));
}

std::int64_t to_ns(double ms) {
  return saturated_ns(ms * 1e6);
}

/// `v` in decimal at the end of `s`.
void append_int(std::string& s, std::int64_t v) {
  char buf[24];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  s.append(buf, r.ptr);
}

/// The events, written through a buffer of their own: a timeline holds a
/// million slices, and an ostream's formatting of each number cost more
/// than the rest of the writing together (the end of a run writes one).
class TraceWriter {
 public:
  TraceWriter(std::ostream& out, double origin_s) : out_(out), origin_s_(origin_s) {
    buf_.reserve(kFlushBytes + 4096);
  }
  ~TraceWriter() { flush(); }
  TraceWriter(const TraceWriter&) = delete;
  TraceWriter& operator=(const TraceWriter&) = delete;

  /// Writes what the buffer holds to the stream.
  void flush() {
    out_.write(buf_.data(), std::streamsize(buf_.size()));
    buf_.clear();
  }

  /// Nanoseconds since the origin of a unix time in seconds.
  [[nodiscard]] std::int64_t at(double unix_s) const {
    return saturated_ns((unix_s - origin_s_) * 1e9);
  }

  void metadata(std::int64_t pid, std::optional<int> tid, const char* what, const char* key,
                const std::string& value_json) {
    open();
    buf_ += R"({"name":")";
    buf_ += what;
    buf_ += R"(","ph":"M","pid":)";
    append_int(buf_, pid);
    if (tid) {
      buf_ += R"(,"tid":)";
      append_int(buf_, *tid);
    }
    buf_ += R"(,"args":{")";
    buf_ += key;
    buf_ += R"(":)";
    buf_ += value_json;
    buf_ += "}}";
    spill();
  }

  /// A complete slice [begin, end] on a rank's track.
  void slice(std::int64_t pid, int tid, const std::string& name, const char* category,
             std::int64_t begin, std::int64_t end, const std::string& args_json) {
    open();
    buf_ += R"({"name":)";
    buf_ += json_text(name);
    buf_ += R"(,"cat":")";
    buf_ += category;
    buf_ += R"(","ph":"X","pid":)";
    append_int(buf_, pid);
    buf_ += R"(,"tid":)";
    append_int(buf_, tid);
    buf_ += R"(,"ts":)";
    buf_ += micros(begin);
    buf_ += R"(,"dur":)";
    buf_ += micros(std::max<std::int64_t>(0, end - begin));
    if (!args_json.empty()) {
      buf_ += R"(,"args":)";
      buf_ += args_json;
    }
    buf_ += "}";
    spill();
  }

  /// A counter sample: one value per named series.
  void counter(std::int64_t pid, const std::string& name, std::int64_t ts,
               const std::vector<std::pair<std::string, double>>& values) {
    std::string args;
    for (const auto& [key, v] : values) {
      if (!std::isfinite(v)) continue;
      args += (args.empty() ? "" : ",") + json_text(key) + ":" + number(v);
    }
    if (args.empty()) return;
    open();
    buf_ += R"({"name":)";
    buf_ += json_text(name);
    buf_ += R"(,"ph":"C","pid":)";
    append_int(buf_, pid);
    buf_ += R"(,"ts":)";
    buf_ += micros(ts);
    buf_ += R"(,"args":{)";
    buf_ += args;
    buf_ += "}}";
    spill();
  }

  [[nodiscard]] std::int64_t events() const { return events_; }

 private:
  static constexpr std::size_t kFlushBytes = std::size_t{1} << 16;

  void open() {
    buf_ += events_ == 0 ? "\n" : ",\n";
    ++events_;
  }
  void spill() {
    if (buf_.size() >= kFlushBytes) flush();
  }

  std::ostream& out_;
  std::string buf_;
  double origin_s_;
  std::int64_t events_ = 0;
};

/// A step's durations on one clock, in ms; absent where not measured.
struct Durations {
  std::optional<double> input_wait, traced;
  std::array<std::optional<double>, model::kEventCount> phase{};
};

Durations durations(const model::StepRecord& r, bool gpu) {
  Durations d;
  for (std::size_t e = 0; e < model::kEventCount; ++e) {
    const auto v = gpu ? r.events.gpu_ms(Event(e)) : r.events.cpu_ms(Event(e));
    d.phase[e] = v;
  }
  d.input_wait = d.phase[std::size_t(Event::InputWait)];
  d.traced = d.phase[std::size_t(Event::TracedStepTime)];
  return d;
}

/// The step's time on one clock (input wait + traced step, the traced step
/// alone when the wait was not measured); absent without a traced step.
std::optional<double> step_ms(const Durations& d) {
  if (!d.traced) return std::nullopt;
  return d.input_wait.value_or(0.0) + *d.traced;
}

std::string step_args(const model::StepRecord& r, const Durations& d, bool recorded) {
  std::string s = R"({"step":)" + std::to_string(r.step);
  if (const auto total = step_ms(d)) s += R"(,"step_ms":)" + number(*total);
  double covered = 0.0;
  for (std::size_t e = 0; e < model::kEventCount; ++e) {
    if (!d.phase[e]) continue;
    s += std::string(",\"") + model::event_name(Event(e)) + "_ms\":" + number(*d.phase[e]);
  }
  for (const Event e : kBodyPhases)
    covered += d.phase[std::size_t(e)].value_or(0.0);
  if (d.traced) s += R"(,"unattributed_ms":)" + number(std::max(0.0, *d.traced - covered));
  s += recorded ? R"(,"positions":"recorded"})" : R"(,"positions":"inferred"})";
  return s;
}

/// Draws one step on one clock's track from durations alone: the step, its
/// input wait, its traced body and the phases inside it, back to back.
/// `floor` is where the track's previous step ended: a step never starts
/// before it (clock jitter between the recorded end and the durations would
/// otherwise overlap two steps).
void draw_inferred(TraceWriter& w, std::int64_t pid, int tid, const model::StepRecord& r,
                   const Durations& d, std::int64_t end, std::int64_t& floor) {
  const auto total = step_ms(d);
  if (!total) return;
  const std::int64_t begin = std::max(floor, end - to_ns(*total));
  floor = std::max(floor, end);
  w.slice(pid, tid, "step " + std::to_string(r.step), "step", begin, end, step_args(r, d, false));
  const auto clamp = [&](std::int64_t x) { return std::min(end, std::max(begin, x)); };
  std::int64_t cursor = begin;
  if (d.input_wait) {
    const std::int64_t wait_end = clamp(begin + to_ns(*d.input_wait));
    w.slice(pid, tid, model::event_name(Event::InputWait), "phase", begin, wait_end, {});
    cursor = wait_end;
  }
  w.slice(pid, tid, "traced_step", "phase", cursor, end, {});
  for (const Event e : kBodyPhases) {
    const auto& v = d.phase[std::size_t(e)];
    if (!v) continue;
    const std::int64_t phase_end = clamp(cursor + to_ns(*v));
    w.slice(pid, tid, model::event_name(e), "phase", cursor, phase_end, {});
    cursor = phase_end;
  }
}

/// The track of a rank's profiled operators run by profiler thread `thread`:
/// after every step track a rank can have (two per traced thread).
int profile_track(int thread) {
  return 1000000 + thread;
}

/// The time spans (unix seconds) of the drawn ranges' steps, one a range.
using Spans = std::vector<std::pair<double, double>>;

bool within(const Spans& spans, double begin_s, double end_s) {
  return std::any_of(spans.begin(), spans.end(),
                     [&](const auto& s) { return begin_s >= s.first && end_s <= s.second; });
}

/// The operators of each drawn rank's profiles inside one of the drawn spans.
template <class Rows>
void draw_profiles(TraceWriter& w, const std::vector<RankProfile>& profiles, const Rows& rows,
                   const Spans& spans, TimelineStats& stats) {
  for (const RankProfile& p : profiles) {
    if (rows.count(p.rank) == 0) continue;
    std::map<int, bool> named;
    for (const model::ProfileOp& op : p.ops) {
      // As read_profile_ops bounds them: no sum below overflows.
      if (op.thread < 0 || op.thread >= (1 << 20) || op.start_us < 0 ||
          op.start_us > (std::int64_t{1} << 56) || op.duration_us < 0 ||
          op.duration_us > (std::int64_t{1} << 56))
        continue;
      const double begin_s = double(op.start_us) * 1e-6;
      const double end_s = double(op.start_us + op.duration_us) * 1e-6;
      if (!within(spans, begin_s, end_s)) continue;
      const int track = profile_track(op.thread);
      if (!named[op.thread]) {
        named[op.thread] = true;
        w.metadata(
            p.rank, track, "thread_name", "name",
            json_text("operators (LibTorch profiler, thread " + std::to_string(op.thread) + ")"));
        w.metadata(p.rank, track, "thread_sort_index", "sort_index", std::to_string(track));
      }
      std::string args;
      if (op.sequence) args += R"("sequence":)" + std::to_string(*op.sequence);
      if (!op.shapes.empty())
        args += std::string(args.empty() ? "" : ",") + R"("input_shapes":)" + json_text(op.shapes);
      w.slice(p.rank, track, op.name, op.gpu != 0 ? "gpu" : "cpu_op", w.at(begin_s), w.at(end_s),
              args.empty() ? std::string() : "{" + args + "}");
      ++stats.profile_ops;
    }
  }
}

/// A phase slice to draw: its event and span in trace nanoseconds.
struct Span {
  Event event;
  std::int64_t begin;
  std::int64_t end;
};

/// Draws one step of the CPU clock where its phases began, as recorded: the
/// traced step from its start (its end minus its duration), each phase from
/// its begin offset for its summed duration, and the step around them all.
/// Slices are kept nesting, as the viewers need: a phase never pokes out of
/// its step or across the traced step's start, and one that runs into the
/// next phase (it was entered again later on the step) is cut where that
/// one begins. A measured event without a begin (an input wait of 0: the
/// loader is traced but this step fetched nothing) is not drawn.
void draw_recorded(TraceWriter& w, std::int64_t pid, int tid, const model::StepRecord& r,
                   const Durations& d, std::int64_t end, std::int64_t& floor) {
  if (!d.traced) return;
  const std::int64_t body = end - to_ns(*d.traced);
  std::vector<Span> spans;
  std::int64_t first = body;
  for (std::size_t e = 0; e < model::kEventCount; ++e) {
    const auto begin_ms = r.events.begin_ms(Event(e));
    if (!begin_ms || !d.phase[e]) continue;
    const std::int64_t b = body + to_ns(*begin_ms);
    spans.push_back({Event(e), b, b + to_ns(*d.phase[e])});
    first = std::min(first, b);
  }
  const std::int64_t begin = std::max(floor, first);
  floor = std::max(floor, end);
  w.slice(pid, tid, "step " + std::to_string(r.step), "step", begin, end, step_args(r, d, true));
  const std::int64_t body_begin = std::max(begin, body);
  w.slice(pid, tid, "traced_step", "phase", body_begin, end, {});
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end > b.end;
  });
  for (std::size_t i = 0; i < spans.size(); ++i) {
    Span s = spans[i];
    // Inside the step; on one side of the traced step's start.
    const bool before_body = s.begin < body_begin;
    s.begin = std::min(end, std::max(begin, s.begin));
    s.end = std::min(before_body ? body_begin : end, std::max(s.begin, s.end));
    if (i + 1 < spans.size()) {
      const Span& next = spans[i + 1];
      if (next.begin < s.end && next.end > s.end) s.end = std::max(s.begin, next.begin);
    }
    w.slice(pid, tid, model::event_name(s.event), "phase", s.begin, s.end, {});
  }
}

constexpr double kMB = 1e6;

}  // namespace

std::optional<StepRange> parse_step_range(const std::string& text, std::string& error) {
  const auto colon = text.find(':');
  const auto bad = [&](const std::string& why) -> std::optional<StepRange> {
    error = why;
    return std::nullopt;
  };
  if (colon == std::string::npos)
    return bad("--steps takes A:B, the first and last step ids (e.g. 100:200), got '" + text + "'");
  const auto parse = [](const std::string& s, std::int64_t& v) {
    const auto r = std::from_chars(s.data(), s.data() + s.size(), v);
    return !s.empty() && r.ec == std::errc() && r.ptr == s.data() + s.size();
  };
  StepRange range;
  if (!parse(text.substr(0, colon), range.first) || !parse(text.substr(colon + 1), range.last))
    return bad("--steps takes A:B with whole step ids (e.g. 100:200), got '" + text + "'");
  if (range.first < 1 || range.last < range.first)
    return bad("--steps A:B needs 1 <= A <= B, got '" + text + "'");
  return range;
}

std::optional<StepRange> default_timeline_steps(const model::Telemetry& t, std::int64_t window,
                                                std::int64_t max_steps) {
  const analysis::StepWindow w = analysis::build_step_window(t, window);
  if (w.steps.empty()) return std::nullopt;
  const std::size_t n = std::min<std::size_t>(w.steps.size(), std::size_t(max_steps));
  return StepRange{w.steps[w.steps.size() - n], w.steps.back()};
}

TimelineStats write_chrome_trace(const model::Telemetry& t, StepRange range,
                                 const std::string& producer, std::ostream& out,
                                 const std::vector<RankProfile>& profiles) {
  return write_chrome_trace(t, std::vector<StepRange>{range}, producer, out, profiles);
}

std::string ranges_text(const std::vector<StepRange>& ranges) {
  std::string s;
  for (const StepRange& r : ranges)
    s += (s.empty() ? "" : ",") + std::to_string(r.first) + ":" + std::to_string(r.last);
  return s;
}

TimelineStats write_chrome_trace(const model::Telemetry& t, const std::vector<StepRange>& ranges,
                                 const std::string& producer, std::ostream& out,
                                 const std::vector<RankProfile>& profiles) {
  // The range a step falls in; ranges.size() when none.
  const auto range_of = [&ranges](std::int64_t step) {
    std::size_t k = 0;
    while (k < ranges.size() && (step < ranges[k].first || step > ranges[k].last))
      ++k;
    return k;
  };
  // Each rank's rows in the ranges, the later of two rows of one step winning.
  // Read in place: a long run holds millions of rows, a few of them drawn.
  std::map<int, std::map<std::int64_t, std::size_t>> rows;
  {
    std::size_t i = 0;
    for (const auto& c : t.steps.chunks())
      for (std::size_t k = 0; k < c->size(); ++k, ++i)
        if (c->event_mask(k) != 0 && range_of(c->step(k)) < ranges.size())
          rows[c->rank(k)][c->step(k)] = i;
  }
  TimelineStats stats;
  // The origin: a whole second before the first step begins.
  double first_s = 0.0;
  bool any = false;
  Spans spans(ranges.size());
  std::vector<bool> spanned(ranges.size(), false);
  for (const auto& [rank, steps] : rows) {
    for (const auto& [step, i] : steps) {
      const model::StepRecord r = t.steps[i];
      double longest = 0.0;
      for (const bool gpu : {false, true})
        longest = std::max(longest, step_ms(durations(r, gpu)).value_or(0.0));
      const double begin = r.ts - longest / 1e3;
      first_s = any ? std::min(first_s, begin) : begin;
      any = true;
      const std::size_t k = range_of(step);
      auto& [from, to] = spans[k];
      from = spanned[k] ? std::min(from, begin) : begin;
      to = spanned[k] ? std::max(to, r.ts) : r.ts;
      spanned[k] = true;
      stats.gpu = stats.gpu || r.events.gpu_mask() != 0;
      (r.events.begin_mask() != 0 ? stats.recorded_steps : stats.inferred_steps) += 1;
    }
  }
  const char* placement = stats.inferred_steps == 0   ? kRecordedNote
                          : stats.recorded_steps == 0 ? kInferredNote
                                                      : kMixedNote;
  const double origin = std::floor(first_s) - 1.0;
  TraceWriter w(out, origin);

  out << R"({"displayTimeUnit":"ms","otherData":{"producer":)" << json_text(producer)
      << R"(,"run_name":)" << json_text(t.run.run_name) << R"(,"steps":")" << ranges_text(ranges)
      << R"(","time_origin_unix_s":)" << number(origin) << R"(,"phase_positions":)"
      << json_text(placement) << R"(},"traceEvents":[)";

  std::map<int, std::optional<int>> node_of;
  for (const auto& id : t.ranks)
    node_of[id.global_rank] = id.node_rank;
  std::map<std::pair<int, std::int64_t>, std::int64_t> step_end;  // (rank, step) -> its end

  for (const auto& [rank, steps] : rows) {
    ++stats.ranks;
    const auto node = node_of.count(rank) != 0 ? node_of[rank] : std::nullopt;
    const std::string name =
        "R" + std::to_string(rank) + (node ? "/N" + std::to_string(*node) : std::string());
    w.metadata(rank, std::nullopt, "process_name", "name", json_text(name));
    w.metadata(rank, std::nullopt, "process_sort_index", "sort_index", std::to_string(rank));
    // A track pair per thread that recorded a step; named by thread only
    // when the rank has more than its first.
    std::map<int, std::pair<std::int64_t, std::int64_t>> floors;  // thread -> (CPU, GPU) floor
    for (const auto& [step, i] : steps)
      floors.emplace(t.steps[i].thread, std::make_pair(w.at(origin), w.at(origin)));
    stats.threads = std::max<std::int64_t>(stats.threads, std::int64_t(floors.size()));
    const bool several = floors.size() > 1 || floors.begin()->first != 0;
    for (const auto& [thread, floor] : floors) {
      const std::string who = several ? "thread " + std::to_string(thread) + ": " : std::string();
      w.metadata(rank, cpu_track(thread), "thread_name", "name",
                 json_text(who + "steps (CPU clock)"));
      w.metadata(rank, cpu_track(thread), "thread_sort_index", "sort_index",
                 std::to_string(cpu_track(thread)));
      if (stats.gpu) {
        w.metadata(rank, gpu_track(thread), "thread_name", "name",
                   json_text(who + "steps (GPU clock, ends placed at the CPU clock's)"));
        w.metadata(rank, gpu_track(thread), "thread_sort_index", "sort_index",
                   std::to_string(gpu_track(thread)));
      }
    }
    for (const auto& [step, i] : steps) {
      const model::StepRecord r = t.steps[i];
      const std::int64_t end = w.at(r.ts);
      step_end[{rank, step}] = end;
      ++stats.steps;
      auto& [cpu_floor, gpu_floor] = floors[r.thread];
      if (r.events.begin_mask() != 0)
        draw_recorded(w, rank, cpu_track(r.thread), r, durations(r, false), end, cpu_floor);
      else
        draw_inferred(w, rank, cpu_track(r.thread), r, durations(r, false), end, cpu_floor);
      if (r.events.gpu_mask() != 0)
        draw_inferred(w, rank, gpu_track(r.thread), r, durations(r, true), end, gpu_floor);
    }
  }

  // A range no rank drew a step of has no span.
  for (std::size_t k = ranges.size(); k-- > 0;)
    if (!spanned[k]) spans.erase(spans.begin() + std::ptrdiff_t(k));
  if (any) draw_profiles(w, profiles, rows, spans, stats);

  if (any) {
    // Counters within the drawn steps' span.
    for (const auto& m : t.step_memory) {
      const auto it = step_end.find({m.global_rank, m.step});
      if (it == step_end.end()) continue;
      w.counter(m.global_rank, "step peak memory (MB)", it->second,
                {{"allocated", m.peak_allocated_bytes.value_or(NAN) / kMB},
                 {"reserved", m.peak_reserved_bytes.value_or(NAN) / kMB}});
    }
    const auto in_span = [&](double ts) { return within(spans, ts, ts); };
    for (const auto& p : t.process) {
      if (rows.count(p.global_rank) == 0 || !in_span(p.ts)) continue;
      w.counter(p.global_rank, "process", w.at(p.ts),
                {{"cpu_percent", p.cpu_percent.value_or(NAN)},
                 {"rss_MB", p.rss_bytes.value_or(NAN) / kMB}});
      if (p.gpu)
        w.counter(p.global_rank, "process GPU memory (MB)", w.at(p.ts),
                  {{"allocated", p.gpu->allocated_bytes.value_or(NAN) / kMB},
                   {"reserved", p.gpu->reserved_bytes.value_or(NAN) / kMB}});
    }
    std::map<int, bool> named;
    for (const auto& s : t.system) {
      if (!in_span(s.ts)) continue;
      const std::int64_t pid = kSystemPid + s.node_rank;
      if (!named[s.node_rank]) {
        named[s.node_rank] = true;
        w.metadata(pid, std::nullopt, "process_name", "name",
                   json_text("N" + std::to_string(s.node_rank) + " system"));
        w.metadata(pid, std::nullopt, "process_sort_index", "sort_index",
                   std::to_string(kSystemPid + s.node_rank));
      }
      w.counter(pid, "system", w.at(s.ts),
                {{"cpu_percent", s.cpu_percent.value_or(NAN)},
                 {"ram_used_GB", s.ram_used_bytes.value_or(NAN) / 1e9}});
      for (const auto& g : s.gpus)
        w.counter(pid, "GPU " + std::to_string(g.index), w.at(s.ts),
                  {{"util_percent", g.util_percent.value_or(NAN)},
                   {"mem_used_GB", g.mem_used_bytes.value_or(NAN) / 1e9}});
    }
  }
  w.flush();
  out << "\n]}\n";
  stats.events = w.events();
  return stats;
}

}  // namespace traceml::report
