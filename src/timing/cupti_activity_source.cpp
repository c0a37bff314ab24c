#include "timing/cupti_activity_source.hpp"

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <mutex>

#include "timing/clock.hpp"

#if TRACEML_HAVE_CUPTI
#include <cupti_activity.h>
#include <cupti_result.h>

#include <cstddef>
#include <type_traits>
#endif

namespace traceml::timing {
namespace {

/// CUPTI needs record buffers aligned to ACTIVITY_RECORD_ALIGNMENT.
constexpr std::size_t kRecordAlignment = 8;
/// Smallest buffer we lend: a few dozen records, so that a misconfigured size
/// does not turn every record into a callback.
constexpr std::size_t kMinBufferBytes = std::size_t{16} << 10;

/// The source CUPTI's callbacks serve. CUPTI calls plain functions without a
/// user pointer, from its own thread or from inside a flush or any CUDA call.
std::mutex& callback_mutex() {
  static std::mutex m;
  return m;
}
CuptiActivitySource* g_active = nullptr;  // guarded by callback_mutex()
/// Bytes of buffers allocated for CUPTI and not yet freed, by any source: a
/// buffer can outlive the source that lent it (CUPTI hands it back late).
std::atomic<std::size_t> g_lent_bytes{0};

void free_buffer(std::uint8_t* buffer, std::size_t size) noexcept {
  std::free(buffer);
  g_lent_bytes.fetch_sub(size, std::memory_order_relaxed);
}

/// `m` locked, or not (a mutex that failed to lock): the caller checks.
std::unique_lock<std::mutex> lock_or_not(std::mutex& m) noexcept {
  std::unique_lock<std::mutex> hold(m, std::defer_lock);
  try {
    hold.lock();
  } catch (...) {
  }
  return hold;
}

void bump(std::atomic<std::int64_t>& counter, std::int64_t by = 1) noexcept {
  counter.fetch_add(by, std::memory_order_relaxed);
}

#if TRACEML_HAVE_CUPTI
/// CUPTI's clock when it takes time from us.
std::uint64_t now_for_cupti() {
  return static_cast<std::uint64_t>(now_ns());
}

/// CUPTI's own clock (CLOCK_REALTIME, in ns), for another user while CUPTI is
/// lent: LibTorch's profiler reads its records on that clock unless it
/// registers a clock of its own.
std::uint64_t realtime_for_cupti() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000ULL +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

static_assert(kCuptiSuccess == CUPTI_SUCCESS);
static_assert(kCuptiErrorMaxLimitReached == CUPTI_ERROR_MAX_LIMIT_REACHED);
static_assert(kCuptiErrorNotInitialized == CUPTI_ERROR_NOT_INITIALIZED);
static_assert(kCuptiErrorInsufficientPrivileges == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES);
static_assert(kCuptiErrorMultipleSubscribersNotSupported ==
              CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED);
static_assert(kCuptiErrorUnknown == CUPTI_ERROR_UNKNOWN);
static_assert(kCuptiActivityKindMemcpy == CUPTI_ACTIVITY_KIND_MEMCPY);
static_assert(kCuptiActivityKindMemset == CUPTI_ACTIVITY_KIND_MEMSET);
static_assert(kCuptiActivityKindDriver == CUPTI_ACTIVITY_KIND_DRIVER);
static_assert(kCuptiActivityKindRuntime == CUPTI_ACTIVITY_KIND_RUNTIME);
static_assert(kCuptiActivityKindConcurrentKernel == CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
static_assert(kCuptiCbDomainDriverApi == CUPTI_CB_DOMAIN_DRIVER_API);
static_assert(kCuptiCbDomainRuntimeApi == CUPTI_CB_DOMAIN_RUNTIME_API);
static_assert(kCuptiFlushForced == CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
static_assert(kCuptiActivityAttrPerThreadActivityBuffer ==
              CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER);
static_assert(std::is_same_v<CuptiBufferRequested, CUpti_BuffersCallbackRequestFunc>);
static_assert(sizeof(CUpti_ActivityKind) == sizeof(int));

#endif

}  // namespace

/// The functions CUPTI calls. They run inside CUDA calls of the training
/// threads: they never throw and never wait for anything but the short
/// critical sections of callback_mutex().
struct CuptiActivitySource::Callbacks {
  static void requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
    *buffer = nullptr;  // declining: CUPTI drops records and counts them
    *size = 0;
    *max_records = 0;  // as many as fit
    try {
      std::lock_guard<std::mutex> lock(callback_mutex());
      CuptiActivitySource* self = g_active;
      if (self == nullptr || !self->accepting_.load(std::memory_order_relaxed)) return;
      const std::size_t bytes = self->settings_.buffer_bytes;
      if (g_lent_bytes.load(std::memory_order_relaxed) + bytes > self->settings_.max_buffer_bytes ||
          self->ours_.size() == self->ours_.capacity()) {
        bump(self->buffers_refused_);
        return;
      }
      void* p = std::aligned_alloc(kRecordAlignment, bytes);
      if (p == nullptr) {
        bump(self->buffers_refused_);
        return;
      }
      g_lent_bytes.fetch_add(bytes, std::memory_order_relaxed);
      *buffer = static_cast<std::uint8_t*>(p);
      *size = bytes;
      self->ours_.push_back(*buffer);  // reserved at start: no allocation
    } catch (...) {                    // a mutex that cannot lock: decline
    }
  }

  static void completed(void* /*context*/, std::uint32_t /*stream_id*/, std::uint8_t* buffer,
                        std::size_t size, std::size_t valid_size) {
    if (buffer == nullptr) return;
    try {
      std::lock_guard<std::mutex> lock(callback_mutex());
      CuptiActivitySource* self = g_active;
      if (self != nullptr) {
        // Only a buffer this source lent: another user's (LibTorch's
        // profiler, whose buffers may come back here once traceml has taken
        // CUPTI back) is neither read nor freed.
        const auto it = std::find(self->ours_.begin(), self->ours_.end(), buffer);
        if (it == self->ours_.end()) return;
        *it = self->ours_.back();
        self->ours_.pop_back();
      }
      if (self != nullptr && valid_size > 0) {
        // Reserved for every buffer that can be lent: push_back does not allocate.
        if (self->filled_.size() < self->filled_.capacity()) {
          self->filled_.push_back({buffer, size, valid_size});
          return;
        }
        bump(self->lost_);
      }
    } catch (...) {  // a mutex that cannot lock: the records are lost, the memory is not
    }
    free_buffer(buffer, size);
  }
};

CuptiActivitySource::CuptiActivitySource(const CuptiApi& api, CuptiSourceSettings settings)
    : api_(api), settings_(settings) {
  // Whole records only, aligned as CUPTI needs.
  settings_.buffer_bytes = std::max(settings_.buffer_bytes, kMinBufferBytes);
  settings_.buffer_bytes =
      (settings_.buffer_bytes + kRecordAlignment - 1) / kRecordAlignment * kRecordAlignment;
  settings_.max_buffer_bytes = std::max(settings_.max_buffer_bytes, settings_.buffer_bytes);
}

CuptiActivitySource::~CuptiActivitySource() {
  stop();
  try {
    std::lock_guard<std::mutex> lock(callback_mutex());
    for (const Filled& f : filled_)
      free_buffer(f.buffer, f.size);
    filled_.clear();
  } catch (...) {  // a mutex that cannot lock: leak the buffers rather than race
  }
}

std::optional<std::string> CuptiActivitySource::start() noexcept {
  try {
    return start_or_why();
  } catch (...) {  // allocation, perhaps half-way: undo what was done
    disable_enabled();
    running_ = false;
    accepting_.store(false, std::memory_order_relaxed);
    try {
      std::lock_guard<std::mutex> lock(callback_mutex());
      if (g_active == this) g_active = nullptr;
    } catch (...) {
    }
    return std::string("out of memory");  // short: no allocation
  }
}

std::optional<std::string> CuptiActivitySource::start_or_why() {
  if (started_) return std::string("a CUPTI activity source starts once");
  started_ = true;
#if !TRACEML_HAVE_CUPTI
  return std::string("traceml was built without CUPTI headers");
#else
  // Every buffer that can be lent at once, plus those other sources lent.
  const std::size_t max_buffers = settings_.max_buffer_bytes / settings_.buffer_bytes + 8;
  filled_.reserve(max_buffers);
  reading_.reserve(max_buffers);
  ours_.reserve(max_buffers);
  enabled_.reserve(8);
  {
    std::lock_guard<std::mutex> lock(callback_mutex());
    if (g_active != nullptr)
      return std::string("another CUPTI activity source is capturing in this process");
    g_active = this;
  }
  accepting_.store(true, std::memory_order_relaxed);
  auto fail = [&](std::string why) -> std::optional<std::string> {
    const bool flush = !enabled_.empty();
    disable_enabled();
    if (flush) api_.activity_flush_all(kCuptiFlushForced);  // our buffers back, to free
    accepting_.store(false, std::memory_order_relaxed);
    std::lock_guard<std::mutex> lock(callback_mutex());
    g_active = nullptr;
    for (const Filled& f : filled_)
      free_buffer(f.buffer, f.size);
    filled_.clear();
    return why;
  };

  // Our clock for every record, where CUPTI can take it from us; it must be
  // registered before any kind is enabled.
  if (api_.activity_register_timestamp_callback != nullptr &&
      api_.activity_register_timestamp_callback(&now_for_cupti) == kCuptiSuccess) {
    timestamp_callback_ = true;
    map_.offset_ns = 0;
  } else if (auto why = calibrate()) {
    return fail(*why);
  }
  if (api_.get_version != nullptr) {
    std::uint32_t v = 0;
    if (api_.get_version(&v) == kCuptiSuccess) version_ = v;
  }
  // One buffer stream for every thread (CUDA 13 defaults to one per thread):
  // set before the callbacks are registered and any kind enabled, as CUPTI
  // requires. A CUPTI that cannot is used with its default.
  per_thread_ = set_per_thread_buffers();
  const int registered =
      api_.activity_register_callbacks(&Callbacks::requested, &Callbacks::completed);
  if (registered != kCuptiSuccess)
    return fail(failure("cuptiActivityRegisterCallbacks", registered));

  struct Kind {
    int kind;
    const char* name;
  };
  static constexpr Kind kKinds[] = {
      {kCuptiActivityKindConcurrentKernel, "cuptiActivityEnable(CONCURRENT_KERNEL)"},
      {kCuptiActivityKindMemcpy, "cuptiActivityEnable(MEMCPY)"},
      {kCuptiActivityKindMemset, "cuptiActivityEnable(MEMSET)"},
      {kCuptiActivityKindRuntime, "cuptiActivityEnable(RUNTIME)"},
      {kCuptiActivityKindDriver, "cuptiActivityEnable(DRIVER)"},
  };
  for (const Kind& k : kKinds) {
    const int result = api_.activity_enable(k.kind);
    if (result != kCuptiSuccess) return fail(failure(k.name, result));
    enabled_.push_back(k.kind);
  }
  if (settings_.launch_api_records_only) keep_launch_apis_only();
  running_ = true;
  return std::nullopt;
#endif
}

PerThreadBuffers CuptiActivitySource::set_per_thread_buffers() noexcept {
  if (!settings_.per_thread_buffers) return PerThreadBuffers::CuptiDefault;
  if (api_.activity_set_attribute == nullptr) return PerThreadBuffers::Unsupported;
  std::uint8_t value = *settings_.per_thread_buffers ? 1 : 0;
  std::size_t size = sizeof value;
  const int set =
      api_.activity_set_attribute(kCuptiActivityAttrPerThreadActivityBuffer, &size, &value);
  return set != kCuptiSuccess ? PerThreadBuffers::Refused
         : value != 0         ? PerThreadBuffers::SetOn
                              : PerThreadBuffers::SetOff;
}

const char* to_string(PerThreadBuffers p) noexcept {
  switch (p) {
    case PerThreadBuffers::CuptiDefault:
      return "cupti-default";
    case PerThreadBuffers::SetOff:
      return "off";
    case PerThreadBuffers::SetOn:
      return "on";
    case PerThreadBuffers::Unsupported:
      return "unsupported";
    case PerThreadBuffers::Refused:
      return "refused";
  }
  return "?";
}

std::optional<std::string> CuptiActivitySource::calibrate() {
  // The offset read between two of our readings; the pair closest together
  // bounds the error best (half their distance, typically well under 1 us).
  constexpr int kSamples = 7;
  std::int64_t best_gap = std::numeric_limits<std::int64_t>::max();
  for (int i = 0; i < kSamples; ++i) {
    std::uint64_t cupti_ns = 0;
    const std::int64_t before = now_ns();
    const int result = api_.get_timestamp(&cupti_ns);
    const std::int64_t after = now_ns();
    if (result != kCuptiSuccess) return failure("cuptiGetTimestamp", result);
    if (after - before < best_gap) {
      best_gap = after - before;
      map_.offset_ns = before + (after - before) / 2 - static_cast<std::int64_t>(cupti_ns);
    }
  }
  return std::nullopt;
}

std::string CuptiActivitySource::failure(const char* call, int result) const {
  std::string out = std::string(call) + " failed: " + describe_cupti_result(api_, result);
  switch (result) {
    case kCuptiErrorUnknown:
    case kCuptiErrorNotInitialized:
      out += "; is there a CUDA driver and a GPU, as recent as this CUPTI?";
      break;
    case kCuptiErrorMultipleSubscribersNotSupported:
      out += "; another profiler (Nsight Systems, a torch profiler) holds CUPTI";
      break;
    case kCuptiErrorInsufficientPrivileges:
      out += "; this user may not profile the GPU";
      break;
    default:
      break;
  }
  return out;
}

void CuptiActivitySource::disable_enabled() noexcept {
  // Paused, the kinds are off already; turning an API on one by one now would
  // record it alone, so the per-API settings are left as they are.
  if (paused_) {
    disabled_apis_.clear();
    enabled_.clear();
    return;
  }
  // APIs turned off one by one are turned on again while their kind is still
  // enabled, then the kinds go: disabling a kind last overrides every per-API
  // setting, so nothing stays recorded after us.
  restore_disabled_apis();
  for (auto it = enabled_.rbegin(); it != enabled_.rend(); ++it)
    api_.activity_disable(*it);
  enabled_.clear();
}

void CuptiActivitySource::restore_disabled_apis() noexcept {
  for (const ApiId& id : disabled_apis_) {
    if (id.domain == kCuptiCbDomainRuntimeApi) {
      api_.activity_enable_runtime_api(id.cbid, 1);
    } else {
      api_.activity_enable_driver_api(id.cbid, 1);
    }
  }
  disabled_apis_.clear();
}

void CuptiActivitySource::keep_launch_apis_only() {
  if (api_.activity_enable_runtime_api == nullptr || api_.activity_enable_driver_api == nullptr ||
      api_.get_callback_name == nullptr)
    return;  // a CUPTI before per-API control: every call stays recorded
  // Callback ids are small and dense (about 500 runtime and 800 driver APIs
  // in CUDA 13); an id CUPTI does not know has no name.
  constexpr std::uint32_t kMaxCallbackId = 4096;
  LaunchApis kept;
  for (const int domain : {kCuptiCbDomainRuntimeApi, kCuptiCbDomainDriverApi}) {
    const bool runtime = domain == kCuptiCbDomainRuntimeApi;
    for (std::uint32_t cbid = 1; cbid < kMaxCallbackId; ++cbid) {
      const char* name = nullptr;
      if (api_.get_callback_name(domain, cbid, &name) != kCuptiSuccess || name == nullptr) continue;
      if (is_launching_api(name)) {
        ++(runtime ? kept.runtime : kept.driver);
        continue;
      }
      const int off = runtime ? api_.activity_enable_runtime_api(cbid, 0)
                              : api_.activity_enable_driver_api(cbid, 0);
      if (off != kCuptiSuccess) continue;
      disabled_apis_.push_back({domain, cbid});
      ++kept.turned_off;
    }
  }
  // Without a launch API in either domain the names are not what we expect:
  // record every call rather than miss launches.
  if (kept.runtime == 0 || kept.driver == 0) {
    restore_disabled_apis();
    return;
  }
  launch_apis_ = kept;
}

bool CuptiActivitySource::pause() noexcept {
  if (!running_ || paused_) return running_;
  // Every kind off, the API kinds first (they are the training thread's
  // cost); a kind CUPTI refuses to disable is turned back on so that the
  // records stay whole rather than half on.
  for (auto it = enabled_.rbegin(); it != enabled_.rend(); ++it) {
    if (api_.activity_disable(*it) == kCuptiSuccess) continue;
    for (auto back = enabled_.rbegin(); back != it; ++back)
      api_.activity_enable(*back);
    return false;
  }
  paused_ = true;
  return true;
}

bool CuptiActivitySource::resume() noexcept {
  if (!running_ || !paused_) return running_;
  for (std::size_t i = 0; i < enabled_.size(); ++i) {
    if (api_.activity_enable(enabled_[i]) == kCuptiSuccess) continue;
    for (std::size_t j = 0; j < i; ++j)
      api_.activity_disable(enabled_[j]);
    return false;
  }
  for (const ApiId& id : disabled_apis_) {
    if (id.domain == kCuptiCbDomainRuntimeApi) {
      api_.activity_enable_runtime_api(id.cbid, 0);
    } else {
      api_.activity_enable_driver_api(id.cbid, 0);
    }
  }
  paused_ = false;
  return true;
}

bool CuptiActivitySource::lend() noexcept {
#if TRACEML_HAVE_CUPTI
  const std::unique_lock<std::mutex> hold = lock_or_not(switch_mutex_);
  if (!hold) return false;
  if (!running_) return false;
  // CUPTI's own clock for the other user's records (ours would stay
  // registered otherwise, and LibTorch's profiler would place its records
  // decades off); take_back() registers ours again.
  const auto cuptis_clock = [this] {
    return !timestamp_callback_ ||
           api_.activity_register_timestamp_callback(&realtime_for_cupti) == kCuptiSuccess;
  };
  // Still lent (CUPTI refused it back): its clock is CUPTI's already, unless
  // a half-done take_back() registered ours.
  if (lent_.load(std::memory_order_relaxed)) return cuptis_clock();
  if (!pause()) return false;
  if (!cuptis_clock()) {
    resume();
    return false;
  }
  // No buffer of ours stays with CUPTI: once the other user's callbacks are
  // registered, a buffer of ours would come back to them. With the kinds
  // off, nothing asks for another after the flush.
  api_.activity_flush_all(kCuptiFlushForced);
  accepting_.store(false, std::memory_order_relaxed);
  lent_.store(true, std::memory_order_release);
  return true;
#else
  return false;
#endif
}

bool CuptiActivitySource::take_back(bool records) noexcept {
#if TRACEML_HAVE_CUPTI
  const std::unique_lock<std::mutex> hold = lock_or_not(switch_mutex_);
  if (!hold) return false;
  if (!running_ || !lent_.load(std::memory_order_relaxed)) return running_;
  // As at start: the buffer setting and our clock before the callbacks and
  // any kind (the other user may have changed both; the setting's outcome
  // reported is start's). A CUPTI that no longer takes our clock would stamp
  // records on its own: the source stays lent rather than put them at the
  // wrong time. Without our clock the offset is measured again (the other
  // user may have registered a clock of its own).
  (void)set_per_thread_buffers();
  if (timestamp_callback_) {
    if (api_.activity_register_timestamp_callback == nullptr ||
        api_.activity_register_timestamp_callback(&now_for_cupti) != kCuptiSuccess)
      return false;
  } else {
    try {
      if (calibrate()) return false;
    } catch (...) {
      return false;
    }
  }
  if (api_.activity_register_callbacks(&Callbacks::requested, &Callbacks::completed) !=
      kCuptiSuccess) {
    // Still lent: CUPTI's clock again for the next capture's records.
    if (timestamp_callback_) api_.activity_register_timestamp_callback(&realtime_for_cupti);
    return false;
  }
  accepting_.store(true, std::memory_order_relaxed);
  lent_.store(false, std::memory_order_release);
  // A refused resume leaves the kinds off, as a refused duty-cycle switch
  // does: paused() says so.
  if (records) resume();
  return true;
#else
  (void)records;
  return false;
#endif
}

void CuptiActivitySource::stop() noexcept {
  if (!running_) return;
  running_ = false;
  if (lent_.load(std::memory_order_acquire)) {
    // CUPTI's switches are the other user's now, and no buffer of ours is
    // with CUPTI (lend() flushed them, and none was lent since).
    enabled_.clear();
    disabled_apis_.clear();
    try {
      std::lock_guard<std::mutex> lock(callback_mutex());
      if (g_active == this) g_active = nullptr;
    } catch (...) {
    }
    return;
  }
  disable_enabled();
  // Every buffer back, to read or free: nothing of this source's is left with CUPTI.
  api_.activity_flush_all(kCuptiFlushForced);
  accepting_.store(false, std::memory_order_relaxed);
  std::size_t dropped = 0;
  if (api_.activity_get_num_dropped_records(nullptr, 0, &dropped) == kCuptiSuccess)
    bump(cupti_dropped_, static_cast<std::int64_t>(dropped));
  try {
    std::lock_guard<std::mutex> lock(callback_mutex());
    if (g_active == this) g_active = nullptr;
  } catch (...) {  // cannot happen with a working mutex; the callbacks then keep queueing
  }
}

std::size_t CuptiActivitySource::collect(std::vector<ApiLaunch>& launches,
                                         std::vector<GpuActivity>& activities,
                                         FlushMode mode) noexcept {
  // Not while CUPTI is being lent or taken back, and no flush while it is
  // lent: the flush would hand the other user's buffers over half-done, and
  // take_back() may measure the clock's offset again.
  // The records are parsed after: the lending thread never waits for that.
  std::unique_lock<std::mutex> hold = lock_or_not(switch_mutex_);
  if (!hold) return 0;
  if (running_ && !lent_.load(std::memory_order_acquire)) {
    // Without the callbacks' mutex: CUPTI calls completed() inside the flush.
    api_.activity_flush_all(mode == FlushMode::Forced ? kCuptiFlushForced : 0);
    std::size_t dropped = 0;
    if (api_.activity_get_num_dropped_records(nullptr, 0, &dropped) == kCuptiSuccess)
      bump(cupti_dropped_, static_cast<std::int64_t>(dropped));
  }
  const TimestampMap map = map_;
  try {
    std::lock_guard<std::mutex> lock(callback_mutex());
    filled_.swap(reading_);  // same capacities: the callback still never allocates
  } catch (...) {
    return 0;
  }
  hold.unlock();
  std::size_t appended = 0;
  for (const Filled& f : reading_) {
    void* record = nullptr;
    try {
      while (api_.activity_get_next_record(f.buffer, f.valid, &record) == kCuptiSuccess) {
        switch (parse_activity_record(record, map, launches, activities)) {
          case RecordUse::Launch:
          case RecordUse::Activity:
            ++appended;
            break;
          case RecordUse::Untimed:
            bump(untimed_);
            break;
          case RecordUse::Ignored:
            break;
        }
      }
    } catch (...) {  // out of memory for the caller's vectors: the rest of this buffer
      bump(lost_);
    }
    free_buffer(f.buffer, f.size);
  }
  reading_.clear();
  return appended;
}

}  // namespace traceml::timing
