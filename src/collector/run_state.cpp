// The run in memory (run_state.hpp): per-rank logs of rows in sealed chunks,
// compacted to what the analysis reads once they outgrow it.
#include "collector/run_state.hpp"

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "analysis/history.hpp"
#include "analysis/summary.hpp"

namespace traceml::collector {

namespace {

/// Rows per chunk: a snapshot copies at most this many rows of each log under
/// the lock (the open chunk); the rest it shares.
constexpr std::size_t kChunkRows = 1024;

template <typename T>
using ChunkPtr = std::shared_ptr<const std::vector<T>>;

/// One rank's (or node's) rows of one kind, in arrival order.
template <typename T>
class RowLog {
 public:
  void push(const T& r) {
    if (open_.empty()) open_.reserve(kChunkRows);
    open_.push_back(r);
    ++rows_;
    if (open_.size() == kChunkRows) {
      sealed_.push_back(std::make_shared<const std::vector<T>>(std::move(open_)));
      open_ = {};
    }
  }

  [[nodiscard]] std::size_t rows() const { return rows_; }

  /// Calls f(row) on every row, in order.
  template <typename F>
  void for_each(F&& f) const {
    for (const auto& c : sealed_)
      for (const T& r : *c)
        f(r);
    for (const T& r : open_)
      f(r);
  }

  /// Drops the `n` oldest rows, calling f(row) on each first. Whole sealed
  /// chunks go as they are; of a chunk cut in two, the rest is copied.
  template <typename F>
  void drop_front(std::size_t n, F&& f) {
    n = std::min(n, rows_);
    rows_ -= n;
    std::size_t whole = 0;
    while (whole < sealed_.size() && sealed_[whole]->size() <= n) {
      for (const T& r : *sealed_[whole])
        f(r);
      n -= sealed_[whole]->size();
      ++whole;
    }
    sealed_.erase(sealed_.begin(), sealed_.begin() + static_cast<std::ptrdiff_t>(whole));
    if (n == 0) return;
    std::vector<T>* rest = nullptr;
    std::vector<T> cut;
    if (!sealed_.empty()) {
      cut.assign(sealed_.front()->begin(), sealed_.front()->end());
      rest = &cut;
    } else {
      rest = &open_;
    }
    for (std::size_t i = 0; i < n; ++i)
      f((*rest)[i]);
    rest->erase(rest->begin(), rest->begin() + static_cast<std::ptrdiff_t>(n));
    if (!sealed_.empty()) sealed_.front() = std::make_shared<const std::vector<T>>(std::move(cut));
  }

  /// Appends the latest `n` rows to `out`, oldest first.
  void tail(std::size_t n, std::vector<T>& out) const {
    n = std::min(n, rows_);
    std::size_t skip = rows_ - n;
    const auto copy_from = [&](const std::vector<T>& rows) {
      if (skip >= rows.size()) {
        skip -= rows.size();
        return;
      }
      out.insert(out.end(), rows.begin() + static_cast<std::ptrdiff_t>(skip), rows.end());
      skip = 0;
    };
    // Only the chunks that hold the tail are visited.
    std::size_t first = sealed_.size();
    for (std::size_t held = open_.size(); first > 0 && held < n;)
      held += sealed_[--first]->size();
    for (std::size_t k = 0; k < first; ++k)
      skip -= sealed_[k]->size();
    for (std::size_t k = first; k < sealed_.size(); ++k)
      copy_from(*sealed_[k]);
    copy_from(open_);
  }

  /// The chunks a reader walks: the sealed ones shared, the open one copied.
  void share(std::vector<ChunkPtr<T>>& out) const {
    out = sealed_;
    if (!open_.empty()) out.push_back(std::make_shared<const std::vector<T>>(open_));
  }

  /// The same, leaving the log empty (the end of the run).
  void release(std::vector<ChunkPtr<T>>& out) {
    out = std::move(sealed_);
    if (!open_.empty()) out.push_back(std::make_shared<const std::vector<T>>(std::move(open_)));
    sealed_.clear();
    open_ = {};
    rows_ = 0;
  }

 private:
  std::vector<ChunkPtr<T>> sealed_;
  std::vector<T> open_;
  std::size_t rows_ = 0;
};

/// A log grows this far past what it must keep before it is compacted: the
/// compaction's cost (a sort of the log) is then spread over as many rows.
std::size_t compact_at(std::int64_t keep) {
  const auto k = static_cast<std::size_t>(keep);
  return k + std::max(k / 2, kChunkRows);
}

/// Which rows of a step log to keep: of each step its latest row (a resent
/// step replaces the earlier one), and only the `keep` highest steps.
/// `steps` is the log's step ids in arrival order.
std::vector<char> rows_to_keep(const std::vector<std::int64_t>& steps, std::int64_t keep) {
  std::vector<std::pair<std::int64_t, std::size_t>> by_step;
  by_step.reserve(steps.size());
  for (const std::int64_t s : steps)
    by_step.emplace_back(s, by_step.size());
  std::sort(by_step.begin(), by_step.end());
  std::vector<char> kept(by_step.size(), 0);
  std::int64_t distinct = 0;
  for (std::size_t i = by_step.size(); i-- > 0 && distinct < keep;) {
    // The last of a run of equal steps is the step's latest arrival.
    if (i + 1 < by_step.size() && by_step[i + 1].first == by_step[i].first) continue;
    kept[by_step[i].second] = 1;
    ++distinct;
  }
  return kept;
}

/// Keeps of a step log only what the alignment can read (rows_to_keep).
/// Arrival order is kept among what remains. Reads the chunks in place: the
/// log, the kept rows and 17 bytes a row of bookkeeping are all it holds at once.
template <typename T>
void compact_steps(RowLog<T>& log, std::int64_t keep) {
  std::vector<std::int64_t> steps;
  steps.reserve(log.rows());
  log.for_each([&](const T& r) { steps.push_back(r.step); });
  const std::vector<char> kept = rows_to_keep(steps, keep);
  steps = {};
  RowLog<T> out;
  std::size_t i = 0;
  log.for_each([&](const T& r) {
    if (kept[i++] != 0) out.push(r);
  });
  log = std::move(out);
}

/// The same for the columnar step log: rows are copied column by column.
void compact_steps(model::StepLog& log, std::int64_t keep) {
  std::vector<std::int64_t> steps;
  steps.reserve(log.size());
  for (const auto& c : log.chunks())
    for (std::size_t j = 0; j < c->size(); ++j)
      steps.push_back(c->step(j));
  const std::vector<char> kept = rows_to_keep(steps, keep);
  steps = {};
  model::StepLog out;
  std::size_t i = 0;
  for (const auto& c : log.chunks())
    for (std::size_t j = 0; j < c->size(); ++j)
      if (kept[i++] != 0) out.push_row(*c, j);
  log = std::move(out);
}

/// The distinct values of a set of step ids, counted as they arrive: ranges of
/// consecutive ids, so that a run's steps take a few entries whatever its length.
class IdSet {
 public:
  void add(std::int64_t id) {
    auto next = ranges_.upper_bound(id);  // first range starting after id
    if (next != ranges_.begin()) {
      auto prev = std::prev(next);
      if (id <= prev->second) return;  // already in
      if (prev->second != kMax && id == prev->second + 1) {
        prev->second = id;
        ++count_;
        if (next != ranges_.end() && next->first == id + 1) {
          prev->second = next->second;
          ranges_.erase(next);
        }
        return;
      }
    }
    ++count_;
    if (next != ranges_.end() && id != kMax && next->first == id + 1) {
      const std::int64_t end = next->second;
      ranges_.erase(next);
      ranges_.emplace(id, end);
      return;
    }
    ranges_.emplace(id, id);
  }
  [[nodiscard]] std::int64_t count() const { return count_; }

 private:
  static constexpr std::int64_t kMax = std::numeric_limits<std::int64_t>::max();
  std::map<std::int64_t, std::int64_t> ranges_;  // first id -> last id
  std::int64_t count_ = 0;
};

/// Older samples of a rank that whole-run facts rest on, kept when the
/// samples around them are dropped: one with a GPU per device it named (the
/// run's GPU count), and the one with the largest GPU memory (Step Memory's
/// capacity).
struct ProcessWitnesses {
  std::map<std::optional<int>, model::ProcessSample> by_device;
  std::optional<model::ProcessSample> largest;

  void consider(const model::ProcessSample& p) {
    if (!p.gpu) return;
    by_device.try_emplace(p.gpu->device, p);
    const auto& total = p.gpu->total_bytes;
    if (total && (!largest || !largest->gpu->total_bytes || *total > *largest->gpu->total_bytes))
      largest = p;
  }
  void append_to(std::vector<model::ProcessSample>& out) const {
    for (const auto& [device, p] : by_device)
      out.push_back(p);
    if (largest) out.push_back(*largest);
  }
};

/// A node's older sample that says it had GPUs, kept when it is dropped.
struct SystemWitness {
  std::optional<model::SystemSample> with_gpus;
  void consider(const model::SystemSample& s) {
    if (!with_gpus && !s.gpus.empty()) with_gpus = s;
  }
  void append_to(std::vector<model::SystemSample>& out) const {
    if (with_gpus) out.push_back(*with_gpus);
  }
};

/// Keeps a sample log's latest `keep` rows; the dropped ones go past `witness`.
template <typename T, typename W>
void compact_samples(RowLog<T>& log, std::size_t keep, W& witness) {
  if (log.rows() > keep)
    log.drop_front(log.rows() - keep, [&](const T& r) { witness.consider(r); });
}

struct RankRows {
  model::StepLog steps;
  RowLog<model::StepMemoryRecord> memory;
  RowLog<model::ProcessSample> process;
  ProcessWitnesses process_witnesses;
};

struct NodeRows {
  RowLog<model::SystemSample> system;
  SystemWitness witness;
};

/// What a reader walks: per rank (or node) the chunks of one kind, and the
/// witnesses that go first.
template <typename T>
struct Shared {
  std::vector<std::vector<ChunkPtr<T>>> logs;
  std::vector<T> first;  // witnesses: older than every row of the logs
};

/// Appends the logs' rows to `out`, interleaved row by row across logs (the
/// ranks' rows then lie step-major, the order the analysis reads them in).
/// With `release`, each chunk is freed once read.
template <typename T>
void interleave(Shared<T>& s, std::vector<T>& out, bool release) {
  std::size_t total = s.first.size();
  for (const auto& log : s.logs)
    for (const auto& c : log)
      total += c->size();
  out.reserve(out.size() + total);
  for (T& w : s.first)
    out.push_back(std::move(w));
  struct Cursor {
    std::size_t chunk = 0;
    std::size_t row = 0;
  };
  std::vector<Cursor> at(s.logs.size());
  for (bool more = true; more;) {
    more = false;
    for (std::size_t k = 0; k < s.logs.size(); ++k) {
      auto& log = s.logs[k];
      Cursor& c = at[k];
      if (c.chunk >= log.size()) continue;
      out.push_back((*log[c.chunk])[c.row]);
      if (++c.row == log[c.chunk]->size()) {
        if (release) log[c.chunk].reset();
        ++c.chunk;
        c.row = 0;
      }
      more = more || c.chunk < log.size();
    }
  }
}

}  // namespace

struct RunState::Impl {
  explicit Impl(std::int64_t w)
      : window(std::max<std::int64_t>(w, 1)),
        step_keep(analysis::step_history(window)),
        memory_keep(analysis::step_memory_history(window)) {}

  const std::int64_t window;
  const std::int64_t step_keep;
  const std::int64_t memory_keep;

  model::RunInfo run;
  std::map<int, model::RankIdentity> identities;
  std::map<int, RankRows> ranks;
  std::map<int, NodeRows> nodes;
  std::map<int, store::RankDelivery> deliveries;
  std::vector<store::RejectedConnection> rejected;
  std::vector<model::ProfiledSteps> profiled;  ///< at most collector::kMaxRunProfiles
  IdSet step_ids;
  IdSet memory_ids;
  std::optional<double> latest_ts;
  std::optional<double> earliest_ts;

  /// A rank's rows; records come in runs of one rank (a connection's batch),
  /// so the last rank looked up is kept at hand.
  RankRows& rank(int r) {
    if (last_rank_rows == nullptr || last_rank != r) {
      last_rank_rows = &ranks[r];  // std::map: references stay valid
      last_rank = r;
    }
    return *last_rank_rows;
  }
  RankRows* last_rank_rows = nullptr;
  int last_rank = 0;

  /// A record that covers [begin, ts] (a step its whole length, a sample
  /// its moment): the run's ends, which rows left out must not move.
  void saw_ts(double ts, double begin) {
    if (!latest_ts || ts > *latest_ts) latest_ts = ts;
    if (!earliest_ts || begin < *earliest_ts) earliest_ts = begin;
  }
  void saw_ts(double ts) { saw_ts(ts, ts); }

  /// Copies (or, with `release`, moves) the state out; the caller holds `mu`.
  /// Returns the shared chunks to be read outside the lock.
  struct Out {
    store::RunData data;
    std::vector<model::StepLog> steps;  // per rank
    Shared<model::StepMemoryRecord> memory;
    Shared<model::ProcessSample> process;
    Shared<model::SystemSample> system;
  };
  Out gather(bool release) {
    Out o;
    model::Telemetry& t = o.data.telemetry;
    t.run = run;
    for (const auto& [rank, id] : identities)
      t.ranks.push_back(id);
    for (const auto& [rank, d] : deliveries)
      o.data.deliveries.push_back(d);
    o.data.rejected = rejected;
    t.profiled_steps = profiled;
    t.totals = model::RunTotals{step_ids.count(), memory_ids.count(), latest_ts, earliest_ts};
    for (auto& [rank, r] : ranks) {
      auto take = [release](auto& log, auto& shared) {
        shared.logs.emplace_back();
        if (release)
          log.release(shared.logs.back());
        else
          log.share(shared.logs.back());
      };
      o.steps.push_back(release ? std::move(r.steps) : r.steps.copy_for_reader());
      if (release) r.steps.clear();
      take(r.memory, o.memory);
      take(r.process, o.process);
      r.process_witnesses.append_to(o.process.first);
    }
    for (auto& [node, n] : nodes) {
      o.system.logs.emplace_back();
      if (release)
        n.system.release(o.system.logs.back());
      else
        n.system.share(o.system.logs.back());
      n.witness.append_to(o.system.first);
    }
    return o;
  }

  static store::RunData materialize(Out o, bool release) {
    model::Telemetry& t = o.data.telemetry;
    // Rank by rank: the chunks change hands, no row is copied.
    for (model::StepLog& log : o.steps) {
      t.steps.append(log);
      if (release) log.clear();
    }
    interleave(o.memory, t.step_memory, release);
    interleave(o.system, t.system, release);
    interleave(o.process, t.process, release);
    return std::move(o.data);
  }
};

/// The state's records without the lock: what apply() hands out, and what
/// the locking entry points call.
class RunState::Unlocked final : public store::RunSink {
 public:
  explicit Unlocked(Impl& m) : m_(m) {}

  void add(const model::Record& r) override {
    store::visit_stored(r, [this](const auto& x) { put(x); });
  }

 private:
  void put(const model::RunInfo& info) { m_.run = info; }

  void put(const model::RankIdentity& id) { m_.identities.insert_or_assign(id.global_rank, id); }

  void put(const model::StepRecord& r) {
    m_.saw_ts(r.ts, analysis::step_begin(r.ts, r.events.cpu_ms(model::Event::TracedStepTime),
                                         r.events.cpu_ms(model::Event::InputWait)));
    if (!analysis::is_step_row(r)) return;  // no section reads it
    m_.step_ids.add(r.step);
    auto& log = m_.rank(r.global_rank).steps;
    // Phase begins and threads only draw a timeline, which is made from the
    // database: the run in memory is for the analysis and leaves them out.
    log.push_back(r, /*timeline=*/false);
    if (log.size() >= compact_at(m_.step_keep)) compact_steps(log, m_.step_keep);
  }

  void put(const model::StepMemoryRecord& r) {
    if (!analysis::is_step_memory_row(r)) return;  // no section reads it
    m_.memory_ids.add(r.step);
    auto& log = m_.rank(r.global_rank).memory;
    log.push(r);
    if (log.rows() >= compact_at(m_.memory_keep)) compact_steps(log, m_.memory_keep);
  }

  // Samples: per node (system) or rank (process), the latest `window` and
  // the witnesses of what the dropped ones showed.
  void put(const model::SystemSample& s) {
    NodeRows& n = m_.nodes[s.node_rank];
    keep_sample(s, n.system, n.witness);
  }

  void put(const model::ProcessSample& s) {
    RankRows& r = m_.rank(s.global_rank);
    keep_sample(s, r.process, r.process_witnesses);
  }

  template <typename T, typename W>
  void keep_sample(const T& s, RowLog<T>& log, W& witness) {
    m_.saw_ts(s.ts);
    log.push(s);
    if (log.rows() >= compact_at(m_.window))
      compact_samples(log, static_cast<std::size_t>(m_.window), witness);
  }

  void put(const store::RankDelivery& d) { m_.deliveries.insert_or_assign(d.global_rank, d); }

  void put(const store::RejectedConnection& c) { m_.rejected.push_back(c); }

  void put(const model::ProfiledSteps& p) { m_.profiled.push_back(p); }

  Impl& m_;
};

RunState::RunState(std::int64_t window)
    : impl_(std::make_unique<Impl>(window)), unlocked_(std::make_unique<Unlocked>(*impl_)) {}
RunState::~RunState() = default;

void RunState::add(const model::Record& r) {
  apply([&](store::RunSink& s) { s.add(r); });
}

store::RunData RunState::snapshot() const {
  Impl::Out o;
  {
    std::lock_guard<std::mutex> lk(mu_);
    o = impl_->gather(false);
  }
  return Impl::materialize(std::move(o), false);
}

store::RunData RunState::latest(std::int64_t rows) const {
  const auto n = static_cast<std::size_t>(std::max<std::int64_t>(rows, 0));
  store::RunData out;
  model::Telemetry& t = out.telemetry;
  std::lock_guard<std::mutex> lk(mu_);
  const Impl& m = *impl_;
  t.run = m.run;
  for (const auto& [rank, id] : m.identities)
    t.ranks.push_back(id);
  t.totals = model::RunTotals{m.step_ids.count(), m.memory_ids.count(), m.latest_ts, m.earliest_ts};
  t.profiled_steps = m.profiled;
  for (const auto& [rank, r] : m.ranks) {
    // The step log's tail, row by row from the chunk that holds its first row.
    const std::size_t from = r.steps.size() - std::min(n, r.steps.size());
    std::size_t at = 0;
    for (const auto& c : r.steps.chunks()) {
      if (at + c->size() > from)
        for (std::size_t i = at < from ? from - at : 0; i < c->size(); ++i)
          t.steps.push_row(*c, i);
      at += c->size();
    }
    r.memory.tail(n, t.step_memory);
    r.process.tail(n, t.process);
  }
  for (const auto& [node, s] : m.nodes)
    s.system.tail(n, t.system);
  return out;
}

store::RunData RunState::take() {
  Impl::Out o;
  {
    std::lock_guard<std::mutex> lk(mu_);
    o = impl_->gather(true);
  }
  return Impl::materialize(std::move(o), true);
}

std::int64_t RunState::rows_held() const {
  std::lock_guard<std::mutex> lk(mu_);
  std::size_t n = 0;
  for (const auto& [rank, r] : impl_->ranks)
    n += r.steps.size() + r.memory.rows() + r.process.rows();
  for (const auto& [node, s] : impl_->nodes)
    n += s.system.rows();
  return static_cast<std::int64_t>(n);
}

}  // namespace traceml::collector
