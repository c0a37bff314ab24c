#include "store/black_box.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <new>

namespace traceml::store {

namespace {

/// The memory file's name, as /proc/PID/fd/N shows it ("/memfd:NAME").
constexpr const char* kMemfdName = "traceml-black-box";

std::string errno_text() {
  return std::strerror(errno);
}

/// The clock the sender last wrote: ticks to now_ns() nanoseconds.
struct TickClock {
  bool tsc = false;
  std::int64_t anchor_ticks = 0;
  std::int64_t anchor_ns = 0;
  double ns_per_tick = 1.0;

  // In double: the region is another process's memory, and a value it
  // holds must not overflow an integer here (a bad one is refused later by
  // the record's check).
  [[nodiscard]] double at(std::int64_t ticks) const {
    if (!tsc) return double(ticks);
    return double(anchor_ns) + (double(ticks) - double(anchor_ticks)) * ns_per_tick;
  }
  [[nodiscard]] double span(std::int64_t ticks) const {
    return tsc ? double(ticks) * ns_per_tick : double(ticks);
  }
};

TickClock read_clock(const model::BlackBoxHeader& h) {
  TickClock c;
  // A sequence lock: a writer that died half way leaves an odd sequence,
  // and the fields are then read as they are (the rate is still right).
  for (int attempt = 0; attempt < 100; ++attempt) {
    const std::uint32_t before = h.clock_sequence.load(std::memory_order_acquire);
    c.tsc = h.tsc.load(std::memory_order_relaxed) != 0;
    c.anchor_ticks = h.anchor_ticks.load(std::memory_order_relaxed);
    c.anchor_ns = h.anchor_ns.load(std::memory_order_relaxed);
    c.ns_per_tick = h.ns_per_tick.load(std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before % 2 == 0 && h.clock_sequence.load(std::memory_order_relaxed) == before) break;
  }
  if (!(c.ns_per_tick > 0.0) || !std::isfinite(c.ns_per_tick)) c.ns_per_tick = 1.0;
  return c;
}

model::StepRecord to_record(const model::BlackBoxStep& s, int rank, const TickClock& clock,
                            double wall_offset_s) {
  return model::cpu_step_record(
      rank, s.step, wall_offset_s + clock.at(s.end_ticks) * 1e-9, s.thread, s.mask, s.begin_mask,
      [&](std::size_t e) { return std::max(clock.span(s.ticks[e]), 0.0) * 1e-6; },
      [&](std::size_t e) { return clock.span(s.begin_ticks[e]) * 1e-6; });
}

}  // namespace

std::int64_t BlackBoxReading::steps_completed() const {
  constexpr std::int64_t kMost = std::int64_t{1} << 62;
  std::int64_t done = std::max(steps_done, last_step);
  for (const model::StepRecord& s : steps)
    done = std::max(done, s.step);
  return std::clamp<std::int64_t>(done, 0, kMost);
}

BlackBoxReading read_black_box(const model::BlackBoxRegion& region, bool with_steps) {
  const model::BlackBoxHeader& h = region.header;
  BlackBoxReading out;
  out.global_rank = h.global_rank;
  out.attached = h.attached.load(std::memory_order_acquire) == 1;
  out.phase = model::LoopPhase(
      std::min<std::uint8_t>(h.phase.load(std::memory_order_relaxed), model::kMaxLoopPhase));
  out.steps_done = h.steps_done.load(std::memory_order_relaxed);
  out.position_ts = h.position_ts.load(std::memory_order_relaxed);
  if (!out.attached) return out;
  out.pid = h.pid.load(std::memory_order_relaxed);
  out.stream = h.stream.load(std::memory_order_relaxed);
  const double wall = h.wall_offset_s.load(std::memory_order_relaxed);
  const TickClock clock = read_clock(h);
  const std::uint64_t next = h.next.load(std::memory_order_acquire);
  out.journaled = next;
  // The last journaled steps' ids alone (for steps_completed): the last
  // slot, or the one before when a death tore the last (a few slots, not
  // the journal).
  for (std::uint64_t i = next; i > 0 && next - i < 2 && out.last_step == 0; --i) {
    const model::BlackBoxSlot& slot = region.slots[(i - 1) % model::kBlackBoxSlots];
    if (slot.sequence.load(std::memory_order_acquire) != i) continue;
    const std::int64_t step = slot.step.step;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.sequence.load(std::memory_order_relaxed) == i) out.last_step = step;
  }
  if (!with_steps) return out;
  const std::uint64_t first = next > model::kBlackBoxSlots ? next - model::kBlackBoxSlots : 0;
  out.steps.reserve(next - first);
  for (std::uint64_t i = first; i < next; ++i) {
    const model::BlackBoxSlot& slot = region.slots[i % model::kBlackBoxSlots];
    if (slot.sequence.load(std::memory_order_acquire) != i + 1) continue;
    const model::BlackBoxStep s = slot.step;
    std::atomic_thread_fence(std::memory_order_acquire);
    if (slot.sequence.load(std::memory_order_relaxed) != i + 1) continue;  // overwritten meanwhile
    out.steps.push_back(to_record(s, out.global_rank, clock, wall));
    if (s.has_memory != 0) {
      model::StepMemoryRecord m;
      m.global_rank = out.global_rank;
      m.step = s.step;
      m.device = "cuda:" + std::to_string(s.memory_device);
      m.peak_allocated_bytes = s.peak_allocated_bytes;
      m.peak_reserved_bytes = s.peak_reserved_bytes;
      out.memory.push_back(std::move(m));
    }
  }
  return out;
}

std::unique_ptr<BlackBox> BlackBox::create(int global_rank, std::string& why) {
  const int made = ::memfd_create(kMemfdName, MFD_CLOEXEC | MFD_ALLOW_SEALING);
  if (made < 0) {
    why = "cannot make a black box (memfd_create: " + errno_text() + ")";
    return nullptr;
  }
  // Above 0-2: a launcher started with a standard descriptor closed would
  // otherwise hand the rank its box as its stdin or stdout.
  int fd = made;
  if (made <= 2) {
    fd = ::fcntl(made, F_DUPFD_CLOEXEC, 3);
    ::close(made);
    if (fd < 0) {
      why = "cannot make a black box (" + errno_text() + ")";
      return nullptr;
    }
  }
  // Sealed at its size: a rank that truncated it would make the launcher's
  // next read fault (SIGBUS), and the launcher must outlive its ranks.
  if (::ftruncate(fd, static_cast<off_t>(model::kBlackBoxBytes)) != 0 ||
      ::fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    why = "cannot size a black box (" + errno_text() + ")";
    ::close(fd);
    return nullptr;
  }
  void* p = ::mmap(nullptr, model::kBlackBoxBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    why = "cannot map a black box (" + errno_text() + ")";
    ::close(fd);
    return nullptr;
  }
  // The file reads as zeros: only the header is built; the slots' zero
  // sequences already say "empty".
  auto* region = static_cast<model::BlackBoxRegion*>(p);
  auto* header = new (&region->header) model::BlackBoxHeader();
  header->bytes = model::kBlackBoxBytes;
  header->global_rank = global_rank;
  return std::unique_ptr<BlackBox>(new BlackBox(fd, region, global_rank));
}

BlackBox::~BlackBox() {
  if (region_ != nullptr) ::munmap(region_, model::kBlackBoxBytes);
  if (fd_ >= 0) ::close(fd_);
}

BlackBoxReading BlackBox::read_header() const {
  BlackBoxReading r = read_black_box(*region_, false);
  r.global_rank = global_rank_;
  return r;
}

BlackBoxReading BlackBox::read() const {
  BlackBoxReading r = read_black_box(*region_, true);
  // Whatever the header says now: the steps are this rank's.
  r.global_rank = global_rank_;
  for (model::StepRecord& s : r.steps)
    s.global_rank = global_rank_;
  for (model::StepMemoryRecord& m : r.memory)
    m.global_rank = global_rank_;
  return r;
}

std::unique_ptr<BlackBoxMapping> BlackBoxMapping::attach(int fd, std::string& why) {
  // A descriptor that is not a black box is no box for this process (the
  // variable reached a process the launcher did not start: a child of the
  // rank's), and nothing to warn about.
  char target[256] = {};
  const std::string link = "/proc/self/fd/" + std::to_string(fd);
  const ssize_t n = ::readlink(link.c_str(), target, sizeof target - 1);
  if (n <= 0 ||
      std::string(target, std::size_t(n)).rfind(std::string("/memfd:") + kMemfdName, 0) != 0)
    return nullptr;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    why = "its descriptor " + std::to_string(fd) + " is not open (" + errno_text() + ")";
    return nullptr;
  }
  if (static_cast<std::uint64_t>(st.st_size) != model::kBlackBoxBytes) {
    why = "descriptor " + std::to_string(fd) + " holds " + std::to_string(st.st_size) +
          " bytes, not a black box of this build (" + std::to_string(model::kBlackBoxBytes) + ")";
    return nullptr;
  }
  void* p = ::mmap(nullptr, model::kBlackBoxBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    why = "cannot map descriptor " + std::to_string(fd) + " (" + errno_text() + ")";
    return nullptr;
  }
  auto* region = static_cast<model::BlackBoxRegion*>(p);
  model::BlackBoxHeader& h = region->header;
  // Claimed at once (2), ready once the sender has written the rest (1): two
  // processes that inherited one box never both write it.
  std::uint32_t fresh = 0;
  if (h.magic != model::kBlackBoxMagic || h.version != model::kBlackBoxVersion ||
      h.slots != model::kBlackBoxSlots || h.bytes != model::kBlackBoxBytes ||
      !h.attached.compare_exchange_strong(fresh, 2)) {
    ::munmap(p, model::kBlackBoxBytes);
    why = "descriptor " + std::to_string(fd) + " is not a fresh black box of this build";
    return nullptr;
  }
  ::close(fd);
  return std::unique_ptr<BlackBoxMapping>(new BlackBoxMapping(region));
}

BlackBoxMapping::~BlackBoxMapping() {
  // Left mapped on purpose by the runtime (the training threads may write
  // until the process ends); a test that owns one unmaps it.
  if (region_ != nullptr) ::munmap(region_, model::kBlackBoxBytes);
}

}  // namespace traceml::store
