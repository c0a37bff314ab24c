// Drawing final_summary.html in a child process with a time and a memory
// limit. The page is an extra: a plot loop that never returns, memory without
// bound or a crash while drawing it must cost the run neither its summary nor
// its end. A time budget checked between steps cannot stop a loop that never
// returns; a process that is killed can.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/telemetry.hpp"
#include "report/html/html_report.hpp"
#include "report/summary_json.hpp"

namespace traceml::report {

/// The largest limits a variable may set: a limit is only useful if it ends.
inline constexpr double kMaxPageTimeoutSec = 86400.0;     // a day
inline constexpr long long kMaxPageMemoryMb = 1LL << 30;  // a pebibyte

struct PageLimits {
  /// How long the child may draw before it is killed.
  std::chrono::milliseconds time{std::chrono::seconds(60)};
  /// Address space the child may add to what it inherited (RLIMIT_AS);
  /// 0: no limit.
  std::uint64_t memory_bytes = std::uint64_t(2048) << 20;
};

/// The limits from the values of TRACEML_PAGE_TIMEOUT_S (seconds, > 0, at
/// most a day) and TRACEML_PAGE_MEMORY_MB (MiB, at least 1), as read by the
/// process that draws the page: the CLI (cli/page_limits.hpp) or a rank's
/// runtime (runtime::resolve_config). Absent or empty: unset. A set value
/// that is no limit leaves its default and adds one line to `problems`,
/// "NAME='value' is not ...", for the caller to say in its own way (the CLI
/// refuses to run, the runtime warns).
PageLimits page_limits_from(const std::optional<std::string>& timeout_s,
                            const std::optional<std::string>& memory_mb,
                            std::vector<std::string>& problems);

struct DrawnPage {
  std::optional<std::string> page;  ///< the whole page; absent when it could not be drawn
  std::string error;                ///< why not, one line ("drawing it took longer than 60 s ...")
};

/// render_html(summary, run, opts), drawn by a forked child that only renders,
/// sends the page back through a pipe and _exits. The child is killed when it
/// outlives limits.time, and is always reaped. The page comes back only when
/// it arrived whole; the caller writes it (nothing the child does touches a
/// file). Never throws.
///
/// Test hook, inert unless set: TRACEML_TEST_PAGE_FAULT=hang|abort|oom makes
/// the child wait forever, abort, or allocate until its memory limit stops it
/// (docs/html-report.md).
DrawnPage draw_page_in_child(const Json& summary, const model::Telemetry* run,
                             const HtmlOptions& opts, const PageLimits& limits);

/// draw_page_in_child in two halves, so that the caller works while the page
/// draws (the end of a run writes the JSON and the text meanwhile): the
/// constructor forks the child (limits.time counts from here), finish()
/// takes the page or says why not. A child not finished is killed and
/// reaped by the destructor. Never throws.
class PageChild {
 public:
  PageChild(const Json& summary, const model::Telemetry* run, const HtmlOptions& opts,
            const PageLimits& limits);
  ~PageChild();
  PageChild(const PageChild&) = delete;
  PageChild& operator=(const PageChild&) = delete;

  /// Waits for the page until the deadline; once.
  DrawnPage finish();

 private:
  PageLimits limits_;
  std::chrono::steady_clock::time_point deadline_;
  int pid_ = -1;
  int fd_ = -1;
  std::string error_;  ///< why no child was started
};

}  // namespace traceml::report
