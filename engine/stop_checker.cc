// StopChecker implementation.
#include "engine/stop_checker.h"

#include <algorithm>

namespace ls {

StopChecker::StopChecker(std::vector<std::string> stops, bool include_stop)
    : stops_(std::move(stops)), include_stop_(include_stop) {
  for (const auto& s : stops_) max_len_ = std::max(max_len_, s.size());
}

std::string StopChecker::Push(const std::string& text, bool* stopped) {
  *stopped = false;
  if (stops_.empty()) return text;
  held_ += text;
  // Earliest stop string occurrence.
  size_t first = std::string::npos;
  for (const auto& s : stops_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    *stopped = true;
    size_t end = first;
    if (include_stop_)
      for (const auto& s : stops_)
        if (held_.compare(first, s.size(), s) == 0) end = std::max(end, first + s.size());
    std::string out = held_.substr(0, end);
    held_.clear();
    return out;
  }
  // Keep the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const auto& s : stops_)
    for (size_t k = std::min(s.size() - 1, held_.size()); k > keep; --k)
      if (held_.compare(held_.size() - k, k, s, 0, k) == 0) {
        keep = k;
        break;
      }
  // Do not split a UTF-8 character between emitted and held text.
  size_t cut = held_.size() - keep;
  while (cut > 0 && cut < held_.size() && (static_cast<unsigned char>(held_[cut]) & 0xc0) == 0x80) --cut;
  std::string out = held_.substr(0, cut);
  held_.erase(0, cut);
  return out;
}

std::string StopChecker::Flush() {
  std::string out;
  out.swap(held_);
  return out;
}

}  // namespace ls
