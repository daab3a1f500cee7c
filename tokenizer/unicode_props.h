// Unicode character classes the tokenizers test one code point at a time, defined as the
// reference libraries define them: White_Space (Rust regex `\s`, which Hugging Face uses for
// added-token lstrip/rstrip), word characters (Rust regex `\w`, for single_word) and Python's
// str.isspace (Kimi's chunk guard). Pure functions over utf8proc's tables; thread-safe.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>

namespace ls::tok {

// The White_Space property: U+0009..U+000D, U+0085 and the Z categories.
bool IsWhiteSpace(uint32_t cp);
// Alphabetic, marks, decimal digits, connector punctuation and the joiners (UTS #18 \w).
bool IsWordChar(uint32_t cp);
// Python str.isspace: bidirectional class WS, B or S, or category Zs.
bool IsPythonSpace(uint32_t cp);

// A closed range of code points, for the tables generated from the reference's Unicode version.
struct CodePointRange {
  uint32_t first, last;
};
// Whether cp lies in one of a sorted table's disjoint ranges.
template <size_t N>
bool InRanges(const CodePointRange (&table)[N], uint32_t cp) {
  const auto* it = std::upper_bound(std::begin(table), std::end(table), cp,
                                    [](uint32_t c, const CodePointRange& r) { return c < r.first; });
  return it != std::begin(table) && cp <= (it - 1)->last;
}

}  // namespace ls::tok
