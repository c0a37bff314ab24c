// The environment contract between `traceml run` and the runtime in each
// rank: the TRACEML_* variables the launcher sets and the runtime reads, named
// once so that the two sides cannot drift apart. docs/quickstart.md lists the
// ones a user may set.
#pragma once

namespace traceml::model::env {

// Set by `traceml run` for every rank; read by runtime/config.cpp.
/// "1" (or true/yes/on): the rank runs untraced; `traceml run --disable` sets it.
inline constexpr const char* kDisabled = "TRACEML_DISABLED";
/// Where the rank's sender connects: the collector's host and TCP port.
inline constexpr const char* kAggregatorHost = "TRACEML_AGGREGATOR_HOST";
inline constexpr const char* kAggregatorPort = "TRACEML_AGGREGATOR_PORT";
/// The run's token, checked by the collector's Hello. On several nodes the
/// user may set it for `traceml run` itself, so every node agrees on it.
inline constexpr const char* kRunToken = "TRACEML_RUN_TOKEN";
/// The run's name (its directory under the logs directory).
inline constexpr const char* kSessionId = "TRACEML_SESSION_ID";
/// The directory that holds run directories.
inline constexpr const char* kLogsDir = "TRACEML_LOGS_DIR";
/// The sampler's period, seconds.
inline constexpr const char* kInterval = "TRACEML_INTERVAL";
/// Record only the first N steps (empty: all).
inline constexpr const char* kTraceMaxSteps = "TRACEML_TRACE_MAX_STEPS";
/// The training strategy word ("ddp", "fsdp", "single_process").
inline constexpr const char* kStrategy = "TRACEML_STRATEGY";
/// The launch's shape, for the rank's own use and for debugging; the runtime
/// takes its identity from torchrun's variables (RANK, WORLD_SIZE, ...).
inline constexpr const char* kNnodes = "TRACEML_NNODES";
inline constexpr const char* kNprocPerNode = "TRACEML_NPROC_PER_NODE";
inline constexpr const char* kNodeRank = "TRACEML_NODE_RANK";
inline constexpr const char* kExpectedWorldSize = "TRACEML_EXPECTED_WORLD_SIZE";
/// "<stdout inode>,<stderr inode>": the pipes the launcher gave the rank
/// (set by launcher/rank_process.cpp; runtime/pipe_safety.hpp).
inline constexpr const char* kLauncherPipes = "TRACEML_LAUNCHER_PIPES";
/// The descriptor of the rank's black box, the memory it shares with its
/// launcher (set by launcher/rank_process.cpp; store/black_box.hpp).
inline constexpr const char* kBlackBoxFd = "TRACEML_BLACK_BOX_FD";

/// "A:B": LibTorch's profiler on for steps A to B (`--profile-steps`;
/// model::parse_profile_steps).
inline constexpr const char* kProfileSteps = "TRACEML_PROFILE_STEPS";
/// "all" or "0,3": the ranks that profile (`--profile-ranks`; default all).
inline constexpr const char* kProfileRanks = "TRACEML_PROFILE_RANKS";

// Set by the user only; read by runtime/config.cpp, like those above.
/// "0" turns CUPTI activity capture off.
inline constexpr const char* kCupti = "TRACEML_CUPTI";
/// "1" asks for CUPTI's per-thread activity buffers.
inline constexpr const char* kCuptiPerThreadBuffers = "TRACEML_CUPTI_PER_THREAD_BUFFERS";
/// "launches": CUPTI records the API calls that launch GPU work only, not
/// every runtime and driver call ("all", the default). Not yet verified on a
/// GPU (docs/gpu-validation.md).
inline constexpr const char* kCuptiApiRecords = "TRACEML_CUPTI_API_RECORDS";
/// "K/M" (e.g. "8/128"): CUPTI records a window of K steps every M steps
/// and is off in between ("off", the default: every step). Not yet measured
/// on a GPU (docs/gpu-validation.md); read by runtime/config.cpp.
inline constexpr const char* kCuptiDuty = "TRACEML_CUPTI_DUTY";
/// "1": each rank prints what the GPU paths did at shutdown, and `traceml run`
/// where the end of the run went.
inline constexpr const char* kDebug = "TRACEML_DEBUG";
/// The hot path's clock: auto (the TSC where it is invariant), tsc or steady.
inline constexpr const char* kClock = "TRACEML_CLOCK";

// Read once by the process that draws final_summary.html: the CLI for
// `traceml run`, `serve` and `report` (cli/page_limits.hpp: a bad value is a
// usage error), a rank traced on its own in runtime::resolve_config (a bad
// value is warned and the default kept); both by report::page_limits_from.
/// Seconds the page may take to draw before it is given up (default 60).
inline constexpr const char* kPageTimeout = "TRACEML_PAGE_TIMEOUT_S";
/// MiB of memory the page may take to draw (default 2048).
inline constexpr const char* kPageMemory = "TRACEML_PAGE_MEMORY_MB";
/// Tests only: "hang", "abort" or "oom" makes drawing the page fail that way.
inline constexpr const char* kTestPageFault = "TRACEML_TEST_PAGE_FAULT";

}  // namespace traceml::model::env
