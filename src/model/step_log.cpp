#include "model/step_log.hpp"

#include <algorithm>

namespace traceml::model {

void StepChunk::put(Column& c, std::size_t i, double v) {
  if (!c) c = std::make_unique<double[]>(kRows);  // zeroed: rows without the value read 0
  c[i] = v;
}

void StepChunk::put_thread(std::size_t i, int thread) {
  if (thread == 0 && !thread_) return;  // rows read 0 until a row names another thread
  if (!thread_) thread_ = std::make_unique<std::uint16_t[]>(kRows);
  thread_[i] = std::uint16_t(thread);
}

void StepChunk::put_activity(std::size_t i, const StepGpuActivity& a) {
  if (!activity_) activity_ = std::make_unique<StepGpuActivity[]>(kRows);
  activity_[i] = a;
  mask_[i] |= kActivityBit;
}

// A row is counted (rows_) only once written: a column that cannot be
// allocated leaves the chunk as it was.
void StepChunk::push(const StepRecord& r, bool timeline) {
  const std::size_t i = rows_;
  rank_[i] = r.global_rank;
  step_[i] = r.step;
  ts_[i] = r.ts;
  const unsigned cpu = r.events.cpu_mask();
  const unsigned gpu = r.events.gpu_mask();
  const unsigned begins = timeline ? r.events.begin_mask() : 0u;
  mask_[i] =
      r.events.event_mask() | (cpu << kCpuShift) | (gpu << kGpuShift) | (begins << kBeginShift);
  for (std::size_t e = 0; e < kEventCount; ++e) {
    if (((cpu >> e) & 1u) != 0) put(cpu_[e], i, r.events.cpu_values()[e]);
    if (((gpu >> e) & 1u) != 0) put(gpu_[e], i, r.events.gpu_values()[e]);
    if (((begins >> e) & 1u) != 0) put(begin_[e], i, r.events.begin_values()[e]);
  }
  put_thread(i, timeline ? r.thread : 0);
  if (r.gpu_activity) put_activity(i, *r.gpu_activity);
  rows_ = std::uint32_t(i + 1);
}

void StepChunk::push_row(const StepChunk& src, std::size_t j) {
  const std::size_t i = rows_;
  rank_[i] = src.rank_[j];
  step_[i] = src.step_[j];
  ts_[i] = src.ts_[j];
  mask_[i] = src.mask_[j] & ~kActivityBit;
  const unsigned cpu = src.cpu_mask(j);
  const unsigned gpu = src.gpu_mask(j);
  const unsigned begins = src.begin_mask(j);
  for (std::size_t e = 0; e < kEventCount; ++e) {
    if (((cpu >> e) & 1u) != 0) put(cpu_[e], i, src.cpu_[e][j]);
    if (((gpu >> e) & 1u) != 0) put(gpu_[e], i, src.gpu_[e][j]);
    if (((begins >> e) & 1u) != 0) put(begin_[e], i, src.begin_[e][j]);
  }
  put_thread(i, src.thread(j));
  if (const StepGpuActivity* a = src.activity(j)) put_activity(i, *a);
  rows_ = std::uint32_t(i + 1);
}

StepRecord StepChunk::record(std::size_t i) const {
  StepRecord r;
  r.global_rank = rank_[i];
  r.step = step_[i];
  r.ts = ts_[i];
  r.thread = thread(i);
  const unsigned events = event_mask(i);
  const unsigned cpu = cpu_mask(i);
  const unsigned gpu = gpu_mask(i);
  const unsigned begins = begin_mask(i);
  for (std::size_t e = 0; e < kEventCount; ++e) {
    if (((events >> e) & 1u) == 0) continue;
    Timing t;
    if (((cpu >> e) & 1u) != 0) t.cpu_ms = cpu_[e][i];
    if (((gpu >> e) & 1u) != 0) t.gpu_ms = gpu_[e][i];
    r.events.set(Event(e), t);
    if (((begins >> e) & 1u) != 0) r.events.set_begin(Event(e), begin_[e][i]);
  }
  if (const StepGpuActivity* a = activity(i)) r.gpu_activity = *a;
  return r;
}

std::unique_ptr<StepChunk> StepChunk::clone() const {
  auto c = std::make_unique<StepChunk>();
  for (std::size_t i = 0; i < rows_; ++i)
    c->push_row(*this, i);
  return c;
}

std::size_t StepChunk::bytes() const {
  std::size_t n = sizeof(StepChunk);
  for (std::size_t e = 0; e < kEventCount; ++e)
    n += (cpu_[e] ? kRows * sizeof(double) : 0) + (gpu_[e] ? kRows * sizeof(double) : 0) +
         (begin_[e] ? kRows * sizeof(double) : 0);
  n += thread_ ? kRows * sizeof(std::uint16_t) : 0;
  return n + (activity_ ? kRows * sizeof(StepGpuActivity) : 0);
}

std::size_t StepLog::bytes() const {
  std::size_t n = 0;
  for (const auto& c : chunks_)
    n += c->bytes();
  return n;
}

StepChunk& StepLog::tail() {
  // A shared last chunk is never written again: its readers see it as it was.
  // use_count() is exact here because every copy that leaves this thread is
  // made under the owner's lock (RunState) or before the owner appends again.
  if (chunks_.empty() || chunks_.back()->full() || chunks_.back().use_count() != 1) {
    starts_.reserve(starts_.size() + 1);  // nothing below throws after the allocation
    chunks_.reserve(chunks_.size() + 1);
    auto c = std::make_shared<StepChunk>();
    starts_.push_back(size_);
    chunks_.push_back(std::move(c));
  }
  return *chunks_.back();
}

void StepLog::push_back(const StepRecord& r, bool timeline) {
  tail().push(r, timeline);
  ++size_;
}

void StepLog::push_row(const StepChunk& c, std::size_t i) {
  tail().push_row(c, i);
  ++size_;
}

void StepLog::append(const StepLog& other) {
  for (const auto& c : other.chunks_) {
    starts_.push_back(size_);
    chunks_.push_back(c);
    size_ += c->size();
  }
}

StepLog StepLog::copy_for_reader() const {
  StepLog out;
  for (const auto& c : chunks_) {
    out.starts_.push_back(out.size_);
    out.chunks_.push_back(c->full() ? c : std::shared_ptr<StepChunk>(c->clone()));
    out.size_ += c->size();
  }
  return out;
}

void StepLog::clear() {
  chunks_.clear();
  starts_.clear();
  size_ = 0;
}

const StepRecord StepLog::operator[](std::size_t i) const {
  const auto at = std::upper_bound(starts_.begin(), starts_.end(), i) - 1;
  const auto k = static_cast<std::size_t>(at - starts_.begin());
  return chunks_[k]->record(i - *at);
}

}  // namespace traceml::model
