#include "transport/record_codec.hpp"

#include <algorithm>
#include <string>

#include "transport/wire.hpp"

namespace traceml::transport {
namespace {

using wire::Reader;
using wire::Writer;

std::string capped(const std::string& s) {
  return s.substr(0, kMaxStringBytes);
}

// Presence bits: one byte per record (or nested object) with bit i set when its
// i-th optional field is present; the present values follow in bit order.
// Bits a layout does not define must be clear, or the payload is malformed.
class Presence {
 public:
  void add(bool present) {
    if (present) bits_ = std::uint8_t(bits_ | (1u << n_));
    ++n_;
  }
  [[nodiscard]] std::uint8_t bits() const { return bits_; }

 private:
  std::uint8_t bits_ = 0;
  unsigned n_ = 0;
};

bool has(std::uint8_t bits, unsigned i) {
  return (bits >> i & 1u) != 0;
}
/// Reads a presence byte of `count` defined bits; fails the reader on others.
std::uint8_t read_presence(Reader& r, unsigned count) {
  const std::uint8_t bits = r.u8();
  if ((bits >> count) != 0) r.fail();
  return bits;
}

void put_opt(Writer& w, const std::optional<double>& v) {
  if (v) w.f64(*v);
}
void put_opt(Writer& w, const std::optional<int>& v) {
  if (v) w.i32(*v);
}
std::optional<double> get_f64(Reader& r, std::uint8_t bits, unsigned i) {
  if (!has(bits, i)) return std::nullopt;
  return r.f64();
}
std::optional<int> get_i32(Reader& r, std::uint8_t bits, unsigned i) {
  if (!has(bits, i)) return std::nullopt;
  return r.i32();
}

template <typename T>
std::optional<T> finished(const Reader& r, T value) {
  if (!r.done()) return std::nullopt;
  return value;
}

}  // namespace

// --- StepRecord: i32 rank, i64 step, f64 ts, u8 event mask (bit 7: a GPU
// activity block follows), u8 cpu mask, u8 gpu mask, then per event in Event
// order its cpu_ms and gpu_ms if present, then the GPU activity block if any:
// f64 h2d_ms, f64 h2d_bytes, i64 h2d_copies, i64 h2d_pageable_copies,
// f64 h2d_pageable_bytes, f64 collective_ms, f64 busy_ms.
//
// The flag lives in a bit the six events leave free, so a step without GPU
// activity encodes exactly as before it existed.
namespace {
constexpr unsigned kGpuActivityFlag = 1u << 7;
constexpr unsigned kAllEvents = (1u << model::kEventCount) - 1;
}  // namespace

std::vector<std::uint8_t> encode_step(const model::StepRecord& s) {
  std::vector<std::uint8_t> out;
  Writer w(out);
  w.i32(s.global_rank);
  w.i64(s.step);
  w.f64(s.ts);
  const auto& e = s.events;
  w.u8(static_cast<std::uint8_t>(e.event_mask() | (s.gpu_activity ? kGpuActivityFlag : 0u)));
  w.u8(static_cast<std::uint8_t>(e.cpu_mask()));
  w.u8(static_cast<std::uint8_t>(e.gpu_mask()));
  for (std::size_t i = 0; i < model::kEventCount; ++i) {
    if (has(static_cast<std::uint8_t>(e.cpu_mask()), unsigned(i))) w.f64(e.cpu_values()[i]);
    if (has(static_cast<std::uint8_t>(e.gpu_mask()), unsigned(i))) w.f64(e.gpu_values()[i]);
  }
  if (s.gpu_activity) {
    const model::StepGpuActivity& a = *s.gpu_activity;
    w.f64(a.h2d_ms);
    w.f64(a.h2d_bytes);
    w.i64(a.h2d_copies);
    w.i64(a.h2d_pageable_copies);
    w.f64(a.h2d_pageable_bytes);
    w.f64(a.collective_ms);
    w.f64(a.busy_ms);
  }
  return out;
}

std::optional<model::StepRecord> decode_step(const std::vector<std::uint8_t>& payload) {
  Reader r(payload.data(), payload.size());
  model::StepRecord s;
  s.global_rank = r.i32();
  s.step = r.i64();
  s.ts = r.f64();
  const std::uint8_t head = r.u8();
  const bool activity = (head & kGpuActivityFlag) != 0;
  const auto events = static_cast<std::uint8_t>(head & ~kGpuActivityFlag);
  const std::uint8_t cpu = r.u8();
  const std::uint8_t gpu = r.u8();
  // A clock can only be present on a measured event, and only six events exist.
  if ((events & ~kAllEvents) != 0 || (cpu & ~unsigned(events)) != 0 ||
      (gpu & ~unsigned(events)) != 0) {
    return std::nullopt;
  }
  for (unsigned i = 0; i < model::kEventCount && r.ok(); ++i) {
    if (!has(events, i)) continue;
    model::Timing t;
    t.cpu_ms = get_f64(r, cpu, i);
    t.gpu_ms = get_f64(r, gpu, i);
    s.events.set(static_cast<model::Event>(i), t);
  }
  if (activity) {
    model::StepGpuActivity a;
    a.h2d_ms = r.f64();
    a.h2d_bytes = r.f64();
    a.h2d_copies = r.i64();
    a.h2d_pageable_copies = r.i64();
    a.h2d_pageable_bytes = r.f64();
    a.collective_ms = r.f64();
    a.busy_ms = r.f64();
    s.gpu_activity = a;
  }
  return finished(r, s);
}

// --- StepMemoryRecord: i32 rank, i64 step, str device, presence
// {peak_allocated, peak_reserved}, the present values.
std::vector<std::uint8_t> encode_step_memory(const model::StepMemoryRecord& m) {
  std::vector<std::uint8_t> out;
  Writer w(out);
  w.i32(m.global_rank);
  w.i64(m.step);
  w.str(capped(m.device));
  Presence p;
  p.add(m.peak_allocated_bytes.has_value());
  p.add(m.peak_reserved_bytes.has_value());
  w.u8(p.bits());
  put_opt(w, m.peak_allocated_bytes);
  put_opt(w, m.peak_reserved_bytes);
  return out;
}

std::optional<model::StepMemoryRecord> decode_step_memory(
    const std::vector<std::uint8_t>& payload) {
  Reader r(payload.data(), payload.size());
  model::StepMemoryRecord m;
  m.global_rank = r.i32();
  m.step = r.i64();
  m.device = r.str(kMaxStringBytes);
  const std::uint8_t bits = read_presence(r, 2);
  m.peak_allocated_bytes = get_f64(r, bits, 0);
  m.peak_reserved_bytes = get_f64(r, bits, 1);
  return finished(r, m);
}

// --- SystemSample: i32 node_rank, f64 ts, presence {cpu_percent, ram_used,
// ram_total}, the present values, u16 GPU count, then per GPU: i32 index,
// presence {util, mem_used, mem_total, temperature, power, power_limit}, values.
std::vector<std::uint8_t> encode_system(const model::SystemSample& s) {
  std::vector<std::uint8_t> out;
  Writer w(out);
  w.i32(s.node_rank);
  w.f64(s.ts);
  Presence p;
  p.add(s.cpu_percent.has_value());
  p.add(s.ram_used_bytes.has_value());
  p.add(s.ram_total_bytes.has_value());
  w.u8(p.bits());
  put_opt(w, s.cpu_percent);
  put_opt(w, s.ram_used_bytes);
  put_opt(w, s.ram_total_bytes);
  const std::size_t count = std::min(s.gpus.size(), kMaxGpusPerSample);
  w.u16(static_cast<std::uint16_t>(count));
  for (std::size_t i = 0; i < count; ++i) {
    const model::GpuSample& g = s.gpus[i];
    w.i32(g.index);
    Presence gp;
    for (const auto* v : {&g.util_percent, &g.mem_used_bytes, &g.mem_total_bytes, &g.temperature_c,
                          &g.power_w, &g.power_limit_w}) {
      gp.add(v->has_value());
    }
    w.u8(gp.bits());
    for (const auto* v : {&g.util_percent, &g.mem_used_bytes, &g.mem_total_bytes, &g.temperature_c,
                          &g.power_w, &g.power_limit_w}) {
      put_opt(w, *v);
    }
  }
  return out;
}

std::optional<model::SystemSample> decode_system(const std::vector<std::uint8_t>& payload) {
  Reader r(payload.data(), payload.size());
  model::SystemSample s;
  s.node_rank = r.i32();
  s.ts = r.f64();
  const std::uint8_t bits = read_presence(r, 3);
  s.cpu_percent = get_f64(r, bits, 0);
  s.ram_used_bytes = get_f64(r, bits, 1);
  s.ram_total_bytes = get_f64(r, bits, 2);
  const std::size_t count = r.u16();
  if (count > kMaxGpusPerSample) return std::nullopt;
  // Each GPU takes at least 5 bytes, so a count the payload cannot hold fails
  // here, before any allocation sized by it.
  if (!r.ok() || count * 5 > payload.size() - r.pos()) return std::nullopt;
  s.gpus.reserve(count);
  for (std::size_t i = 0; i < count && r.ok(); ++i) {
    model::GpuSample g;
    g.index = r.i32();
    const std::uint8_t gb = read_presence(r, 6);
    g.util_percent = get_f64(r, gb, 0);
    g.mem_used_bytes = get_f64(r, gb, 1);
    g.mem_total_bytes = get_f64(r, gb, 2);
    g.temperature_c = get_f64(r, gb, 3);
    g.power_w = get_f64(r, gb, 4);
    g.power_limit_w = get_f64(r, gb, 5);
    s.gpus.push_back(g);
  }
  return finished(r, s);
}

// --- ProcessSample: i32 rank, f64 ts, presence {cpu_percent, cpu_cores,
// rss, ram_total, gpu}, the present values, then if gpu: presence {device,
// allocated, reserved, total} and its present values.
std::vector<std::uint8_t> encode_process(const model::ProcessSample& s) {
  std::vector<std::uint8_t> out;
  Writer w(out);
  w.i32(s.global_rank);
  w.f64(s.ts);
  Presence p;
  p.add(s.cpu_percent.has_value());
  p.add(s.cpu_cores.has_value());
  p.add(s.rss_bytes.has_value());
  p.add(s.ram_total_bytes.has_value());
  p.add(s.gpu.has_value());
  w.u8(p.bits());
  put_opt(w, s.cpu_percent);
  put_opt(w, s.cpu_cores);
  put_opt(w, s.rss_bytes);
  put_opt(w, s.ram_total_bytes);
  if (s.gpu) {
    const model::ProcessGpu& g = *s.gpu;
    Presence gp;
    gp.add(g.device.has_value());
    gp.add(g.allocated_bytes.has_value());
    gp.add(g.reserved_bytes.has_value());
    gp.add(g.total_bytes.has_value());
    w.u8(gp.bits());
    put_opt(w, g.device);
    put_opt(w, g.allocated_bytes);
    put_opt(w, g.reserved_bytes);
    put_opt(w, g.total_bytes);
  }
  return out;
}

std::optional<model::ProcessSample> decode_process(const std::vector<std::uint8_t>& payload) {
  Reader r(payload.data(), payload.size());
  model::ProcessSample s;
  s.global_rank = r.i32();
  s.ts = r.f64();
  const std::uint8_t bits = read_presence(r, 5);
  s.cpu_percent = get_f64(r, bits, 0);
  s.cpu_cores = get_i32(r, bits, 1);
  s.rss_bytes = get_f64(r, bits, 2);
  s.ram_total_bytes = get_f64(r, bits, 3);
  if (has(bits, 4)) {
    model::ProcessGpu g;
    const std::uint8_t gb = read_presence(r, 4);
    g.device = get_i32(r, gb, 0);
    g.allocated_bytes = get_f64(r, gb, 1);
    g.reserved_bytes = get_f64(r, gb, 2);
    g.total_bytes = get_f64(r, gb, 3);
    s.gpu = g;
  }
  return finished(r, s);
}

// --- TracerStats: i32 rank, i64 pid, string strategy, i64 steps recorded,
// i64 records sent, i64 records dropped, presence {overhead_ns_per_step}, value.
std::vector<std::uint8_t> encode_tracer_stats(const model::TracerStats& s) {
  std::vector<std::uint8_t> out;
  Writer w(out);
  w.i32(s.global_rank);
  w.i64(s.pid);
  w.str(capped(s.strategy));
  w.i64(s.steps_recorded);
  w.i64(s.records_sent);
  w.i64(s.records_dropped);
  Presence p;
  p.add(s.overhead_ns_per_step.has_value());
  p.add(s.gpu.has_value());
  p.add(s.activity_lost.has_value());
  w.u8(p.bits());
  put_opt(w, s.overhead_ns_per_step);
  if (s.gpu) {
    w.i32(s.gpu->device);
    w.i64(s.gpu->steps_resolved);
    w.i64(s.gpu->steps_unresolved);
    w.i64(s.gpu->scopes_skipped);
  }
  if (s.activity_lost) w.i64(*s.activity_lost);
  return out;
}

std::optional<model::TracerStats> decode_tracer_stats(const std::vector<std::uint8_t>& payload) {
  Reader r(payload.data(), payload.size());
  model::TracerStats s;
  s.global_rank = r.i32();
  s.pid = r.i64();
  s.strategy = r.str(kMaxStringBytes);
  s.steps_recorded = r.i64();
  s.records_sent = r.i64();
  s.records_dropped = r.i64();
  const std::uint8_t bits = read_presence(r, 3);
  s.overhead_ns_per_step = get_f64(r, bits, 0);
  if (bits & 2u) {
    model::TracerStats::Gpu g;
    g.device = r.i32();
    g.steps_resolved = r.i64();
    g.steps_unresolved = r.i64();
    g.scopes_skipped = r.i64();
    s.gpu = g;
  }
  if (bits & 4u) s.activity_lost = r.i64();
  return finished(r, s);
}

// --- RankIdentity: i32 global_rank, presence {local_rank, node_rank,
// hostname, local_world_size, world_size}, the present values.
std::vector<std::uint8_t> encode_rank_identity(const model::RankIdentity& id) {
  std::vector<std::uint8_t> out;
  Writer w(out);
  w.i32(id.global_rank);
  Presence p;
  p.add(id.local_rank.has_value());
  p.add(id.node_rank.has_value());
  p.add(id.hostname.has_value());
  p.add(id.local_world_size.has_value());
  p.add(id.world_size.has_value());
  w.u8(p.bits());
  put_opt(w, id.local_rank);
  put_opt(w, id.node_rank);
  if (id.hostname) w.str(capped(*id.hostname));
  put_opt(w, id.local_world_size);
  put_opt(w, id.world_size);
  return out;
}

std::optional<model::RankIdentity> decode_rank_identity(const std::vector<std::uint8_t>& payload) {
  Reader r(payload.data(), payload.size());
  model::RankIdentity id;
  id.global_rank = r.i32();
  const std::uint8_t bits = read_presence(r, 5);
  id.local_rank = get_i32(r, bits, 0);
  id.node_rank = get_i32(r, bits, 1);
  if (has(bits, 2)) id.hostname = r.str(kMaxStringBytes);
  id.local_world_size = get_i32(r, bits, 3);
  id.world_size = get_i32(r, bits, 4);
  return finished(r, id);
}

}  // namespace traceml::transport
