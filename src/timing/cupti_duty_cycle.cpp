#include "timing/cupti_duty_cycle.hpp"

#include <algorithm>
#include <cstdlib>

#include "timing/clock.hpp"
#include "timing/cupti_activity_source.hpp"

namespace traceml::timing {

std::int64_t DutyCycle::next_boundary(std::int64_t step) const noexcept {
  if (is_always()) return std::numeric_limits<std::int64_t>::max();
  if (step < 1) return 1;
  const std::int64_t base = (step - 1) / period * period;
  return records(step) ? base + window + 1 : base + period + 1;
}

namespace {

std::optional<std::int64_t> whole_number(const std::string& text) {
  if (text.empty() || text.size() > 12) return std::nullopt;
  for (const char c : text)
    if (c < '0' || c > '9') return std::nullopt;
  return std::strtoll(text.c_str(), nullptr, 10);
}

}  // namespace

std::optional<DutyCycle> parse_duty_cycle(const std::string& text, std::string& why) {
  why.clear();
  if (text.empty() || text == "off" || text == "0") return std::nullopt;
  const auto slash = text.find('/');
  const auto window = whole_number(text.substr(0, slash));
  const auto period =
      slash == std::string::npos ? std::nullopt : whole_number(text.substr(slash + 1));
  if (!window || !period || *window < 1 || *window >= *period || *period > kMaxDutyPeriod) {
    why = "is not K/M with 1 <= K < M <= " + std::to_string(kMaxDutyPeriod) +
          " (e.g. 8/128) or off; CUPTI records every step";
    return std::nullopt;
  }
  return DutyCycle{*window, *period};
}

CuptiDutyCycle::CuptiDutyCycle(DutyCycle cycle, CuptiActivitySource& source,
                               std::int64_t started_ns) noexcept
    : cycle_(cycle), next_boundary_(cycle.next_boundary(1)), source_(&source) {
  windows_[0].on_ns = cycle.is_always() ? std::numeric_limits<std::int64_t>::min() : started_ns;
  opened_ = 1;
}

void CuptiDutyCycle::switch_at(std::int64_t step) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  if (source_ == nullptr) return;
  // Another thread may have passed this boundary already (several training
  // threads): the state follows the latest step seen, never an older one.
  if (step < next_boundary_.load(std::memory_order_relaxed)) return;
  if (lent_) {
    // LibTorch's profiler holds CUPTI: take_back() decides for its step.
    next_boundary_.store(cycle_.next_boundary(step), std::memory_order_relaxed);
    return;
  }
  const bool want = cycle_.records(step);
  if (want != on_) {
    if (want) {
      if (source_->resume()) {
        on_ = true;
        Window& w = windows_[std::size_t(opened_) % kWindows];
        w.on_ns = now_ns();  // after the kinds are on: a step from here on is whole
        w.off_ns = std::numeric_limits<std::int64_t>::max();
        ++opened_;
      } else {
        ++failed_;
      }
    } else {
      // Before the kinds go off: every step that ended before it was whole.
      const std::int64_t off = now_ns();
      if (source_->pause()) {
        on_ = false;
        windows_[std::size_t(opened_ - 1) % kWindows].off_ns = off;
      } else {
        ++failed_;  // still recording: the window stays open until the next try
      }
    }
  }
  next_boundary_.store(cycle_.next_boundary(step), std::memory_order_relaxed);
}

bool CuptiDutyCycle::lend() noexcept {
  // The GPU finishes what the steps before launched: the forced flush below
  // then hands back their records whole (work still running would come back
  // without its end and be lost), and those steps stay covered rightly.
  if (bool (*settle)() noexcept = settle_.load(std::memory_order_acquire);
      settle != nullptr && !settle())
    return false;  // the GPU could not finish first: the capture is refused
  std::lock_guard<std::mutex> lock(mu_);
  if (source_ == nullptr) return false;
  if (lent_) return true;
  // Before the kinds go off: every step that ended before it was whole.
  const std::int64_t off = now_ns();
  if (!source_->lend()) {
    ++failed_;
    return false;
  }
  if (on_) {
    windows_[std::size_t(opened_ - 1) % kWindows].off_ns = off;
    on_ = false;
  }
  lent_ = true;
  ++lends_;
  return true;
}

bool CuptiDutyCycle::take_back(std::int64_t next) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  // Not lent, or the source stopped meanwhile (the run's end): nothing of
  // traceml's to take back.
  if (!lent_ || source_ == nullptr) return true;
  const bool want = cycle_.records(next);
  if (!source_->take_back(want)) {
    ++failed_;  // still lent: tried again at the next capture's end
    return false;
  }
  lent_ = false;
  if (want && !source_->paused()) {
    Window& w = windows_[std::size_t(opened_) % kWindows];
    w.on_ns = now_ns();  // after the kinds are on: a step from here on is whole
    w.off_ns = std::numeric_limits<std::int64_t>::max();
    ++opened_;
    on_ = true;
  }
  next_boundary_.store(cycle_.next_boundary(next), std::memory_order_relaxed);
  if (want && !on_) {
    // CUPTI refused the kinds back: off until the next boundary switches
    // them, or (always recording: no boundary) the next capture's end.
    ++failed_;
    return false;
  }
  return true;
}

void CuptiDutyCycle::settle_with(bool (*settle)() noexcept) noexcept {
  settle_.store(settle, std::memory_order_release);
}

std::int64_t CuptiDutyCycle::lends() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return lends_;
}

void CuptiDutyCycle::detach() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  source_ = nullptr;
  next_boundary_.store(std::numeric_limits<std::int64_t>::max(), std::memory_order_relaxed);
}

const CuptiDutyCycle::Window* CuptiDutyCycle::holding(std::int64_t begin_ns,
                                                      std::int64_t end_ns) const noexcept {
  const std::int64_t kept = std::min<std::int64_t>(opened_, std::int64_t(kWindows));
  for (std::int64_t i = 1; i <= kept; ++i) {  // newest first: the pipeline asks of recent steps
    const Window& w = windows_[std::size_t(opened_ - i) % kWindows];
    if (begin_ns >= w.on_ns && end_ns <= w.off_ns) return &w;
    if (end_ns > w.off_ns) return nullptr;  // after this window and before the next one
  }
  return nullptr;
}

bool CuptiDutyCycle::covers(std::int64_t begin_ns, std::int64_t end_ns) const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return holding(begin_ns, end_ns) != nullptr;
}

std::optional<std::int64_t> CuptiDutyCycle::records_off_after(std::int64_t end_ns) const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  const Window* w = holding(end_ns, end_ns);
  if (w == nullptr || w->off_ns == std::numeric_limits<std::int64_t>::max()) return std::nullopt;
  return w->off_ns;
}

std::int64_t CuptiDutyCycle::windows() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return opened_;
}

std::int64_t CuptiDutyCycle::failed_switches() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return failed_;
}

bool CuptiDutyCycle::recording() const noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return on_;
}

}  // namespace traceml::timing
