// Between the collector's I/O thread and the run database: a bounded queue of
// records and the one writer thread that owns the database, writes the queue
// in batches and commits at least every kCommitInterval. std, model and store
// only.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/record_kinds.hpp"
#include "store/run_db.hpp"

namespace traceml::collector {

class WriteQueue {
 public:
  /// Records the I/O thread gathers before it hands them on: the queue can
  /// hold this many more than its capacity.
  static constexpr std::size_t kPendingRecords = 512;

  /// Runs on the writer thread at least every kBoardInterval while the run
  /// goes on (the collector classifies its live board there).
  using Tick = std::function<void(std::chrono::steady_clock::time_point)>;

  /// Takes the database (its run row already written) and starts the writer.
  WriteQueue(std::unique_ptr<store::RunDbWriter> writer, Tick tick);
  ~WriteQueue();
  WriteQueue(const WriteQueue&) = delete;
  WriteQueue& operator=(const WriteQueue&) = delete;

  /// I/O thread: hands `batch` on, waiting while the queue is full. Leaves
  /// `batch` empty, with room for kPendingRecords.
  void put(std::vector<model::Record>& batch);

  /// Lets the writer write what is queued, then joins it: the caller's
  /// thread owns the database from then on. Idempotent.
  void stop();

  /// After stop(): runs f on the database unless a write failed before; a
  /// failure is kept (the first one) and not thrown.
  void write(const std::function<void(store::RunDbWriter&)>& f);

  /// After stop(): the records the database holds.
  [[nodiscard]] std::int64_t records() const { return writer_->records(); }

  /// After stop(): closes the database.
  void close() { writer_.reset(); }

  /// The first write that failed, if one did.
  [[nodiscard]] const std::optional<std::string>& error() const { return error_; }

 private:
  template <typename F>
  void guarded(F&& f);
  void loop();

  std::unique_ptr<store::RunDbWriter> writer_;
  Tick tick_;
  std::mutex mu_;
  std::condition_variable not_empty_;
  std::condition_variable not_full_;
  std::vector<model::Record> queue_;
  bool stopping_ = false;
  bool io_waiting_ = false;           // the I/O thread waits for room in the queue
  std::optional<std::string> error_;  // writer thread, then the caller of stop()
  std::thread thread_;
};

}  // namespace traceml::collector
