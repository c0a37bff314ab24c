// What a record may hold, decided once for every reader of records from
// outside: the collector (frames from the ranks), the telemetry JSONL reader
// and the run-database reader. A record one of them refuses, the others
// refuse too, so a value cannot reach the analysis by a side door and flip a
// verdict. These check values; text is checked by model/text.hpp. std only.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "model/telemetry.hpp"

namespace traceml::model {

/// Longest text a record keeps (host name, device, strategy, run name), in
/// bytes: the wire's limit (transport::kMaxStringBytes). Host names stop at
/// 255 bytes, device names at a few dozen; longer text is cut, never refused.
inline constexpr std::size_t kMaxTextBytes = 1024;

/// How far from its step's start an event may say it began, in ms (a
/// little over 11 days): a bound that keeps every begin a timeline can place
/// exactly in nanoseconds.
inline constexpr double kMaxBeginMs = 1e9;

// Each check returns why the record cannot be true, as one phrase that names
// the field as docs/telemetry-format.md does, e.g.
// "'events.forward.cpu_ms' must be a finite number >= 0, got -1.5"; readers
// put where the record came from in front (a line, a table row). std::nullopt
// when every value is possible. Durations, byte counts, percents and
// timestamps are finite and >= 0; ranks, indexes and devices >= 0; step ids,
// sizes and core counts >= 1.

std::optional<std::string> check_run_info(const RunInfo& r);
std::optional<std::string> check_rank_identity(const RankIdentity& r);
std::optional<std::string> check_step(const StepRecord& r);
std::optional<std::string> check_step_memory(const StepMemoryRecord& r);
std::optional<std::string> check_system(const SystemSample& s);
/// One GPU of a system sample, its fields named without the "gpus[i]." of check_system.
std::optional<std::string> check_gpu_sample(const GpuSample& g);
std::optional<std::string> check_process(const ProcessSample& s);
std::optional<std::string> check_tracer_stats(const TracerStats& s);
/// Its fields, and an exit status the parent can see (at most 255).
std::optional<std::string> check_rank_goodbye(const RankGoodbye& g);
std::optional<std::string> check_rank_end(const RankEnd& e);
/// Its fields, steps in order and at most kMaxProfileSteps of them, at most
/// kMaxProfileChunkOps ops, flags 0 or 1, and nothing but the last chunk
/// saying how the profile ended.
std::optional<std::string> check_profile_chunk(const ProfileChunk& p);
/// Its fields, steps in order and at most kMaxProfileSteps of them.
std::optional<std::string> check_profiled_steps(const ProfiledSteps& p);
/// Its fields, at most kMaxProfileSteps steps, none past the largest step id.
std::optional<std::string> check_profile_request(const ProfileRequest& r);

/// A protocol-4 stream as RankEnd::stream spells it (16 lower-case hex
/// digits), and back; std::nullopt for anything else, or 0 (no stream).
std::string stream_hex(std::uint64_t stream);
std::optional<std::uint64_t> stream_from_hex(const std::string& hex);

}  // namespace traceml::model
