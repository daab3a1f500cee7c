// IncrementalDetokenizer: turns a stream of ids into text pieces for streaming responses, through
// the tokenizer's DecodeStream. A piece is emitted only once it is final: complete UTF-8, and no
// pending byte-fallback run or strippable tail. The concatenation of all pieces (with Finish)
// equals Decode(all ids). One per sequence; not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "tokenizer/tokenizer.h"

namespace ls::tok {

class IncrementalDetokenizer {
 public:
  IncrementalDetokenizer(const Tokenizer* tokenizer, bool skip_special)
      : stream_(tokenizer->NewDecodeStream(skip_special)) {}

  // Adds one id; returns the text that became final (possibly empty).
  absl::StatusOr<std::string> Push(int32_t id) { return stream_->Push(id); }
  // Flushes what is still pending at the end of the stream (an incomplete character becomes U+FFFD).
  std::string Finish() { return stream_->Finish(); }

 private:
  std::unique_ptr<DecodeStream> stream_;
};

}  // namespace ls::tok
