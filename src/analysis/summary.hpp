// The whole diagnosis of a run: the four sections, the run-level primary
// diagnosis (spec §4.5) and the meta block (spec §5.2). A pure function of the
// telemetry; no I/O.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "analysis/section.hpp"
#include "model/telemetry.hpp"

namespace traceml::analysis {

struct StepWindow;

struct Options {
  /// Latest aligned steps / samples per rank analysed (TraceML's summary_window_rows).
  std::int64_t window = 10000;
};

/// The run-level verdict (spec §4.5).
struct Primary {
  std::string kind;
  std::string status;
  Severity severity = Severity::Info;
  std::string section;  ///< "step_time" | "system"
  std::string summary;
  std::string action;
  Json evidence = Json::object();

  /// Sets `kind` and `status` from the vocabulary.
  void set_kind(DiagnosisKind k) {
    kind = to_string(k);
    status = status_of(k);
  }
};

struct Meta {
  std::optional<std::string> run_name;
  std::string mode = "no_data";
  std::optional<std::int64_t> world_size;
  std::optional<std::int64_t> nodes_observed;
  std::optional<std::int64_t> gpus_observed;
};

struct Summary {
  /// TraceML's: the span of a section's samples (spec §5.1).
  std::optional<double> duration_s;
  /// The run's own (DECISIONS 16): from the earliest moment any record
  /// covers to the latest record, so never shorter than the steps' span.
  std::optional<double> run_duration_s;
  Meta meta;
  Primary primary;
  Section system;
  Section process;
  Section step_time;
  Section step_memory;
  /// The aligned steps the step-time section was diagnosed on (views into
  /// the telemetry, which must outlive it), for reports that draw the same
  /// steps without aligning them again; null when the section failed.
  std::shared_ptr<const StepWindow> step_window;
};

Section analyze_system(const model::Telemetry& t, const Options& o);
Section analyze_process(const model::Telemetry& t, const Options& o);
/// `window`, when given, receives the aligned steps the section was built on.
Section analyze_step_time(const model::Telemetry& t, const Options& o,
                          std::shared_ptr<const StepWindow>* window = nullptr);
Section analyze_step_memory(const model::Telemetry& t, const Options& o);

/// Spec §4.5: promotes the step-time finding, or explains why there is none.
Primary primary_diagnosis(const Section& system, const Section& process, const Section& step_time,
                          const Section& step_memory);

/// When a step began, in unix seconds: `end_ts` (a step record's `ts`) less
/// its traced time and the input wait before it, those it has (finite, > 0).
double step_begin(double end_ts, std::optional<double> traced_ms,
                  std::optional<double> input_wait_ms);

/// The run's duration in seconds (Summary::run_duration_s): from
/// `totals.earliest_ts` (else the records' earliest step begin or sample) to
/// `totals.latest_ts` (else their latest `ts`); absent without records.
std::optional<double> run_duration(const model::Telemetry& t);

/// Runs every section (a section that throws becomes the fallback payload) and
/// derives meta and the primary diagnosis.
Summary summarize(const model::Telemetry& t, const Options& o = {});

}  // namespace traceml::analysis
