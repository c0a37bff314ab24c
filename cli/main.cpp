// traceml: the command-line entry point. CLI11 wiring only; every subcommand
// is a thin call into the library.
#include <algorithm>
#include <exception>
#include <iostream>

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

}  // namespace traceml::cli

int main(int argc, char** argv) {
  using namespace traceml::cli;
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
  const bool known = argc < 2 || argv[1][0] == '-' ||
                     std::any_of(subs.begin(), subs.end(),
                                 [&](const CLI::App* sub) { return sub->check_name(argv[1]); });
  if (!known) {
    std::string names;
    for (const CLI::App* sub : subs)
      names += (names.empty() ? "" : ", ") + sub->get_name();
    return fail(std::string("unknown command '") + argv[1] + "' (commands: " + names + ")");
  }
  // A command that needs arguments, given none: its usage, not the first
  // missing argument's name.
  if (argc == 2 && argv[1][0] != '-') {
    for (const CLI::App* sub : subs) {
      if (!sub->check_name(argv[1])) continue;
      const auto opts = sub->get_options([](const CLI::Option* o) { return o->get_required(); });
      if (opts.empty()) break;
      std::cerr << sub->help();
      return fail(std::string("'") + argv[1] + "' needs arguments (usage above)");
    }
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    return fail(std::string(e.what()) + " (run 'traceml --help' for usage)");
  }
  try {
    return action ? action() : kExitOk;
  } catch (const std::exception& e) {
    return fail(e.what());
  }
}
