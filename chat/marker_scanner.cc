// MarkerScanner and MarkerTokens.
#include "chat/marker_scanner.h"

#include <algorithm>

#include "tokenizer/tokenizer.h"

namespace ls::chat {
namespace {

bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

// Length of the longest suffix of `text` that is a proper prefix of a marker.
size_t HeldSuffix(std::string_view text, const std::vector<std::string_view>& markers) {
  size_t held = 0;
  for (std::string_view m : markers) {
    const size_t most = std::min(text.size(), m.empty() ? 0 : m.size() - 1);
    for (size_t n = most; n > held; --n) {
      if (text.substr(text.size() - n) == m.substr(0, n)) {
        held = n;
        break;
      }
    }
  }
  return held;
}

}  // namespace

MarkerScanner::Piece MarkerScanner::Next(const std::vector<std::string_view>& markers, bool final) {
  Piece out;
  size_t best = std::string::npos;
  for (size_t i = 0; i < markers.size(); ++i) {
    if (markers[i].empty()) continue;
    const size_t at = buffer_.find(markers[i]);
    // The earliest wins; at one position the longer marker ("<|a|>" over "<|a").
    if (at != std::string::npos &&
        (best == std::string::npos || at < best ||
         (at == best && markers[i].size() > markers[static_cast<size_t>(out.marker)].size()))) {
      best = at;
      out.marker = static_cast<int>(i);
    }
  }
  if (out.marker >= 0) {
    out.text = buffer_.substr(0, best);
    buffer_.erase(0, best + markers[static_cast<size_t>(out.marker)].size());
    return out;
  }
  const size_t keep = final ? 0 : HeldSuffix(buffer_, markers);
  out.text = buffer_.substr(0, buffer_.size() - keep);
  buffer_.erase(0, buffer_.size() - keep);
  return out;
}

std::string MarkerScanner::TakeAll() {
  std::string out;
  out.swap(buffer_);
  return out;
}

MarkerTokens::MarkerTokens(const tok::Tokenizer* tokenizer, const std::vector<std::string>& markers) {
  if (!tokenizer) return;
  for (const std::string& m : markers) {
    const int32_t id = tokenizer->TokenToId(m);
    if (id >= 0) ids_.emplace_back(id, m);
  }
}

std::string_view MarkerTokens::Text(int32_t id, std::string_view text) const {
  if (!text.empty()) return text;
  for (const auto& [marker_id, marker] : ids_)
    if (marker_id == id) return marker;
  return text;
}

std::pair<std::string_view, std::string_view> SplitTrailingSpace(std::string_view text) {
  size_t end = text.size();
  while (end > 0 && IsSpace(text[end - 1])) --end;
  return {text.substr(0, end), text.substr(end)};
}

bool IsAllSpace(std::string_view text) { return std::all_of(text.begin(), text.end(), IsSpace); }

std::string_view TrimSpace(std::string_view text) {
  text = SplitTrailingSpace(text).first;
  while (!text.empty() && IsSpace(text.front())) text.remove_prefix(1);
  return text;
}

}  // namespace ls::chat
