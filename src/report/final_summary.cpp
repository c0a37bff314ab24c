#include "report/final_summary.hpp"

#include <filesystem>
#include <system_error>

#include "report/atomic_file.hpp"
#include "report/html/html_report.hpp"
#include "report/html/page_process.hpp"
#include "report/text/text_report.hpp"

namespace traceml::report {

namespace fs = std::filesystem;

FinalSummary build_final_summary(const analysis::Summary& s, const std::string& generated_at,
                                 const std::string& evidence_hint,
                                 const std::optional<Json>& tracer, const std::optional<Json>& run,
                                 const std::string& run_dir, const std::string& html_hint,
                                 const std::optional<Json>& partial,
                                 const std::optional<Json>& profiles) {
  FinalSummary f;
  f.json = summary_json(s, generated_at, tracer);
  f.step_window = s.step_window;
  if (run) f.json["run"] = *run;
  if (partial) f.json["partial"] = *partial;
  if (profiles && !profiles->empty()) f.json["profiles"] = *profiles;
  f.text_options.evidence_hint = evidence_hint;
  f.text_options.run_dir = run_dir;
  f.text_options.html_hint = html_hint;
  f.text = render_text(f.json, f.text_options);
  f.json["text"] = f.text;
  return f;
}

void write_final_summary(const FinalSummary& f, const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw WriteError(dir + ": cannot create directory: " + ec.message());
  // Both documents are complete in memory before either file is touched.
  const std::string json = dump_json(f.json) + "\n";
  const std::string text = f.text + "\n";
  write_file_atomic((fs::path(dir) / "final_summary.json").string(), json);
  write_file_atomic((fs::path(dir) / "final_summary.txt").string(), text);
}

void write_run_report(FinalSummary& f, const std::string& dir, const model::Telemetry* telemetry,
                      const PageLimits& page_limits) {
  const std::string html_hint = f.text_options.html_hint;
  if (html_hint.empty()) {
    write_final_summary(f, dir);
    return;
  }
  // The summary as it reads once the page exists: the page shows this text.
  FinalSummary named = f;
  // The page's child starts first and draws while this process writes the
  // JSON and the text, naming no page: whatever drawing the page does (a
  // loop that never ends, memory without bound, a crash), they are on disk
  // before the page is waited for. (A child killed on the way out if writing
  // them throws.)
  HtmlOptions opts;
  opts.run_dir = named.text_options.run_dir;
  opts.step_window = named.step_window.get();
  PageChild child(named.json, telemetry, opts, page_limits);
  f.text_options.html_hint.clear();
  f.text = render_text(f.json, f.text_options);
  f.json["text"] = f.text;
  write_final_summary(f, dir);

  const fs::path page_path = fs::path(dir) / "final_summary.html";
  const DrawnPage drawn = child.finish();
  std::optional<std::string> error;
  if (drawn.page) {
    try {
      write_file_atomic(page_path.string(), *drawn.page);
    } catch (const WriteError& e) {
      error = e.what();
    }
  } else {
    error = drawn.error;
  }
  if (error) {
    f.html_error = "final_summary.html not written: " + *error;
    // A page left from an earlier report would be another summary's.
    std::error_code ec;
    if (fs::is_regular_file(page_path, ec)) fs::remove(page_path, ec);
    return;
  }
  // The page exists: the text names it now.
  try {
    write_final_summary(named, dir);
    f = std::move(named);
  } catch (const WriteError&) {
    // The JSON and text on disk are whole and agree; they just do not name
    // the page, and neither does what the caller prints.
  }
}

std::string html_hint_for(const std::string& dir) {
  return (fs::path(evidence_hint_for(dir)).parent_path() / "final_summary.html").string();
}

std::string evidence_hint_for(const std::string& dir) {
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  const fs::path parent = p.parent_path().filename();
  fs::path hint = parent.empty() || parent == "." ? p.filename() : parent / p.filename();
  return (hint / "final_summary.json").string();
}

std::string run_dir_hint_for(const std::string& dir) {
  return fs::path(evidence_hint_for(dir)).parent_path().string();
}

}  // namespace traceml::report
