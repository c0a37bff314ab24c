#include "timing/gpu_activity.hpp"

#include <algorithm>

namespace traceml::timing {
namespace {

constexpr double kNsPerMs = 1e6;

bool is_digit(char c) noexcept {
  return c >= '0' && c <= '9';
}

/// Reads one <length><identifier> component of a mangled name into `out` and
/// moves past it; false when `name` does not start with one.
bool next_component(std::string_view& name, std::string_view& out) noexcept {
  std::size_t digits = 0;
  std::size_t length = 0;
  while (digits < name.size() && digits < 6 && is_digit(name[digits]))
    length = length * 10 + std::size_t(name[digits++] - '0');
  if (digits == 0 || length == 0 || length > name.size() - digits) return false;
  out = name.substr(digits, length);
  name.remove_prefix(digits + length);
  return true;
}

/// A duration that a clock glitch made negative counts as nothing.
std::int64_t duration_ns(const GpuActivity& a) noexcept {
  return a.end_ns > a.start_ns ? a.end_ns - a.start_ns : 0;
}

}  // namespace

bool is_collective_kernel(std::string_view name) noexcept {
  // nvcc prefixes a kernel of internal linkage (static, or in an anonymous
  // namespace) with __nv_static_<n>__<file id>__, then its mangled name.
  constexpr std::string_view kNvStatic = "__nv_static_";
  if (name.substr(0, kNvStatic.size()) == kNvStatic) {
    const std::size_t mangled = name.find("__Z", kNvStatic.size());
    if (mangled == std::string_view::npos) return false;
    name.remove_prefix(mangled + 1);
  }
  // CUPTI reports the mangled symbol: _Z, then L for internal linkage, N for
  // a nested name, then <length><identifier> components. The kernel's name is
  // the first component that is not an anonymous namespace (_GLOBAL__N_...).
  if (name.substr(0, 2) == "_Z") {
    name.remove_prefix(2);
    if (!name.empty() && name.front() == 'L') name.remove_prefix(1);
    const bool nested = !name.empty() && name.front() == 'N';
    if (nested) name.remove_prefix(1);
    std::string_view identifier;
    do {
      if (!next_component(name, identifier)) return false;
    } while (nested && identifier.substr(0, 10) == "_GLOBAL__N");
    name = identifier;
  }
  // NCCL's kernels are named nccl...; a one-rank communicator runs an
  // all-reduce that scales (an average) as its oneRankReduce<...> kernel.
  return name.substr(0, 4) == "nccl" || name == "oneRankReduce" ||
         name.substr(0, 14) == "oneRankReduce<";
}

ActivityAttributor::ActivityAttributor(AttributorSettings settings) : settings_(settings) {}

void ActivityAttributor::add(const std::vector<ApiLaunch>& launches,
                             const std::vector<GpuActivity>& activities) {
  for (const ApiLaunch& l : launches) {
    auto it = launches_.find(l.correlation_id);
    if (it != launches_.end()) {
      // The same id twice (a runtime call and the driver call inside it, or
      // ids wrapping around): the earlier call is the launch.
      it->second = std::min(it->second, l.cpu_ns);
    } else if (full()) {
      ++dropped_;
      continue;
    } else {
      launches_.emplace(l.correlation_id, l.cpu_ns);
    }
    auto [first, last] = orphans_.equal_range(l.correlation_id);
    if (first == last) continue;
    const std::int64_t launch_ns = launches_.find(l.correlation_id)->second;
    for (auto o = first; o != last; ++o)
      place(launch_ns, o->second, /*counted_in_store=*/true);
    orphans_.erase(first, last);
  }
  for (const GpuActivity& a : activities) {
    auto it = launches_.find(a.correlation_id);
    if (it != launches_.end()) {
      place(it->second, a, /*counted_in_store=*/false);
    } else if (full()) {
      ++dropped_;
    } else {
      orphans_.emplace(a.correlation_id, a);
    }
  }
}

void ActivityAttributor::place(std::int64_t launch_ns, const GpuActivity& a,
                               bool counted_in_store) {
  latest_owner_ns_ = std::max(latest_owner_ns_.value_or(launch_ns), launch_ns);
  if (launch_ns <= settled_until_) {
    ++late_;  // its step (or the stretch outside steps) is already settled
    return;
  }
  // An orphan that finds its launch moves from one store to the other: no
  // room is needed.
  if (!counted_in_store && full()) {
    ++dropped_;
    return;
  }
  matched_.push_back({launch_ns, a});
}

void ActivityAttributor::settle(std::int64_t until_ns) {
  // Orphans first, against the time settled by the previous call: a whole
  // step of grace for a launch record that comes in a later batch.
  for (auto it = orphans_.begin(); it != orphans_.end();) {
    if (it->second.start_ns <= settled_until_) {
      ++unmatched_;
      it = orphans_.erase(it);
    } else {
      ++it;
    }
  }
  for (auto it = launches_.begin(); it != launches_.end();) {
    it = it->second <= until_ns ? launches_.erase(it) : std::next(it);
  }
  settled_until_ = std::max(settled_until_, until_ns);
}

model::StepGpuActivity ActivityAttributor::attribute(std::int64_t cpu_begin_ns,
                                                     std::int64_t cpu_end_ns) {
  model::StepGpuActivity out;
  busy_.clear();
  collective_.clear();
  std::int64_t h2d_ns = 0;
  auto keep = matched_.begin();
  for (auto it = matched_.begin(); it != matched_.end(); ++it) {
    if (it->launch_ns > cpu_end_ns) {  // a later step's
      if (keep != it) *keep = *it;
      ++keep;
      continue;
    }
    if (it->launch_ns < cpu_begin_ns) {
      ++outside_steps_;
      continue;
    }
    ++attributed_;
    const GpuActivity& a = it->activity;
    busy_.push_back({a.start_ns, a.end_ns});
    if (a.kind == ActivityKind::Kernel && a.collective)
      collective_.push_back({a.start_ns, a.end_ns});
    if (a.kind == ActivityKind::Memcpy && a.copy_kind == CopyKind::HostToDevice) {
      h2d_ns += duration_ns(a);
      out.h2d_bytes += double(a.bytes);
      ++out.h2d_copies;
      if (a.from_pageable) {
        ++out.h2d_pageable_copies;
        out.h2d_pageable_bytes += double(a.bytes);
      }
    }
  }
  matched_.erase(keep, matched_.end());
  settle(cpu_end_ns);
  out.h2d_ms = double(h2d_ns) / kNsPerMs;
  out.collective_ms = union_ms(collective_);
  out.busy_ms = union_ms(busy_);
  return out;
}

void ActivityAttributor::discard_until(std::int64_t cpu_ns) {
  auto keep = matched_.begin();
  for (auto it = matched_.begin(); it != matched_.end(); ++it) {
    if (it->launch_ns <= cpu_ns) {
      ++outside_steps_;
      continue;
    }
    if (keep != it) *keep = *it;
    ++keep;
  }
  matched_.erase(keep, matched_.end());
  settle(cpu_ns);
}

double ActivityAttributor::union_ms(std::vector<Interval>& intervals) {
  std::sort(intervals.begin(), intervals.end(),
            [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::int64_t total = 0;
  bool open = false;
  Interval run;
  for (const Interval& i : intervals) {
    if (i.end <= i.begin) continue;
    if (open && i.begin <= run.end) {
      run.end = std::max(run.end, i.end);
      continue;
    }
    if (open) total += run.end - run.begin;
    run = i;
    open = true;
  }
  if (open) total += run.end - run.begin;
  return double(total) / kNsPerMs;
}

}  // namespace traceml::timing
