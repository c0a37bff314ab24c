// The black box's region as an operating-system object (model/black_box.hpp
// has its layout): the launcher makes it (an anonymous memory file, handed to
// the rank as an inherited descriptor), the rank maps it, and the launcher
// reads it, also after the rank is gone. std, model and POSIX only.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/black_box.hpp"
#include "model/position.hpp"
#include "model/telemetry.hpp"

namespace traceml::store {

/// What a black box held when it was read.
class BlackBox;

struct BlackBoxReading {
  int global_rank = 0;
  bool attached = false;  ///< the rank mapped it (a rank that never did holds nothing)
  std::int64_t pid = 0;
  std::uint64_t stream = 0;  ///< the rank's protocol-4 stream
  /// The completed steps the journal still holds, oldest first, CPU clock
  /// only (a dead rank's GPU times are not known: they stay missing), with
  /// the memory peaks of those that carried one.
  std::vector<model::StepRecord> steps;
  std::vector<model::StepMemoryRecord> memory;
  /// Steps journaled in all (the journal keeps the last kBlackBoxSlots).
  std::uint64_t journaled = 0;
  /// The last journaled step (0: none), read also when the steps are not.
  std::int64_t last_step = 0;
  /// Read without its steps (BlackBox::read_header): the box to read them
  /// from, when they turn out to be needed; null once read, or for a box
  /// that came whole (another node's relay).
  std::shared_ptr<const BlackBox> source;
  /// Where the loop was when the sender last looked, and when (unix seconds;
  /// 0: never): a hung rank's position, read from outside.
  model::LoopPhase phase = model::LoopPhase::Outside;
  std::int64_t steps_done = 0;
  double position_ts = 0.0;
  /// The rank exited with status 0 (set by who saw it end, not read from the
  /// region): it ended where its program meant to, so its position is no
  /// hang's, whatever silence came before.
  bool exited_cleanly = false;

  /// The steps the rank completed: its last journaled step, or what its
  /// sender last saw when that is more; within [0, 2^62] whatever the
  /// region held. The step it was in (or about to begin) is one more.
  [[nodiscard]] std::int64_t steps_completed() const;
};

/// The launcher's side: a region for one rank, made before the rank starts.
class BlackBox {
 public:
  /// Null when the system cannot make one (no memfd, out of memory): the
  /// rank then runs as before, without one. `why` says what failed. Sealed
  /// at its size, above descriptor 2.
  static std::unique_ptr<BlackBox> create(int global_rank, std::string& why);
  ~BlackBox();
  BlackBox(const BlackBox&) = delete;
  BlackBox& operator=(const BlackBox&) = delete;

  /// The descriptor a child inherits (close-on-exec here: spawn_rank moves it).
  [[nodiscard]] int fd() const { return fd_; }
  /// What it holds now. Safe while the rank runs (a step written meanwhile
  /// is skipped or read whole), exact once it has ended.
  [[nodiscard]] BlackBoxReading read() const;
  /// The header and the last journaled step only: where the rank was, its
  /// steps completed, its stream. Touches two pages of the region where
  /// read() touches all of it (768 KiB): a rank whose telemetry all arrived
  /// needs no more (docs/launchers.md "The black box").
  [[nodiscard]] BlackBoxReading read_header() const;

 private:
  BlackBox(int fd, model::BlackBoxRegion* region, int global_rank)
      : fd_(fd), region_(region), global_rank_(global_rank) {}
  int fd_ = -1;
  model::BlackBoxRegion* region_ = nullptr;
  int global_rank_ = 0;  // the launcher's, not the header's (the rank can write that)
};

/// The rank's side: the region its launcher made, mapped.
class BlackBoxMapping {
 public:
  /// Maps the region behind `fd`, claims it and closes `fd` (the mapping
  /// stays). Null with `why` empty when `fd` is no black box (a process the
  /// launcher did not start inherited the variable); null with `why` when
  /// it is one of another build, or another process claimed it first.
  static std::unique_ptr<BlackBoxMapping> attach(int fd, std::string& why);
  ~BlackBoxMapping();
  BlackBoxMapping(const BlackBoxMapping&) = delete;
  BlackBoxMapping& operator=(const BlackBoxMapping&) = delete;

  [[nodiscard]] model::BlackBoxRegion& region() { return *region_; }

 private:
  explicit BlackBoxMapping(model::BlackBoxRegion* region) : region_(region) {}
  model::BlackBoxRegion* region_ = nullptr;
};

/// Reads a region (its layout checked by the caller); without its steps
/// (`with_steps` false) the header and the last journaled step only.
/// Exposed for tests.
BlackBoxReading read_black_box(const model::BlackBoxRegion& region, bool with_steps = true);

}  // namespace traceml::store
