// The kinds of record, declared once: one enum and one table indexed by it
// (as Tracy's TracyQueue.hpp, libkineto's ActivityType.h). A row says where a
// kind travels and is kept: its frame on the wire and the direction, the
// protocol version that brought it, its telemetry JSONL line, its run-database
// table and the check every reader applies. Its fields are its Schema
// (model/telemetry.hpp). From the table come the Record variant, the wire
// codec's decode(frame) and encode_into (transport/record_codec), the
// store::RunSink's one add(), and the collector's per-frame path.
//
// A new kind is a struct, its Schema, one enumerator and one row here, plus
// the code that fills and reads it. std only.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <variant>
#include <vector>

#include "model/position.hpp"
#include "model/record_checks.hpp"
#include "model/telemetry.hpp"

namespace traceml::model {

/// A connection the collector refused (wrong token, garbage, oversized frame).
struct RejectedConnection {
  double ts = 0.0;   ///< unix seconds
  std::string peer;  ///< "address:port"
  std::string reason;
};

/// Per rank: what the collector received, and what the rank said of itself.
struct RankDelivery {
  int global_rank = 0;
  std::int64_t records_received = 0;
  bool clean_end = false;  ///< the rank said Bye before closing
  std::optional<TracerStats> tracer;
  /// The program's exit status, when the rank said goodbye with one (RankGoodbye).
  /// `{}`: a delivery spelled with the four values before it needs no fifth.
  std::optional<int> exit_status{};
};

/// Who sends a kind's frame.
enum class Direction : std::uint8_t {
  Local,             ///< never on the wire: the collector's own record
  RankToCollector,   ///< a rank's runtime sends it
  CollectorToRank,   ///< the collector sends it
  RelayToCollector,  ///< another node's traceml sends it (transport::PeerRole::Relay)
};

/// The kinds, in table order (the Record variant's index).
enum class RecordKind : std::uint8_t {
  RunInfo,
  Rank,
  Step,
  StepMemory,
  System,
  Process,
  TracerStats,
  Heartbeat,
  Delivery,
  Rejected,
  Goodbye,
  RankEnd,
  Profile,
  ProfiledSteps,
  ProfileReady,
  ProfileRequest,
};

/// Which field of a record names who sent it, and what of the connection's
/// Hello it must equal: a rank sends only its own records, and local rank 0
/// samples only its own node.
enum class Sender : std::uint8_t {
  None,        ///< not checked (not on the wire, or inside the Hello itself)
  GlobalRank,  ///< `owner` equals the Hello's global rank
  NodeRank,    ///< `owner` equals the Hello's node rank, when it gave one
};

/// One row of the table.
template <class R>
struct KindRow {
  using Type = R;
  RecordKind kind;
  /// The kind's name in messages and logs; a frame's name (transport::frame_type_name).
  const char* name;
  /// The byte of its frame type (transport::FrameType); 0: no frame of its
  /// own (the rank identity travels inside the Hello).
  std::uint8_t frame;
  Direction direction;
  /// The protocol version (transport::kProtocolVersion) that brought its
  /// frame or payload; 0: not on the wire.
  std::uint16_t since_protocol;
  /// The "type" of its telemetry JSONL lines; nullptr: not in that file.
  const char* jsonl_type;
  /// Its run-database table; nullptr: not part of a stored run (a tracer's
  /// report is stored inside its rank's delivery).
  const char* table;
  /// The value check every reader applies (model/record_checks); nullptr:
  /// its decoder checks everything it can hold.
  std::optional<std::string> (*check)(const R&);
  Sender sender = Sender::None;
  /// The field `sender` compares (with GlobalRank or NodeRank).
  int R::*owner = nullptr;
  /// Where a Telemetry keeps the kind's records, when a list does (the steps
  /// are columnar, model::StepLog).
  std::vector<R> Telemetry::*rows = nullptr;
  /// Kept by the run outside its database (a profile's file): its frames
  /// are records of the stream as a stored kind's are.
  bool kept_as_file = false;
  /// Its table came after the run database's schema version: a file
  /// written before it has none, and holds none of its records.
  bool table_added_later = false;

  [[nodiscard]] constexpr KindRow kept_in(std::vector<R> Telemetry::*list) const {
    KindRow k = *this;
    k.rows = list;
    return k;
  }
  [[nodiscard]] constexpr KindRow with_table_added_later() const {
    KindRow k = *this;
    k.table_added_later = true;
    return k;
  }
  [[nodiscard]] constexpr KindRow kept_in_a_file() const {
    KindRow k = *this;
    k.kept_as_file = true;
    return k;
  }
};

template <class R>
constexpr KindRow<R> row(RecordKind kind, const char* name, std::uint8_t frame, Direction direction,
                         std::uint16_t since_protocol, const char* jsonl_type, const char* table,
                         std::optional<std::string> (*check)(const R&),
                         Sender sender = Sender::None, int R::*owner = nullptr) {
  return KindRow<R>{kind,  name,   frame, direction, since_protocol, jsonl_type, table,
                    check, sender, owner, nullptr,   false,          false};
}

// clang-format off
/// The table. Frame bytes, names and JSONL types are stable: never renumber
/// or rename, never reuse a retired value.
inline constexpr auto kRecordKinds = std::make_tuple(
    // row<struct>(kind, name, frame byte, direction, since protocol, JSONL type, table,
    //             check, sender, owner)
    row<RunInfo>(         RecordKind::RunInfo,     "run",             0, Direction::Local,            0, "run",         "run_info",
                          &check_run_info),
    row<RankIdentity>(    RecordKind::Rank,        "rank",            0, Direction::RankToCollector,  1, "rank",        "ranks",
                          &check_rank_identity).kept_in(&Telemetry::ranks),
    row<StepRecord>(      RecordKind::Step,        "step",            2, Direction::RankToCollector,  1, "step",        "step_blocks",
                          &check_step, Sender::GlobalRank, &StepRecord::global_rank),
    row<StepMemoryRecord>(RecordKind::StepMemory,  "step_memory",     3, Direction::RankToCollector,  1, "step_memory", "step_memory",
                          &check_step_memory, Sender::GlobalRank, &StepMemoryRecord::global_rank)
                          .kept_in(&Telemetry::step_memory),
    row<SystemSample>(    RecordKind::System,      "system",          4, Direction::RankToCollector,  1, "system",      "system_samples",
                          &check_system, Sender::NodeRank, &SystemSample::node_rank)
                          .kept_in(&Telemetry::system),
    row<ProcessSample>(   RecordKind::Process,     "process",         5, Direction::RankToCollector,  1, "process",     "process_samples",
                          &check_process, Sender::GlobalRank, &ProcessSample::global_rank)
                          .kept_in(&Telemetry::process),
    row<TracerStats>(     RecordKind::TracerStats, "tracer_stats",    7, Direction::RankToCollector,  1, nullptr,       nullptr,
                          &check_tracer_stats, Sender::GlobalRank, &TracerStats::global_rank),
    row<RankPosition>(    RecordKind::Heartbeat,   "heartbeat",       8, Direction::RankToCollector,  2, nullptr,       nullptr,
                          nullptr, Sender::GlobalRank, &RankPosition::global_rank),
    row<RankDelivery>(    RecordKind::Delivery,    "delivery",        0, Direction::Local,            0, nullptr,       "deliveries",
                          nullptr),
    row<RejectedConnection>(RecordKind::Rejected,  "rejected_connection", 0, Direction::Local,        0, nullptr,       "rejected_connections",
                          nullptr),
    row<RankGoodbye>(     RecordKind::Goodbye,     "goodbye",        10, Direction::RankToCollector,  4, nullptr,       nullptr,
                          &check_rank_goodbye, Sender::GlobalRank, &RankGoodbye::global_rank),
    row<RankEnd>(         RecordKind::RankEnd,     "rank_end",       11, Direction::RelayToCollector, 5, nullptr,       nullptr,
                          &check_rank_end),
    // Written by the collector as profiles/rank<R>_steps<A>-<B>.json, not stored in the database.
    row<ProfileChunk>(    RecordKind::Profile,     "profile",        12, Direction::RankToCollector,  6, nullptr,       nullptr,
                          &check_profile_chunk, Sender::GlobalRank, &ProfileChunk::global_rank)
                          .kept_in_a_file(),
    // Sent by a rank as its capture begins (protocol 8); the collector's own
    // at a profile's arrival from a rank of 6 or 7.
    row<ProfiledSteps>(   RecordKind::ProfiledSteps, "profiled_steps", 15, Direction::RankToCollector, 8, "profiled_steps", "profiled_steps",
                          &check_profiled_steps, Sender::GlobalRank, &ProfiledSteps::global_rank)
                          .kept_in(&Telemetry::profiled_steps)
                          .with_table_added_later(),
    row<ProfileReady>(    RecordKind::ProfileReady, "profile_ready", 13, Direction::RankToCollector, 7, nullptr,      nullptr,
                          nullptr, Sender::GlobalRank, &ProfileReady::global_rank),
    row<ProfileRequest>(  RecordKind::ProfileRequest, "profile_request", 14, Direction::CollectorToRank, 7, nullptr,  nullptr,
                          &check_profile_request, Sender::GlobalRank, &ProfileRequest::global_rank));
// clang-format on

namespace detail {
template <class Rows>
struct variant_of;
template <class... Row>
struct variant_of<std::tuple<Row...>> {
  using type = std::variant<typename Row::Type...>;
};

template <std::size_t... I>
constexpr bool rows_in_enum_order(std::index_sequence<I...>) {
  return ((static_cast<std::size_t>(std::get<I>(kRecordKinds).kind) == I) && ...);
}
}  // namespace detail

inline constexpr std::size_t kRecordKindCount = std::tuple_size_v<decltype(kRecordKinds)>;
static_assert(detail::rows_in_enum_order(std::make_index_sequence<kRecordKindCount>{}),
              "kRecordKinds lists its rows in RecordKind order");

/// Any record of the table; its index is its RecordKind.
using Record = typename detail::variant_of<std::remove_const_t<decltype(kRecordKinds)>>::type;

/// The row of the kind whose struct is R.
template <class R>
constexpr const KindRow<R>& row_of() {
  return std::get<KindRow<R>>(kRecordKinds);
}

/// The row of the kind whose enumerator is K.
template <RecordKind Kind>
constexpr const auto& row_of() {
  return std::get<static_cast<std::size_t>(Kind)>(kRecordKinds);
}

constexpr RecordKind kind_of(const Record& r) {
  return static_cast<RecordKind>(r.index());
}

/// Calls f(row) for every row, in table order.
template <class F>
constexpr void for_each_kind(F&& f) {
  std::apply([&f](const auto&... r) { (f(r), ...); }, kRecordKinds);
}

/// Whether a frame of type byte `frame` holds a record the run stores (its
/// kind has a table, or a file): what a rank counts as sent or dropped, and what a
/// stream's records are numbered by (transport::Verdict::resume_from). The
/// rank's own state (tracer stats, heartbeat, goodbye) and Hello, Bye and
/// Verdict do not.
namespace detail {
constexpr std::array<bool, 256> record_frames() {
  std::array<bool, 256> stored{};
  for_each_kind([&](const auto& r) {
    if (r.frame != 0 && (r.table != nullptr || r.kept_as_file)) stored[r.frame] = true;
  });
  return stored;
}
inline constexpr std::array<bool, 256> kRecordFrames = record_frames();
}  // namespace detail
constexpr bool frame_holds_record(std::uint8_t frame) {
  return detail::kRecordFrames[frame];
}
static_assert(frame_holds_record(row_of<StepRecord>().frame) &&
              !frame_holds_record(row_of<TracerStats>().frame) &&
              !frame_holds_record(row_of<RankPosition>().frame) && !frame_holds_record(0));

/// The kind's name (its row's `name`).
const char* kind_name(RecordKind k);

/// Why `r` cannot be true (its row's check); std::nullopt for a possible
/// record, or a kind without a check.
std::optional<std::string> check(const Record& r);

/// The same for a record whose kind is known when compiling.
template <class R>
std::optional<std::string> check(const R& r) {
  constexpr auto fn = row_of<R>().check;
  if constexpr (fn == nullptr) {
    (void)r;
    return std::nullopt;
  } else {
    return fn(r);
  }
}

}  // namespace traceml::model
