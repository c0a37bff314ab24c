// fuzz_jsonl: the telemetry JSONL boundary (`traceml report --telemetry F`).
// The input is a whole file. Promises checked, each aborting when broken:
// - the in-memory and the stream readers give the same verdict (the same
//   error line, or the same warnings and the same telemetry);
// - bad input is a TelemetryError, never another exception or a crash;
// - what the reader accepts the writer writes, and reads back unchanged
//   (written twice, the bytes are equal);
// - the report pipeline (summarize, final summary, text) never throws on it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>

#include "analysis/summary.hpp"
#include "collector/finalize.hpp"
#include "report/final_summary.hpp"
#include "store/jsonl_reader.hpp"
#include "store/jsonl_writer.hpp"

namespace {

using traceml::store::ReadResult;
using traceml::store::TelemetryError;

[[noreturn]] void broken(const std::string& why) {
  std::fprintf(stderr, "fuzz_jsonl: %s\n", why.c_str());
  std::abort();
}

/// The reader's result, or its one error line in `error`.
template <class Read>
std::optional<ReadResult> attempt(Read read, std::string& error) {
  try {
    return read();
  } catch (const TelemetryError& e) {
    error = e.what();
    if (error.empty() || error.find('\n') != std::string::npos)
      broken("a TelemetryError that is not one line: '" + error + "'");
    return std::nullopt;
  }
}

std::string written(const traceml::model::Telemetry& t) {
  std::ostringstream out;
  try {
    traceml::store::write_telemetry_jsonl(t, out);
  } catch (const std::exception& e) {
    broken(std::string("the writer refused what the reader accepted: ") + e.what());
  }
  return out.str();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::string parse_error;
  const std::optional<ReadResult> parsed = attempt(
      [&] { return traceml::store::parse_telemetry_jsonl(text, "fuzz.jsonl"); }, parse_error);
  std::string stream_error;
  const std::optional<ReadResult> streamed = attempt(
      [&] {
        std::istringstream in{std::string(text)};
        return traceml::store::read_telemetry_jsonl(in, "fuzz.jsonl");
      },
      stream_error);
  if (parse_error != stream_error)
    broken("the readers disagree: '" + parse_error + "' vs '" + stream_error + "'");
  if (!parsed) return 0;
  if (parsed->warnings != streamed->warnings) broken("the readers' warnings differ");

  const std::string once = written(parsed->telemetry);
  if (written(streamed->telemetry) != once) broken("the readers' telemetry differs");
  std::string again_error;
  const std::optional<ReadResult> again = attempt(
      [&] { return traceml::store::parse_telemetry_jsonl(once, "written.jsonl"); }, again_error);
  if (!again) broken("the reader rejects what the writer wrote: " + again_error);
  if (written(again->telemetry) != once) broken("a write/read round trip changed the telemetry");

  // What `traceml report --telemetry` does with it; documented never to throw.
  const traceml::analysis::Summary s = traceml::analysis::summarize(parsed->telemetry);
  const traceml::report::FinalSummary f = traceml::report::build_final_summary(
      s, traceml::report::iso8601_utc(traceml::collector::end_of_run(parsed->telemetry)),
      "fuzz/final_summary.json");
  if (f.text.empty()) broken("an empty text report");
  return 0;
}
