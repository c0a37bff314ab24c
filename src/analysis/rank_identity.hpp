// Group-row identities and the run mode they imply (spec §5.4), shared by the
// sections grouped by global rank.
#pragma once

#include <string>
#include <vector>

#include "analysis/section.hpp"
#include "model/telemetry.hpp"

namespace traceml::analysis {

/// The identity a rank declared (its latest `rank` record), or just its
/// global rank when it declared none.
Identity identity_of(const model::Telemetry& t, int rank);

/// "no_data" without identities; "multi_node" when they span more than one
/// node or any world is wider than its node; else "single_node".
std::string mode_of(const std::vector<Identity>& ids);

}  // namespace traceml::analysis
