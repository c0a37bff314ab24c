#include "collector/profiles.hpp"

#include <algorithm>
#include <tuple>
#include <utility>

#include "report/atomic_file.hpp"

namespace traceml::collector {

std::optional<std::string> ProfileStore::take(model::ProfileChunk&& c) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = open_.find(c.global_rank);
  if (c.chunk == 0) {
    if (it != open_.end()) {
      // A new profile while one is open: the open one lost its end.
      ProfileOutcome cut;
      cut.file.rank = c.global_rank;
      cut.file.first_step = it->second.first;
      cut.file.last_step = it->second.last;
      cut.file.error = "its last chunk never came";
      done_.push_back(std::move(cut));
      open_.erase(it);
    }
    if (++started_[c.global_rank] > kMaxProfilesPerRank)
      return "a rank sends at most " + std::to_string(kMaxProfilesPerRank) + " profiles";
    Open o;
    o.first = c.first_step;
    o.last = c.last_step;
    try {
      o.writer = std::make_unique<report::ProfileTraceWriter>(run_dir_, c.global_rank, c.first_step,
                                                              c.last_step, kMaxProfileFileBytes);
    } catch (const report::WriteError& e) {
      ProfileOutcome failed;
      failed.file.rank = c.global_rank;
      failed.file.first_step = c.first_step;
      failed.file.last_step = c.last_step;
      failed.file.error = e.what();
      done_.push_back(std::move(failed));
      return std::nullopt;
    }
    it = open_.emplace(c.global_rank, std::move(o)).first;
  } else if (it == open_.end() || it->second.next_chunk != c.chunk ||
             it->second.first != c.first_step || it->second.last != c.last_step) {
    return std::string("a profile chunk out of order");
  }
  Open& o = it->second;
  o.next_chunk = c.chunk + 1;
  for (const model::ProfileOp& op : c.ops)
    o.writer->add(op);
  if (c.last == 0) return std::nullopt;
  ProfileOutcome outcome;
  try {
    outcome.file = o.writer->finish(c.ops_cut.value_or(0), c.error);
    outcome.written = true;
  } catch (const report::WriteError& e) {
    outcome.file.rank = c.global_rank;
    outcome.file.first_step = o.first;
    outcome.file.last_step = o.last;
    outcome.file.error = e.what();
  }
  done_.push_back(std::move(outcome));
  open_.erase(it);
  return std::nullopt;
}

std::vector<ProfileOutcome> ProfileStore::outcomes(bool close_open) {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<ProfileOutcome> out = done_;
  for (auto it = open_.begin(); it != open_.end();) {
    ProfileOutcome cut;
    cut.file.rank = it->first;
    cut.file.first_step = it->second.first;
    cut.file.last_step = it->second.last;
    cut.file.error = "the rank's connection ended before its last chunk";
    out.push_back(cut);
    if (close_open) {
      done_.push_back(std::move(cut));
      it = open_.erase(it);  // its writer removes the partial file
    } else {
      ++it;
    }
  }
  std::sort(out.begin(), out.end(), [](const ProfileOutcome& a, const ProfileOutcome& b) {
    return std::tie(a.file.rank, a.file.first_step) < std::tie(b.file.rank, b.file.first_step);
  });
  return out;
}

}  // namespace traceml::collector
