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
                                 const std::optional<Json>& profiles,
                                 const std::optional<Json>& timeline) {
  FinalSummary f;
  f.json = summary_json(s, generated_at, tracer);
  f.step_window = s.step_window;
  if (run) f.json["run"] = *run;
  if (partial) f.json["partial"] = *partial;
  if (profiles && !profiles->empty()) f.json["profiles"] = *profiles;
  if (timeline) f.json["timeline"] = *timeline;
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

namespace {

void rerender(FinalSummary& s) {
  s.text = render_text(s.json, s.text_options);
  s.json["text"] = s.text;
}

/// `s` naming no timeline (its key gone, its text again).
void drop_timeline(FinalSummary& s) {
  if (s.json.erase("timeline") > 0) rerender(s);
}

}  // namespace

void write_run_report(FinalSummary& f, const std::string& dir, const model::Telemetry* telemetry,
                      const PageLimits& page_limits, const ExtraWriter& timeline) {
  const bool has_timeline = timeline && f.json.contains("timeline");
  const std::string html_hint = f.text_options.html_hint;
  if (html_hint.empty()) {
    if (has_timeline)
      if (auto error = timeline()) {
        f.timeline_error = *error;
        drop_timeline(f);
      }
    write_final_summary(f, dir);
    return;
  }
  // The summary as it reads once the page and the timeline exist: the page
  // shows this text.
  FinalSummary named = f;
  // The page's child starts first and draws while this process writes the
  // JSON and the text, naming neither the page nor the timeline, then the
  // timeline (the two take about as long, on two cores): whatever drawing
  // the page does (a loop that never ends, memory without bound, a crash),
  // the summary is on disk before the page is waited for. (A child killed
  // on the way out if writing them throws.)
  HtmlOptions opts;
  opts.run_dir = named.text_options.run_dir;
  opts.step_window = named.step_window.get();
  PageChild child(named.json, telemetry, opts, page_limits);
  FinalSummary bare = f;
  bare.text_options.html_hint.clear();
  if (has_timeline) bare.json.erase("timeline");
  rerender(bare);
  write_final_summary(bare, dir);
  std::optional<std::string> timeline_error;
  if (has_timeline) timeline_error = timeline();
  if (timeline_error) drop_timeline(named);

  const fs::path page_path = fs::path(dir) / "final_summary.html";
  DrawnPage drawn = child.finish();
  if (timeline_error && drawn.page) {
    // It was drawn naming the timeline that could not be written: drawn
    // again (a rare path: the disk that refused the timeline).
    PageChild again(named.json, telemetry, opts, page_limits);
    drawn = again.finish();
  }
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
  // What the files say last, and what the caller prints: the page and the
  // timeline that exist, and none that does not.
  FinalSummary last = std::move(named);
  if (error) {
    // A page left from an earlier report would be another summary's.
    std::error_code ec;
    if (fs::is_regular_file(page_path, ec)) fs::remove(page_path, ec);
    last.text_options.html_hint.clear();
    rerender(last);
  }
  if (error && (!has_timeline || timeline_error)) {
    last = std::move(bare);  // on disk already
  } else {
    try {
      write_final_summary(last, dir);
    } catch (const WriteError&) {
      // The JSON and text on disk are whole and agree; they just name
      // neither the page nor the timeline, and neither does what the
      // caller prints.
      last = std::move(bare);
    }
  }
  if (error) last.html_error = "final_summary.html not written: " + *error;
  if (timeline_error) last.timeline_error = timeline_error;
  f = std::move(last);
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::weakly_canonical(fs::absolute(path, ec), ec);
  if (ec || p.empty()) {
    ec.clear();
    p = fs::absolute(path, ec).lexically_normal();
    if (ec) p = fs::path(path).lexically_normal();
  }
  // "dir/" and "dir" are one directory: no trailing separator.
  if (p.filename().empty() && p.has_parent_path() && p != p.root_path()) p = p.parent_path();
  return p.string();
}

std::string path_for_terminal(const std::string& path) {
  std::error_code ec;
  const fs::path cwd = fs::current_path(ec);
  if (ec || cwd.empty() || !fs::path(path).is_absolute()) return path;
  const fs::path rel = fs::path(path).lexically_relative(absolute_path(cwd.string()));
  if (rel.empty() || *rel.begin() == "..") return path;
  return rel.string();
}

std::string html_hint_for(const std::string& dir) {
  return (fs::path(absolute_path(dir)) / "final_summary.html").string();
}

std::string evidence_hint_for(const std::string& dir) {
  return (fs::path(absolute_path(dir)) / "final_summary.json").string();
}

std::string run_dir_hint_for(const std::string& dir) {
  return absolute_path(dir);
}

std::string terminal_text(const FinalSummary& f) {
  TextOptions o = f.text_options;
  const auto local = [](std::string& p) {
    if (!p.empty()) p = path_for_terminal(p);
  };
  local(o.evidence_hint);
  local(o.html_hint);
  local(o.run_dir);
  if (o.evidence_hint == f.text_options.evidence_hint && o.html_hint == f.text_options.html_hint &&
      o.run_dir == f.text_options.run_dir)
    return f.text;
  return render_text(f.json, o);
}

}  // namespace traceml::report
