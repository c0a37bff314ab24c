// LibTorch's operator profiler on the steps `--profile-steps A:B` chose
// (DECISIONS 18, docs/profiling.md): the training thread switches it on as
// step A begins and off as step B ends, through the hooks traceml/torch.hpp
// installed (include/traceml/hooks.hpp); the sender reads the capture off
// that thread and sends it to the collector in chunks (model::ProfileChunk),
// which writes profiles/rank<R>_steps<A>-<B>.json.
//
// Its cost when no profile is asked: none (the runtime makes no capture,
// and the step scope loads one null pointer). While armed, one relaxed load
// per step edge.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <traceml/hooks.hpp>

#include "model/telemetry.hpp"
#include "timing/clock.hpp"

namespace traceml::timing {
class CuptiDutyCycle;
}  // namespace traceml::timing

namespace traceml::runtime {

/// The profiler hooks the program installed (all null: none).
detail::ProfilerHooks profiler_hooks() noexcept;

/// Who holds CUPTI in this process, asked as each capture begins: the duty
/// cycle of traceml's own GPU activity records, which lends CUPTI to
/// LibTorch's profiler (Kineto registers its own callbacks, process-wide)
/// for the capture and takes it back after; null when traceml records
/// nothing with CUPTI, or with `refusal` set when its records are on and
/// cannot be lent (no capture may then run).
using CuptiLender = timing::CuptiDutyCycle* (*)(std::string& refusal);

/// Steps first..last of one rank, both included.
struct ProfileRange {
  std::int64_t first = 1;
  std::int64_t last = 1;
};

class ProfileCapture {
 public:
  /// `warn` prints one line (the runtime's warning); `wall` maps the hot
  /// path's clock to unix time, as the steps' timestamps are (copied: the
  /// capture outlives the runtime). `cupti`: who holds CUPTI (null: nobody
  /// of traceml's).
  ProfileCapture(ProfileRange range, int global_rank, const timing::WallMapping& wall,
                 void (*warn)(const std::string&), CuptiLender cupti = nullptr);
  /// A capture with nothing armed: it waits for the collector's requests
  /// (request()).
  ProfileCapture(int global_rank, const timing::WallMapping& wall, void (*warn)(const std::string&),
                 CuptiLender cupti = nullptr);
  /// Frees the captures never sent (the runtime's lives until the process ends).
  ~ProfileCapture() { discard(); }
  ProfileCapture(const ProfileCapture&) = delete;
  ProfileCapture& operator=(const ProfileCapture&) = delete;

  // ---- the training thread ----
  /// Step `next` is about to begin (traceml records it): at step A, the
  /// profiler goes on.
  void at_step_begin(std::int64_t next) noexcept {
    const int s = state_.load(std::memory_order_acquire);
    if ((s == kArmed && next >= range_.first) || (s == kCapturing && stop_asked_.load()))
      begin_or_stop(next);
  }
  /// A step begins that traceml does not record (it was shut down): a
  /// capture that a shutdown on another thread asked to stop is switched
  /// off here, on its own thread; `next` as for at_step_begin.
  void at_untraced_step_begin(std::int64_t next) noexcept {
    if (stop_asked_.load(std::memory_order_acquire) &&
        state_.load(std::memory_order_acquire) == kCapturing)
      begin_or_stop(next);
  }
  /// Step `done` has ended (kept): at step B, the profiler goes off.
  void at_step_end(std::int64_t done) noexcept {
    if (state_.load(std::memory_order_acquire) == kCapturing && done >= last_) end(done);
  }
  /// The program shuts traceml down: a capture still armed is said never to
  /// have begun; one open is stopped here when this is the capturing thread
  /// and `may_stop` (an explicit shutdown; at the process's exit LibTorch
  /// may be going away), else its thread switches the profiler off at its
  /// next step edge and the capture is said given up. `steps_done`: the
  /// last step that ended.
  void at_shutdown(std::int64_t steps_done, bool may_stop) noexcept;

  // ---- the sender thread ----
  /// The collector's request (model::ProfileRequest): `steps` steps from
  /// step `first`, or (0) from the next step to begin. Armed when no capture
  /// is armed or running and traceml still records; otherwise left, and
  /// said in one line. Returns whether it was armed.
  bool request(std::int64_t first, std::int64_t steps) noexcept;
  /// The next capture that began (its profiler on), as the steps it means
  /// to cover: the rank tells the collector (protocol 8) before its chunks,
  /// so that a profile lost with the rank is known lost and its steps still
  /// left out of the analysis. False when none waits.
  bool next_began(model::ProfiledSteps& out);
  /// The next chunk of a finished capture; false when none waits.
  bool next_chunk(model::ProfileChunk& out);
  /// A capture waits to be sent (finished, not all of it taken yet).
  [[nodiscard]] bool waiting() const;
  /// A capture is armed: its first step has not begun yet.
  [[nodiscard]] bool armed() const { return state_.load(std::memory_order_acquire) == kArmed; }
  /// Frees every finished capture unsent (one that cannot go anywhere).
  void discard();
  /// The captures that cannot be sent, kept beside the rank instead:
  /// every finished one not begun to be sent is written as the collector
  /// would, to <run_dir>/profiles/rank<R>_steps<A>-<B>.json (one begun is
  /// the collector's, which says it was cut short), and the rest freed.
  /// Returns one line per capture: where it went, or why it could not.
  std::vector<std::string> keep(const std::string& run_dir);
  /// Where the profiler's own trace of each capture goes (sender thread,
  /// before the first chunk): <run_dir>/profiles/rank<R>_steps<A>-<B>.kineto.json
  /// beside the rank, when the hooks can save one (ProfilerHooks::save);
  /// empty: none kept.
  void keep_native_traces_in(std::string run_dir) { native_dir_ = std::move(run_dir); }
  /// The largest file keep() writes (the collector's bound on one profile).
  static constexpr std::int64_t kMaxKeptProfileBytes = std::int64_t{256} << 20;
  /// Prints one warning line, as the runtime does.
  void say(const std::string& line) const noexcept {
    if (warn_ != nullptr) warn_(line);
  }
  /// Where notes go (what went right, worth a line: where LibTorch's own
  /// trace was kept): "traceml: <line>" on stderr unless set (tests).
  void note_with(void (*note)(const std::string&)) noexcept { note_ = note; }

 private:
  /// kStarting and kStopping: the thread that moved the capture there owns
  /// it until it publishes the next state.
  /// kIdle: nothing armed (a capture that waits for requests).
  enum State : int { kArmed, kStarting, kCapturing, kStopping, kDone, kIdle };
  /// A finished capture as the training thread leaves it.
  struct Finished {
    std::int64_t first = 0;
    std::int64_t last = 0;
    void* capture = nullptr;      ///< the hooks' (read frees it)
    detail::ProfilerHooks hooks;  ///< those that made it
    std::int64_t offset_us = 0;   ///< traceml's unix time less the profiler's, at its start
    std::string error;            ///< why it failed or is partial
  };
  void begin_or_stop(std::int64_t next) noexcept;
  void begin(std::int64_t next) noexcept;
  void end(std::int64_t done) noexcept;
  /// Switches the profiler off (the capturing thread, from kCapturing):
  /// the capture ends at step `last`, with `error` if any.
  void stop(std::int64_t last, std::string error) noexcept;
  void finish(Finished f) noexcept;
  /// Says traceml's CUPTI records stay off after the capture of steps
  /// first..last (`why`: ", which did not stop", or empty).
  void say_cupti_not_back(std::int64_t first, std::int64_t last, const char* why) const noexcept;
  /// Reads the oldest finished capture into ops_ (sender thread).
  void read_next();
  /// Reads `f`'s ops (freeing its capture) into `ops`, sorted by start;
  /// returns the ops left out.
  static std::int64_t read_ops(Finished& f, std::vector<model::ProfileOp>& ops);
  /// Writes the profiler's own trace of `f` into `run_dir`'s profiles/
  /// (before read_ops frees it), when the hooks can; said once, where it
  /// went, the first time.
  void save_native(const Finished& f, const std::string& run_dir);
  std::string native_dir_;      ///< the sender's: keep_native_traces_in()
  bool native_said_ = false;    ///< the sender's: the first kept trace was said
  bool native_failed_ = false;  ///< the sender's: the hooks could not save one

  /// Written by whoever arms the capture (the constructor, request() under
  /// arm_mu_) before kArmed is published; read only after it is seen.
  ProfileRange range_;
  /// The armed range starts at the next step to begin (a request without a
  /// first step): begin() places it, range_.last - range_.first + 1 steps.
  bool from_next_ = false;
  /// request() and at_shutdown(): a request arms the capture before the
  /// shutdown (which then says it never began) or finds it shut down.
  std::mutex arm_mu_;
  static constexpr int kMaxSaidLeft = 3;  ///< lines a collector's requests may make a rank say
  int said_left_ = 0;                     ///< under arm_mu_
  bool failed_after_end_ = false;         ///< under arm_mu_: the one failed profile kept after it
  ProfileRange last_fixed_{0, 0};         ///< under arm_mu_: the last request with a first step
  int rank_;
  timing::WallMapping wall_;
  void (*warn_)(const std::string&);
  void (*note_)(const std::string&) = nullptr;  ///< note_with(); null: stderr
  CuptiLender cupti_;
  std::atomic<int> state_{kArmed};
  std::atomic<bool> stop_asked_{false};
  std::atomic<bool> shut_down_{false};
  // Written before kCapturing is published (release), read after it is seen.
  std::thread::id thread_{};
  std::int64_t first_ = 0;
  std::int64_t last_ = 0;  ///< the capture's last step, as begin() placed it
  std::int64_t offset_us_ = 0;
  detail::ProfilerHooks hooks_;
  timing::CuptiDutyCycle* lent_from_ = nullptr;  ///< traceml's CUPTI, lent for this capture

  mutable std::mutex mu_;
  std::deque<Finished> finished_;           // guarded by mu_
  std::deque<model::ProfiledSteps> began_;  // guarded by mu_: not yet told

  // The sender's: the capture being sent.
  std::optional<Finished> sending_;
  std::vector<model::ProfileOp> ops_;
  std::size_t next_op_ = 0;
  std::int64_t next_chunk_ = 0;
  std::int64_t ops_cut_ = 0;
};

}  // namespace traceml::runtime
