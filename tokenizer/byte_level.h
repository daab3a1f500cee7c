// The byte-level alphabet of GPT-2-style BPE: every byte maps to a printable code point
// (printable Latin-1 bytes to themselves, the rest to U+0100 onwards), so any byte string is a
// string of vocabulary symbols.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace ls::tok {

class ByteLevel {
 public:
  static const ByteLevel& Get();
  // UTF-8 text of the symbols for `bytes`.
  std::string Encode(std::string_view bytes) const;
  // Byte of a symbol code point, or -1 if it is not in the alphabet.
  int ByteOf(uint32_t cp) const {
    auto it = byte_of_.find(cp);
    return it == byte_of_.end() ? -1 : it->second;
  }
  const std::string& SymbolOf(uint8_t b) const { return symbol_[b]; }

 private:
  ByteLevel();
  std::array<std::string, 256> symbol_;
  std::unordered_map<uint32_t, int> byte_of_;
};

}  // namespace ls::tok
