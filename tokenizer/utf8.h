// UTF-8 helpers for the tokenizer: validation, code-point iteration, and lossy decoding that
// replaces each maximal invalid subsequence with U+FFFD (the Unicode "maximal subpart" rule,
// as Rust's String::from_utf8_lossy and so the Hugging Face tokenizers library do).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace ls::tok {

// Byte offset of the first invalid sequence, or npos when `s` is valid UTF-8.
size_t FindInvalidUtf8(std::string_view s);

// Appends the UTF-8 encoding of code point `cp`.
void AppendUtf8(uint32_t cp, std::string* out);

// Decodes the code point starting at s[i] (s must be valid); advances i.
uint32_t NextCodePoint(std::string_view s, size_t* i);
// Decodes the code point that ends at s[end] (exclusive; s valid, end > 0).
uint32_t PrevCodePoint(std::string_view s, size_t end);

// Decodes `bytes` lossily into `out`. With `final` false, an incomplete but so-far valid
// sequence at the very end is left undecoded; returns the number of bytes consumed.
size_t DecodeUtf8Lossy(std::string_view bytes, bool final, std::string* out);

}  // namespace ls::tok
