// traceml view SUMMARY.json [--html [OUT]] — prints the text report of a
// summary written by traceml or by TraceML (rendered from the JSON when it
// carries no text), or writes it as an HTML page.
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "output_paths.hpp"
#include "report/atomic_file.hpp"
#include "report/html/html_report.hpp"
#include "report/summary_file.hpp"
#include "report/text/text_report.hpp"
#include "store/run_db.hpp"

namespace traceml::cli {

namespace {

namespace fs = std::filesystem;

struct ViewArgs {
  std::string summary;
  bool html = false;     ///< --html given
  std::string html_out;  ///< its value; empty: <summary stem>.html beside the summary
};

/// Where --html writes the page of the summary at `summary_path`.
fs::path html_path(const std::string& summary_path, const ViewArgs& a) {
  return a.html_out.empty() ? fs::path(summary_path).replace_extension(".html")
                            : fs::path(a.html_out);
}

/// The page of a summary alone (it says that the plots need the run
/// directory), written to `out` atomically.
int write_html(const std::string& summary_path, const nlohmann::ordered_json& j,
               const ViewArgs& a) {
  const fs::path input(summary_path);
  const fs::path out = html_path(summary_path, a);
  std::error_code ec;
  if (fs::equivalent(out, input, ec))
    return fail(out.string() + ": is the summary itself; pass another --html path");
  // Beside a run's database, the default path is the run's own page, which
  // has the plots this one cannot draw: never replace it with less.
  if (a.html_out.empty() && fs::exists(out, ec) &&
      fs::exists(input.parent_path() / store::kRunDbFileName, ec))
    return fail(out.string() + ": the run's own page, with plots (traceml report " +
                input.parent_path().string() +
                " rebuilds it); pass --html OUT to write this summary's page elsewhere");
  try {
    report::write_file_atomic(out.string(), report::render_html(j, nullptr));
  } catch (const report::WriteError& e) {
    return fail(std::string(e.what()) + " (choose a writable --html path)");
  }
  std::cerr << "traceml: wrote HTML report: " << out.string() << "\n";
  return kExitOk;
}

int run_view(const ViewArgs& a) {
  const SummaryPath resolved = resolve_summary_path(a.summary);
  if (!resolved.error.empty()) return fail(resolved.error);
  const std::string& path = resolved.path;
  std::ifstream in(path, std::ios::binary);
  if (!in) return fail(path + ": cannot open file: " + std::strerror(errno));
  std::stringstream buf;
  buf << in.rdbuf();
  const report::SummaryParse summary = report::parse_summary_to_view(buf.str());
  if (!summary.json)
    return fail(path + ": " + summary.problem + "; pass a final_summary.json file");
  const nlohmann::ordered_json& j = *summary.json;
  if (a.html) return write_html(path, j, a);
  std::string text = report::summary_text(j);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  std::cout << text << "\n";
  return kExitOk;
}

/// The page's path, checked before the summary is read: a command that
/// exits 2 writes nothing.
std::optional<std::string> check_view(const ViewArgs& a) {
  if (!a.html) return std::nullopt;
  const SummaryPath resolved = resolve_summary_path(a.summary);
  if (!resolved.error.empty()) return resolved.error;
  return unwritable_file("--html", html_path(resolved.path, a).string(), false);
}

}  // namespace

SummaryPath resolve_summary_path(const std::string& arg) {
  std::error_code ec;
  if (!fs::is_directory(arg, ec)) return {arg, ""};
  const fs::path inside = fs::path(arg) / "final_summary.json";
  if (fs::is_regular_file(inside, ec)) return {inside.string(), ""};
  return {"", arg +
                  ": a directory without final_summary.json; pass a run directory "
                  "(logs/<run>) or a final_summary.json file"};
}

void add_view_command(CLI::App& app, Action& action) {
  auto args = std::make_shared<ViewArgs>();
  CLI::App* cmd = app.add_subcommand(
      "view",
      "Print the text report of a final_summary.json (or of a run directory's), or write it as "
      "an HTML page.");
  cmd->add_option("summary", args->summary,
                  "final_summary.json written by traceml or TraceML, or a run directory")
      ->required();
  CLI::Option* html =
      cmd->add_option("--html", args->html_out,
                      "Write the summary as an HTML page (verdict and tables; the plots need the "
                      "run directory: traceml report RUN_DIR) to OUT, by default "
                      "<summary stem>.html beside the summary")
          ->expected(0, 1);
  cmd->callback([args, html, &action] {
    args->html = html->count() > 0;
    action.check = [args] { return check_view(*args); };
    action.run = [args] { return run_view(*args); };
  });
}

}  // namespace traceml::cli
