#include "report/html/html_report.hpp"

#include <optional>
#include <vector>

#include "report/html/html_plots.hpp"
#include "report/html/html_text.hpp"
#include "report/html/plot_data.hpp"
#include "report/summary_view.hpp"
#include "report/text/text_format.hpp"
#include "report/text/text_layout.hpp"
#include "report/text/text_report.hpp"
#include "report/text/text_run_context.hpp"
#include "report/text/text_verdict.hpp"

namespace traceml::report {

namespace {

/// The page's style. System fonts only (nothing to fetch); one column at
/// most 1,100 px wide, so that nothing scrolls sideways on a laptop; plots
/// scale to the column (viewBox) and keep their text legible.
constexpr const char* kStyle = R"(
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;color:#1d1d1f;background:#f6f6f7}
main{max-width:1100px;margin:0 auto;padding:12px 20px 40px}
h1{font-size:21px;margin:8px 0 0}h2{font-size:16px;margin:26px 0 8px;padding-bottom:3px;border-bottom:1px solid #d8d8dc}
.meta{color:#555;margin:2px 0 12px}
#verdict,#hang{background:#fff;border:1px solid #d8d8dc;border-left:6px solid #8a8a8e;border-radius:6px;padding:6px 16px}
#verdict.critical,#hang{border-left-color:#d62728}#verdict.warning{border-left-color:#f0a202}#hang{margin-bottom:10px}
#verdict p{margin:6px 0}.vline{font-size:18px;font-weight:600}.critical .sev{color:#d62728}.warning .sev{color:#b87800}
.scope{color:#777;font-size:12px}
pre{font:12px/1.35 ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;background:#fff;border:1px solid #d8d8dc;border-radius:6px;padding:10px;overflow-x:auto}
pre.cmd{margin:4px 0;padding:4px 8px;display:inline-block}
figure{margin:0 0 14px;background:#fff;border:1px solid #d8d8dc;border-radius:6px;padding:8px 12px}
figcaption{font-weight:600;margin-bottom:4px}.note{font-weight:400;color:#666}
svg{display:block;width:100%;height:auto}
svg text{font-size:11px;fill:#444}.yl{text-anchor:end}.xl,.xc{text-anchor:middle}.culprit{fill:#d62728;font-weight:700}
.grid{stroke:#ececf0}.axis{stroke:#8a8a8e}
.band{fill:#d62728;fill-opacity:.1}.window{fill:none;stroke:#d62728;stroke-width:2;stroke-dasharray:4 3}
.spike{fill:#d62728}.profiled{fill:#7e57c2}.hover{fill:transparent}
.stall{stroke:#d62728;stroke-width:2;stroke-dasharray:2 2}.stallband{fill:#d62728;fill-opacity:.18}
.sw.stall{border-left:2px dashed #d62728;width:0;height:10px}
.line{fill:none;stroke-width:1.5;stroke-linejoin:round}.faint{stroke-opacity:.45;stroke-width:1}
.box line,.box rect{stroke:#1f77b4;fill:#cfe2f3}.box .median{stroke:#0b3d66;stroke-width:2}
.box.culprit line,.box.culprit rect{stroke:#d62728;fill:#f6caca}
.legend{font-size:12px;color:#444;margin-top:2px}
.sw{display:inline-block;width:10px;height:10px;margin:0 4px 0 10px;vertical-align:-1px}
.sw.band{background:#d62728;opacity:.2}.sw.window{border:2px dashed #d62728;width:8px;height:8px}
.scale{display:inline-block;width:140px;height:10px;vertical-align:-1px}
table.spikes{border-collapse:collapse;font-size:13px;margin:0 0 14px}table.spikes td,table.spikes th{border:1px solid #d8d8dc;padding:2px 10px;text-align:right;background:#fff}
footer{color:#888;font-size:12px;margin-top:24px}
)";

/// Wrapped report lines as one paragraph's text: the page wraps by itself.
std::string unwrap(const std::vector<std::string>& lines) {
  std::string s;
  for (const auto& l : lines) {
    const std::string t = json_read::trimmed(l);
    if (t.empty()) continue;
    s += (s.empty() ? "" : " ") + t;
  }
  return s;
}

std::string labelled(const char* label, const std::string& text) {
  return "<p><b>" + std::string(label) + "</b> " + escape_html(text) + "</p>\n";
}

const char* severity_class(const std::string& s) {
  switch (severity_of(s)) {
    case Severity::Critical:
      return "critical";
    case Severity::Warning:
      return "warning";
    case Severity::Info:
      return "info";
  }
  return "info";
}

/// The verdict block of the text report (text_report.cpp), as HTML.
std::string verdict_html(const SummaryView& run, const HtmlOptions& opts) {
  const Verdict v = read_verdict(run);
  // A run that ended while a rank hung opens with the hang (DECISIONS 15).
  const std::optional<HangHeadline> hang = hang_headline(run);
  std::string html;
  if (hang)
    html +=
        "<section id=\"hang\" class=\"critical\">\n<p class=\"vline\">Verdict: HANG <span "
        "class=\"sev\">(critical)</span></p>\n" +
        labelled("Why:", hang->why) + labelled("Next:", hang->next) + "</section>\n";
  html += "<section id=\"verdict\" class=\"" + std::string(severity_class(run.severity)) +
          "\">\n<p class=\"vline\">" + (hang ? "Before the hang: " : "Verdict: ") +
          escape_html(v.display);
  if (const std::string sev = severity_word(run.severity); !sev.empty())
    html += " <span class=\"sev\">(" + escape_html(sev) + ")</span>";
  html += "</p>\n";
  if (!json_read::trimmed(v.why).empty()) html += labelled("Why:", v.why);
  const std::optional<SlowWindowNext> slow =
      v.degraded ? std::nullopt : slow_window_next(run, opts.run_dir);
  if (!json_read::trimmed(v.next).empty() || slow) {
    std::string next = v.next;
    if (slow) next += (json_read::trimmed(next).empty() ? "" : " ") + slow->sentence;
    html += labelled("Next:", next);
    if (slow) html += "<pre class=\"cmd\">" + escape_html(slow->command) + "</pre>\n";
    if (slow && !slow->profile.empty()) html += "<p>" + escape_html(slow->profile) + "</p>\n";
  }
  if (const std::string after = unwrap(after_next_lines(run)); !after.empty())
    html += "<p>" + escape_html(after) + "</p>\n";
  // Beside the page: paths relative to it.
  if (const std::vector<std::string> profiles = profile_lines(run, "."); !profiles.empty()) {
    html += "<div id=\"profiles\"><p>" + escape_html(profiles.front()) + "</p>\n<ul>\n";
    for (std::size_t i = 1; i < profiles.size(); ++i)
      html += "<li>" + escape_html(json_read::trimmed(profiles[i])) + "</li>\n";
    html += "</ul></div>\n";
  }
  if (v.degraded) {
    if (const std::string seen = unwrap(observed_anyway_lines(run)); !seen.empty())
      html += "<p>" + escape_html(seen) + "</p>\n";
  }
  return html +
         "<p class=\"scope\">Scope: N = node \u00B7 R = global rank \u00B7 G = GPU index</p>\n" +
         "</section>\n";
}

}  // namespace

std::string render_html(const Json& summary, const model::Telemetry* data,
                        const HtmlOptions& opts) {
  const SummaryView run = view_summary(summary);
  const std::string verdict = hang_headline(run) ? "HANG" : read_verdict(run).display;
  const std::string name = json_read::text_or(json_read::child(run.meta, "run_name"), "run");
  std::string html =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
      // Nothing on the page may load anything: no script, no fetch, no font.
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; "
      "style-src 'unsafe-inline'; img-src data:\">\n<title>TraceML \u00B7 " +
      escape_html(name) + " \u00B7 " + escape_html(verdict) + "</title>\n<style>" + kStyle +
      "</style>\n</head>\n<body>\n<main>\n<header><h1>TraceML Run Summary</h1>\n<p "
      "class=\"meta\">" +
      escape_html(unwrap(meta_lines(run))) + "</p></header>\n";
  html += verdict_html(run, opts);
  if (data != nullptr) {
    html += plots_html(plot_data(run, *data, opts.step_window), slow_window(run));
  } else {
    html +=
        "<section id=\"plots\" class=\"absent\">\n<h2>Plots</h2>\n<p class=\"note\">Plots need the "
        "run directory: this page was made from a summary alone, which holds no per-step data. "
        "<code>traceml report RUN_DIR</code> writes RUN_DIR/final_summary.html with them.</p>\n"
        "</section>\n";
  }
  html +=
      "<section id=\"report\">\n<h2>Report</h2>\n<pre>" + escape_html(summary_text(summary)) +
      "</pre>\n</section>\n<footer>" +
      escape_html(json_read::text_or(json_read::path(run.root, {"producer", "name"}), "traceml") +
                  " " + json_read::text_or(json_read::path(run.root, {"producer", "version"})) +
                  " \u00B7 schema " + json_read::schema_version_text(run.root) + " \u00B7 " +
                  json_read::text_or(json_read::child(run.root, "generated_at"))) +
      "</footer>\n</main>\n</body>\n</html>\n";
  return html;
}

}  // namespace traceml::report
