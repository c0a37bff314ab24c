// GPU activity records from CUPTI, live: the kernels, copies and memsets the
// process runs and the CUDA API calls that launched them, normalized into
// timing/gpu_activity's records on now_ns()'s clock.
//
// CUPTI writes records into buffers we lend it and hands each back once
// filled or flushed; collect() flushes, reads the buffers handed back and
// frees them. Memory is bounded: buffers lent and not yet read never exceed
// max_buffer_bytes; beyond it CUPTI is refused a buffer and drops records,
// which cupti_dropped() counts.
//
// Clocks: CUPTI stamps records with CLOCK_REALTIME unless told otherwise.
// Where CUPTI has cuptiActivityRegisterTimestampCallback, it stamps them with
// our now_ns() instead (GPU times are interpolated to it by CUPTI); elsewhere
// the offset between the two clocks is measured at start (and again when
// CUPTI comes back from LibTorch's profiler, take_back) and added to every
// timestamp (a wall-clock step later shifts the records by its size).
//
// Compiled against the CUPTI headers when the build finds them
// (TRACEML_HAVE_CUPTI); without them start() says so and nothing is captured.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "timing/cupti_api.hpp"
#include "timing/gpu_activity.hpp"

namespace traceml::timing {

/// Turns CUPTI timestamps into now_ns() readings.
struct TimestampMap {
  std::int64_t offset_ns = 0;  ///< now_ns() minus CUPTI's clock; 0 with the callback
  [[nodiscard]] std::int64_t to_cpu_ns(std::uint64_t cupti_ns) const noexcept {
    return static_cast<std::int64_t>(cupti_ns) + offset_ns;
  }
};

/// What parse_activity_record made of one record.
enum class RecordUse {
  Launch,    ///< a runtime or driver API call: appended to the launches
  Activity,  ///< a kernel, memcpy or memset: appended to the activities
  Untimed,   ///< a kernel, memcpy or memset without timestamps: skipped
  Ignored,   ///< another kind of record: skipped
};

/// Normalizes one CUPTI activity record (a CUpti_Activity*: CUpti_ActivityAPI,
/// CUpti_ActivityKernel4 and later, CUpti_ActivityMemcpy and later,
/// CUpti_ActivityMemset and later). Reads only fields that every version of
/// those records has at the same place, since CUPTI writes the newest version
/// it knows and appends fields to new ones. Activities with a zero start or
/// end never got their timestamps (CUPTI could not collect them, or a forced
/// flush handed back work still running) and are Untimed. Without CUPTI
/// headers every record is Ignored.
/// Whether a CUDA runtime or driver API (its name as cuptiGetCallbackName
/// gives it, e.g. "cudaLaunchKernel_v7000", "cuMemcpyHtoDAsync_v2") launches
/// GPU work that CUPTI records as a kernel, copy or memset: launches, graph
/// launches, copies, memsets. Host functions (cudaLaunchHostFunc) are not.
bool is_launching_api(std::string_view name) noexcept;

RecordUse parse_activity_record(const void* record, const TimestampMap& map,
                                std::vector<ApiLaunch>& launches,
                                std::vector<GpuActivity>& activities);

struct CuptiSourceSettings {
  /// One buffer lent to CUPTI. A launch costs ~250 bytes of records (kernel
  /// ~216, API call 40), so a buffer holds ~2000 launches: a buffer comes back
  /// only when full or all its work has finished, and small buffers keep the
  /// records of a finished step from waiting behind a later one.
  std::size_t buffer_bytes = std::size_t{512} << 10;
  /// Buffers lent to CUPTI and not yet read by collect(), in all.
  std::size_t max_buffer_bytes = std::size_t{32} << 20;
  /// CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER, set before the callbacks
  /// are registered; absent: CUPTI's default (on since CUDA 13). Off by
  /// default: with one buffer stream, records of every thread come back
  /// together (runtime/cupti_stage.cpp). TRACEML_CUPTI_PER_THREAD_BUFFERS.
  std::optional<bool> per_thread_buffers = false;
  /// Records of the launching API calls only (is_launching_api): the RUNTIME
  /// and DRIVER kinds are enabled, then every other API is turned off one by
  /// one (cuptiActivityEnableRuntimeApi/DriverApi), where CUPTI can. Off by
  /// default: a record of every call costs the training thread ~0.45 ms a
  /// step of a launch-bound LibTorch loop on an H200, but turning APIs on one
  /// by one without the kinds delivered no API record at all there
  /// (docs/gpu-validation.md); this path is not yet measured on a GPU.
  /// TRACEML_CUPTI_API_RECORDS=launches.
  bool launch_api_records_only = false;
};

/// What start() did with CuptiSourceSettings::per_thread_buffers.
enum class PerThreadBuffers : std::uint8_t {
  CuptiDefault,  ///< not asked to set it
  SetOff,
  SetOn,
  Unsupported,  ///< this CUPTI has no cuptiActivitySetAttribute
  Refused,      ///< cuptiActivitySetAttribute failed (CUPTI's default applies)
};
const char* to_string(PerThreadBuffers p) noexcept;

/// Whether collect() asks for buffers that hold records of work still running.
enum class FlushMode {
  /// Buffers whose records are all complete. Nothing lost, but records wait
  /// until the rest of their buffer's work has finished too.
  Completed,
  /// Every buffer. Work still running at that moment comes back without an
  /// end time and CUPTI never sends it again (it is Untimed): for the final
  /// collect, after the last step's work has finished.
  Forced,
};

/// The live source. At most one is started per process: CUPTI calls back
/// plain functions without a context pointer. collect() and stop() are called
/// from one thread (the runtime's sampler); nothing here throws.
class CuptiActivitySource {
 public:
  explicit CuptiActivitySource(const CuptiApi& api, CuptiSourceSettings settings = {});
  /// Stops and frees every buffer it still holds.
  ~CuptiActivitySource();
  CuptiActivitySource(const CuptiActivitySource&) = delete;
  CuptiActivitySource& operator=(const CuptiActivitySource&) = delete;

  /// Registers the callbacks and enables CONCURRENT_KERNEL, MEMCPY, MEMSET,
  /// RUNTIME and DRIVER records (with launch_api_records_only, the API calls
  /// that launch nothing are turned off again where CUPTI can). Returns why it
  /// could not (no driver, CUPTI refusing, another source started, built
  /// without CUPTI), in one line; nothing when capturing. A source starts at
  /// most once.
  [[nodiscard]] std::optional<std::string> start() noexcept;

  /// Disables the records and hands back every buffer (forced flush); what
  /// they hold is still returned by the next collect(). Idempotent.
  void stop() noexcept;

  [[nodiscard]] bool running() const noexcept { return running_; }

  /// The duty cycle (timing/cupti_duty_cycle.hpp): turns the kinds start()
  /// enabled off, and on again, while running; what was recorded before still
  /// comes back through collect(). With launch_api_records_only the APIs
  /// turned off stay off across a pause (they are turned off again after the
  /// kinds come back, in case CUPTI forgot them). Called under the duty
  /// cycle's mutex, never concurrently with stop() (which detaches it first).
  /// False when CUPTI refused: the records stay as they were.
  bool pause() noexcept;
  bool resume() noexcept;
  [[nodiscard]] bool paused() const noexcept { return paused_; }

  /// Hands CUPTI to another user for a while (LibTorch's profiler, whose
  /// Kineto registers its own buffer callbacks, process-wide, and may
  /// finalize CUPTI when it stops): the kinds go off (as pause()), CUPTI's
  /// own clock is registered again for the other user's records, every
  /// buffer comes back (a forced flush: their records still come through
  /// collect()), and no buffer is lent to CUPTI until take_back(). While
  /// lent, collect() never flushes and stop() touches none of CUPTI's
  /// switches (they are the other user's). Under the duty cycle's mutex, as
  /// pause(). False when CUPTI refused the kinds off or its clock (nothing
  /// lent). Called again while still lent, it only registers CUPTI's clock.
  bool lend() noexcept;
  /// The other user is done: the buffer setting, the clock (or the offset,
  /// measured again) and the buffer callbacks are registered again (CUPTI
  /// may have been finalized in between) and, when `records`, the kinds go
  /// on again (as resume(); paused() says whether they did). False when
  /// CUPTI refused the clock or the callbacks: the source stays lent, its
  /// records off, CUPTI's clock registered, until a later take_back().
  bool take_back(bool records) noexcept;
  [[nodiscard]] bool lent() const noexcept { return lent_.load(std::memory_order_acquire); }

  /// Flushes (while running) and appends the records of every buffer CUPTI
  /// has handed back since the last call. Returns how many were appended.
  std::size_t collect(std::vector<ApiLaunch>& launches, std::vector<GpuActivity>& activities,
                      FlushMode mode = FlushMode::Completed) noexcept;

  /// How CUPTI timestamps map to now_ns(): offset 0 when CUPTI takes its
  /// time from us (uses_timestamp_callback()).
  [[nodiscard]] TimestampMap timestamp_map() const noexcept { return map_; }
  [[nodiscard]] bool uses_timestamp_callback() const noexcept { return timestamp_callback_; }
  /// Whether start() set per-thread buffers, and to what.
  [[nodiscard]] PerThreadBuffers per_thread_buffers() const noexcept { return per_thread_; }
  /// cuptiGetVersion of the library, when it has one and answered.
  [[nodiscard]] std::optional<std::uint32_t> cupti_version() const noexcept { return version_; }
  /// With launch_api_records_only: the runtime and driver APIs still
  /// recorded (the launches, copies and memsets) and those turned off; all 0
  /// when every call is recorded.
  struct LaunchApis {
    int runtime = 0;
    int driver = 0;
    int turned_off = 0;
  };
  [[nodiscard]] LaunchApis launch_api_records() const noexcept { return launch_apis_; }

  // Counters since start, readable from any thread.
  /// Records CUPTI dropped (no buffer space), as cuptiActivityGetNumDroppedRecords says.
  [[nodiscard]] std::int64_t cupti_dropped() const noexcept { return load(cupti_dropped_); }
  /// Buffer requests refused because max_buffer_bytes were lent.
  [[nodiscard]] std::int64_t buffers_refused() const noexcept { return load(buffers_refused_); }
  /// Activities without timestamps (RecordUse::Untimed).
  [[nodiscard]] std::int64_t untimed() const noexcept { return load(untimed_); }
  /// Records lost on our side: a buffer that could not be queued or records
  /// that could not be stored (out of memory).
  [[nodiscard]] std::int64_t lost() const noexcept { return load(lost_); }

 private:
  struct Filled {
    std::uint8_t* buffer = nullptr;
    std::size_t size = 0;
    std::size_t valid = 0;
  };
  struct Callbacks;  // the functions CUPTI calls, in the .cpp
  friend struct Callbacks;

  std::optional<std::string> start_or_why();
  std::optional<std::string> calibrate();
  void disable_enabled() noexcept;
  std::string failure(const char* call, int result) const;
  static std::int64_t load(const std::atomic<std::int64_t>& a) noexcept {
    return a.load(std::memory_order_relaxed);
  }

  CuptiApi api_;
  CuptiSourceSettings settings_;
  bool started_ = false;  // start() was called: a source starts once
  bool running_ = false;
  bool paused_ = false;  // the kinds are off for the duty cycle
  bool timestamp_callback_ = false;
  PerThreadBuffers per_thread_ = PerThreadBuffers::CuptiDefault;
  std::optional<std::uint32_t> version_;
  TimestampMap map_;
  std::vector<int> enabled_;  // activity kinds enabled by us, to disable at stop
  struct ApiId {
    int domain;
    std::uint32_t cbid;
  };
  std::vector<ApiId> disabled_apis_;  // API records turned off one by one, to restore
  LaunchApis launch_apis_;
  void keep_launch_apis_only();
  void restore_disabled_apis() noexcept;
  /// Buffers handed back, guarded by the callbacks' mutex; reserved at start
  /// for every buffer that can exist, so the callback never allocates.
  std::vector<Filled> filled_;
  std::vector<Filled> reading_;         // collect()'s side of the swap, same capacity
  std::atomic<bool> accepting_{false};  // lend buffers to CUPTI
  std::atomic<bool> lent_{false};       // CUPTI is another user's (lend())
  /// Held by lend(), take_back() and collect()'s flush: none runs while
  /// another switches who holds CUPTI.
  std::mutex switch_mutex_;
  /// The buffers lent to CUPTI and not yet handed back, guarded by the
  /// callbacks' mutex; reserved at start (the callbacks never allocate).
  std::vector<std::uint8_t*> ours_;
  /// Applies CuptiSourceSettings::per_thread_buffers; what came of it.
  PerThreadBuffers set_per_thread_buffers() noexcept;
  std::atomic<std::int64_t> cupti_dropped_{0};
  std::atomic<std::int64_t> buffers_refused_{0};
  std::atomic<std::int64_t> untimed_{0};
  std::atomic<std::int64_t> lost_{0};
};

}  // namespace traceml::timing
