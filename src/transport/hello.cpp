#include "transport/hello.hpp"

#include <random>

#include <cstddef>
#include <string>
#include <utility>

#include "transport/record_codec.hpp"
#include "transport/wire.hpp"

namespace traceml::transport {

std::vector<std::uint8_t> encode_hello(const Hello& h) {
  std::vector<std::uint8_t> out;
  wire::Writer w(out);
  w.u16(h.protocol_version);
  w.str(h.token.substr(0, kMaxStringBytes));
  if (h.protocol_version >= kVerdictProtocolVersion) w.u64(h.stream);
  if (h.protocol_version >= kRoleProtocolVersion) w.u8(static_cast<std::uint8_t>(h.role));
  const std::vector<std::uint8_t> id = encode(h.identity);
  out.insert(out.end(), id.begin(), id.end());
  return out;
}

std::optional<Hello> decode_hello(const std::vector<std::uint8_t>& payload) {
  wire::Reader r(payload.data(), payload.size());
  Hello h;
  h.protocol_version = r.u16();
  h.token = r.str(kMaxStringBytes);
  if (h.protocol_version >= kVerdictProtocolVersion) h.stream = r.u64();
  if (h.protocol_version >= kRoleProtocolVersion) {
    const std::uint8_t role = r.u8();
    if (role > static_cast<std::uint8_t>(PeerRole::Relay)) return std::nullopt;
    h.role = static_cast<PeerRole>(role);
  }
  if (!r.ok()) return std::nullopt;
  // The identity is the rest of the payload, in its own encoding.
  const std::vector<std::uint8_t> rest(payload.begin() + static_cast<std::ptrdiff_t>(r.pos()),
                                       payload.end());
  std::optional<model::RankIdentity> id = decode<model::RankIdentity>(rest);
  if (!id) return std::nullopt;
  h.identity = std::move(*id);
  return h;
}

std::vector<std::uint8_t> encode_verdict(const Verdict& v) {
  std::vector<std::uint8_t> out;
  wire::Writer w(out);
  w.u16(v.protocol_version);
  w.u8(v.accepted ? 1 : 0);
  w.str(v.accepted ? std::string() : v.reason.substr(0, kMaxStringBytes));
  w.u64(v.accepted ? v.resume_from : 0);
  return out;
}

std::optional<Verdict> decode_verdict(const std::vector<std::uint8_t>& payload) {
  wire::Reader r(payload.data(), payload.size());
  Verdict v;
  v.protocol_version = r.u16();
  const std::uint8_t accepted = r.u8();
  v.reason = r.str(kMaxStringBytes);
  v.resume_from = r.u64();
  if (!r.ok() || r.pos() != payload.size() || accepted > 1) return std::nullopt;
  v.accepted = accepted == 1;
  if (v.accepted && !v.reason.empty()) return std::nullopt;
  if (!v.accepted && v.resume_from != 0) return std::nullopt;
  return v;
}

HelloCheck check_hello(const Hello& h, std::string_view expected_token) {
  if (!supported_protocol(h.protocol_version)) {
    return {"protocol version " + std::to_string(h.protocol_version) +
            " is not supported (this build speaks " + std::to_string(kOldestProtocolVersion) +
            " to " + std::to_string(kProtocolVersion) + ")"};
  }
  // Every byte is looked at whatever the first difference, so the time taken
  // does not tell a prober how much of a guessed token was right.
  unsigned diff = h.token.size() == expected_token.size() ? 0u : 1u;
  for (std::size_t i = 0; i < h.token.size(); ++i) {
    const char want = i < expected_token.size() ? expected_token[i] : '\0';
    diff |= unsigned(static_cast<unsigned char>(h.token[i] ^ want));
  }
  if (diff != 0) return {"wrong run token (the connection is not from this run)"};
  return {};
}

std::string random_run_token() {
  std::random_device rd;
  static const char* hex = "0123456789abcdef";
  std::string t;
  for (int i = 0; i < 32; ++i)
    t += hex[rd() % 16];
  return t;
}

}  // namespace traceml::transport
