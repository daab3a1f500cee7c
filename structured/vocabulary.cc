// Token bytes for the matcher's trie.
#include "structured/vocabulary.h"

#include "structured/grammar.h"

namespace ls::structured {

std::vector<std::string> VocabularyBytes(const tok::Tokenizer& tokenizer, int64_t logit_rows) {
  std::vector<std::string> bytes(static_cast<size_t>(logit_rows));
  for (int32_t id = 0; id < logit_rows && id < tokenizer.vocab_size(); ++id) {
    if (!tokenizer.IsSpecial(id)) {
      tokenizer.AppendTokenBytes(id, /*skip_special=*/false, &bytes[id]);
      // A token holding the byte that marks special tokens (a byte-level vocabulary's raw 0xFF,
      // which no UTF-8 text has) would let text spell a special marker out: no grammar admits it.
      if (bytes[id].find(static_cast<char>(kSpecialTokenByte)) != std::string::npos) bytes[id].clear();
      continue;
    }
    // A special token: its text behind the byte no text has, so only a grammar's marker matches it.
    std::string text;
    tokenizer.AppendTokenBytes(id, /*skip_special=*/false, &text);
    if (!text.empty()) bytes[id] = structured::SpecialToken(text);
  }
  return bytes;
}

}  // namespace ls::structured
