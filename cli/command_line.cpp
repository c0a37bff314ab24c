// Reading `traceml`'s command line: the CLI11 app with every subcommand, the
// usage errors main reports before anything runs, and each command's check.
// Shared by main.cpp and the fuzz target fuzz_cli.
#include <algorithm>
#include <exception>
#include <iostream>
#include <sstream>

#include "commands.hpp"
#include "model/text.hpp"
#include "traceml/version.hpp"

namespace traceml::cli {

// Messages may quote what a user or a peer gave us (a path, a host name, a
// library's error text): escaped, so they can never drive the terminal, and
// never more than the one line they promise.
int fail(const std::string& message) {
  std::cerr << "traceml: error: " << model::escape_for_terminal(message, true) << "\n";
  return kExitBadInput;
}

void warn(const std::string& message) {
  std::cerr << "traceml: warning: " << model::escape_for_terminal(message, true) << "\n";
}

namespace {

/// Each command's one-line usage, said when it is given nothing, or
/// something it does not take: `traceml <command> --help` has the rest.
struct ShortUsage {
  const char* command;
  const char* usage;
};
constexpr ShortUsage kShortUsage[] = {
    {"run", "traceml run [options] -- PROGRAM [ARGS...]"},
    {"serve", "traceml serve [--port N] [--world-size N] [options]"},
    {"report",
     "traceml report RUN_DIR | traceml report DIR... --out DIR | traceml report --telemetry "
     "FILE.jsonl --out DIR"},
    {"export", "traceml export RUN_DIR --out FILE [--format jsonl|chrome-trace] [--steps A:B]"},
    {"view", "traceml view SUMMARY.json|RUN_DIR [--html [OUT]]"},
    {"compare", "traceml compare A B [--output BASE] [gates]"},
};

std::string short_usage(const std::string& command) {
  for (const ShortUsage& u : kShortUsage)
    if (command == u.command)
      return std::string("usage: ") + u.usage + "\n       run 'traceml " + command +
             " --help' for the options\n";
  return "usage: traceml COMMAND ...; run 'traceml --help' for the commands\n";
}

/// CLI11's "The following arguments were not expected: -- --bogus" as the
/// words the user typed: "unknown option --bogus", "unexpected argument x".
std::string not_expected(const std::string& what) {
  const auto colon = what.find(": ");
  std::istringstream words(colon == std::string::npos ? what : what.substr(colon + 2));
  std::vector<std::string> options, others;
  for (std::string w; words >> w;) {
    if (w == "--") continue;
    (w.size() > 1 && w[0] == '-' ? options : others).push_back(w);
  }
  const auto listed = [](const std::vector<std::string>& v) {
    std::string s;
    for (const std::string& w : v)
      s += (s.empty() ? "" : " ") + w;
    return s;
  };
  if (!options.empty())
    return std::string(options.size() == 1 ? "unknown option " : "unknown options ") +
           listed(options);
  if (!others.empty())
    return std::string(others.size() == 1 ? "unexpected argument " : "unexpected arguments ") +
           listed(others);
  return what;
}

}  // namespace

CommandLine read_command_line(const std::vector<std::string>& args) {
  CommandLine out;
  const auto usage_error = [&](std::string message) {
    out.exit_code = kExitBadInput;
    out.error = std::move(message);
    return out;
  };
  CLI::App app{"traceml: find out why LibTorch training is slow.", "traceml"};
  app.set_version_flag("--version", std::string("traceml ") + traceml::version());
  app.require_subcommand(1);
  Action action;
  add_run_command(app, action);
  add_serve_command(app, action);
  add_report_command(app, action);
  add_export_command(app, action);
  add_view_command(app, action);
  add_compare_command(app, action);
  const auto subs = app.get_subcommands({});
  const std::string first = args.size() > 1 ? args[1] : "";
  const bool known = args.size() < 2 || (!first.empty() && first[0] == '-') ||
                     std::any_of(subs.begin(), subs.end(),
                                 [&](const CLI::App* sub) { return sub->check_name(first); });
  if (!known) {
    std::string names;
    for (const CLI::App* sub : subs)
      names += (names.empty() ? "" : ", ") + sub->get_name();
    return usage_error("unknown command '" + first + "' (commands: " + names + ")");
  }
  // A command that needs arguments, given none: its usage, not the first
  // missing argument's name.
  if (args.size() == 2 && first[0] != '-') {
    for (const CLI::App* sub : subs) {
      if (!sub->check_name(first)) continue;
      const auto opts = sub->get_options([](const CLI::Option* o) { return o->get_required(); });
      if (opts.empty()) break;
      out.usage = short_usage(sub->get_name());
      return usage_error("'" + sub->get_name() + "' needs arguments (usage above)");
    }
  }
  std::vector<const char*> argv;
  for (const std::string& a : args)
    argv.push_back(a.c_str());
  try {
    app.parse(int(argv.size()), argv.data());
  } catch (const CLI::Success& e) {  // --help, --help-all, --version
    std::ostringstream text, err;
    out.exit_code = app.exit(e, text, err);
    out.out = text.str();
    out.usage = err.str();
    return out;
  } catch (const CLI::ParseError& e) {
    // Where the options are: the command's own help when one was named.
    const bool command = std::any_of(subs.begin(), subs.end(),
                                     [&](const CLI::App* sub) { return sub->check_name(first); });
    const std::string help =
        " (run 'traceml " + (command ? first + " " : std::string()) + "--help' for the options)";
    // Not CLI11's "-- --bogus-flag": the word the user typed.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr)
      return usage_error(not_expected(e.what()) + help);
    return usage_error(std::string(e.what()) + help);
  }
  if (action.check)
    if (auto problem = action.check()) return usage_error(std::move(*problem));
  out.action = std::move(action);
  return out;
}

}  // namespace traceml::cli
