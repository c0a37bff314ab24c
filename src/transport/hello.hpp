// The handshake: the Hello frame a rank sends first on each connection, and the
// collector's check of it (docs/transport.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "model/env_values.hpp"
#include "model/telemetry.hpp"
#include "transport/record_codec.hpp"

namespace traceml::transport {

/// Version of the conversation (which frames come when, what they mean), as
/// opposed to kCodecVersion, the byte layout. A collector closes a connection
/// whose Hello names another protocol version, with a reason that says so.
/// Version 2 added the Heartbeat frame; a collector still takes version 1
/// ranks (they send none, so they are only ever "silent", never "stalled" in
/// a phase). Version 3 added the Step's timeline block (its thread and each
/// phase's begin); older ranks send none and their steps are drawn from
/// durations alone. Version 4 made the socket two-way: the collector answers
/// the Hello with a Verdict (accepted, or refused and why), and the rank
/// sends records only once accepted; ranks of 1 to 3 get no Verdict. Its
/// Hello names the rank's stream (its process) and the Verdict says how many
/// of that stream's records the collector already has: a rank that
/// reconnects resends from there, so a record is stored once whatever the
/// connection lost in flight. Version 5 added the Hello's role: a rank, or
/// the relay of another node's traceml, which hands over the black boxes of
/// the ranks it launched once they have ended (RankEnd, Step, StepMemory).
/// Version 6 added the Profile frame (model::ProfileChunk): a rank sends one
/// only to a collector whose Verdict names 6 or later (a rank's Hello still
/// speaks 4: nothing in it changed). Version 7 added the profile requests:
/// a rank that reads a Verdict naming 7 or later says ProfileReady, and the
/// collector may then send it ProfileRequest frames (`--profile auto`,
/// `traceml serve --profile-steps`), the only frames besides the Verdict
/// that go from the collector to a rank. Version 8 added ProfiledSteps
/// frames: a rank whose collector's Verdict names 8 or later says when a
/// capture begins, so that a profile lost with its rank is known to be lost
/// and its steps still left out of the analysis.
inline constexpr std::uint16_t kProtocolVersion = 8;
/// The first version whose collector takes a rank's profiles.
inline constexpr std::uint16_t kProfileProtocolVersion = 6;
/// The first version whose collector asks ranks for profiles (ProfileRequest).
inline constexpr std::uint16_t kProfileRequestProtocolVersion = 7;
/// The first version whose collector hears a capture begin (ProfiledSteps).
inline constexpr std::uint16_t kProfileBeganProtocolVersion = 8;
/// The first version whose Hello the collector answers with a Verdict.
inline constexpr std::uint16_t kVerdictProtocolVersion = 4;
/// The first version whose Hello says who speaks (Hello::role).
inline constexpr std::uint16_t kRoleProtocolVersion = 5;
/// What a rank speaks: nothing of protocol 5 concerns a rank (its role is
/// the default), and a collector of protocol 4 reads a Hello of 4 whole,
/// while it cannot read one of 5 far enough to answer it (the role byte
/// shifts the identity): a rank of this build keeps its Verdict, resume and
/// goodbye with such a collector. Only a relay speaks 5.
inline constexpr std::uint16_t kRankProtocolVersion = 4;
inline constexpr std::uint16_t kOldestProtocolVersion = 1;
constexpr bool supported_protocol(std::uint16_t v) {
  return v >= kOldestProtocolVersion && v <= kProtocolVersion;
}

/// The largest Hello payload this build encodes: u16 protocol version, the
/// token string, the u64 stream (protocol 4), the u8 role (protocol 5), then
/// the rank identity with every optional field present and its hostname at
/// kMaxStringBytes:
/// 2 + (2 + 1024) + 8 + 1 + 4 + 1 + 4 + 4 + (2 + 1024) + 4 + 4 = 2084 bytes.
inline constexpr std::size_t kMaxHelloPayloadBytes =
    2 + (2 + kMaxStringBytes) + 8 + 1 + 4 + 1 + 4 + 4 + (2 + kMaxStringBytes) + 4 + 4;

/// The largest frame a connection may announce before its Hello has passed:
/// kMaxHelloPayloadBytes rounded up to 4 KiB, room for a field or two more in
/// a later protocol version. A peer without the token can then make the
/// collector buffer 4 KiB, not kMaxFrameBytes (1 MiB), per connection.
inline constexpr std::size_t kMaxPreHelloFrameBytes = 4096;
static_assert(kMaxHelloPayloadBytes <= kMaxPreHelloFrameBytes);
static_assert(model::kMaxTokenBytes <= kMaxStringBytes, "a valid token travels whole");

/// Who opens a connection (protocol 5; before it, always a rank).
enum class PeerRole : std::uint8_t {
  Rank = 0,
  /// Another node's `traceml run`, after its ranks ended: it sends what their
  /// black boxes held for the ranks it launched (its identity names its node:
  /// node_rank, local_world_size, and its first rank as global_rank), then
  /// Bye. Authenticated by the run token like a rank; stream 0.
  Relay = 1,
};

struct Hello {
  std::uint16_t protocol_version = kProtocolVersion;
  /// Per-run secret handed to the ranks by the launcher: a connection from
  /// another run (or anything else on the port) does not know it and is closed.
  std::string token;
  /// Protocol 4: the rank's stream, one per process (random, never 0): its
  /// records are numbered along it across connections. 0: none (protocol 1-3).
  std::uint64_t stream = 0;
  model::RankIdentity identity;
  /// Protocol 5: who speaks (before it, a rank). Last, though the wire has
  /// it before the identity, so that a Hello spelled with four values needs
  /// no fifth.
  PeerRole role = PeerRole::Rank;
};

/// A fresh run token: 32 hex digits from the system's random device, so that
/// a connection from another run (or anything else on the port) cannot guess it.
std::string random_run_token();

/// Payload of a Hello frame: u16 protocol version, token string, u64 stream
/// (protocol 4 and later only), u8 role (protocol 5 and later), rank identity. A token over
/// kMaxStringBytes is cut to that length.
std::vector<std::uint8_t> encode_hello(const Hello& h);
/// std::nullopt for any malformed payload. The protocol version comes first and
/// is decoded whatever its value, so that check_hello can name a mismatch.
std::optional<Hello> decode_hello(const std::vector<std::uint8_t>& payload);

/// The verdict on a Hello: ok, or the one-line reason to close the connection.
struct HelloCheck {
  std::optional<std::string> reason;
  [[nodiscard]] bool ok() const { return !reason.has_value(); }
};

/// The collector's answer to a Hello of protocol kVerdictProtocolVersion or
/// later (a Verdict frame): the rank sends records only once accepted, and a
/// refused rank prints the reason and trains on untraced.
struct Verdict {
  /// The newest protocol the collector speaks: a rank refused for its
  /// version can tell which one to speak instead.
  std::uint16_t protocol_version = kProtocolVersion;
  bool accepted = true;
  /// Why not, one line (empty when accepted).
  std::string reason;
  /// Accepted: how many records of the Hello's stream the collector already
  /// has (record frames: model::frame_holds_record). The rank resends what
  /// it wrote past them and counts what it no longer holds as dropped.
  std::uint64_t resume_from = 0;
};

/// Payload of a Verdict frame: u16 protocol version, u8 accepted (0 or 1),
/// reason string (at most kMaxStringBytes; a longer one is cut), u64
/// resume_from.
std::vector<std::uint8_t> encode_verdict(const Verdict& v);
/// std::nullopt for a malformed payload (trailing bytes, accepted not 0 or 1,
/// an accepted verdict with a reason, a refused one with a resume point).
std::optional<Verdict> decode_verdict(const std::vector<std::uint8_t>& payload);

/// Accepts `h` when it speaks kProtocolVersion and carries `expected_token`.
/// The token is compared in time independent of where it differs, and the
/// reason never repeats either token.
HelloCheck check_hello(const Hello& h, std::string_view expected_token);

}  // namespace traceml::transport
