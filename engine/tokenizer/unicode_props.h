// Unicode character classes the tokenizers test one code point at a time, defined as the
// reference libraries define them: White_Space (Rust regex `\s`, which Hugging Face uses for
// added-token lstrip/rstrip), word characters (Rust regex `\w`, for single_word) and Python's
// str.isspace (Kimi's chunk guard). Pure functions over utf8proc's tables; thread-safe.
#pragma once

#include <cstdint>

namespace ls::tok {

// The White_Space property: U+0009..U+000D, U+0085 and the Z categories.
bool IsWhiteSpace(uint32_t cp);
// Alphabetic, marks, decimal digits, connector punctuation and the joiners (UTS #18 \w).
bool IsWordChar(uint32_t cp);
// Python str.isspace: bidirectional class WS, B or S, or category Zs.
bool IsPythonSpace(uint32_t cp);

}  // namespace ls::tok
