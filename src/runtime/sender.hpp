// The sender thread: every flush interval it drains the training threads'
// rings and the sampler queue, encodes frames, and writes them to the
// collector. It connects (Hello first) with back-off, keeps a bounded buffer
// while the collector is away, and drops and counts what does not fit. It
// never touches the training thread: a dead collector costs telemetry, not time.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "model/black_box.hpp"
#include "model/position.hpp"
#include "model/telemetry.hpp"
#include "runtime/gpu_clock.hpp"
#include "runtime/profile_capture.hpp"
#include "runtime/registry.hpp"
#include "runtime/step_pipeline.hpp"
#include "timing/clock.hpp"
#include "timing/tick_clock.hpp"
#include "transport/frame.hpp"
#include "transport/hello.hpp"
#include "transport/tcp_client.hpp"

namespace traceml::runtime {

struct SenderSettings {
  std::string host = "127.0.0.1";
  std::uint16_t port = 0;
  std::string token;
  model::RankIdentity identity;
  /// The sender wakes every flush_interval while the steps' rings fill fast,
  /// and up to max_flush_interval apart while they fill slowly (each wake-up
  /// costs the rank CPU: ~0.1 ms on a VM): so that a ring is at most a
  /// quarter full when drained. With a GPU clock or activity records it waits
  /// at most max_gpu_flush_interval (their steps wait for the GPU).
  std::chrono::milliseconds flush_interval{50};
  std::chrono::milliseconds max_flush_interval{500};
  std::chrono::milliseconds max_gpu_flush_interval{100};
  /// Encoded frames kept while the collector is unreachable or slow: about
  /// 60,000 step records. Beyond it new records are dropped and counted.
  std::size_t max_pending_bytes = std::size_t{4} << 20;
  /// Record frames already written, kept for a collector of protocol 4 that
  /// lost some in flight when a connection broke (its Verdict says where to
  /// resume): the last this many bytes of them. Older ones it lacks are
  /// counted dropped.
  std::size_t max_retained_bytes = std::size_t{4} << 20;
  std::chrono::milliseconds connect_timeout{1000};
  /// The handshake's deadline: a connection whose Hello does not go out in
  /// this long is closed and tried again later.
  std::chrono::milliseconds send_timeout{2000};
  /// A collector that is slow is not gone: the sender keeps its connection
  /// and writes the rest at its next wake-up (nothing is sent twice). Only
  /// when the collector takes no byte at all for this long is the connection
  /// given up (a host that vanished, a collector that hangs).
  std::chrono::milliseconds stall_timeout{30000};
  /// How long a connection waits for the collector's answer to its Hello
  /// (protocol 4) before it is tried again. Long: a collector whose node is
  /// starved answers late, and a new connection would only queue behind
  /// the old one; a collector that is gone closes the connection.
  std::chrono::milliseconds verdict_timeout{300000};
  std::chrono::milliseconds backoff_min{100};
  std::chrono::milliseconds backoff_max{5000};
  /// Called once, on the sender thread, the first time the collector cannot
  /// be reached or the connection breaks (the runtime prints one warning).
  std::function<void(const std::string&)> on_first_failure;
  /// Called once, on the sender thread, when the buffer is first full and a
  /// record is dropped (the runtime prints one warning; the count comes at
  /// the end, records_dropped_total()).
  std::function<void(const std::string&)> on_first_drop;
  /// Called once, on the sender thread, when the collector refused this
  /// rank (its Verdict, protocol 4): the sender sends nothing more, and the
  /// runtime prints the reason and stops recording.
  std::function<void(const std::string&)> on_refused;
  /// The protocol the sender speaks first (tests speak an older one). Where
  /// the collector answers no Verdict twice, it falls back to 3.
  std::uint16_t protocol_version = transport::kRankProtocolVersion;
  /// Called on the sender thread every flush interval (the runtime watches
  /// for a dead launcher's pipes there).
  std::function<void()> on_tick;
  /// Where the training loop is (the heartbeat), read every
  /// heartbeat_interval while connected, also when no step completes; the
  /// rank's counters (TracerStats) go with it. Empty: no heartbeat.
  std::function<model::RankPosition()> position;
  /// The rank's black box (not owned; null: none): every wake-up writes the
  /// tick clock and the loop's position there, so that the launcher can read
  /// the journal's steps, and where a hung rank is, from outside.
  model::BlackBoxRegion* black_box = nullptr;
  std::chrono::milliseconds heartbeat_interval{1000};
  /// The calibrated cost of one scope (overhead.hpp); with the scopes each
  /// step used it gives the rank's tracer cost per step.
  std::optional<double> ns_per_scope;
  /// The rank's GPU clock and activity records, when it has them (not owned).
  GpuClock* gpu_clock = nullptr;
  ActivityStage* activity = nullptr;
  /// The rank's profile capture (--profile-steps; not owned; null: none):
  /// its chunks go to a collector of protocol 6 or later, a few each
  /// wake-up, so that they never crowd the steps out of the buffer.
  ProfileCapture* profiles = nullptr;
  /// Protocol 7: the capture that takes the collector's profile requests
  /// (made on the first one, on the sender thread; the runtime's lives to
  /// the process's end). Empty: the rank takes none and never says
  /// ProfileReady.
  std::function<ProfileCapture*()> profile_requests;
  /// Where a profile that cannot be sent is kept instead (a run directory:
  /// its profiles/ gets the file); empty: it is freed.
  std::string profile_keep_dir;
};

/// The rank's counters that only the runtime knows (steps, overhead); the
/// sender adds records sent and dropped.
using StatsSource = std::function<model::TracerStats()>;

/// Wakes the sender before its interval ends: a training thread calls it when
/// its ring is half full (ThreadRecorder::take_filling). Never blocks.
void wake_sender() noexcept;

class Sender {
 public:
  Sender(SenderSettings settings, RecorderRegistry& recorders, SampleQueue& samples,
         const timing::WallMapping& wall, StatsSource stats);
  ~Sender();
  Sender(const Sender&) = delete;
  Sender& operator=(const Sender&) = delete;

  void start();
  /// The program's explicit shutdown: drains everything and sends it with
  /// the final TracerStats by `deadline`. A collector that speaks protocol 4
  /// keeps its connection (heartbeats only, the rank no longer recording)
  /// until stop() says how the program ended; one that does not gets its Bye
  /// now. Returns once that is done (the thread lingers).
  void drain(std::chrono::steady_clock::time_point deadline);
  /// Drains everything, sends the final TracerStats, the goodbye with
  /// `exit_status` when there is one, and a Bye, and stops the thread,
  /// giving up at `deadline` (what is unsent by then is dropped).
  void stop(std::chrono::steady_clock::time_point deadline,
            std::optional<int> exit_status = std::nullopt);

  [[nodiscard]] std::int64_t records_sent() const { return sent_.load(); }
  /// Records lost in the sender (buffer full, unsent at the end); rings and
  /// the sample queue count their own.
  [[nodiscard]] std::int64_t records_dropped() const { return dropped_.load(); }
  /// Every record this rank lost: in the sender, the training threads' rings
  /// and the sample queue. Read after stop() for the rank's last word.
  [[nodiscard]] std::int64_t records_dropped_total() const;

 private:
  /// Writes the tick clock and the loop's position into the black box.
  void mirror_to_black_box();
  void loop();
  /// The end of the stream, after the loop (sender_end.cpp).
  void finish_stream();
  /// Writes pending_ until it is empty or `until` passes (connecting if
  /// need be). Returns whether it all went.
  bool deliver(std::chrono::steady_clock::time_point until);
  /// deliver() to deadline_, but what remains when most of the budget is
  /// spent is cut to the rank's last word (cut_to_last_word), which then
  /// has the rest: a starved collector still hears how the rank ended and
  /// what it dropped. Returns whether it all went.
  bool deliver_last_word();
  /// When the part of deadline_'s budget kept for the last word begins.
  [[nodiscard]] std::chrono::steady_clock::time_point last_word_starts() const;
  /// Drops the records still waiting (counted), and the rank's earlier
  /// state, leaving a frame partly written, the counters as they now stand
  /// and the frames that must stay last (goodbye, Bye).
  void cut_to_last_word();
  /// Where a frame goes that must precede the last word: before the frames
  /// that stay last, after a frame partly written.
  [[nodiscard]] std::size_t before_last_word() const;
  /// After drain(): heartbeats on the open connection until stop().
  void linger();
  /// drain() may return: the thread no longer reads what stop() sets.
  void signal_drained();
  /// The rest cannot go: closes the connection, counts its records dropped.
  void give_up();
  /// Appends a frame that must stay last (the goodbye, Bye): the stats a
  /// new connection's Verdict brings go before it.
  void add_last(transport::FrameType type, const std::vector<std::uint8_t>& payload);
  /// Takes every goodbye out of pending_ (a collector of protocol 3 would
  /// refuse them).
  void drop_goodbyes();
  /// Drains the rings and samples into pending_; returns the steps drained.
  std::size_t collect();
  /// Queues profile chunks while pending_ holds less than `budget` bytes and
  /// the collector takes them; returns whether a capture still waits.
  bool add_profile_chunks(std::size_t budget);
  /// At the end: the profiles still waiting, before the rank's last word.
  void send_last_profiles();
  /// Profiles that cannot go (`why`): kept beside the rank when it has a
  /// place for them (SenderSettings::profile_keep_dir), else freed; said.
  void keep_profiles(const std::string& why);
  void add_frame(transport::FrameType type, const std::vector<std::uint8_t>& payload);
  bool ensure_connected(std::chrono::steady_clock::time_point now, bool final_attempt);
  /// Writes what pending_ holds past written_ for up to `budget`; whole
  /// frames written leave pending_ (their records counted sent). Returns
  /// true when pending_ is empty. A connection that took nothing for
  /// stall_timeout, or failed, is closed; its unfinished frame goes out
  /// whole on the next one.
  bool flush(std::chrono::milliseconds budget);
  /// The connection ended (failed, or stalled): retry later, resend the cut frame whole.
  void connection_lost(const std::string& what);
  /// Reads what the collector said (its Verdict), waiting up to `wait` for
  /// it. Returns false when the connection ended (closed, refused, garbled).
  bool read_collector(std::chrono::milliseconds wait);
  void on_verdict(const transport::Verdict& v);
  /// A ProfileRequest frame from the collector (protocol 7).
  void on_profile_request(const transport::Frame& frame);
  /// The Verdict is late on a stream's first connection: its records go
  /// without it (the collector reads them once it has taken the Hello).
  void write_before_verdict();
  /// After the Bye, on a connection of protocol 4: waits (to the deadline)
  /// for the collector to end it, which it does once it has read the Bye.
  /// Then it has everything, and no late Verdict is left unread at the
  /// close (which would reset the connection and lose what the collector
  /// had not read yet).
  void await_close();
  /// Records may be written on the current connection.
  [[nodiscard]] bool may_write() const { return !awaiting_verdict_ || writing_before_verdict_; }
  /// Keeps the record frames of pending_'s first `bytes` (just written whole)
  /// in retained_, numbered along the stream; forgets the oldest past
  /// max_retained_bytes.
  void retain(std::size_t bytes);
  /// The collector has the stream's first `have` records: what was written
  /// past them goes out again, first; what it lacks and is no longer kept is
  /// counted dropped.
  void resume(std::uint64_t have);
  /// Reports the first failure through settings_.on_first_failure; later ones
  /// stay silent (one warning per process, not one per step).
  void warn_once(const std::string& what);
  [[nodiscard]] model::TracerStats full_stats() const;

  SenderSettings settings_;
  RecorderRegistry& recorders_;
  SampleQueue& samples_;
  StatsSource stats_;
  transport::TcpClient client_;
  StepPipeline::Emit emit_step_;  // queues a finished step's frames
  StepPipeline pipeline_;
  timing::TickMapping ticks_;  ///< the training threads' ticks to ns (sender thread)

  /// Appends a record's frame (its kind's frame type, model/record_kinds.hpp)
  /// to pending_, unless that would pass max_pending_bytes (then it is
  /// dropped and counted).
  template <typename R>
  void add_record(const R& r);
  /// Appends a frame of the rank's own state (heartbeat, tracer stats): not
  /// a record, never dropped.
  template <typename R>
  void add_control(const R& r);
  /// The wait before the next flush, from how fast the last one's steps came.
  std::chrono::milliseconds next_interval(std::size_t steps,
                                          std::chrono::steady_clock::duration span) const;

  std::vector<RawStep> steps_;         // a flush's drained steps (kept: no allocation per flush)
  std::vector<GpuRawStep> gpu_;        // a flush's GPU records
  std::vector<std::uint8_t> pending_;  // encoded frames not yet written whole
  std::int64_t pending_records_ = 0;
  /// Protocol 4: this process's stream (random, not 0), the record frames
  /// written whole on it so far (the next one's number), and the last of
  /// them, from number retained_first_ on.
  std::uint64_t stream_ = 0;
  std::uint64_t written_records_ = 0;
  std::vector<std::uint8_t> retained_;
  std::uint64_t retained_first_ = 0;
  std::uint64_t last_resume_ = ~std::uint64_t{0};  ///< the last Verdict's resume point
  int same_resume_ = 0;  ///< Verdicts in a row that resumed at last_resume_, less one
  /// Bytes at the front of pending_ written on the current connection: less
  /// than one frame once flush() has taken the whole frames out.
  std::size_t written_ = 0;
  /// When the current connection last took a byte (or was made).
  std::chrono::steady_clock::time_point last_progress_{};
  std::int64_t steps_drained_ = 0;
  std::int64_t scopes_drained_ = 0;
  std::chrono::milliseconds backoff_;
  std::chrono::steady_clock::time_point next_attempt_{};
  std::chrono::steady_clock::time_point connected_at_{};  // of the current connection
  /// A connection ended: the next attempt waits the backoff. A connection
  /// that lasted less than backoff_max (a collector that refuses this rank
  /// closes it at the Hello) doubles it; a longer one starts again from
  /// backoff_min.
  void retry_later();
  bool warned_ = false;
  bool drop_warned_ = false;

  /// Protocol 4: records go only once the collector accepted the Hello.
  bool awaiting_verdict_ = false;
  bool writing_before_verdict_ = false;  ///< write_before_verdict() on this connection
  std::uint16_t protocol_;               ///< what the next Hello speaks
  /// The rank's capture: settings_.profiles, or the one made for the
  /// collector's first request (settings_.profile_requests).
  ProfileCapture* profiles_ = nullptr;
  /// When this rank last said ProfileReady (a Verdict of protocol 7).
  std::chrono::steady_clock::time_point profile_ready_at_{};
  bool verdict_seen_ = false;              ///< the collector answered once: it speaks 4
  std::uint16_t collector_protocol_ = 0;   ///< the newest its last Verdict named (0: none yet)
  bool profile_warned_ = false;            ///< said once that the collector takes no profiles
  int verdictless_closes_ = 0;             ///< connections closed before any Verdict came
  bool refused_ = false;                   ///< the collector refused this rank: send nothing more
  transport::FrameDecoder inbound_{4096};  ///< the collector's frames

  std::atomic<std::int64_t> sent_{0};
  std::atomic<std::int64_t> dropped_{0};
  bool stopping_ = false;   // guarded by the wake signal's mutex
  bool lingering_ = false;  // drain() asked for the end without a Bye (guarded like stopping_)
  bool drained_ = false;    // drain()'s work is done (guarded like stopping_)
  bool final_ = false;      // stop() came after drain() (guarded like stopping_)
  std::condition_variable drained_cv_;
  std::chrono::steady_clock::time_point deadline_{};
  std::optional<int> exit_status_;  // guarded like stopping_
  std::size_t last_bytes_ = 0;      ///< pending_'s tail that must stay last (add_last)
  std::thread thread_;
};

}  // namespace traceml::runtime
