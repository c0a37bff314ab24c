// Plain value types for everything a rank reports: identity, per-step phase
// timings, per-step memory peaks, and periodic system/process samples; and,
// at the end, each record's field list (model/schema.hpp), from which every
// layer that checks, encodes, stores or reads records derives its code.
// std only; no behaviour beyond accessors.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/schema.hpp"
#include "model/step_log.hpp"
#include "model/step_record.hpp"

namespace traceml::model {

struct RankIdentity {
  int global_rank = 0;
  std::optional<int> local_rank;
  std::optional<int> node_rank;
  std::optional<std::string> hostname;
  std::optional<int> local_world_size;
  std::optional<int> world_size;
};

struct StepMemoryRecord {
  int global_rank = 0;
  std::int64_t step = 0;
  std::string device;
  std::optional<double> peak_allocated_bytes;
  std::optional<double> peak_reserved_bytes;
};

struct GpuSample {
  int index = 0;
  std::optional<double> util_percent;
  std::optional<double> mem_used_bytes;
  std::optional<double> mem_total_bytes;
  std::optional<double> temperature_c;
  std::optional<double> power_w;
  std::optional<double> power_limit_w;
};

/// Host-level sample, taken by local rank 0 of each node.
struct SystemSample {
  int node_rank = 0;
  double ts = 0.0;
  std::optional<double> cpu_percent;
  std::optional<double> ram_used_bytes;
  std::optional<double> ram_total_bytes;
  std::vector<GpuSample> gpus;  ///< empty: no GPU on the node
};

/// GPU memory of one process, as the framework's allocator sees it.
struct ProcessGpu {
  std::optional<int> device;
  std::optional<double> allocated_bytes;
  std::optional<double> reserved_bytes;
  std::optional<double> total_bytes;
};

struct ProcessSample {
  int global_rank = 0;
  double ts = 0.0;
  std::optional<double> cpu_percent;  ///< can exceed 100 (several cores)
  std::optional<int> cpu_cores;
  std::optional<double> rss_bytes;
  std::optional<double> ram_total_bytes;
  std::optional<ProcessGpu> gpu;  ///< absent: the process has no GPU
};

/// What a rank's tracer reports about itself (DECISIONS 9: the summary's
/// `tracer` block). Sent after the handshake and again at the end of the run;
/// the last report wins.
struct TracerStats {
  int global_rank = 0;
  std::int64_t pid = 0;
  std::string strategy;              ///< the rank's strategy word ("ddp", "fsdp", ...)
  std::int64_t steps_recorded = 0;   ///< steps assembled on the training thread
  std::int64_t records_sent = 0;     ///< records written to the collector's socket
  std::int64_t records_dropped = 0;  ///< records lost: buffer full or collector unreachable
  /// The tracer's own CPU cost per step on the training thread, nanoseconds
  /// (docs/architecture.md says how it is measured); absent before any step.
  std::optional<double> overhead_ns_per_step;

  /// The rank's GPU clock: how its steps fared on the GPU.
  struct Gpu {
    int device = 0;                   ///< the CUDA device timed
    std::int64_t steps_resolved = 0;  ///< steps that got GPU times
    std::int64_t steps_unresolved =
        0;  ///< timed on the GPU, sent without (expired, failed, refused, abandoned)
    std::int64_t scopes_skipped = 0;  ///< scopes that got no GPU timing (no event, another device)
  };
  /// Absent when the rank never timed a step on a GPU.
  std::optional<Gpu> gpu;
  /// GPU activity records lost: dropped by CUPTI or our buffers, or steps
  /// whose records never came. Absent when the rank had no CUPTI.
  std::optional<std::int64_t> activity_lost;
};

/// A rank's last word before its Bye (protocol 4): how its program ended,
/// from glibc's on_exit at exit(3) or a return from main. An explicit
/// traceml::shutdown() sends one without a status once everything recorded
/// has gone (the rank is drained: if its connection then closes without a
/// Bye, nothing was lost), and the one with the status at exit.
struct RankGoodbye {
  int global_rank = 0;
  /// The status the parent sees: exit(3)'s argument & 0377 (0 to 255).
  /// Absent: drained, the status not known yet.
  std::optional<int> exit_status;
};

/// How a rank of another node ended, from that node's `traceml run` (protocol
/// 5's relay, transport::PeerRole::Relay): its launcher saw it end and read
/// its black box. The relay sends it before the steps it recovered.
struct RankEnd {
  int global_rank = 0;
  int exit_code = 0;          ///< the shell's convention: the status, or 128 + signal
  std::optional<int> signal;  ///< the signal that killed it
  /// 1: stopped by its launcher (another rank failed, or an interrupt); 0: not.
  int stopped_by_launcher = 0;
  /// Absent when the rank never mapped its black box (nothing is known of
  /// where it was, and no step was recovered).
  std::optional<std::int64_t> steps_completed;
  std::optional<int> phase;  ///< the LoopPhase its training thread was in
  /// Its protocol-4 stream (its process), 16 hex digits; empty: none known.
  std::string stream;
};

/// One operator of a profile (LibTorch's profiler, on the steps
/// `--profile-steps` chose), on traceml's timeline.
struct ProfileOp {
  std::string name;
  std::int64_t start_us = 0;  ///< unix microseconds, on the clock of the steps' `ts`
  std::int64_t duration_us = 0;
  int thread = 0;                        ///< the profiler's number of its thread
  std::optional<std::int64_t> sequence;  ///< links a forward op to its backward
  int gpu = 0;                           ///< 1: a GPU kernel or copy
  std::string shapes;                    ///< its inputs' shapes; empty: not recorded
};

/// A part of one rank's profile of steps first_step..last_step (protocol 6):
/// a profile travels as chunks 0, 1, ... of at most kMaxProfileChunkOps
/// ops, the last one saying so.
struct ProfileChunk {
  int global_rank = 0;
  std::int64_t first_step = 1;
  std::int64_t last_step = 1;
  std::int64_t chunk = 0;
  int last = 0;  ///< 1: the profile's last chunk
  /// On the last chunk: ops the rank left out (the profile was cut at its size limit).
  std::optional<std::int64_t> ops_cut;
  /// On the last chunk: why the capture failed or is partial (empty: it did not).
  std::string error;
  std::vector<ProfileOp> ops;
};

/// Steps a rank runs under LibTorch's profiler: their time holds the
/// profiler's own cost, so the step-time analysis leaves them out. A rank
/// sends one as its capture begins (protocol 8: the steps it means to
/// capture), so that they are known even when the profile never comes (the
/// rank killed in the middle); from a rank of protocol 6 or 7 the collector
/// makes its own when a profile with operators reaches it.
struct ProfiledSteps {
  int global_rank = 0;
  std::int64_t first_step = 1;
  std::int64_t last_step = 1;
};

/// A rank says it takes the collector's profile requests (protocol 7): it
/// sends one, a control frame, on each connection whose Verdict names 7 or
/// later. Whether its program installed LibTorch's profiler hooks is told
/// by what it answers a request (a profile, or a failed one and why).
struct ProfileReady {
  int global_rank = 0;
};

/// The collector asks a rank that said ProfileReady to run `steps` steps
/// under LibTorch's profiler (protocol 7, collector to rank): from
/// `first_step`, or (0) from the next step to begin once the rank has read
/// it. `traceml serve --profile-steps` asks with a first step; `--profile
/// auto` with none, when the rank's steps turn slow. A rank busy with
/// another capture, or past `first_step`, answers with a failed profile.
struct ProfileRequest {
  int global_rank = 0;
  std::int64_t first_step = 0;
  std::int64_t steps = 10;
};

/// TraceML's training-strategy words (spec §4.1.1).
enum class Strategy : std::uint8_t { Ddp, Fsdp, SingleProcess, DistributedUnknown, Unknown };
/// Normalises a strategy string: trimmed, lower-cased; anything unknown is DDP.
Strategy strategy_from_string(const std::string& s);
const char* strategy_name(Strategy s);

struct RunInfo {
  std::string run_name;
  std::optional<int> world_size;
  Strategy strategy = Strategy::Ddp;
};

/// Everything recorded for one run. Record vectors keep arrival order: when the
/// same (rank, step) appears twice, the later record wins.
/// Whole-run facts that a store keeping the run bounded (collector::RunState)
/// counts as records arrive, since it drops rows no section reads: the
/// sections' totals must still be of the whole run.
struct RunTotals {
  std::int64_t step_ids = 0;         ///< distinct steps over every rank's step rows
  std::int64_t step_memory_ids = 0;  ///< distinct steps over every rank's step-memory rows
  std::optional<double> latest_ts;   ///< latest `ts` of any step, system or process record
  /// Earliest moment any record covers: a step's begin (its `ts` less its
  /// input wait and traced time), a sample's `ts`; the run's own start.
  std::optional<double> earliest_ts;
};

struct Telemetry {
  RunInfo run;
  std::vector<RankIdentity> ranks;
  StepLog steps;  ///< columnar; rows read back as StepRecord
  std::vector<StepMemoryRecord> step_memory;
  std::vector<SystemSample> system;
  std::vector<ProcessSample> process;
  std::vector<ProfiledSteps> profiled_steps;
  /// Present when rows were left out (RunTotals); absent: the records are the whole run.
  std::optional<RunTotals> totals;
};

}  // namespace traceml::model

// ---------------------------------------------------------------------------
// The field lists. Each field once: its name (JSONL key, run-database column,
// the name in messages), its member, the values it may hold and its unit.
// The order of a list is the order on the wire and in files: append new
// fields at the end of their group and bump the protocol/format version
// (docs/transport.md, docs/telemetry-format.md) when a layout changes.
// The StepRecord's events (a fixed table of the six Event values, each with
// two clocks) are not a field list; each layer handles them in one place.

namespace traceml::model::schema {

template <>
struct Schema<RunInfo> {
  // `strategy` is an enum with its own names (strategy_name).
  static constexpr auto fields =
      std::make_tuple(field("run_name", &RunInfo::run_name, Rule::Text),
                      field("world_size", &RunInfo::world_size, Rule::Positive, "ranks"));
};

template <>
struct Schema<RankIdentity> {
  static constexpr auto fields = std::make_tuple(
      field("global_rank", &RankIdentity::global_rank, Rule::Index),
      field("local_rank", &RankIdentity::local_rank, Rule::Index),
      field("node_rank", &RankIdentity::node_rank, Rule::Index),
      field("hostname", &RankIdentity::hostname, Rule::Text),
      field("local_world_size", &RankIdentity::local_world_size, Rule::Positive, "ranks"),
      field("world_size", &RankIdentity::world_size, Rule::Positive, "ranks"));
};

template <>
struct Schema<StepGpuActivity> {
  using A = StepGpuActivity;
  static constexpr const char* example = R"({"h2d_ms":0.4,"h2d_bytes":1e6,...})";
  static constexpr auto fields =
      std::make_tuple(field("h2d_ms", &A::h2d_ms, Rule::Amount, "ms"),
                      field("h2d_bytes", &A::h2d_bytes, Rule::Amount, "bytes"),
                      field("h2d_copies", &A::h2d_copies, Rule::Index, "copies"),
                      field("h2d_pageable_copies", &A::h2d_pageable_copies, Rule::Index, "copies")
                          .not_above(&A::h2d_copies, "h2d_copies"),
                      field("h2d_pageable_bytes", &A::h2d_pageable_bytes, Rule::Amount, "bytes")
                          .not_above(&A::h2d_bytes, "h2d_bytes"),
                      field("collective_ms", &A::collective_ms, Rule::Amount, "ms"),
                      field("busy_ms", &A::busy_ms, Rule::Amount, "ms"));
};

template <>
struct Schema<StepRecord> {
  static constexpr auto fields =
      std::make_tuple(field("global_rank", &StepRecord::global_rank, Rule::Index),
                      field("step", &StepRecord::step, Rule::Positive),
                      field("ts", &StepRecord::ts, Rule::Amount, "s"),
                      field("gpu_activity", &StepRecord::gpu_activity, Rule::Record)
                          .with_column("activity")
                          .since_later_schema());
};

template <>
struct Schema<StepMemoryRecord> {
  using M = StepMemoryRecord;
  static constexpr auto fields = std::make_tuple(
      field("global_rank", &M::global_rank, Rule::Index), field("step", &M::step, Rule::Positive),
      field("device", &M::device, Rule::Text),
      field("peak_allocated_bytes", &M::peak_allocated_bytes, Rule::Amount, "bytes"),
      field("peak_reserved_bytes", &M::peak_reserved_bytes, Rule::Amount, "bytes"));
};

template <>
struct Schema<GpuSample> {
  using G = GpuSample;
  static constexpr const char* example = R"({"index":0,"util_percent":80.0})";
  static constexpr auto fields = std::make_tuple(
      field("index", &G::index, Rule::Index).with_column("gpu_index").omissible_in_file(),
      field("util_percent", &G::util_percent, Rule::Amount, "%").null_when_absent(),
      field("mem_used_bytes", &G::mem_used_bytes, Rule::Amount, "bytes").null_when_absent(),
      field("mem_total_bytes", &G::mem_total_bytes, Rule::Amount, "bytes").null_when_absent(),
      // A temperature may be below zero in principle; it only has to be a number.
      field("temperature_c", &G::temperature_c, Rule::Reading, "C").null_when_absent(),
      field("power_w", &G::power_w, Rule::Amount, "W").null_when_absent(),
      field("power_limit_w", &G::power_limit_w, Rule::Amount, "W").null_when_absent());
};

template <>
struct Schema<SystemSample> {
  using S = SystemSample;
  static constexpr auto fields = std::make_tuple(
      field("node_rank", &S::node_rank, Rule::Index), field("ts", &S::ts, Rule::Amount, "s"),
      field("cpu_percent", &S::cpu_percent, Rule::Amount, "%"),
      field("ram_used_bytes", &S::ram_used_bytes, Rule::Amount, "bytes"),
      field("ram_total_bytes", &S::ram_total_bytes, Rule::Amount, "bytes"),
      field("gpus", &S::gpus, Rule::Record));
};

template <>
struct Schema<ProcessGpu> {
  using G = ProcessGpu;
  static constexpr const char* example = R"({"device":0,"allocated_bytes":1e9})";
  static constexpr auto fields = std::make_tuple(
      field("device", &G::device, Rule::Index).null_when_absent(),
      field("allocated_bytes", &G::allocated_bytes, Rule::Amount, "bytes").null_when_absent(),
      field("reserved_bytes", &G::reserved_bytes, Rule::Amount, "bytes").null_when_absent(),
      field("total_bytes", &G::total_bytes, Rule::Amount, "bytes").null_when_absent());
};

template <>
struct Schema<ProcessSample> {
  using P = ProcessSample;
  static constexpr auto fields = std::make_tuple(
      field("global_rank", &P::global_rank, Rule::Index), field("ts", &P::ts, Rule::Amount, "s"),
      field("cpu_percent", &P::cpu_percent, Rule::Amount, "%"),
      field("cpu_cores", &P::cpu_cores, Rule::Positive, "cores"),
      field("rss_bytes", &P::rss_bytes, Rule::Amount, "bytes"),
      field("ram_total_bytes", &P::ram_total_bytes, Rule::Amount, "bytes"),
      // null: the process has no GPU.
      field("gpu", &P::gpu, Rule::Record).null_when_absent());
};

template <>
struct Schema<TracerStats::Gpu> {
  using G = TracerStats::Gpu;
  static constexpr auto fields =
      std::make_tuple(field("device", &G::device, Rule::Index),
                      field("steps_resolved", &G::steps_resolved, Rule::Index, "steps"),
                      field("steps_unresolved", &G::steps_unresolved, Rule::Index, "steps"),
                      field("scopes_skipped", &G::scopes_skipped, Rule::Index, "scopes"));
};

template <>
struct Schema<TracerStats> {
  using T = TracerStats;
  static constexpr auto fields = std::make_tuple(
      // Stored beside the collector's own per-rank counts, whose rank is global_rank.
      field("global_rank", &T::global_rank, Rule::Index).with_column("tracer_rank"),
      field("pid", &T::pid, Rule::Index), field("strategy", &T::strategy, Rule::Text),
      field("steps_recorded", &T::steps_recorded, Rule::Index, "steps"),
      field("records_sent", &T::records_sent, Rule::Index, "records"),
      field("records_dropped", &T::records_dropped, Rule::Index, "records"),
      field("overhead_ns_per_step", &T::overhead_ns_per_step, Rule::Amount, "ns"),
      field("gpu", &T::gpu, Rule::Record).without_presence_column().since_later_schema(),
      field("activity_lost", &T::activity_lost, Rule::Index, "records").since_later_schema());
};

template <>
struct Schema<RankGoodbye> {
  static constexpr auto fields =
      std::make_tuple(field("global_rank", &RankGoodbye::global_rank, Rule::Index),
                      field("exit_status", &RankGoodbye::exit_status, Rule::Index));
};

template <>
struct Schema<RankEnd> {
  using E = RankEnd;
  static constexpr auto fields = std::make_tuple(
      field("global_rank", &E::global_rank, Rule::Index),
      field("exit_code", &E::exit_code, Rule::Index), field("signal", &E::signal, Rule::Positive),
      field("stopped_by_launcher", &E::stopped_by_launcher, Rule::Index),
      field("steps_completed", &E::steps_completed, Rule::Index, "steps"),
      field("phase", &E::phase, Rule::Index), field("stream", &E::stream, Rule::Text));
};

template <>
struct Schema<ProfileOp> {
  using O = ProfileOp;
  static constexpr auto fields = std::make_tuple(
      field("name", &O::name, Rule::Text), field("start_us", &O::start_us, Rule::Index, "us"),
      field("duration_us", &O::duration_us, Rule::Index, "us"),
      field("thread", &O::thread, Rule::Index), field("sequence", &O::sequence, Rule::Index),
      field("gpu", &O::gpu, Rule::Index), field("shapes", &O::shapes, Rule::Text));
};

template <>
struct Schema<ProfiledSteps> {
  using P = ProfiledSteps;
  static constexpr auto fields =
      std::make_tuple(field("global_rank", &P::global_rank, Rule::Index),
                      field("first_step", &P::first_step, Rule::Positive, "steps"),
                      field("last_step", &P::last_step, Rule::Positive, "steps"));
};

template <>
struct Schema<ProfileReady> {
  static constexpr auto fields =
      std::make_tuple(field("global_rank", &ProfileReady::global_rank, Rule::Index));
};

template <>
struct Schema<ProfileRequest> {
  using P = ProfileRequest;
  static constexpr auto fields =
      std::make_tuple(field("global_rank", &P::global_rank, Rule::Index),
                      field("first_step", &P::first_step, Rule::Index),
                      field("steps", &P::steps, Rule::Positive, "steps"));
};

template <>
struct Schema<ProfileChunk> {
  using P = ProfileChunk;
  static constexpr auto fields = std::make_tuple(
      field("global_rank", &P::global_rank, Rule::Index),
      field("first_step", &P::first_step, Rule::Positive),
      field("last_step", &P::last_step, Rule::Positive), field("chunk", &P::chunk, Rule::Index),
      field("last", &P::last, Rule::Index), field("ops_cut", &P::ops_cut, Rule::Index, "ops"),
      field("error", &P::error, Rule::Text), field("ops", &P::ops, Rule::Record));
};

}  // namespace traceml::model::schema
