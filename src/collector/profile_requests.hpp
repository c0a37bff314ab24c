// What the collector asks the ranks to profile (protocol 7, docs/profiling.md):
// `traceml serve --profile-steps A:B` asks each chosen rank for those steps as
// it says ProfileReady, and `--profile auto` asks a rank for its next N steps
// when they turn slow, or when a stall of it resumes. The ranks' answers are
// their profiles (collector/profiles); why each was asked goes into its file.
//
// Bounded: a rank is asked by `auto` at most once every kAutoRankGapS, the run
// at most kAutoRunCap times, at most kAutoPerCheck ranks a check.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "model/position.hpp"
#include "model/telemetry.hpp"

namespace traceml::collector {

/// What a run asks of its ranks' profilers.
struct ProfileAsking {
  /// `traceml serve --profile-steps A:B`: asked once of each rank of
  /// `ranks` (empty: every rank), when it first says ProfileReady.
  std::optional<std::pair<std::int64_t, std::int64_t>> steps;
  std::vector<int> ranks;
  /// `--profile auto`: the steps each capture covers; 0: off.
  std::int64_t auto_steps = 0;
};

/// `--profile auto`'s rules. The steps judged are a rank's newest, the
/// baseline the steps before them among its latest rows (the live view's
/// kLiveRows), the profiled ones left out of both.
inline constexpr std::size_t kAutoRecentSteps = 5;
inline constexpr std::size_t kAutoBaselineSteps = 20;  ///< at least, before the recent ones
/// Slow: the recent median is this much (a fraction) over the baseline's...
inline constexpr double kAutoSlower = 0.5;
/// ... and at least this many ms over it (a 0.2 ms step is noise).
inline constexpr double kAutoMinRiseMs = 1.0;
inline constexpr double kAutoRankGapS = 300.0;
inline constexpr int kAutoRunCap = 16;
inline constexpr std::size_t kAutoPerCheck = 4;
/// Defaults of `--profile auto`: steps a capture covers.
inline constexpr std::int64_t kAutoDefaultSteps = 10;

/// A rank whose newest steps are slow against its baseline.
struct SlowTurn {
  int rank = 0;
  std::int64_t step = 0;   ///< its newest step judged
  double base_ms = 0.0;    ///< median step of the baseline
  double recent_ms = 0.0;  ///< median step of the recent steps
  /// How much of the rise is outside the backward pass (the collective
  /// that makes a data-parallel rank wait for the others sits in it).
  double own_rise_ms = 0.0;
};

/// Every rank of `latest` (its latest rows, in step order) whose recent
/// steps are slow by kAutoSlower and kAutoMinRiseMs, the steps of
/// `latest.profiled_steps` left out. CPU clock, input wait included (the
/// step the user sees, as the live board's median).
/// `judged`, when given, gets how many ranks had steps enough to judge.
std::vector<SlowTurn> slow_turns(const model::Telemetry& latest, std::size_t* judged = nullptr);

/// Of the ranks that turned slow together, those that cause it: in a
/// data-parallel run every rank slows while it waits for a straggler, in
/// its backward pass; the straggler slows elsewhere. The ranks whose own
/// rise (outside backward) is at least half their rise, the largest rises
/// first, at most kAutoPerCheck. Else, only when every rank judged (`judged`
/// of them) turned slow together (a single process; every rank's backward
/// pass slowed), the one that rose most: a rank that waits is not asked
/// while the straggler's slow steps have not come yet, nor once they have
/// been slow for so long that they no longer count as a turn.
std::vector<SlowTurn> causes(std::vector<SlowTurn> turns, std::size_t judged);

/// One request to send on a rank's connection (an opaque id of the server's).
struct ProfileAsk {
  std::uint64_t connection = 0;
  model::ProfileRequest request;
};

class ProfileRequests {
 public:
  explicit ProfileRequests(ProfileAsking asking) : asking_(std::move(asking)) {}

  [[nodiscard]] bool automatic() const { return asking_.auto_steps > 0; }

  /// I/O thread: `rank` said ProfileReady on `connection`. What to ask it
  /// now (serve's --profile-steps, once a rank), if anything.
  std::optional<ProfileAsk> ready(int rank, std::uint64_t connection);
  /// I/O thread: a connection ended; its rank is asked nothing more on it.
  void closed(int rank, std::uint64_t connection);
  /// Every board interval (the writer thread): the ranks to ask now under
  /// `--profile auto`, from their latest rows and the run's stalls;
  /// `now_s` is a steady clock in seconds.
  std::vector<ProfileAsk> check(const model::Telemetry& latest,
                                const std::vector<model::Stall>& stalls, double now_s);
  /// A profile of `rank`'s steps first..last began to arrive (its first
  /// chunk): serve's request of the rank is answered, and why `auto` asked
  /// for it, when it is the answer to its last request of the rank (steps
  /// after the rank's step when asked, as many as asked); empty otherwise.
  std::string profile_came(int rank, std::int64_t first, std::int64_t last);
  /// Requests `auto` sent in the run.
  [[nodiscard]] int auto_asked();

 private:
  /// May `auto` ask `rank` at `now_s`? Under mu_.
  [[nodiscard]] bool may_ask(int rank, double now_s) const;
  /// Records the ask of the steps after `after_step`. Under mu_.
  ProfileAsk ask(int rank, double now_s, std::int64_t after_step, std::string reason);

  /// Why `auto` asked a rank, until the answer comes.
  struct Pending {
    std::string reason;
    std::int64_t after_step = 0;  ///< the rank's newest step the collector had seen
    std::int64_t steps = 0;
  };

  ProfileAsking asking_;
  std::mutex mu_;
  std::map<int, std::uint64_t> ready_;  ///< rank -> its connection that said ProfileReady
  /// Ranks asked for --profile-steps: on which connection (0: answered).
  /// One whose connection closes unanswered is asked again on its next.
  std::map<int, std::uint64_t> asked_steps_;
  std::map<int, double> last_auto_;               ///< rank -> when `auto` last asked it
  int auto_asked_ = 0;                            ///< the run's `auto` requests
  std::map<int, Pending> pending_;                ///< rank -> why `auto` last asked it
  std::set<std::pair<int, double>> stalls_seen_;  ///< resumed stalls acted on: rank, start
};

}  // namespace traceml::collector
