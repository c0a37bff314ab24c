// traceml: tells you why your LibTorch training is slow.
//
// Mark the training loop, and traceml records per step how long the rank
// waited for input, copied to the device, ran forward, backward and the
// optimizer, and how long the whole step took; `traceml run` (or the program
// itself, when run on its own) turns that into a diagnosis at the end:
//
//   traceml::init();
//   for (auto& batch : traceml::wrap_dataloader(*loader)) {  // input wait
//     traceml::StepScope step;                                // the traced step
//     { traceml::PhaseScope p(traceml::Phase::Forward);       /* forward */ }
//     { traceml::PhaseScope p(traceml::Phase::Backward);      /* backward */ }
//     { traceml::PhaseScope p(traceml::Phase::OptimizerStep); /* optimizer */ }
//   }
//   traceml::shutdown();  // also runs at normal exit
//
// This header includes no torch and no CUDA header. Recording a scope costs two
// clock reads and a store into a per-thread buffer: no lock, no allocation, no
// system call. Nothing here throws or changes what the program does; if traceml
// cannot record or send, it drops telemetry and counts what it dropped.
//
// Define TRACEML_DISABLE_MACROS to make TRACEML_STEP() and TRACEML_PHASE(...)
// expand to nothing (the classes and functions stay available).
#pragma once

#include <cstdint>
#include <exception>
#include <iterator>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>

#include <traceml/hooks.hpp>

namespace traceml {

/// What init() is configured with. Every field can also come from the
/// environment (`traceml run` sets them); an explicit field wins over the
/// environment. docs/quickstart.md lists the variables.
struct Options {
  /// false: run untraced (every scope is a no-op). TRACEML_DISABLED=1 does the same.
  bool enabled = true;
  /// Period of the process/system sampler, seconds, in [0.01, 3600]
  /// (TRACEML_INTERVAL); a value outside is reported once and not used.
  std::optional<double> sample_interval_sec;
  /// Record only the first N steps, then stop recording; training goes on
  /// (TRACEML_TRACE_MAX_STEPS).
  std::optional<std::int64_t> trace_max_steps;
  /// Training strategy word of the summary: "ddp", "fsdp", "single_process"
  /// (TRACEML_STRATEGY). Default: "ddp" when WORLD_SIZE > 1, else "single_process".
  std::optional<std::string> strategy;
  /// Standalone mode (no `traceml run`): the directory that receives
  /// <run name>/final_summary.json. Default ./logs (TRACEML_LOGS_DIR).
  std::optional<std::string> logs_dir;
  /// Standalone mode: the run's directory name. Default <program>_<timestamp>
  /// (TRACEML_SESSION_ID).
  std::optional<std::string> run_name;
};

/// Starts tracing in this process: reads the rank identity and the collector's
/// address from the environment, starts the sampler and sender threads, and
/// arranges for shutdown() at normal exit. Without `traceml run` the process
/// traces itself and writes its own summary at exit (standalone mode).
/// Calling it again does nothing. Never throws; on any failure it prints one
/// warning and leaves tracing off.
void init();
void init(const Options& options);

/// Stops tracing: flushes what was recorded to the collector (standalone: writes
/// the summary) and stops recording. Waits a bounded time, never forever.
/// The connection to a collector stays open (heartbeats only) until the
/// process exits, so that it learns the program's exit status.
/// Safe to call twice, or without init().
void shutdown();

/// Whether scopes are being recorded now (init() succeeded, tracing is enabled
/// and --trace-max-steps has not been reached).
bool is_recording();

/// The phases of a step that PhaseScope times. Values are stable (they are the
/// event numbers of the telemetry format): never renumber.
enum class Phase : std::uint8_t {
  H2D = 1,            ///< host-to-device copies of the batch
  Forward = 2,        ///< the forward pass
  Backward = 3,       ///< the backward pass, gradient all-reduce included
  OptimizerStep = 4,  ///< optimizer.step(); "optimizer_step" in the telemetry
  /// The former name of OptimizerStep.
  Optimizer [[deprecated("use Phase::OptimizerStep")]] = OptimizerStep,
};

namespace detail {
// The hot path, implemented in the runtime. A start of 0 means "not recording":
// the matching end call then does nothing.
std::int64_t scope_begin() noexcept;
/// scope_begin() that also publishes where the loop is (the heartbeat's phase).
std::int64_t phase_begin(Phase phase) noexcept;
std::int64_t fetch_begin() noexcept;
void phase_end(Phase phase, std::int64_t start) noexcept;
void fetch_end(std::int64_t start) noexcept;
std::int64_t step_begin() noexcept;
void step_end(std::int64_t start, bool failed) noexcept;

}  // namespace detail

/// Times one traced step, from construction to destruction. Phases and fetches
/// recorded on this thread since the previous step ended belong to it (a batch
/// fetched before the step is the step's input wait). A step left by an
/// exception is not recorded. Nested StepScopes count as one step.
class StepScope {
 public:
  StepScope() noexcept : start_(detail::step_begin()), exceptions_(std::uncaught_exceptions()) {}
  ~StepScope() { detail::step_end(start_, std::uncaught_exceptions() > exceptions_); }
  StepScope(const StepScope&) = delete;
  StepScope& operator=(const StepScope&) = delete;

 private:
  std::int64_t start_;
  int exceptions_;
};

/// Times one phase of the step, from construction to destruction. A phase
/// entered several times in a step (gradient accumulation) adds up.
class PhaseScope {
 public:
  explicit PhaseScope(Phase phase) noexcept : phase_(phase), start_(detail::phase_begin(phase)) {}
  ~PhaseScope() { detail::phase_end(phase_, start_); }
  PhaseScope(const PhaseScope&) = delete;
  PhaseScope& operator=(const PhaseScope&) = delete;

 private:
  Phase phase_;
  std::int64_t start_;
};

/// Times one fetch of input (a batch from a custom loader, a queue pop, a wait
/// on a prefetch thread) as input wait of the next step recorded on this thread.
class FetchScope {
 public:
  FetchScope() noexcept : start_(detail::fetch_begin()) {}
  ~FetchScope() { detail::fetch_end(start_); }
  FetchScope(const FetchScope&) = delete;
  FetchScope& operator=(const FetchScope&) = delete;

 private:
  std::int64_t start_;
};

/// A view of a range (LibTorch's torch::data loaders, a std::vector, anything
/// with begin() and end()) whose iteration times how long each element takes
/// to arrive: from the start of the increment (or of begin()) to the end of
/// the dereference. Lazy loaders that fetch in operator!= or operator* are
/// covered too. An rvalue range is moved into the view; an lvalue is referenced.
template <class Range>
class WrappedLoader {
  using RangeRef = std::remove_reference_t<Range>;
  using Inner = decltype(std::begin(std::declval<RangeRef&>()));
  using InnerEnd = decltype(std::end(std::declval<RangeRef&>()));

 public:
  /// Marks the end of iteration; compares against iterator.
  class sentinel {
   public:
    explicit sentinel(InnerEnd end) : end_(std::move(end)) {}

   private:
    friend class WrappedLoader;
    InnerEnd end_;
  };

  class iterator {
   public:
    using reference = decltype(*std::declval<Inner&>());
    using value_type = std::remove_cv_t<std::remove_reference_t<reference>>;
    using difference_type = std::ptrdiff_t;
    using pointer = std::add_pointer_t<reference>;
    using iterator_category = std::input_iterator_tag;

    iterator(Inner it, std::int64_t pending) : it_(std::move(it)), pending_(pending) {}

    reference operator*() {
      reference value = *it_;
      settle();
      if constexpr (std::is_rvalue_reference_v<reference>) {
        return std::move(value);
      } else {
        return value;
      }
    }
    iterator& operator++() {
      pending_ = detail::fetch_begin();
      ++it_;
      return *this;
    }
    void operator++(int) { ++*this; }
    /// The loop's end test. When the range is exhausted, the time spent finding
    /// that out is input wait of whatever step comes next.
    bool operator!=(const sentinel& end) {
      const bool more = it_ != end.end_;
      if (!more) settle();
      return more;
    }
    bool operator==(const sentinel& end) { return !(*this != end); }

   private:
    void settle() noexcept {
      if (pending_ != 0) {
        detail::fetch_end(pending_);
        pending_ = 0;
      }
    }
    Inner it_;
    std::int64_t pending_;
  };

  explicit WrappedLoader(Range&& range) : range_(std::forward<Range>(range)) {}

  iterator begin() {
    const std::int64_t start = detail::fetch_begin();
    return iterator(std::begin(range_), start);
  }
  sentinel end() { return sentinel(std::end(range_)); }

 private:
  Range range_;  // a reference for lvalues, the value itself for rvalues
};

/// Wraps a data loader (or any range) so that each fetch is timed as input wait.
///   for (auto& batch : traceml::wrap_dataloader(*loader)) { ... }
template <class Range>
WrappedLoader<Range> wrap_dataloader(Range&& range) {
  return WrappedLoader<Range>(std::forward<Range>(range));
}

}  // namespace traceml

#define TRACEML_CONCAT_INNER(a, b) a##b
#define TRACEML_CONCAT(a, b) TRACEML_CONCAT_INNER(a, b)

#if defined(TRACEML_DISABLE_MACROS)
#define TRACEML_STEP()
#define TRACEML_PHASE(name)
#define TRACEML_FETCH()
#else
/// Times the rest of the enclosing block as one step.
#define TRACEML_STEP() ::traceml::StepScope TRACEML_CONCAT(traceml_step_, __LINE__)
/// Times the rest of the enclosing block as a phase: TRACEML_PHASE(Forward).
#define TRACEML_PHASE(name) \
  ::traceml::PhaseScope TRACEML_CONCAT(traceml_phase_, __LINE__)(::traceml::Phase::name)
/// Times the rest of the enclosing block as one input fetch.
#define TRACEML_FETCH() ::traceml::FetchScope TRACEML_CONCAT(traceml_fetch_, __LINE__)
#endif
