// A block of one rank's steps as the run database stores them (schema
// version 2, table step_blocks; docs/run-database.md "Step blocks"): the
// rows one after the other, each as few bytes as its values need. One SQLite
// row per block of up to kStepBlockRows steps instead of one per step makes
// the writer, the end of a run and `traceml report RUN_DIR` several times
// cheaper. The reader holds every decoded record to model::check_step.
#pragma once

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>

#include "model/step_record.hpp"

namespace traceml::store {

/// Steps the writer gathers for a rank before it stores them as one block.
inline constexpr int kStepBlockRows = 1024;
/// The most rows a stored block may say it holds (a reader refuses more).
inline constexpr std::int64_t kMaxStepBlockRows = 65536;
/// The codec version, the first byte of every block: 2 since steps carry
/// their phases' begins and thread. Blocks of codec 1 still read.
inline constexpr std::uint8_t kStepBlockCodec = 2;

/// Encodes the steps of one rank into a block, in the order they arrive.
class StepBlockEncoder {
 public:
  StepBlockEncoder() { clear(); }
  /// Appends `r` (its rank is the block's, stored beside the block).
  void add(const model::StepRecord& r);
  /// Empties the block for the next one.
  void clear();

  [[nodiscard]] const std::string& bytes() const { return data_; }
  [[nodiscard]] int rows() const { return rows_; }
  [[nodiscard]] std::int64_t min_step() const { return min_step_; }
  [[nodiscard]] std::int64_t max_step() const { return max_step_; }

 private:
  std::string data_;
  int rows_ = 0;
  std::int64_t prev_step_ = 0;
  std::int64_t min_step_ = 0;
  std::int64_t max_step_ = 0;
};

/// A block that no encoder wrote: truncated, trailing bytes, an unknown
/// codec, or a record that model::check_step refuses. `record` is the
/// 1-based record the problem is in (0: the block as a whole).
class StepBlockError : public std::runtime_error {
 public:
  StepBlockError(std::int64_t record, const std::string& problem)
      : std::runtime_error(problem), record_(record) {}
  [[nodiscard]] std::int64_t record() const { return record_; }

 private:
  std::int64_t record_;
};

/// Reads the records of one block back, checking each.
class StepBlockDecoder {
 public:
  /// `rows` and `rank` come from the block's row in step_blocks. Throws
  /// StepBlockError (record 0) for an unknown codec or a row count out of
  /// [1, kMaxStepBlockRows].
  StepBlockDecoder(std::string_view bytes, int rank, std::int64_t rows);
  /// Reads the next record into `r`; false after the last one (which also
  /// checks that no byte is left). Throws StepBlockError naming the record.
  bool next(model::StepRecord& r);

 private:
  [[noreturn]] void fail(const std::string& problem) const;
  std::uint64_t varint();
  double real();

  std::string_view in_;
  std::size_t pos_ = 0;
  std::uint8_t codec_ = 0;
  int rank_;
  std::int64_t rows_;
  std::int64_t done_ = 0;
  std::int64_t prev_step_ = 0;
};

}  // namespace traceml::store
