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
      out.usage = sub->help();
      return usage_error("'" + first + "' needs arguments (usage above)");
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
    return usage_error(std::string(e.what()) + " (run 'traceml --help' for usage)");
  }
  if (action.check)
    if (auto problem = action.check()) return usage_error(std::move(*problem));
  out.action = std::move(action);
  return out;
}

}  // namespace traceml::cli
