// Step Memory's alignment (spec §4.4 "Inputs"): each rank's usable rows (both
// peaks measured), a resent step replacing the earlier one, each rank's latest
// steps kept, then the latest window of steps every rank reported. Rows are
// referenced by index, never copied. Private to the analysis module.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "model/telemetry.hpp"

namespace traceml::analysis::step_memory {

/// Index of a row in Telemetry::step_memory.
using RowIndex = std::size_t;

/// The rows of one rank, ascending. Rows usually arrive step-major (every
/// rank once per step), so a rank's rows are evenly spaced: such a list is
/// kept as its first row and stride and only stored once the spacing breaks.
/// On millions of rows this saves the memory and its page faults, which cost
/// more than the analysis itself.
class RowList {
 public:
  void push_back(RowIndex row) {
    if (stored_) {
      rows_.push_back(row);
      return;
    }
    if (size_ == 1) {
      stride_ = row - first_;
    } else if (size_ == 0) {
      first_ = row;
    } else if (row != first_ + size_ * stride_) {
      store();
      rows_.push_back(row);
      return;
    }
    ++size_;
  }

  /// Replaces the list with `rows`.
  void assign(std::vector<RowIndex> rows) {
    rows_ = std::move(rows);
    stored_ = true;
  }

  [[nodiscard]] bool stored() const { return stored_; }
  /// The spacing of the rows while not stored.
  [[nodiscard]] RowIndex stride() const { return stride_; }
  [[nodiscard]] std::size_t size() const { return stored_ ? rows_.size() : size_; }
  [[nodiscard]] RowIndex operator[](std::size_t i) const {
    return stored_ ? rows_[i] : first_ + i * stride_;
  }

 private:
  void store() {
    rows_.reserve(2 * size_);
    for (std::size_t i = 0; i < size_; ++i)
      rows_.push_back(first_ + i * stride_);
    stored_ = true;
  }

  bool stored_ = false;
  RowIndex first_ = 0;
  RowIndex stride_ = 0;
  std::size_t size_ = 0;  ///< while not stored
  std::vector<RowIndex> rows_;
};

/// The steps every rank reported, and where each rank's peaks on them are.
struct AlignedWindow {
  std::vector<int> ranks;           ///< ascending
  std::vector<std::int64_t> steps;  ///< ascending
  /// Per rank (parallel to `ranks`): rows[r][first[r] + i] is the row holding
  /// steps[i]. Rows are referenced rather than copied: on millions of rows the
  /// copies (and the fresh pages they need) would cost more than the analysis.
  std::vector<RowList> rows;
  std::vector<std::size_t> first;

  [[nodiscard]] RowIndex row(std::size_t rank_index, std::size_t step_index) const {
    return rows[rank_index][first[rank_index] + step_index];
  }
};

struct Inputs {
  std::int64_t ranks_seen = 0;
  std::int64_t steps_seen = 0;  ///< distinct step ids (DECISIONS.md quirk 4)
  std::optional<std::int64_t> latest_step;
  AlignedWindow window;
};

/// Dedupe (later wins), per-rank history cap, then the latest `window` steps
/// common to every rank (spec §4.4 "Inputs").
Inputs load_inputs(const model::Telemetry& t, std::int64_t window);

}  // namespace traceml::analysis::step_memory
