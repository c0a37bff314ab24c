#include "launcher/line_relay.hpp"

#include <utility>

namespace traceml::launcher {

LineRelay::LineRelay(std::string prefix, std::function<void(std::string_view)> emit)
    : prefix_(std::move(prefix)), emit_(std::move(emit)) {}

void LineRelay::feed(std::string_view bytes) {
  while (!bytes.empty()) {
    const std::size_t newline = bytes.find('\n');
    if (newline == std::string_view::npos) {
      keep(bytes);
      return;
    }
    const std::string_view head = bytes.substr(0, newline);
    bytes.remove_prefix(newline + 1);
    if (pending_.empty() && head.size() <= kMaxLineBytes) {
      emit_line(head);  // the common case: a whole line in one read, no copy
      continue;
    }
    keep(head);
    emit_line(pending_);
    pending_.clear();
  }
}

void LineRelay::keep(std::string_view text) {
  // Whatever would push the kept bytes past the cap goes out as lines of
  // exactly kMaxLineBytes.
  while (pending_.size() + text.size() > kMaxLineBytes) {
    const std::size_t take = kMaxLineBytes - pending_.size();
    pending_.append(text.substr(0, take));
    text.remove_prefix(take);
    emit_line(pending_);
    pending_.clear();
  }
  pending_.append(text);
}

void LineRelay::finish() {
  if (pending_.empty()) return;
  emit_line(pending_);
  pending_.clear();
}

void LineRelay::emit_line(std::string_view text) {
  line_.clear();
  line_.reserve(prefix_.size() + text.size() + 1);
  line_.append(prefix_);
  line_.append(text);
  line_.push_back('\n');
  emit_(line_);
}

}  // namespace traceml::launcher
