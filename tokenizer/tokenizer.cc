// LayoutName, and decoding a whole id list through a stream.
#include "tokenizer/tokenizer.h"

namespace ls::tok {

const char* LayoutName(TokenizerLayout layout) {
  switch (layout) {
    case TokenizerLayout::kByteLevelBpe:
      return "byte-level BPE (tokenizer.json)";
    case TokenizerLayout::kSentencePieceBpe:
      return "SentencePiece-style BPE (tokenizer.json)";
    case TokenizerLayout::kTiktoken:
      return "tiktoken BPE (tiktoken.model)";
  }
  return "?";
}

absl::StatusOr<std::string> Tokenizer::Decode(const std::vector<int32_t>& ids, bool skip_special) const {
  auto stream = NewDecodeStream(skip_special);
  std::string text;
  for (int32_t id : ids) {
    auto piece = stream->Push(id);
    if (!piece.ok()) return piece.status();
    text += *piece;
  }
  text += stream->Finish();
  return text;
}

}  // namespace ls::tok
