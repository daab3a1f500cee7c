// Helpers of the structured-output tests: a grammar run byte by byte over a one-byte-per-token
// vocabulary, so a test says "this text is a whole match" or "this is a prefix of one".
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "structured/grammar.h"
#include "structured/matcher.h"

namespace ls::structured {

inline std::shared_ptr<const TokenTrie> ByteTrie() {
  std::vector<std::string> bytes(256);
  for (int b = 0; b < 256; ++b) bytes[b] = std::string(1, static_cast<char>(b));
  return std::make_shared<TokenTrie>(bytes);
}

// The state after `text`, or −1 where a byte is refused.
inline int32_t Walk(CompiledGrammar& g, std::string_view text) {
  int32_t s = g.Initial();
  for (char c : text) {
    s = g.Next(s, static_cast<uint8_t>(c));
    if (s < 0) return -1;
  }
  return s;
}

// Whether `text` is a whole match of the grammar.
inline bool Matches(const Grammar& grammar, std::string_view text) {
  CompiledGrammar g(grammar, ByteTrie(), "test");
  const int32_t s = Walk(g, text);
  return s >= 0 && g.Accepting(s);
}

// Whether `text` can be continued into a match (every byte was taken).
inline bool IsPrefix(const Grammar& grammar, std::string_view text) {
  CompiledGrammar g(grammar, ByteTrie(), "test");
  return Walk(g, text) >= 0;
}

}  // namespace ls::structured
