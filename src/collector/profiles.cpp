#include "collector/profiles.hpp"

#include <algorithm>
#include <utility>
#include <vector>

#include "report/atomic_file.hpp"

namespace traceml::collector {

std::optional<model::ProfiledSteps> ProfileStore::end(int rank, Open& o, std::int64_t ops_cut,
                                                      const std::string& error) {
  if (!o.writer) return std::nullopt;
  std::optional<model::ProfiledSteps> profiled;
  try {
    o.writer->flush();
    const report::ProfileFileInfo info = o.writer->finish(ops_cut, error);
    if (info.ops > 0) profiled = model::ProfiledSteps{rank, info.first_step, info.last_step};
  } catch (const report::WriteError&) {
    // The disk refused it: no file (the writer removes its partial one).
  }
  run_bytes_ += o.writer->bytes();
  o.writer.reset();
  // Its steps were kept when it began, up to the last it meant to reach:
  // the steps past that (its last step left by an exception, the profiler
  // off at a later one) are profiled too.
  if (o.announced_last > 0) {
    if (!profiled || profiled->last_step <= o.announced_last) return std::nullopt;
    profiled->first_step = std::max(profiled->first_step, o.announced_last + 1);
  }
  return profiled;
}

std::optional<std::string> ProfileStore::start(int rank) {
  if (run_started_ >= kMaxRunProfiles || started_[rank] >= kMaxProfilesPerRank)
    return "a run keeps at most " + std::to_string(kMaxRunProfiles) + " profiles, at most " +
           std::to_string(kMaxProfilesPerRank) + " a rank";
  ++run_started_;
  ++started_[rank];
  return std::nullopt;
}

std::int64_t ProfileStore::room() const {
  // What the run's profiles have left, and at most a file's worth.
  return std::min(kMaxProfileFileBytes,
                  std::max<std::int64_t>(0, kMaxRunProfileBytes - run_bytes_));
}

ProfileStore::Taken ProfileStore::began(const model::ProfiledSteps& p, std::string reason) {
  std::lock_guard<std::mutex> lk(mu_);
  Taken taken;
  taken.refused = start(p.global_rank);
  if (taken.refused) return taken;
  began_[p.global_rank].push_back(Began{p, std::move(reason)});
  taken.profiled = p;
  return taken;
}

ProfileStore::Taken ProfileStore::take(model::ProfileChunk&& c, const std::string& reason) {
  std::lock_guard<std::mutex> lk(mu_);
  Taken taken;
  auto it = open_.find(c.global_rank);
  if (c.chunk == 0) {
    if (it != open_.end()) {
      // A new profile while one is open: the open one lost its end.
      taken.profiled = end(c.global_rank, it->second, 0, "its last chunk never came");
      open_.erase(it);
    }
    // A capture said begun is counted already, and asked for what it said.
    Open o;
    std::string why = reason;
    std::vector<Began>& said = began_[c.global_rank];
    const auto b = std::find_if(said.begin(), said.end(),
                                [&](const Began& x) { return x.steps.first_step == c.first_step; });
    if (b != said.end()) {
      o.announced_last = b->steps.last_step;
      if (why.empty()) why = b->reason;
      said.erase(b);
    } else if ((taken.refused = start(c.global_rank))) {
      return taken;
    }
    try {
      o.writer = std::make_unique<report::ProfileTraceWriter>(run_dir_, c.global_rank, c.first_step,
                                                              c.last_step, room(), why);
    } catch (const report::WriteError&) {
      return taken;  // no file can be made: the profile is lost, its chunks not refused
    }
    it = open_.emplace(c.global_rank, std::move(o)).first;
  } else if (it == open_.end() || !it->second.writer ||
             it->second.writer->info().first_step != c.first_step ||
             it->second.writer->info().last_step != c.last_step) {
    // The rest of a profile already ended short (a chunk lost): dropped.
    if (it != open_.end() && !it->second.writer) return taken;
    taken.refused = "a profile chunk of no open profile";
    return taken;
  } else if (it->second.next_chunk != c.chunk) {
    // A chunk never came: the profile ends with what it has, and its later
    // chunks are dropped until the rank's next profile.
    taken.profiled = end(c.global_rank, it->second, 0,
                         "chunk " + std::to_string(it->second.next_chunk) + " never came");
    return taken;
  }
  Open& o = it->second;
  o.next_chunk = c.chunk + 1;
  for (const model::ProfileOp& op : c.ops)
    o.writer->add(op);
  o.writer->flush();
  if (c.last == 0) return taken;
  taken.profiled = end(c.global_rank, o, c.ops_cut.value_or(0), c.error);
  open_.erase(it);
  return taken;
}

std::vector<model::ProfiledSteps> ProfileStore::close_open() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<model::ProfiledSteps> profiled;
  for (auto& [rank, o] : open_)
    if (auto p = end(rank, o, 0, "the rank's connection ended before its last chunk"))
      profiled.push_back(*p);
  open_.clear();
  // Captures whose profile never came: lost with their rank, and said so
  // where the run's profiles are listed (a file without ops), unless their
  // rank kept the profile beside itself (its last step may be earlier:
  // training ended inside the capture).
  std::vector<report::ProfileFileInfo> kept;
  if (std::any_of(began_.begin(), began_.end(), [](const auto& r) { return !r.second.empty(); }))
    kept = report::read_profile_infos(run_dir_);
  for (auto& [rank, said] : began_)
    for (const Began& b : said) {
      if (std::any_of(kept.begin(), kept.end(), [&b](const report::ProfileFileInfo& k) {
            return k.rank == b.steps.global_rank && k.first_step == b.steps.first_step;
          }))
        continue;
      try {
        report::ProfileTraceWriter w(run_dir_, rank, b.steps.first_step, b.steps.last_step, room(),
                                     b.reason);
        w.finish(0, kNeverCame, /*replace=*/false);
        run_bytes_ += w.bytes();
      } catch (const report::WriteError&) {
        // Kept by its rank already, or the disk refused it.
      }
    }
  began_.clear();
  return profiled;
}

}  // namespace traceml::collector
