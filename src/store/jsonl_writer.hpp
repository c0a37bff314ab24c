// Writes model::Telemetry in the telemetry JSONL format, version 1
// (docs/telemetry-format.md), so that read_telemetry_jsonl gives it back unchanged.
#pragma once

#include <ostream>

#include "model/telemetry.hpp"

namespace traceml::store {

/// Writes `telemetry` as JSONL: the run header, then rank, step, step_memory,
/// system and process lines, each kind in its vector's order. Absent values are
/// left out (GPU sample fields and a process's `gpu` are written as null, as the
/// format shows them). Numbers are written in their shortest round-trip form.
///
/// Throws std::invalid_argument, before anything is written, when a value is one
/// the reader would reject (a negative or non-finite number, a negative rank, a
/// step id below 1, a world size below 1): what the writer writes, the reader reads.
/// Throws std::ios_base::failure when the stream fails.
void write_telemetry_jsonl(const model::Telemetry& telemetry, std::ostream& out);

}  // namespace traceml::store
