// traceml view SUMMARY.json — prints the text report of a summary written by
// traceml or by TraceML (rendered from the JSON when it carries no text).
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "report/summary_file.hpp"
#include "report/text_report.hpp"

namespace traceml::cli {

namespace {

int run_view(const std::string& arg) {
  const SummaryPath resolved = resolve_summary_path(arg);
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
  std::string text = report::summary_text(j);
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  std::cout << text << "\n";
  return kExitOk;
}

}  // namespace

SummaryPath resolve_summary_path(const std::string& arg) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(arg, ec)) return {arg, ""};
  const fs::path inside = fs::path(arg) / "final_summary.json";
  if (fs::is_regular_file(inside, ec)) return {inside.string(), ""};
  return {"", arg +
                  ": a directory without final_summary.json; pass a run directory "
                  "(logs/<run>) or a final_summary.json file"};
}

void add_view_command(CLI::App& app, Action& action) {
  auto path = std::make_shared<std::string>();
  CLI::App* cmd = app.add_subcommand(
      "view", "Print the text report of a final_summary.json (or of a run directory's).");
  cmd->add_option("summary", *path,
                  "final_summary.json written by traceml or TraceML, or a run directory")
      ->required();
  cmd->callback([path, &action] { action = [path] { return run_view(*path); }; });
}

}  // namespace traceml::cli
