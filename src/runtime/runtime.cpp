// init() / shutdown() and the hot-path entry points of the public API
// (include/traceml/traceml.hpp). The process has one runtime; it is created by
// init() and never destroyed (threads that outlive main may still call the
// hot path, which then finds tracing off and returns).
#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "model/text.hpp"
#include "runtime/config.hpp"
#include "runtime/cupti_stage.hpp"
#include "runtime/debug_report.hpp"
#include "runtime/gpu_clock.hpp"
#include "runtime/gpu_side.hpp"
#include "runtime/hot_path.hpp"
#include "runtime/overhead.hpp"
#include "runtime/pipe_safety.hpp"
#include "runtime/proc_sampler.hpp"
#include "runtime/profile_capture.hpp"
#include "runtime/registry.hpp"
#include "runtime/sender.hpp"
#include "runtime/standalone.hpp"
#include "store/black_box.hpp"
#include "timing/cuda_api.hpp"
#include "timing/nvml.hpp"
#include "traceml/traceml.hpp"

namespace traceml {
namespace runtime {
namespace {

using Clock = std::chrono::steady_clock;

/// How long shutdown waits for the last telemetry to reach the collector.
constexpr std::chrono::seconds kFlushBudget{5};

HotState g_hot;

/// LibTorch's profiler on the steps --profile-steps chose (null: none asked
/// of this rank); like the GPU clock never freed.
std::atomic<ProfileCapture*> g_profile{nullptr};
/// Made on the sender thread (the collector's first request) against the
/// runtime's shutdown: g_profile_closed says the shutdown has been.
std::mutex g_profile_mu;
bool g_profile_closed = false;  // guarded by g_profile_mu
thread_local GpuThread* t_gpu = nullptr;
thread_local std::int64_t t_gpu_next_check = 0;
/// How often a thread asks whether the program uses a GPU yet, in the hot
/// path's ticks: about a second (a tick is a nanosecond or a TSC count, less).
constexpr std::int64_t kGpuAttachRetryTicks = 1'000'000'000;

/// The calling thread's GPU side once the program uses a GPU; null before
/// (and on every CPU-only run, after one pointer load).
GpuThread* gpu_thread(std::int64_t now) noexcept {
  if (t_gpu != nullptr) return t_gpu;
  GpuClock* clock = g_gpu_clock.load(std::memory_order_acquire);
  if (clock == nullptr || now < t_gpu_next_check) return nullptr;
  t_gpu_next_check = now + kGpuAttachRetryTicks;
  t_gpu = clock->attach_thread();
  return t_gpu;
}

RecorderRegistry* g_registry = nullptr;  // created once, never freed
thread_local ThreadRecorder* t_recorder = nullptr;

/// Marks the thread's recorder retired when the thread exits, so the sender
/// can free it once drained. Touched only when a thread registers.
struct RetireOnExit {
  ThreadRecorder* recorder = nullptr;
  ~RetireOnExit() {
    if (recorder != nullptr) recorder->retired.store(true, std::memory_order_release);
  }
};
thread_local RetireOnExit t_retire;

ThreadRecorder* recorder() noexcept {
  if (t_recorder != nullptr) return t_recorder;
  if (g_registry == nullptr) return nullptr;
  try {
    t_recorder = g_registry->add();
    t_retire.recorder = t_recorder;
  } catch (...) {
    return nullptr;  // out of memory: this thread records nothing
  }
  return t_recorder;
}

void warn(const std::string& message) {
  write_stderr_line("traceml: warning: " + message);
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return {};
  return buf;
}

/// Everything init() starts; shutdown() stops it in reverse.
/// The black box `traceml run` made for this rank, mapped once per process
/// and never unmapped (a training thread may write to it until the end);
/// null without one. A second init() after shutdown() keeps the first.
model::BlackBoxRegion* black_box_of(const Config& config) {
  static model::BlackBoxRegion* box = nullptr;
  static bool tried = false;
  if (tried || !config.black_box_fd) return box;
  tried = true;
  std::string why;
  if (auto mapped = store::BlackBoxMapping::attach(*config.black_box_fd, why)) {
    box = &mapped->region();
    mapped.release();  // stays mapped until the process ends
  } else if (!why.empty()) {
    warn("no black box (" + why +
         "): if this rank dies, the steps it had not sent yet are lost; training continues");
  }
  return box;
}

class Runtime {
 public:
  explicit Runtime(Config config) : config_(std::move(config)) {}

  void start() {
    // The hot path's clock, before anything is timed (the calibration below included).
    std::string clock_why;
    timing::select_tick_source(timing::choose_tick_source(config_.clock, clock_why));
    if (!clock_why.empty() && config_.speaks_for_its_node()) warn(clock_why);
    if (config_.standalone()) {
      standalone_ = std::make_unique<Standalone>(config_);
      config_.collector_host = "127.0.0.1";
      config_.collector_port = standalone_->port();
      config_.token = standalone_->token();
    }
    SenderSettings s;
    s.host = *config_.collector_host;
    s.port = *config_.collector_port;
    s.token = config_.token;
    s.identity = config_.identity;
    s.ns_per_scope = calibrate_ns_per_scope();
    s.on_first_failure = [kept =
                              std::to_string(s.max_pending_bytes >> 20)](const std::string& why) {
      warn(why + "; training continues, and telemetry waits for the collector (at most " + kept +
           " MiB, then it is dropped and counted)");
    };
    s.on_first_drop = [](const std::string& why) {
      warn(why + ": telemetry is dropped and counted from now on; training continues");
    };
    s.on_refused = [this](const std::string& why) {
      refused_.store(true);
      int recording = kRecording;
      g_hot.state.compare_exchange_strong(recording, kUntraced, std::memory_order_acq_rel);
      warn(model::escape_for_terminal(why, true) + "; training continues untraced");
    };
    start_pipe_watch();
    s.gpu_clock = start_gpu_clock();
    s.activity = cupti_.get();
    s.profiles = start_profile();
    s.profile_requests = [this] { return profile_for_requests(); };
    // A profile that cannot be sent is kept in the run directory as this
    // node's traceml names it (TRACEML_LOGS_DIR/TRACEML_SESSION_ID: on node
    // 0, the run's own), or beside the logs of a rank that has none.
    s.profile_keep_dir =
        standalone_
            ? standalone_->run_dir()
            : (std::filesystem::path(config_.logs_dir) /
               (config_.run_name
                    ? *config_.run_name
                    : "unsent_profiles_rank" + std::to_string(config_.identity.global_rank)))
                  .string();
    const std::string strategy = config_.strategy;
    const int rank = config_.identity.global_rank;
    s.heartbeat_interval = std::chrono::milliseconds(std::int64_t(config_.interval_sec * 1000));
    s.black_box = black_box_of(config_);
    g_hot.black_box = s.black_box;  // before recording starts (init)
    if (s.black_box != nullptr)
      g_hot.where.store(&s.black_box->header.phase, std::memory_order_relaxed);
    s.position = [rank] {
      model::RankPosition p;
      p.global_rank = rank;
      p.ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
                 .count();
      p.steps_done = g_hot.last_step.load(std::memory_order_relaxed);
      p.phase = model::LoopPhase(std::min<std::uint8_t>(
          g_hot.where.load(std::memory_order_relaxed)->load(std::memory_order_relaxed),
          model::kMaxLoopPhase));
      p.recording = g_hot.state.load(std::memory_order_relaxed) == kRecording;
      return p;
    };
    sender_ = std::make_unique<Sender>(s, *g_registry, samples_, wall_, [strategy, rank] {
      model::TracerStats t;
      t.global_rank = rank;
      t.pid = std::int64_t(getpid());
      t.strategy = strategy;
      return t;
    });
    sender_->start();
    sampler_ = std::thread([this] {
      block_sigpipe_in_this_thread();
      pthread_setname_np(pthread_self(), "traceml-sample");  // as top -H and perf show it
      sample_loop();
    });
  }

  /// The capture --profile-steps asked of this rank, made once (null: none).
  ProfileCapture* start_profile() {
    if (ProfileCapture* existing = g_profile.load()) return existing;
    if (!config_.profile_steps) return nullptr;
    auto* capture =
        new ProfileCapture(ProfileRange{config_.profile_steps->first, config_.profile_steps->last},
                           config_.identity.global_rank, wall_, &warn, &cupti_lender);
    g_profile.store(capture, std::memory_order_release);
    return capture;
  }

  /// The capture that takes the collector's requests (protocol 7): the one
  /// --profile-steps made, or one made now, on the sender thread, with
  /// nothing armed. Until then the step edges load a null pointer, as when
  /// no profile is ever asked.
  ProfileCapture* profile_for_requests() {
    std::lock_guard<std::mutex> lk(g_profile_mu);
    if (ProfileCapture* existing = g_profile.load(std::memory_order_acquire)) return existing;
    try {
      auto* capture = new ProfileCapture(config_.identity.global_rank, wall_, &warn, &cupti_lender);
      // Made after the runtime's shutdown (a lingering rank still hears
      // the collector): shut down too, so that a request is said too late.
      if (g_profile_closed) capture->at_shutdown(g_hot.last_step.load(), false);
      g_profile.store(capture, std::memory_order_release);
      return capture;
    } catch (...) {
      return nullptr;  // out of memory: the request is left
    }
  }

  /// Finds CUDA (dlopen) and makes the process's GPU clock, once; says on
  /// stderr, once per node, when the rank stays on the CPU clock.
  GpuClock* start_gpu_clock() {
    if (GpuClock* existing = g_gpu_clock.load()) return existing;
    const timing::CudaApiLoad cuda = timing::load_cuda_api();
    int count = 0;
    if (cuda.api && cuda.api->get_device_count(&count) == timing::kCudaSuccess && count > 0) {
      auto* clock = new GpuClock(*cuda.api, count, config_.identity.local_rank, current_stream);
      g_cuda_api = *cuda.api;
      g_gpu_clock.store(clock, std::memory_order_release);
      start_activity_records();
      return clock;
    }
    gpu_why_ = cuda.api ? "no CUDA device" : cuda.reason;
    // No driver or no device is the ordinary CPU machine: one calm line (the
    // details are in TRACEML_DEBUG's). Anything else may hide a GPU that
    // traceml cannot reach, so it is named.
    const bool ordinary = cuda.api || gpu_why_.rfind("no CUDA driver", 0) == 0 ||
                          gpu_why_.rfind("no CUDA device", 0) == 0 ||
                          gpu_why_.rfind("libcudart not found", 0) == 0;
    if (config_.speaks_for_its_node())
      write_stderr_line(ordinary ? std::string("traceml: no GPU: timing on the CPU clock")
                                 : "traceml: timing on the CPU clock (" + gpu_why_ + ")");
    return nullptr;
  }

  /// CUPTI's activity records (copies, collectives, busy time), unless
  /// TRACEML_CUPTI=0; says once per node when they are unavailable.
  void start_activity_records() {
    if (!config_.cupti) {
      cupti_why_ = "TRACEML_CUPTI=0";
      return;
    }
    std::string why;
    cupti_ = CuptiStage::start(why, config_.cupti_settings, config_.cupti_duty);
    cupti_why_ = why;
    if (cupti_ && cupti_->duty_cycle() != nullptr) {
      timing::CuptiDutyCycle* duty = cupti_->release_duty_cycle();
      duty->settle_with(&settle_gpu);
      // The step scope switches only a real duty cycle's records.
      if (!duty->cycle().is_always()) g_cupti_duty.store(duty, std::memory_order_release);
      g_cupti_lender.store(duty, std::memory_order_release);
    } else if (cupti_) {
      g_cupti_unlendable.store(true, std::memory_order_release);
    }
    if (!cupti_ && config_.speaks_for_its_node())
      write_stderr_line("traceml: no GPU activity records (" + why + ")");
  }

  /// Under `traceml run`: a thread asleep in poll() on the launcher's pipes,
  /// which points them at /dev/null the moment the launcher is gone.
  void start_pipe_watch() {
    OrphanedOutputGuard guard(config_.launcher_pipes);
    if (!guard.watching()) return;
    int fds[2] = {-1, -1};
    if (::pipe2(fds, O_CLOEXEC) != 0) return;  // no watcher: output is still drained by the keeper
    pipe_stop_read_ = fds[0];
    pipe_stop_write_ = fds[1];
    pipe_watch_ = std::thread([guard, fd = pipe_stop_read_]() mutable {
      block_sigpipe_in_this_thread();
      pthread_setname_np(pthread_self(), "traceml-pipes");
      guard.watch(fd);
      if (!guard.watching())
        // Nobody reads the launcher's pipes any more: say so where it can
        // still be seen (the line itself goes to /dev/null when stderr was one).
        write_stderr_line(
            "traceml: warning: the launcher is gone; this rank's output is discarded");
    });
  }

  void stop_pipe_watch() {
    if (!pipe_watch_.joinable()) return;
    const char b = 0;
    if (::write(pipe_stop_write_, &b, 1) != 1) {
      pipe_watch_.detach();  // cannot wake it: it ends with the process
    } else {
      pipe_watch_.join();
    }
    ::close(pipe_stop_write_);
    ::close(pipe_stop_read_);
  }

  /// The program's explicit shutdown (traceml::shutdown()): everything
  /// recorded is sent now; the connection to a collector of protocol 4 stays
  /// open, heartbeats only, until finish() says how the program ended.
  /// Returns whether the runtime lingers so (else it is fully stopped).
  bool drain() {
    if (standalone_) {  // its in-process collector writes the summary now
      stop(std::nullopt);
      return false;
    }
    stop_recording();
    if (sender_) {
      sender_->drain(Clock::now() + kFlushBudget);
      say_drops();
    }
    if (config_.debug) print_debug();
    return true;
  }

  /// After drain(), at the program's exit.
  void finish(std::optional<int> exit_status) {
    if (sender_) {
      sender_->stop(Clock::now() + kFlushBudget, exit_status);
      say_drops();  // only what was lost since drain() said its count
    }
    stop_pipe_watch();
  }

  /// `exit_status`: how the program ended, when known (on_exit); the sender
  /// says it to the collector before its Bye.
  void stop(std::optional<int> exit_status) {
    stop_recording();
    const auto deadline = Clock::now() + kFlushBudget;
    if (sender_) {
      sender_->stop(deadline, exit_status);
      say_drops();
    }
    if (standalone_) standalone_->finish(deadline + kFlushBudget);
    if (config_.debug) print_debug();
    stop_pipe_watch();  // last: the flush above may take seconds
  }

  /// The sampler takes its last reading and ends.
  void stop_recording() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    if (sampler_.joinable()) sampler_.join();
  }

  /// The count, once: a warning mid-run said only that it began. Not after
  /// a refusal: its one line said why nothing more is sent.
  void say_drops() {
    const std::int64_t lost = sender_->records_dropped_total();
    if (lost > said_dropped_ && !refused_.load())
      warn(std::to_string(lost) + " telemetry record" + (lost == 1 ? " was" : "s were") +
           " dropped on this rank and counted; training was not affected");
    said_dropped_ = lost;
  }

  /// TRACEML_DEBUG=1 (runtime/debug_report.hpp), after the sender stopped.
  void print_debug() noexcept {
    try {
      std::optional<GpuClockDebug> gpu;
      if (GpuClock* clock = g_gpu_clock.load(std::memory_order_acquire))
        gpu = GpuClockDebug{clock->device(), clock->counters()};
      std::ifstream maps("/proc/self/maps");
      std::stringstream text;
      text << maps.rdbuf();
      std::vector<std::string> lines =
          debug_lines(gpu, cupti_.get(), cupti_why_, cuda_libraries_in_maps(text.str()));
      if (!gpu && !gpu_why_.empty()) lines.front() += " (" + gpu_why_ + ")";
      for (const std::string& line : lines)
        write_stderr_line("traceml: debug: rank " + std::to_string(config_.identity.global_rank) +
                          ": " + line);
    } catch (...) {  // a debug aid never costs the training anything
    }
  }

 private:
  void sample_loop() {
    ProcSampler sampler;
    const bool host = config_.speaks_for_its_node();
    // NVML (loaded at run time) gives the node's GPUs and, when the program
    // has no allocator hook, the process's GPU memory. Absent on CPU machines.
    std::unique_ptr<timing::NvmlSampler> nvml;
    try {
      if (const timing::NvmlApiLoad load = timing::load_nvml_api(); load.api)
        nvml = std::make_unique<timing::NvmlSampler>(*load.api);
    } catch (...) {
      nvml.reset();  // no NVML: samples without GPU figures
    }
    const auto period = std::chrono::duration<double>(config_.interval_sec);
    std::unique_lock<std::mutex> lock(mu_);
    for (;;) {
      const bool stop = cv_.wait_for(lock, period, [this] { return stopping_; });
      // One more reading at shutdown: a run shorter than the interval still
      // gets its process and system figures, and the last stretch is covered.
      lock.unlock();
      try {
        const double ts = timing::wall_seconds();
        model::ProcessSample process = sampler.sample_process(config_.identity.global_rank, ts);
        process.gpu = process_gpu_memory();
        if (!process.gpu && nvml) process.gpu = nvml_process_gpu(*nvml);
        samples_.push(std::move(process));
        if (host) {
          model::SystemSample system =
              sampler.sample_system(config_.identity.node_rank.value_or(0), ts);
          if (nvml) system.gpus = nvml->sample_gpus();
          samples_.push(std::move(system));
        }
      } catch (...) {
        // A /proc read that fails costs one sample, never the training.
      }
      lock.lock();
      if (stop) return;
    }
  }

  /// The process's GPU memory as NVML sees it (everything it holds on the
  /// GPU, CUDA context included: reported as reserved). The device is the one
  /// the GPU clock times, in CUDA's numbering, when known.
  static std::optional<model::ProcessGpu> nvml_process_gpu(timing::NvmlSampler& nvml) {
    std::optional<model::ProcessGpu> g = nvml.process_gpu(std::int64_t(getpid()));
    if (GpuClock* clock = g_gpu_clock.load(); g && clock != nullptr && clock->device())
      g->device = *clock->device();
    return g;
  }

  Config config_;
  timing::WallMapping wall_;
  SampleQueue samples_;
  std::unique_ptr<Standalone> standalone_;
  std::unique_ptr<CuptiStage> cupti_;       // outlives the sender, which uses it
  std::string cupti_why_ = "no GPU clock";  // why cupti_ is null, when it is
  std::string gpu_why_;                     // why there is no GPU clock, when there is none
  std::unique_ptr<Sender> sender_;
  std::atomic<bool> refused_{false};  // the collector refused this rank (sender thread sets it)
  std::int64_t said_dropped_ = 0;     // the count say_drops() last printed
  std::thread pipe_watch_;
  int pipe_stop_read_ = -1;
  int pipe_stop_write_ = -1;
  std::thread sampler_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
};

std::mutex g_lifecycle;        // init/shutdown only
Runtime* g_runtime = nullptr;  // between a successful init and shutdown
bool g_initialized = false;    // init ran (tracing on or off): later calls do nothing
bool g_in_forked_child = false;

/// After an explicit shutdown(): the runtime whose sender keeps the
/// collector's connection until the program's exit says how it ended.
Runtime* g_lingering = nullptr;

/// An explicit shutdown() (`exiting` false): everything recorded is sent and
/// the runtime lingers for the exit. At the process's exit (`exiting` true,
/// with the exit status where the C library gives it): the goodbye, and the
/// runtime ends.
void stop_runtime(std::optional<int> exit_status, bool exiting) {
  std::lock_guard<std::mutex> lock(g_lifecycle);
  try {
    if (Runtime* rt = g_runtime; rt != nullptr) {
      // A capture still open is closed (or given up) before the last send;
      // one made later for a request is made shut down.
      ProfileCapture* p = nullptr;
      {
        std::lock_guard<std::mutex> lk(g_profile_mu);
        g_profile_closed = true;
        p = g_profile.load(std::memory_order_acquire);
      }
      if (p != nullptr) p->at_shutdown(g_hot.last_step.load(std::memory_order_relaxed), !exiting);
      g_hot.state.store(kOff, std::memory_order_release);
      g_runtime = nullptr;
      if (!exiting) {
        if (rt->drain()) {
          g_lingering = rt;
          return;
        }
      } else {
        rt->stop(exit_status);
      }
      delete rt;  // its threads are joined; the registry stays for late scopes
    } else if (Runtime* lingering = g_lingering; exiting && lingering != nullptr) {
      g_lingering = nullptr;
      lingering->finish(exit_status);
      delete lingering;
    }
  } catch (...) {
    warn("could not finish sending telemetry");
  }
}

/// Registered with glibc's on_exit, which passes exit(3)'s status (atexit
/// does not): the parent sees its low 8 bits, and so does the collector.
[[maybe_unused]] void at_exit_with_status(int status, void* /*unused*/) {
  stop_runtime(status & 0377, true);
}

void at_exit() {
  stop_runtime(std::nullopt, true);
}

/// on_exit where the C library has it; else (or should it fail) atexit, and
/// the rank says no exit status.
void register_exit_handler() {
#if defined(__GLIBC__)
  if (::on_exit(at_exit_with_status, nullptr) == 0) return;
#endif
  std::atexit(at_exit);
}

void in_forked_child() {
  // A forked child has none of the parent's threads: it must not record into,
  // or try to stop, the parent's runtime.
  g_hot.state.store(kOff);
  g_hot.black_box = nullptr;  // shared with the parent: its journal, not the child's
  g_hot.where.store(&g_hot.position, std::memory_order_relaxed);
  g_in_forked_child = true;
  g_runtime = nullptr;
  g_lingering = nullptr;
}

}  // namespace
}  // namespace runtime

void init() {
  init(Options{});
}

void init(const Options& options) {
  using namespace runtime;
  std::lock_guard<std::mutex> lock(g_lifecycle);
  if (g_initialized || g_in_forked_child) return;
  g_initialized = true;
  try {
    Config config = resolve_config(options, process_env(), host_name());
    if (!config.problems.empty()) {
      std::string all;
      for (const auto& p : config.problems)
        all += (all.empty() ? "" : "; ") + p;
      warn("ignoring " + all);
    }
    if (!config.enabled) return;
    if (g_registry == nullptr) g_registry = new RecorderRegistry();
    g_hot.max_steps = config.max_steps.value_or(0);
    auto rt = std::make_unique<Runtime>(std::move(config));
    rt->start();
    g_runtime = rt.release();
    pthread_atfork(nullptr, nullptr, in_forked_child);
    register_exit_handler();
    g_hot.state.store(kRecording, std::memory_order_release);
  } catch (const std::exception& e) {
    warn(std::string("tracing is off: ") + e.what());
  } catch (...) {
    warn("tracing is off: unexpected error at init");
  }
}

void shutdown() {
  runtime::stop_runtime(std::nullopt, false);  // the exit status comes at the exit
}

bool is_recording() {
  return runtime::g_hot.state.load(std::memory_order_relaxed) == runtime::kRecording;
}

namespace detail {

std::int64_t scope_begin() noexcept {
  const std::int64_t start = runtime::hot_scope_begin(runtime::g_hot);
  if (start != 0)
    if (auto* g = runtime::gpu_thread(start)) g->builder.scope_begin(start);
  return start;
}

std::int64_t phase_begin(Phase phase) noexcept {
  const auto event = runtime::to_event(phase);
  const std::int64_t start = scope_begin();
  if (start != 0 && event) runtime::hot_position(runtime::g_hot, runtime::loop_phase_of(*event));
  return start;
}

std::int64_t fetch_begin() noexcept {
  const std::int64_t start = scope_begin();
  if (start != 0) runtime::hot_position(runtime::g_hot, model::LoopPhase::InputWait);
  return start;
}

void phase_end(Phase phase, std::int64_t start) noexcept {
  if (start == 0) return;
  // A value outside the enum (Phase(9) from a cast) would index past the
  // recorder's arrays on the training thread: such a phase is not timed.
  const auto event = runtime::to_event(phase);
  if (!event) return;
  if (auto* r = runtime::recorder()) runtime::hot_add(runtime::g_hot, *r, *event, start);
  if (auto* g = runtime::t_gpu) g->builder.scope_end(*event, start);
}

void fetch_end(std::int64_t start) noexcept {
  if (start == 0) return;
  if (auto* r = runtime::recorder()) runtime::hot_fetch(runtime::g_hot, *r, start);
  if (auto* g = runtime::t_gpu) g->builder.scope_end(model::Event::InputWait, start);
}

std::int64_t step_begin() noexcept {
  auto* profile = runtime::g_profile.load(std::memory_order_acquire);
  if (runtime::g_hot.state.load(std::memory_order_relaxed) != runtime::kRecording) {
    if (profile != nullptr)
      profile->at_untraced_step_begin(runtime::g_hot.last_step.load(std::memory_order_relaxed) + 1);
    return 0;
  }
  auto* r = runtime::recorder();
  if (r == nullptr) return 0;
  const bool outermost = r->enter_step();
  if (outermost) {
    runtime::hot_position(runtime::g_hot, model::LoopPhase::Step);
    // Before the step's clock starts: a switch of CUPTI's records belongs to
    // no step. The id is the one hot_step_end will give it (one thread).
    if (auto* duty = runtime::g_cupti_duty.load(std::memory_order_acquire))
      duty->at_step_begin(runtime::g_hot.last_step.load(std::memory_order_relaxed) + 1);
    // The profiler too goes on before the step's clock starts.
    if (profile != nullptr)
      profile->at_step_begin(runtime::g_hot.last_step.load(std::memory_order_relaxed) + 1);
  }
  const std::int64_t start = timing::now_ticks();
  if (outermost)
    if (auto* g = runtime::gpu_thread(start)) g->builder.scope_begin(start);
  return start;
}

void step_end(std::int64_t start, bool failed) noexcept {
  using runtime::StepEnd;
  if (start == 0) return;
  auto* r = runtime::recorder();
  if (r == nullptr) return;
  runtime::GpuThread* g = runtime::t_gpu;
  const StepEnd how =
      runtime::hot_step_end(runtime::g_hot, *r, start, failed, [&](runtime::RawStep& s) noexcept {
        if (g != nullptr) {
          g->builder.scope_end(model::Event::TracedStepTime, start);
          runtime::g_gpu_clock.load(std::memory_order_relaxed)
              ->publish(*g, s.step, g->builder.finish_step());
        }
        s.memory = runtime::read_step_memory();
      });
  if (r->take_filling()) runtime::wake_sender();  // the ring is half full: drain it now
  // After the step's clock stopped: the profiler's switch-off is no step's.
  if (how == StepEnd::Published)
    if (auto* profile = runtime::g_profile.load(std::memory_order_acquire))
      profile->at_step_end(runtime::g_hot.last_step.load(std::memory_order_relaxed));
  if (how == StepEnd::Dropped && g != nullptr) {
    g->builder.scope_end(model::Event::TracedStepTime, start);  // closes the step's scope
    g->builder.discard_step();
  }
}

void set_gpu_hooks(GpuMemoryReader memory, CurrentCudaStream stream) noexcept {
  runtime::g_memory_reader.store(memory, std::memory_order_release);
  runtime::g_current_stream.store(stream, std::memory_order_release);
}

}  // namespace detail
}  // namespace traceml
