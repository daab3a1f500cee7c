// IncrementalDetokenizer: turns a stream of ids into text pieces for streaming responses. A piece
// is emitted only as far as the bytes form complete UTF-8; a character split across tokens waits
// for its last byte. The concatenation of all pieces (with Finish) equals Decode(all ids).
// One per sequence; not thread-safe.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "engine/tokenizer/tokenizer.h"

namespace ls::tok {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special)
      : tokenizer_(tokenizer), skip_special_(skip_special) {}

  // Adds one id; returns the text that became complete (possibly empty).
  absl::StatusOr<std::string> Push(int32_t id);
  // Flushes bytes still pending at the end of the stream (an incomplete character becomes U+FFFD).
  std::string Finish();

 private:
  const Tokenizer* tokenizer_;
  bool skip_special_;
  std::string pending_;  // bytes not yet emitted
};

}  // namespace ls::tok
