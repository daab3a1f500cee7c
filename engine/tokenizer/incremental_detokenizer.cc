// Incremental detokenization over the lossy UTF-8 decoder.
#include "engine/tokenizer/incremental_detokenizer.h"

#include "absl/strings/str_cat.h"
#include "engine/tokenizer/utf8.h"

namespace ls::tok {

absl::StatusOr<std::string> IncrementalDetokenizer::Push(int32_t id) {
  if (!tokenizer_->AppendTokenBytes(id, skip_special_, &pending_))
    return absl::InvalidArgumentError(absl::StrCat("token id ", id, " is outside the vocabulary"));
  std::string out;
  const size_t used = DecodeUtf8Lossy(pending_, /*final=*/false, &out);
  pending_.erase(0, used);
  return out;
}

std::string IncrementalDetokenizer::Finish() {
  std::string out;
  DecodeUtf8Lossy(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace ls::tok
