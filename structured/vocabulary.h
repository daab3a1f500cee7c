// The bytes each row of a model's logits stands for, as the grammar matcher sees the vocabulary:
// a token's raw bytes; a special token's text behind kSpecialTokenByte (grammar.h), so that only a
// grammar naming it as a marker admits it; nothing for rows past the tokenizer's vocabulary
// (padding) and for tokens holding that byte themselves (never in UTF-8 text), which no grammar
// admits.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace ls::structured {

std::vector<std::string> VocabularyBytes(const tok::Tokenizer& tokenizer, int64_t logit_rows);

}  // namespace ls::structured
