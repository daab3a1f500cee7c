// MarkerScanner: finds fixed markers ("<tool_call>", "</think>", "<|tool_call_begin|>") in text
// that arrives in pieces, as a streaming output parser needs: text before a marker is released as
// soon as it can no longer be the start of one, and a marker split across pieces is found whole.
// MarkerTokens: the text of marker tokens that a decoder skipping special tokens left out. Both
// are plain values owned by the parser that uses them; not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ls::tok {
class Tokenizer;
}

namespace ls::chat {

class MarkerScanner {
 public:
  struct Piece {
    std::string text;  // released text, before the marker if one was found
    int marker = -1;   // index of the marker found (in the list given), or -1: no marker yet
  };
  void Push(std::string_view text) { buffer_.append(text); }
  // The earliest of `markers` in the buffered text, and the text before it, both consumed. Without
  // a marker: the text that cannot begin one (all of it when `final`), consumed, and marker -1.
  Piece Next(const std::vector<std::string_view>& markers, bool final = false);
  // Everything still buffered, consumed.
  std::string TakeAll();
  const std::string& buffered() const { return buffer_; }

 private:
  std::string buffer_;
};

// Marker strings that are single tokens of a tokenizer, by id. A decoder that skips special
// tokens gives such a token no text; Text() then gives the marker's, so that a parser finds it
// whatever skip_special_tokens says.
class MarkerTokens {
 public:
  MarkerTokens() = default;
  MarkerTokens(const tok::Tokenizer* tokenizer, const std::vector<std::string>& markers);
  // `text` as decoded for token `id`, or the marker's text when `id` is a marker token decoded to nothing.
  std::string_view Text(int32_t id, std::string_view text) const;

 private:
  std::vector<std::pair<int32_t, std::string>> ids_;
};

// Splits `text` into its body and its trailing ASCII whitespace.
std::pair<std::string_view, std::string_view> SplitTrailingSpace(std::string_view text);
bool IsAllSpace(std::string_view text);
std::string_view TrimSpace(std::string_view text);

}  // namespace ls::chat
