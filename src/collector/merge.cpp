#include "collector/merge.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>
#include <set>

#include "model/text.hpp"
#include "store/jsonl_reader.hpp"
#include "store/run_db.hpp"

namespace traceml::collector {

namespace {

namespace fs = std::filesystem;

/// Ranks of one job run at the same time: their records' time spans
/// overlap. They start and stop a little apart (a rank that fails early
/// stops first, but started with the others), so spans that miss each other
/// by up to this much still count as overlapping; two runs one after the
/// other do not.
constexpr double kSpanSlackSec = 5.0;

struct Piece {
  std::string source;  ///< the input as given
  store::RunData data;
  std::set<int> ranks;
  std::optional<int> world;
  std::optional<double> first, last;  ///< the span of its records' timestamps
};

void widen(Piece& p, double ts) {
  if (!std::isfinite(ts)) return;
  p.first = std::min(p.first.value_or(ts), ts);
  p.last = std::max(p.last.value_or(ts), ts);
}

std::string quoted(const std::string& s) {
  return model::escape_for_terminal(s, true);
}

Piece read_piece(const std::string& input, std::vector<std::string>& warnings) {
  Piece p;
  p.source = input;
  std::error_code ec;
  if (fs::is_directory(input, ec)) {
    const fs::path db = fs::path(input) / store::kRunDbFileName;
    if (!fs::exists(db, ec))
      throw MergeError(input + " holds no " + store::kRunDbFileName +
                       " (pass run directories that traceml wrote, or telemetry JSONL files)");
    try {
      p.data = store::read_run_db(db.string());
    } catch (const std::exception& e) {
      throw MergeError(e.what());
    }
    if (p.data.telemetry.run.run_name.empty())
      p.data.telemetry.run.run_name = fs::path(input).filename().string();
  } else if (fs::is_regular_file(input, ec)) {
    try {
      store::ReadResult r = store::read_telemetry_jsonl(input);
      p.data.telemetry = std::move(r.telemetry);
      warnings.insert(warnings.end(), r.warnings.begin(), r.warnings.end());
    } catch (const std::exception& e) {
      throw MergeError(e.what());
    }
  } else {
    throw MergeError(input + ": no such run directory or telemetry file");
  }
  const model::Telemetry& t = p.data.telemetry;
  p.world = t.run.world_size;
  for (const model::RankIdentity& id : t.ranks) {
    p.ranks.insert(id.global_rank);
    if (!p.world && id.world_size) p.world = id.world_size;
  }
  for (const model::StepRecord& r : t.steps) {
    p.ranks.insert(r.global_rank);
    widen(p, r.ts);
  }
  for (const auto& s : t.process) {
    p.ranks.insert(s.global_rank);
    widen(p, s.ts);
  }
  for (const auto& s : t.system)
    widen(p, s.ts);
  for (const auto& d : p.data.deliveries)
    p.ranks.insert(d.global_rank);
  if (p.ranks.empty()) throw MergeError(input + " holds no rank's telemetry; nothing to merge");
  return p;
}

/// Why the pieces are not one job, or nothing.
std::optional<std::string> not_one_job(const std::vector<Piece>& pieces) {
  const Piece& a = pieces.front();
  std::map<int, const Piece*> owner;
  for (const Piece& p : pieces) {
    if (p.world != a.world)
      return "different runs: " + quoted(a.source) + " is of world size " +
             (a.world ? std::to_string(*a.world) : "unknown") + ", " + quoted(p.source) + " of " +
             (p.world ? std::to_string(*p.world) : "unknown");
    for (const int r : p.ranks) {
      if (p.world && r >= *p.world)
        return quoted(p.source) + " holds rank " + std::to_string(r) + ", outside its world size " +
               std::to_string(*p.world);
      const auto [it, fresh] = owner.emplace(r, &p);
      if (!fresh)
        return "rank " + std::to_string(r) + " is in both " + quoted(it->second->source) + " and " +
               quoted(p.source) + " (the same piece twice, or two runs)";
    }
    const std::string sa = run_name_stem(a.data.telemetry.run.run_name);
    const std::string sp = run_name_stem(p.data.telemetry.run.run_name);
    if (!sa.empty() && !sp.empty() && sa != sp)
      return "different runs: " + quoted(a.source) + " is a run of '" + quoted(sa) + "', " +
             quoted(p.source) + " of '" + quoted(sp) + "'";
    if (a.first && p.first &&
        (*p.first > *a.last + kSpanSlackSec || *a.first > *p.last + kSpanSlackSec))
      return "different runs: " + quoted(a.source) + " and " + quoted(p.source) +
             " did not run at the same time (one's records end more than " +
             std::to_string(int(kSpanSlackSec)) + " s before the other's begin)";
  }
  return std::nullopt;
}

}  // namespace

std::string run_name_stem(const std::string& name) {
  // The collision suffix (_2) goes first, then _rank<N>, then the timestamp.
  std::string s = name;
  static const std::regex collision("_[0-9]{1,4}$");
  static const std::regex rank("_rank[0-9]+$");
  static const std::regex stamp("_[0-9]{8}_[0-9]{6}$");
  if (!std::regex_search(s, rank) && !std::regex_search(s, stamp))
    s = std::regex_replace(s, collision, "");
  s = std::regex_replace(s, rank, "");
  s = std::regex_replace(s, stamp, "");
  return s;
}

MergeResult merge_runs(const std::vector<std::string>& inputs, const std::string& out_dir) {
  if (inputs.empty()) throw MergeError("no run directory or telemetry file to merge");
  const fs::path out(out_dir);
  const fs::path db = out / store::kRunDbFileName;
  std::error_code ec;
  if (fs::exists(db, ec))
    throw MergeError(out_dir + " already holds a run (" + store::kRunDbFileName +
                     "); choose another --out");
  MergeResult result;
  std::vector<Piece> pieces;
  for (const std::string& in : inputs)
    pieces.push_back(read_piece(in, result.warnings));
  if (const auto why = not_one_job(pieces)) throw MergeError(*why);

  for (const Piece& p : pieces)
    if (fs::equivalent(p.source, out, ec))
      throw MergeError("--out " + out_dir + " is one of the inputs; choose another directory");
  const bool created = !fs::exists(out, ec);
  fs::create_directories(out, ec);
  if (ec)
    throw MergeError("cannot create " + out_dir + ": " + ec.message() +
                     " (choose a writable --out)");
  model::RunInfo info = pieces.front().data.telemetry.run;
  info.run_name = out.filename().string();
  if (info.run_name.empty()) info.run_name = out.parent_path().filename().string();
  info.world_size = pieces.front().world;
  // Written under another name and renamed into place once complete: an
  // interrupted merge never leaves a run database that looks whole.
  const std::string partial = (out / (std::string(store::kRunDbFileName) + ".merging")).string();
  const auto remove_partial = [&] {
    for (const char* suffix : {"", "-wal", "-shm", "-journal"})
      fs::remove(partial + suffix, ec);
  };
  remove_partial();  // a merge killed before
  try {
    {
      store::RunDbWriter w(partial);
      w.add(info);
      for (Piece& p : pieces) {
        p.data.telemetry.run = info;
        store::feed(p.data.telemetry, w);
        for (const auto& d : p.data.deliveries)
          w.add(d);
        for (const auto& r : p.data.rejected)
          w.add(r);
        // Each piece is written and let go before the next is fed.
        p.data = {};
      }
      w.flush();
    }  // closed: its journal is folded into the file
    fs::rename(partial, db);
  } catch (const std::exception& e) {
    remove_partial();
    if (created) fs::remove(out, ec);  // only if still empty
    throw MergeError(std::string("cannot write the merged run: ") + e.what());
  }
  std::set<int> ranks;
  for (const Piece& p : pieces)
    ranks.insert(p.ranks.begin(), p.ranks.end());
  result.ranks = int(ranks.size());
  result.world_size = info.world_size;
  return result;
}

}  // namespace traceml::collector
