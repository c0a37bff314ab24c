#include "launcher/manifest.hpp"

namespace traceml::launcher {

namespace {

using report::Json;

/// The `telemetry` block: how much arrived, and what was refused.
Json telemetry_json(const collector::CollectionReport& c,
                    const std::optional<std::int64_t>& records_dropped) {
  Json t = Json::object();
  t["ranks_connected"] = c.ranks_connected;
  t["ranks_unended"] = c.ranks_unended;
  t["records"] = c.records;
  t["records_dropped"] = records_dropped ? Json(*records_dropped) : Json();
  t["invalid_records"] = c.invalid_records;
  t["strings_repaired"] = c.strings_repaired;
  t["rejected_connections"] = c.rejected_connections;
  Json kinds = Json::object();
  for (const auto& [kind, count] : c.rejected_by_kind)
    kinds[kind] = count;
  t["rejected_by_kind"] = kinds;
  t["finalize_timed_out"] = c.timed_out;
  return t;
}

}  // namespace

report::Json manifest_json(const ManifestInput& in) {
  Json j = Json::object();
  j["manifest_version"] = 1;
  j["launched_by"] = "traceml run";
  j["run_name"] = in.run_name;
  j["status"] = model::word(in.status);
  j["exit_code"] = in.outcome.exit_code;
  j["command"] = in.command;
  j["started_at"] = report::iso8601_utc(in.started_at);
  j["ended_at"] = report::iso8601_utc(in.ended_at);
  j["duration_s"] = in.ended_at - in.started_at;
  j["nnodes"] = in.plan.nnodes;
  j["nproc_per_node"] = in.plan.nproc_per_node;
  j["node_rank"] = in.plan.node_rank;
  j["world_size"] = in.plan.nnodes * in.plan.nproc_per_node;
  j["master_addr"] = in.plan.master_addr;
  j["master_port"] = in.plan.master_port;
  j["first_failed_rank"] =
      in.outcome.first_failed_rank ? Json(*in.outcome.first_failed_rank) : Json();
  j["interrupt_signal"] = in.outcome.interrupt_signal ? Json(*in.outcome.interrupt_signal) : Json();
  Json ranks = Json::array();
  for (const RankOutcome& r : in.outcome.ranks) {
    Json o = Json::object();
    o["rank"] = r.global_rank;
    o["local_rank"] = r.local_rank;
    o["pid"] = r.pid;
    o["exit_code"] = r.exit_code;
    o["signal"] = r.signal ? Json(*r.signal) : Json();
    o["stopped_by_launcher"] = r.stopped_by_launcher;
    o["started_at"] = report::iso8601_utc(r.started_at);
    o["ended_at"] = report::iso8601_utc(r.ended_at);
    o["log"] = r.log.empty() ? Json() : Json(r.log);
    if (r.log_rotated) o["log_older"] = r.log + ".1";
    ranks.push_back(o);
  }
  j["ranks"] = ranks;
  j["telemetry"] = telemetry_json(in.collection, in.records_dropped);
  j["artifacts"] = in.artifacts;
  return j;
}

report::Json serve_manifest_json(const ServeManifestInput& in) {
  Json j = Json::object();
  j["manifest_version"] = 1;
  j["launched_by"] = "traceml serve";
  j["run_name"] = in.run_name;
  j["status"] = model::word(in.status);
  j["exit_code"] = in.exit_code;
  j["end_reason"] = model::word(in.end_reason);
  j["started_at"] = report::iso8601_utc(in.started_at);
  j["ended_at"] = report::iso8601_utc(in.ended_at);
  j["duration_s"] = in.ended_at - in.started_at;
  j["world_size"] = in.world_size ? Json(*in.world_size) : Json();
  j["listen"] = in.listen;
  Json ranks = Json::array();
  for (const ServedRank& r : in.ranks) {
    Json o = Json::object();
    o["rank"] = r.global_rank;
    o["ended"] = model::word(r.ended);
    if (r.exit_status) o["exit_code"] = *r.exit_status;  // an added key: its goodbye said it
    ranks.push_back(o);
  }
  j["ranks"] = ranks;
  j["telemetry"] = telemetry_json(in.collection, in.records_dropped);
  j["artifacts"] = in.artifacts;
  return j;
}

}  // namespace traceml::launcher
