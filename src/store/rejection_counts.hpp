// How many connections the collector refused, by kind, stored in the run
// database next to the telemetry. The `rejected_connections` table keeps only
// the first few refusals in detail, so that a peer opening thousands of
// connections cannot grow the file; these counts keep all of them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace traceml::store {

/// Refusals per kind ("wrong_token" -> 3; kinds are transport::rejection_name
/// plus the collector's own "invalid_identity"), sorted by kind.
using RejectionCounts = std::map<std::string, std::int64_t>;

/// The sum over every kind.
std::int64_t total_rejections(const RejectionCounts& counts);

/// Stores `counts` in the run database at `db_path`, replacing earlier ones
/// (the table is written even when empty: its presence says the counts are
/// complete). Called once the collector has closed the file. Throws RunDbError.
void write_rejection_counts(const std::string& db_path, const RejectionCounts& counts);

/// The stored counts; std::nullopt for a file written before they existed
/// (every refusal then has its `rejected_connections` row) or by a collector
/// that did not finish. Throws RunDbError when the file cannot be read.
std::optional<RejectionCounts> read_rejection_counts(const std::string& db_path);

}  // namespace traceml::store
