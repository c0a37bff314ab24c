// The step records of a run, column by column (docs/run-database.md "In
// memory"). A StepRecord is 240 bytes whatever it holds; a row here is
// 24 bytes plus 8 for each value its chunk measured (a CPU run with every
// phase timed and its begins recorded: 112), with no copy between the
// collector's state and the analysis, which reads the columns in place
// (StepView).
//
// Rows are kept in chunks of StepChunk::kRows. A chunk is shared between
// copies of a log (a copy costs a pointer a chunk) and never changes once
// shared: a log appends only to a last chunk that no one else holds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <vector>

#include "model/step_record.hpp"

namespace traceml::model {

class StepChunk {
 public:
  static constexpr std::size_t kRows = 1024;

  [[nodiscard]] std::size_t size() const { return rows_; }
  [[nodiscard]] bool full() const { return rows_ == kRows; }

  /// Appends a row; the chunk must not be full. Without `timeline`, the
  /// row's phase begins and thread are left out (they read as absent and 0):
  /// what only a timeline draws need not be held by a store for the analysis.
  void push(const StepRecord& r, bool timeline = true);
  /// Appends row `i` of `src`, column by column.
  void push_row(const StepChunk& src, std::size_t i);
  /// Row `i` as a record.
  [[nodiscard]] StepRecord record(std::size_t i) const;
  /// A copy of the rows held.
  [[nodiscard]] std::unique_ptr<StepChunk> clone() const;
  /// Memory the chunk holds, its columns included.
  [[nodiscard]] std::size_t bytes() const;

  [[nodiscard]] int rank(std::size_t i) const { return rank_[i]; }
  [[nodiscard]] std::int64_t step(std::size_t i) const { return step_[i]; }
  [[nodiscard]] double ts(std::size_t i) const { return ts_[i]; }
  /// Bit e: event e was recorded (StepEvents::event_mask).
  [[nodiscard]] unsigned event_mask(std::size_t i) const { return mask_[i] & kSix; }
  /// Bit e: event e has a CPU (GPU) value; cpu(i, e) (gpu(i, e)) reads it.
  [[nodiscard]] unsigned cpu_mask(std::size_t i) const { return (mask_[i] >> kCpuShift) & kSix; }
  [[nodiscard]] unsigned gpu_mask(std::size_t i) const { return (mask_[i] >> kGpuShift) & kSix; }
  [[nodiscard]] double cpu(std::size_t i, std::size_t e) const { return cpu_[e][i]; }
  [[nodiscard]] double gpu(std::size_t i, std::size_t e) const { return gpu_[e][i]; }
  /// Bit e: event e has a recorded begin; begin(i, e) reads it (ms from the
  /// traced step's start, StepEvents::begin_ms).
  [[nodiscard]] unsigned begin_mask(std::size_t i) const {
    return (mask_[i] >> kBeginShift) & kSix;
  }
  [[nodiscard]] double begin(std::size_t i, std::size_t e) const { return begin_[e][i]; }
  /// The thread that recorded the row (StepRecord::thread).
  [[nodiscard]] int thread(std::size_t i) const { return thread_ ? thread_[i] : 0; }
  /// The row's GPU activity; nullptr when it has none.
  [[nodiscard]] const StepGpuActivity* activity(std::size_t i) const {
    return (mask_[i] & kActivityBit) != 0 ? &activity_[i] : nullptr;
  }

 private:
  static constexpr unsigned kSix = (1u << kEventCount) - 1;
  static constexpr unsigned kCpuShift = 8;
  static constexpr unsigned kGpuShift = 16;
  static constexpr unsigned kActivityBit = 1u << 24;
  static constexpr unsigned kBeginShift = 25;
  using Column = std::unique_ptr<double[]>;
  static void put(Column& c, std::size_t i, double v);
  void put_activity(std::size_t i, const StepGpuActivity& a);
  void put_thread(std::size_t i, int thread);

  std::uint32_t rows_ = 0;
  std::array<int, kRows> rank_;
  std::array<std::int64_t, kRows> step_;
  std::array<double, kRows> ts_;
  std::array<std::uint32_t, kRows> mask_;
  // A value column exists once a row of the chunk has that value.
  std::array<Column, kEventCount> cpu_;
  std::array<Column, kEventCount> gpu_;
  std::array<Column, kEventCount> begin_;
  std::unique_ptr<std::uint16_t[]> thread_;  // exists once a row names a thread other than 0
  std::unique_ptr<StepGpuActivity[]> activity_;
};

/// One row of a chunk, read in place: what the analysis's hot loops read
/// instead of a StepRecord.
struct StepView {
  const StepChunk* chunk = nullptr;
  std::size_t row = 0;

  [[nodiscard]] int rank() const { return chunk->rank(row); }
  [[nodiscard]] std::int64_t step() const { return chunk->step(row); }
  [[nodiscard]] double ts() const { return chunk->ts(row); }
  [[nodiscard]] unsigned event_mask() const { return chunk->event_mask(row); }
  [[nodiscard]] unsigned cpu_mask() const { return chunk->cpu_mask(row); }
  [[nodiscard]] unsigned gpu_mask() const { return chunk->gpu_mask(row); }
  [[nodiscard]] bool has(Event e) const { return ((event_mask() >> unsigned(e)) & 1u) != 0; }
  /// The raw value of a clock; meaningful only where its mask bit is set.
  [[nodiscard]] double cpu(Event e) const { return chunk->cpu(row, std::size_t(e)); }
  [[nodiscard]] double gpu(Event e) const { return chunk->gpu(row, std::size_t(e)); }
  [[nodiscard]] std::optional<double> cpu_ms(Event e) const {
    if (((cpu_mask() >> unsigned(e)) & 1u) == 0) return std::nullopt;
    return cpu(e);
  }
  [[nodiscard]] std::optional<double> gpu_ms(Event e) const {
    if (((gpu_mask() >> unsigned(e)) & 1u) == 0) return std::nullopt;
    return gpu(e);
  }
  [[nodiscard]] const StepGpuActivity* activity() const { return chunk->activity(row); }
  [[nodiscard]] StepRecord record() const { return chunk->record(row); }
};

/// Step records in order, column by column. Reads give StepRecord values.
class StepLog {
 public:
  using value_type = StepRecord;
  using Chunks = std::vector<std::shared_ptr<StepChunk>>;

  class const_iterator {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = StepRecord;
    using difference_type = std::ptrdiff_t;
    using pointer = void;
    using reference = const StepRecord;
    const_iterator() = default;
    const_iterator(const Chunks* c, std::size_t chunk, std::size_t row)
        : chunks_(c), chunk_(chunk), row_(row) {}
    const StepRecord operator*() const { return (*chunks_)[chunk_]->record(row_); }
    [[nodiscard]] StepView view() const { return {(*chunks_)[chunk_].get(), row_}; }
    const_iterator& operator++() {
      if (++row_ == (*chunks_)[chunk_]->size()) {
        ++chunk_;
        row_ = 0;
      }
      return *this;
    }
    const_iterator operator++(int) {
      const_iterator old = *this;
      ++*this;
      return old;
    }
    bool operator==(const const_iterator& o) const { return chunk_ == o.chunk_ && row_ == o.row_; }
    bool operator!=(const const_iterator& o) const { return !(*this == o); }

   private:
    const Chunks* chunks_ = nullptr;
    std::size_t chunk_ = 0;
    std::size_t row_ = 0;
  };

  /// Appends `r`; `timeline` as for StepChunk::push.
  void push_back(const StepRecord& r, bool timeline = true);
  /// Appends row `i` of `c` without going through a StepRecord.
  void push_row(const StepChunk& c, std::size_t i);
  /// Appends every row of `other`, sharing its chunks.
  void append(const StepLog& other);
  /// A copy for a reader while this log keeps growing: full chunks shared,
  /// a last chunk with room copied (sharing it would leave this log
  /// appending to fresh, mostly empty chunks).
  [[nodiscard]] StepLog copy_for_reader() const;

  StepLog() = default;
  StepLog(const StepLog&) = default;
  StepLog& operator=(const StepLog&) = default;
  /// A moved-from log is empty, as a moved-from vector is.
  StepLog(StepLog&& o) noexcept
      : chunks_(std::move(o.chunks_)), starts_(std::move(o.starts_)), size_(o.size_) {
    o.clear();
  }
  StepLog& operator=(StepLog&& o) noexcept {
    if (this != &o) {
      chunks_ = std::move(o.chunks_);
      starts_ = std::move(o.starts_);
      size_ = o.size_;
      o.clear();
    }
    return *this;
  }
  ~StepLog() = default;
  void clear();
  /// Rewrites every row through f(StepRecord&), in order (for tests and tools:
  /// it copies the log).
  template <typename F>
  void edit(F&& f) {
    StepLog out;
    for (StepRecord r : *this) {
      f(r);
      out.push_back(r);
    }
    *this = std::move(out);
  }
  /// Rewrites row `i` through f(StepRecord&).
  template <typename F>
  void edit(std::size_t i, F&& f) {
    std::size_t at = 0;
    edit([&](StepRecord& r) {
      if (at++ == i) f(r);
    });
  }

  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] bool empty() const { return size_ == 0; }
  /// Row `i` in order (a search among the chunks: for tests and small logs).
  /// Const, so that assigning to it (which would change nothing) does not
  /// compile: edit() changes rows.
  [[nodiscard]] const StepRecord operator[](std::size_t i) const;
  [[nodiscard]] const StepRecord front() const { return (*this)[0]; }
  [[nodiscard]] const StepRecord back() const { return (*this)[size_ - 1]; }
  [[nodiscard]] const_iterator begin() const { return {&chunks_, 0, 0}; }
  [[nodiscard]] const_iterator end() const { return {&chunks_, chunks_.size(), 0}; }

  /// Memory the chunks hold (shared ones counted in full).
  [[nodiscard]] std::size_t bytes() const;
  /// The chunks, for loops that read columns in place (none is empty).
  [[nodiscard]] const Chunks& chunks() const { return chunks_; }

 private:
  StepChunk& tail();
  Chunks chunks_;
  std::vector<std::size_t> starts_;  // first row of each chunk
  std::size_t size_ = 0;
};

}  // namespace traceml::model
