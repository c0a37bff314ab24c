#include "runtime/profile_capture.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <utility>

#include "model/limits.hpp"
#include "model/record_checks.hpp"
#include "model/text.hpp"
#include "report/atomic_file.hpp"
#include "report/profile_trace.hpp"
#include "runtime/pipe_safety.hpp"
#include "timing/cupti_duty_cycle.hpp"

namespace traceml {
namespace runtime {
namespace {

std::mutex g_hooks_mu;
detail::ProfilerHooks g_hooks;  // guarded by g_hooks_mu

std::int64_t realtime_us() noexcept {
  return std::chrono::duration_cast<std::chrono::microseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// What the sink gathers: ops moved onto traceml's clock, at most kMaxProfileOps.
struct Gather {
  std::vector<model::ProfileOp>* ops;
  std::int64_t offset_us;
  std::int64_t cut = 0;
};

void gather(void* context, const detail::ProfiledOp& op) noexcept {
  auto* g = static_cast<Gather*>(context);
  try {
    if (std::int64_t(g->ops->size()) >= model::kMaxProfileOps) {
      ++g->cut;
      return;
    }
    model::ProfileOp o;
    o.name = model::sanitize_utf8(std::string(op.name), model::kMaxTextBytes);
    o.start_us = std::max<std::int64_t>(0, op.start_us + g->offset_us);
    o.duration_us = std::max<std::int64_t>(0, op.duration_us);
    o.thread =
        int(std::min<std::uint64_t>(op.thread, std::uint64_t(std::numeric_limits<int>::max())));
    if (op.sequence >= 0) o.sequence = op.sequence;
    o.gpu = op.gpu ? 1 : 0;
    o.shapes = model::sanitize_utf8(std::string(op.shapes), model::kMaxTextBytes);
    g->ops->push_back(std::move(o));
  } catch (...) {
    ++g->cut;  // out of memory: this op is left out, and counted
  }
}

}  // namespace

detail::ProfilerHooks profiler_hooks() noexcept {
  std::lock_guard<std::mutex> lk(g_hooks_mu);
  return g_hooks;
}

ProfileCapture::ProfileCapture(ProfileRange range, int global_rank, const timing::WallMapping& wall,
                               void (*warn)(const std::string&), CuptiLender cupti)
    : range_(range), rank_(global_rank), wall_(wall), warn_(warn), cupti_(cupti) {}

ProfileCapture::ProfileCapture(int global_rank, const timing::WallMapping& wall,
                               void (*warn)(const std::string&), CuptiLender cupti)
    : rank_(global_rank), wall_(wall), warn_(warn), cupti_(cupti) {
  state_.store(kIdle, std::memory_order_relaxed);
}

bool ProfileCapture::request(std::int64_t first, std::int64_t steps) noexcept {
  try {
    const std::string what =
        first > 0 ? "steps " + std::to_string(first) + " to " + std::to_string(first + steps - 1)
                  : "the next " + std::to_string(steps) + " steps";
    // What a collector may make a rank say or keep is bounded: a few lines,
    // one failed profile.
    const auto say_left = [&](const std::string& why) {
      if (said_left_ < kMaxSaidLeft) {
        ++said_left_;
        say("the collector asked for a profile of " + what + " " + why);
      }
    };
    std::lock_guard<std::mutex> arming(arm_mu_);
    if (shut_down_.load(std::memory_order_acquire)) {
      // Nothing more is recorded: said, and (steps the user chose) kept as
      // a failed profile, so that the run's summary says it too.
      say_left("after training ended");
      if (first > 0 && !failed_after_end_) {
        failed_after_end_ = true;
        Finished f;
        f.first = first;
        f.last = first + steps - 1;
        f.error = "the collector's request came after training ended";
        std::lock_guard<std::mutex> lk(mu_);
        finished_.push_back(std::move(f));
      }
      return false;
    }
    const int s = state_.load(std::memory_order_acquire);
    // The same steps asked again (the collector's request repeated on a new
    // connection): armed, or captured, already.
    if (first > 0 && last_fixed_.first == first && last_fixed_.last == first + steps - 1)
      return true;
    if (steps < 1 || (s != kIdle && s != kDone)) {
      say_left(steps < 1 ? "of no steps: left"
                         : "while another capture is armed or running: left; training continues");
      return false;
    }
    // Nobody reads the range in kIdle or kDone: it is published with kArmed.
    from_next_ = first <= 0;
    range_.first = from_next_ ? 1 : first;
    range_.last = range_.first + steps - 1;
    if (!from_next_) last_fixed_ = range_;
    stop_asked_.store(false, std::memory_order_relaxed);
    int expected = s;
    return state_.compare_exchange_strong(expected, kArmed, std::memory_order_acq_rel);
  } catch (...) {
    return false;  // out of memory for the message: nothing armed
  }
}

void ProfileCapture::begin_or_stop(std::int64_t next) noexcept {
  const int s = state_.load(std::memory_order_acquire);
  if (s == kArmed) {
    begin(next);
  } else if (s == kCapturing && std::this_thread::get_id() == thread_) {
    int capturing = kCapturing;
    if (state_.compare_exchange_strong(capturing, kStopping, std::memory_order_acq_rel))
      stop(std::max(first_, next - 1),
           "traceml was shut down during the capture (at step " + std::to_string(next - 1) + ")");
  }
}

void ProfileCapture::begin(std::int64_t next) noexcept {
  int armed = kArmed;
  if (!state_.compare_exchange_strong(armed, kStarting, std::memory_order_acq_rel)) return;
  // The range as armed (a request for the next steps starts at this one);
  // range_ itself stays as armed: another thread may still read it.
  const std::int64_t first = from_next_ ? next : range_.first;
  const std::int64_t last = first + (range_.last - range_.first);
  Finished failed;
  failed.first = first;
  failed.last = last;
  const detail::ProfilerHooks hooks = profiler_hooks();
  std::string refusal;
  timing::CuptiDutyCycle* cupti = nullptr;
  try {
    cupti = cupti_ != nullptr ? cupti_(refusal) : nullptr;
  } catch (...) {
    refusal = "out of memory";
  }
  if (next > last) {
    failed.error = "no step of the range began while traceml recorded";
  } else if (!refusal.empty()) {
    failed.error = refusal;
  } else if (hooks.start == nullptr || hooks.stop == nullptr || hooks.read == nullptr) {
    failed.error =
        "the program never installed LibTorch's profiler hooks (include <traceml/torch.hpp> "
        "in the program and link traceml::torch)";
  }
  // traceml's own CUPTI records go off for the capture: LibTorch's profiler
  // takes CUPTI's process-wide callbacks (with a GPU).
  if (failed.error.empty() && cupti != nullptr && !cupti->lend())
    failed.error =
        "traceml's CUPTI records could not be switched off for LibTorch's profiler; set "
        "TRACEML_CUPTI=0 on the ranks to profile";
  if (!failed.error.empty()) {
    finish(std::move(failed));
    return;
  }
  // traceml's timeline against the profiler's clock (the unix clock), read
  // back to back: every op is moved by the difference.
  const std::int64_t traceml_us = std::llround(wall_.to_unix(timing::now_ns()) * 1e6);
  offset_us_ = traceml_us - realtime_us();
  if (const char* why = hooks.start()) {
    failed.error = std::string("LibTorch's profiler did not start: ") + why;
    if (cupti != nullptr && !cupti->take_back(next)) say_cupti_not_back(first, last, "");
    finish(std::move(failed));
    return;
  }
  lent_from_ = cupti;
  thread_ = std::this_thread::get_id();
  first_ = next;
  last_ = last;
  hooks_ = hooks;
  try {
    std::lock_guard<std::mutex> lk(mu_);
    began_.push_back(model::ProfiledSteps{rank_, next, last});
  } catch (...) {
    // Out of memory: the collector hears of these steps with their profile.
  }
  state_.store(kCapturing, std::memory_order_release);
}

bool ProfileCapture::next_began(model::ProfiledSteps& out) {
  std::lock_guard<std::mutex> lk(mu_);
  if (began_.empty()) return false;
  out = began_.front();
  began_.pop_front();
  return true;
}

void ProfileCapture::end(std::int64_t done) noexcept {
  if (std::this_thread::get_id() != thread_) return;  // another thread's step
  int capturing = kCapturing;
  if (!state_.compare_exchange_strong(capturing, kStopping, std::memory_order_acq_rel)) return;
  // A step past B ends it when B itself was not kept (left by an exception):
  // the capture then covers up to that step, and its name says so.
  stop(done, {});
}

void ProfileCapture::stop(std::int64_t last, std::string error) noexcept {
  Finished f;
  f.first = first_;
  f.last = std::max(first_, last);
  f.offset_us = offset_us_;
  f.hooks = hooks_;
  const char* stop_failed = hooks_.stop(&f.capture);
  if (stop_failed != nullptr)
    f.error = std::string("LibTorch's profiler did not stop: ") + stop_failed;
  else if (!error.empty())
    f.error = std::move(error);
  // CUPTI back to traceml's records, from the next step on; not from a
  // profiler that may still hold it (its buffers would come back to
  // traceml's callbacks).
  if (lent_from_ != nullptr && (stop_failed != nullptr || !lent_from_->take_back(f.last + 1)))
    say_cupti_not_back(f.first, f.last, stop_failed != nullptr ? ", which did not stop" : "");
  lent_from_ = nullptr;
  finish(std::move(f));
}

void ProfileCapture::say_cupti_not_back(std::int64_t first, std::int64_t last,
                                        const char* why) const noexcept {
  try {
    say("traceml's CUPTI records did not come back after LibTorch's profiler (steps " +
        std::to_string(first) + " to " + std::to_string(last) + why +
        "): no GPU activity records until CUPTI takes them back (at a later capture's end, or "
        "a duty cycle's next window); training continues");
  } catch (...) {
  }
}

void ProfileCapture::at_shutdown(std::int64_t steps_done, bool may_stop) noexcept {
  {
    // With request(): a request either armed the capture before this (said
    // never begun, below) or sees it shut down.
    std::lock_guard<std::mutex> arming(arm_mu_);
    shut_down_.store(true, std::memory_order_release);
    int idle = kIdle;
    if (state_.compare_exchange_strong(idle, kDone, std::memory_order_acq_rel)) return;
    int armed = kArmed;
    if (state_.compare_exchange_strong(armed, kDone, std::memory_order_acq_rel)) {
      Finished f;
      f.first = from_next_ ? steps_done + 1 : range_.first;
      f.last = f.first + (range_.last - range_.first);
      f.error = "training ended after step " + std::to_string(steps_done) + ", before step " +
                std::to_string(f.first);
      finish(std::move(f));
      return;
    }
  }
  if (state_.load(std::memory_order_acquire) != kCapturing) return;
  if (may_stop && std::this_thread::get_id() == thread_) {
    int capturing = kCapturing;
    if (state_.compare_exchange_strong(capturing, kStopping, std::memory_order_acq_rel))
      stop(steps_done, {});
    return;
  }
  // Not this thread's profiler to switch off (LibTorch's is per thread), or
  // the process is exiting: its thread does it at its next step edge.
  stop_asked_.store(true);
  say("the profile of steps " + std::to_string(first_) + " to " + std::to_string(last_) +
      " is given up: training ended inside it (after step " + std::to_string(steps_done) +
      ") where traceml could not switch LibTorch's profiler off");
}

void ProfileCapture::finish(Finished f) noexcept {
  try {
    if (!f.error.empty() && f.capture == nullptr && warn_ != nullptr)
      warn_("no profile of steps " + std::to_string(f.first) + " to " + std::to_string(f.last) +
            ": " + f.error + "; training continues");
    std::lock_guard<std::mutex> lk(mu_);
    finished_.push_back(std::move(f));
  } catch (...) {
    // Out of memory: the capture is lost (its ops with it).
    if (f.capture != nullptr && f.hooks.read != nullptr)
      f.hooks.read(
          f.capture, [](void*, const detail::ProfiledOp&) noexcept {}, nullptr);
  }
  state_.store(kDone, std::memory_order_release);
}

void ProfileCapture::discard() {
  std::deque<Finished> all;
  {
    std::lock_guard<std::mutex> lk(mu_);
    all.swap(finished_);
  }
  if (sending_) all.push_back(std::move(*sending_));
  sending_.reset();
  ops_.clear();
  for (Finished& f : all)
    if (f.capture != nullptr && f.hooks.read != nullptr)
      f.hooks.read(
          f.capture, [](void*, const detail::ProfiledOp&) noexcept {}, nullptr);
}

bool ProfileCapture::waiting() const {
  std::lock_guard<std::mutex> lk(mu_);
  return !finished_.empty() || sending_.has_value();
}

void ProfileCapture::read_next() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (finished_.empty()) return;
    sending_ = std::move(finished_.front());
    finished_.pop_front();
  }
  ops_.clear();
  next_op_ = 0;
  next_chunk_ = 0;
  save_native(*sending_, native_dir_);
  ops_cut_ = read_ops(*sending_, ops_);
}

void ProfileCapture::save_native(const Finished& f, const std::string& run_dir) {
  if (f.capture == nullptr || f.hooks.save == nullptr || run_dir.empty() || native_failed_) return;
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path dir = fs::path(run_dir) / "profiles";
  const bool made = fs::create_directories(dir, ec);
  if (ec) return;
  const fs::path file = dir / report::native_profile_file_name(rank_, f.first, f.last);
  const fs::path partial = dir / ("." + file.filename().string() + ".partial");
  // Written under a hidden name, then named: never half a trace under its
  // name. A LibTorch without Kineto (Debian's 1.13) cannot save one: there
  // is then no such file, and nothing is said (the profile itself is whole).
  if (f.hooks.save(f.capture, partial.c_str()) != nullptr || !fs::is_regular_file(partial, ec)) {
    fs::remove(partial, ec);
    if (made) fs::remove(dir, ec);  // only when empty: no directory of nothing
    native_failed_ = true;          // the same LibTorch will not save the next one either
    return;
  }
  fs::rename(partial, file, ec);
  if (ec) {
    fs::remove(partial, ec);
    return;
  }
  if (!native_said_) {
    // A note, not a warning: nothing went wrong. Said once a rank, since on
    // a node other than the collector's only the rank can say where it is.
    native_said_ = true;
    const std::string line = "LibTorch's own trace of steps " + std::to_string(f.first) + " to " +
                             std::to_string(f.last) + ": " + file.string() +
                             " (open it in ui.perfetto.dev; it has the GPU's streams where the "
                             "rank ran on a GPU)";
    if (note_ != nullptr)
      note_(line);
    else
      write_stderr_line("traceml: " + line);
  }
}

std::int64_t ProfileCapture::read_ops(Finished& f, std::vector<model::ProfileOp>& ops) {
  if (f.capture == nullptr || f.hooks.read == nullptr) return 0;
  Gather g{&ops, f.offset_us};
  f.hooks.read(f.capture, &gather, &g);
  f.capture = nullptr;  // freed by read
  // In time order: the profiler lists an op when it ends.
  std::stable_sort(
      ops.begin(), ops.end(),
      [](const model::ProfileOp& a, const model::ProfileOp& b) { return a.start_us < b.start_us; });
  return g.cut;
}

std::vector<std::string> ProfileCapture::keep(const std::string& run_dir) {
  std::deque<Finished> unsent;
  {
    std::lock_guard<std::mutex> lk(mu_);
    unsent.swap(finished_);
  }
  std::vector<std::string> lines;
  for (Finished& f : unsent) {
    const std::string what =
        "profile of steps " + std::to_string(f.first) + " to " + std::to_string(f.last);
    try {
      std::vector<model::ProfileOp> ops;
      save_native(f, run_dir);
      const std::int64_t cut = read_ops(f, ops);
      report::ProfileTraceWriter w(run_dir, rank_, f.first, f.last, kMaxKeptProfileBytes);
      for (const model::ProfileOp& op : ops)
        w.add(op);
      const report::ProfileFileInfo info = w.finish(cut, f.error);
      lines.push_back("the " + what + " is kept beside this rank: " +
                      (std::filesystem::path(run_dir) / info.path).string());
    } catch (const std::exception& e) {
      lines.push_back("the " + what + " is lost: " + e.what());
    }
  }
  discard();  // the one begun to be sent, if any
  return lines;
}

bool ProfileCapture::next_chunk(model::ProfileChunk& out) {
  if (!sending_) read_next();
  if (!sending_) return false;
  out = model::ProfileChunk{};
  out.global_rank = rank_;
  out.first_step = sending_->first;
  out.last_step = sending_->last;
  out.chunk = next_chunk_++;
  const std::size_t n =
      std::min<std::size_t>(ops_.size() - next_op_, std::size_t(model::kMaxProfileChunkOps));
  out.ops.assign(std::make_move_iterator(ops_.begin() + std::ptrdiff_t(next_op_)),
                 std::make_move_iterator(ops_.begin() + std::ptrdiff_t(next_op_ + n)));
  next_op_ += n;
  if (next_op_ == ops_.size()) {
    out.last = 1;
    if (ops_cut_ > 0) out.ops_cut = ops_cut_;
    out.error = sending_->error;
    sending_.reset();
    ops_.clear();
    ops_.shrink_to_fit();
  }
  return true;
}

}  // namespace runtime

namespace detail {

void set_profiler_hooks(const ProfilerHooks& hooks) noexcept {
  std::lock_guard<std::mutex> lk(runtime::g_hooks_mu);
  runtime::g_hooks = hooks;
}

}  // namespace detail
}  // namespace traceml
