// Valid but degenerate runs, as telemetry JSONL (docs/telemetry-format.md):
// the shapes a long or odd run can take that an ordinary one never shows
// the report -- one step, equal values, values an ulp apart, 1e-300 and the
// largest doubles, zero durations, step ids near 2^63, a rank without steps,
// a single sample. Every one is a file `traceml report --telemetry` must
// turn into a report in bounded time (issue 30: a range one ulp wide made
// the plots' tick loop run forever). Written here in C++ so that ctest runs
// them without Python.
#pragma once

#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace traceml::testing {

struct DegenerateRun {
  std::string name;   ///< a file name's stem: [a-z0-9_]
  std::string jsonl;  ///< the whole file
};

/// A run as a test parameter prints as its name, not its bytes.
inline void PrintTo(const DegenerateRun& run, std::ostream* os) {
  *os << run.name;
}

namespace degenerate {

/// A double as the shortest decimal that reads back to it exactly enough:
/// 17 significant digits keep one-ulp differences.
inline std::string num(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

/// One event of a step: its durations and begin on the two clocks.
struct Ev {
  const char* name;
  std::optional<double> cpu_ms;
  std::optional<double> gpu_ms = std::nullopt;
  std::optional<double> begin_ms = std::nullopt;
};

class Writer {
 public:
  explicit Writer(const std::string& run_name, int world_size = 1) {
    out_ = R"({"type":"run","format":"traceml-telemetry","version":2,"run_name":")" + run_name +
           R"(","world_size":)" + std::to_string(world_size) + R"(,"strategy":"ddp"})" + "\n";
  }
  Writer& rank(long long global_rank, int node = 0, int world_size = 1) {
    out_ += R"({"type":"rank","global_rank":)" + std::to_string(global_rank) +
            R"(,"local_rank":0,"node_rank":)" + std::to_string(node) + R"(,"hostname":"host)" +
            std::to_string(node) + R"(","local_world_size":1,"world_size":)" +
            std::to_string(world_size) + "}\n";
    return *this;
  }
  Writer& step(long long global_rank, std::int64_t step, double ts, const std::vector<Ev>& events,
               int thread = 0) {
    std::string e;
    for (const Ev& ev : events) {
      std::string v;
      if (ev.cpu_ms) v += R"("cpu_ms":)" + num(*ev.cpu_ms);
      if (ev.gpu_ms) v += (v.empty() ? "" : ",") + std::string(R"("gpu_ms":)") + num(*ev.gpu_ms);
      if (ev.begin_ms)
        v += (v.empty() ? "" : ",") + std::string(R"("begin_ms":)") + num(*ev.begin_ms);
      e += (e.empty() ? "" : ",") + std::string("\"") + ev.name + "\":{" + v + "}";
    }
    out_ += R"({"type":"step","global_rank":)" + std::to_string(global_rank) + R"(,"step":)" +
            std::to_string(step) + R"(,"ts":)" + num(ts) +
            (thread != 0 ? R"(,"thread":)" + std::to_string(thread) : std::string()) +
            R"(,"events":{)" + e + "}}\n";
    return *this;
  }
  /// A step whose every phase takes `ms` on the CPU clock (the traced step
  /// their sum), with an input wait of `wait_ms`.
  Writer& flat_step(long long global_rank, std::int64_t step, double ts, double ms,
                    double wait_ms) {
    return this->step(global_rank, step, ts,
                      {{"input_wait", wait_ms},
                       {"h2d", ms},
                       {"forward", ms},
                       {"backward", ms},
                       {"optimizer_step", ms},
                       {"traced_step_time", ms * 4}});
  }
  Writer& memory(long long global_rank, std::int64_t step, double allocated, double reserved) {
    out_ += R"({"type":"step_memory","global_rank":)" + std::to_string(global_rank) +
            R"(,"step":)" + std::to_string(step) + R"(,"device":"cuda:0","peak_allocated_bytes":)" +
            num(allocated) + R"(,"peak_reserved_bytes":)" + num(reserved) + "}\n";
    return *this;
  }
  Writer& system(int node, double ts, double cpu, double gpu_util, double bytes) {
    out_ += R"({"type":"system","node_rank":)" + std::to_string(node) + R"(,"ts":)" + num(ts) +
            R"(,"cpu_percent":)" + num(cpu) + R"(,"ram_used_bytes":)" + num(bytes) +
            R"(,"ram_total_bytes":)" + num(bytes) + R"(,"gpus":[{"index":0,"util_percent":)" +
            num(gpu_util) + R"(,"mem_used_bytes":)" + num(bytes) + R"(,"mem_total_bytes":)" +
            num(bytes) + "}]}\n";
    return *this;
  }
  Writer& process(long long global_rank, double ts, double cpu, double rss) {
    out_ += R"({"type":"process","global_rank":)" + std::to_string(global_rank) + R"(,"ts":)" +
            num(ts) + R"(,"cpu_percent":)" + num(cpu) + R"(,"cpu_cores":8,"rss_bytes":)" +
            num(rss) + R"(,"ram_total_bytes":)" + num(rss) + "}\n";
    return *this;
  }
  [[nodiscard]] const std::string& str() const { return out_; }

 private:
  std::string out_;
};

constexpr double kTs = 1764662400.0;  // 2025-12-02, as the golden data
/// The value of the report that hung (issue 30) and the next double above it.
constexpr double kX = 83.386;
inline double above(double v) {
  return std::nextafter(v, std::numeric_limits<double>::infinity());
}

/// `ranks` ranks of `steps` steps each, every phase `ms(rank, step)`, with
/// a system and a process sample per second of steps.
inline std::string uniform(const std::string& name, int ranks, std::int64_t steps,
                           const std::function<double(int, std::int64_t)>& ms, double wait_ms = 1.0,
                           double step_s = 0.1) {
  Writer w(name, ranks);
  for (int r = 0; r < ranks; ++r)
    w.rank(r, r / 8, ranks);
  for (std::int64_t s = 1; s <= steps; ++s) {
    const double ts = kTs + double(s) * step_s;
    for (int r = 0; r < ranks; ++r) {
      w.flat_step(r, s, ts, ms(r, s), wait_ms);
      w.memory(r, s, 1e9, 2e9);
    }
    if (s % 10 == 1) {
      for (int n = 0; n <= (ranks - 1) / 8; ++n)
        w.system(n, ts, 50.0, 90.0, 1e10);
      for (int r = 0; r < ranks; ++r)
        w.process(r, ts, 100.0, 2e9);
    }
  }
  return w.str();
}

}  // namespace degenerate

/// Every degenerate run, each valid telemetry.
inline std::vector<DegenerateRun> degenerate_runs() {
  using namespace degenerate;
  std::vector<DegenerateRun> runs;
  const auto add = [&](const std::string& name, const std::string& jsonl) {
    runs.push_back({name, jsonl});
  };
  const auto constant = [](double v) { return [v](int, std::int64_t) { return v; }; };
  constexpr std::int64_t kMaxStep = std::numeric_limits<std::int64_t>::max();

  add("one_step", uniform("one_step", 1, 1, constant(20.0)));
  add("one_step_64_ranks", uniform("one_step_64_ranks", 64, 1, constant(20.0)));
  add("all_equal", uniform("all_equal", 2, 40, constant(kX)));
  // Step times X and the next double: quantile interpolation gives p5 = X
  // and p95 one ulp above it, the distribution plot's range (issue 30).
  {
    Writer w("one_ulp_steps", 4);
    for (int r = 0; r < 4; ++r)
      w.rank(r, 0, 4);
    for (std::int64_t s = 1; s <= 40; ++s) {
      for (int r = 0; r < 4; ++r)
        w.step(r, s, kTs + double(s) * 0.1,
               {{"input_wait", 0.0},
                {"forward", 40.0},
                {"traced_step_time", (s + r) % 2 == 0 ? kX : above(kX)}});
      w.system(0, kTs + double(s) * 0.1, 50.0, 90.0, 1e10);
    }
    add("one_ulp_steps", w.str());
  }
  add("one_ulp_phases", uniform("one_ulp_phases", 2, 30, [](int r, std::int64_t s) {
        return (r + s) % 2 == 0 ? 20.0 : above(20.0);
      }));
  add("tiny_values", uniform("tiny_values", 2, 20, constant(1e-300), 1e-300));
  add("subnormal_values",
      uniform("subnormal_values", 2, 20, constant(std::numeric_limits<double>::denorm_min()),
              std::numeric_limits<double>::denorm_min()));
  add("huge_values", uniform("huge_values", 2, 20, constant(1e300), 1e300));
  // Sums of these overflow to infinity (the step time, a column's mean).
  add("largest_doubles", uniform("largest_doubles", 2, 20, constant(DBL_MAX / 4), DBL_MAX));
  add("zero_durations", uniform("zero_durations", 2, 20, constant(0.0), 0.0));
  add("zero_and_huge", uniform("zero_and_huge", 2, 20,
                               [](int, std::int64_t s) { return s % 2 == 0 ? 0.0 : 1e300; }));
  add("one_huge_step", uniform("one_huge_step", 2, 50, [](int r, std::int64_t s) {
        return r == 1 && s == 25 ? 1e300 : 20.0;
      }));
  {
    Writer w("rank_without_steps", 2);
    w.rank(0, 0, 2).rank(1, 0, 2);
    for (std::int64_t s = 1; s <= 20; ++s) {
      w.flat_step(0, s, kTs + double(s) * 0.1, 10.0, 1.0);
      w.process(1, kTs + double(s) * 0.1, 100.0, 1e9);
    }
    add("rank_without_steps", w.str());
  }
  {
    Writer w("step_gaps");
    w.rank(0);
    std::int64_t i = 0;
    for (const std::int64_t s :
         {std::int64_t(1), std::int64_t(2), std::int64_t(3), std::int64_t(1000000),
          std::int64_t(1000001), std::int64_t(1000000000000000)}) {
      w.flat_step(0, s, kTs + double(++i), 10.0, 1.0);
      w.memory(0, s, 1e9 + double(i), 2e9);
    }
    add("step_gaps", w.str());
  }
  {
    Writer w("huge_step_ids", 2);
    w.rank(0, 0, 2).rank(1, 0, 2);
    for (std::int64_t i = 7; i >= 0; --i) {
      for (int r = 0; r < 2; ++r) {
        w.flat_step(r, kMaxStep - i, kTs + double(8 - i), 10.0, 1.0);
        w.memory(r, kMaxStep - i, 1e9, 2e9);
      }
    }
    add("huge_step_ids", w.str());
  }
  // The first and the last step id a file may hold: the memory plot's span.
  {
    Writer w("first_and_last_step_ids");
    w.rank(0);
    std::int64_t i = 0;
    for (const std::int64_t s : {std::int64_t(1), std::int64_t(2), kMaxStep / 2, kMaxStep}) {
      w.flat_step(0, s, kTs + double(++i), 10.0, 1.0);
      w.memory(0, s, 1e9 * double(i), 2e9 * double(i));
    }
    add("first_and_last_step_ids", w.str());
  }
  {
    Writer w("single_sample");
    w.rank(0);
    for (std::int64_t s = 1; s <= 10; ++s)
      w.flat_step(0, s, kTs + double(s) * 0.1, 10.0, 1.0);
    w.system(0, kTs, 50.0, 90.0, 1e10).process(0, kTs, 100.0, 1e9);
    add("single_sample", w.str());
  }
  {
    Writer w("equal_sample_times");
    w.rank(0);
    for (std::int64_t s = 1; s <= 10; ++s) {
      w.flat_step(0, s, kTs, 10.0, 1.0);
      w.system(0, kTs, 50.0 + double(s), 90.0, 1e10).process(0, kTs, 100.0, 1e9 + double(s));
    }
    add("equal_sample_times", w.str());
  }
  {
    Writer w("one_ulp_sample_times");
    w.rank(0);
    for (std::int64_t s = 1; s <= 10; ++s) {
      const double ts = s % 2 == 0 ? kTs : above(kTs);
      w.flat_step(0, s, ts, 10.0, 1.0);
      w.system(0, ts, 50.0, 90.0, 1e10).process(0, ts, 100.0, above(1e9));
    }
    add("one_ulp_sample_times", w.str());
  }
  add("zero_timestamps", [] {
    Writer w("zero_timestamps");
    w.rank(0);
    for (std::int64_t s = 1; s <= 10; ++s) {
      w.flat_step(0, s, 0.0, 10.0, 1.0);
      w.system(0, 0.0, 0.0, 0.0, 0.0).process(0, 0.0, 0.0, 0.0);
    }
    return w.str();
  }());
  add("huge_timestamps", [] {
    Writer w("huge_timestamps");
    w.rank(0);
    for (std::int64_t s = 1; s <= 10; ++s) {
      const double ts = 1e300 * double(s);
      w.flat_step(0, s, ts, 10.0, 1.0);
      w.system(0, ts, 50.0, 90.0, 1e10).process(0, ts, 100.0, 1e9);
    }
    return w.str();
  }());
  add("tiny_timestamps", [] {
    Writer w("tiny_timestamps");
    w.rank(0);
    for (std::int64_t s = 1; s <= 10; ++s) {
      const double ts = 1e-300 * double(s);
      w.flat_step(0, s, ts, 10.0, 1.0);
      w.system(0, ts, 50.0, 90.0, 1e10).process(0, ts, 100.0, 1e9);
    }
    return w.str();
  }());
  add("timestamp_jump", [] {
    Writer w("timestamp_jump");
    w.rank(0);
    for (std::int64_t s = 1; s <= 20; ++s) {
      const double ts = kTs + double(s) + (s > 10 ? 1e9 : 0.0);
      w.flat_step(0, s, ts, 10.0, 1.0);
      w.system(0, ts, 50.0, 90.0, 1e10).process(0, ts, 100.0, 1e9);
    }
    return w.str();
  }());
  add("memory_extremes", [] {
    Writer w("memory_extremes", 3);
    for (int r = 0; r < 3; ++r)
      w.rank(r, 0, 3);
    for (std::int64_t s = 1; s <= 20; ++s) {
      for (int r = 0; r < 3; ++r)
        w.flat_step(r, s, kTs + double(s) * 0.1, 10.0, 1.0);
      w.memory(0, s, s % 2 == 0 ? 3e9 : above(3e9), 4e9);  // one ulp apart
      w.memory(1, s, DBL_MAX, DBL_MAX);
      w.memory(2, s, 0.0, 0.0);
      w.process(0, kTs + double(s) * 0.1, 100.0, DBL_MAX);
      w.process(1, kTs + double(s) * 0.1, DBL_MAX, 0.0);
    }
    return w.str();
  }());
  add("gpu_clock_one_ulp", [] {
    Writer w("gpu_clock_one_ulp", 2);
    w.rank(0, 0, 2).rank(1, 0, 2);
    for (std::int64_t s = 1; s <= 30; ++s) {
      for (int r = 0; r < 2; ++r) {
        const double v = (s + r) % 2 == 0 ? kX : above(kX);
        w.step(r, s, kTs + double(s) * 0.1,
               {{"input_wait", 1.0, 1.0},
                {"h2d", 0.0, 0.0},
                {"forward", v, v},
                {"backward", v, v},
                {"optimizer_step", 0.0, 0.0},
                {"traced_step_time", 2 * v, 2 * v}});
      }
    }
    return w.str();
  }());
  add("begin_extremes", [] {
    Writer w("begin_extremes");
    w.rank(0);
    for (std::int64_t s = 1; s <= 10; ++s) {
      w.step(0, s, kTs + double(s) * 0.1,
             {{"input_wait", 1.0, std::nullopt, -1e9},
              {"forward", 1e300, std::nullopt, 1e9},
              {"backward", 5.0, std::nullopt, 0.0},
              {"traced_step_time", 1e300}});
    }
    return w.str();
  }());
  add("last_thread", [] {
    Writer w("last_thread");
    w.rank(0);
    for (std::int64_t s = 1; s <= 10; ++s)
      w.step(0, s, kTs + double(s) * 0.1, {{"forward", 5.0}, {"traced_step_time", 6.0}}, 65535);
    return w.str();
  }());
  add("duplicate_steps", [] {
    Writer w("duplicate_steps");
    w.rank(0);
    for (int i = 0; i < 5; ++i)
      w.flat_step(0, 1, kTs + double(i), 10.0 + double(i), 1.0);
    return w.str();
  }());
  add("disjoint_ranks", [] {
    Writer w("disjoint_ranks", 2);
    w.rank(0, 0, 2).rank(1, 0, 2);
    for (std::int64_t s = 1; s <= 10; ++s) {
      w.flat_step(0, s, kTs + double(s), 10.0, 1.0);
      w.flat_step(1, s + 10, kTs + double(s), 10.0, 1.0);
    }
    return w.str();
  }());
  add("empty_events", [] {
    Writer w("empty_events");
    w.rank(0);
    for (std::int64_t s = 1; s <= 10; ++s)
      w.step(0, s, kTs + double(s), {{"forward", std::nullopt}});
    return w.str();
  }());
  add("input_wait_only", [] {
    Writer w("input_wait_only");
    w.rank(0);
    for (std::int64_t s = 1; s <= 10; ++s)
      w.step(0, s, kTs + double(s), {{"input_wait", 3.0}});
    return w.str();
  }());
  add("largest_rank_id", [] {
    Writer w("largest_rank_id", 1);
    w.rank(2147483647, 2147483647, 1);
    for (std::int64_t s = 1; s <= 10; ++s)
      w.flat_step(2147483647, s, kTs + double(s), 10.0, 1.0);
    return w.str();
  }());
  add("long_equal_run", uniform("long_equal_run", 2, 3000, constant(kX), 0.0, 0.01));
  add("one_ulp_16_ranks", uniform("one_ulp_16_ranks", 16, 60, [](int r, std::int64_t s) {
        return (r * 7 + s) % 3 == 0 ? above(kX) : kX;
      }));
  return runs;
}

}  // namespace traceml::testing
