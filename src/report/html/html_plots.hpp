// The HTML report's figures, drawn from PlotData as inline SVG: the phase
// stack of the representative rank, the rank x step heatmaps, the per-rank
// step distributions, step memory, and the system and process series.
#pragma once

#include <optional>
#include <string>

#include "report/html/plot_data.hpp"
#include "report/summary_view.hpp"

namespace traceml::report {

/// The <section> of figures (HTML), each a <figure class="plot"> holding
/// one <svg>; `slow` is marked on the plots whose x axis is the step.
std::string plots_html(const PlotData& d, const std::optional<SlowWindow>& slow);

}  // namespace traceml::report
