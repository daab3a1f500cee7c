// Byte-level alphabet tables.
#include "tokenizer/byte_level.h"

#include "tokenizer/utf8.h"

namespace ls::tok {

ByteLevel::ByteLevel() {
  uint32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || (b >= 0xae && b <= 0xff);
    const uint32_t cp = printable ? static_cast<uint32_t>(b) : next++;
    AppendUtf8(cp, &symbol_[b]);
    byte_of_[cp] = b;
  }
}

const ByteLevel& ByteLevel::Get() {
  static const ByteLevel* instance = new ByteLevel();
  return *instance;
}

std::string ByteLevel::Encode(std::string_view bytes) const {
  std::string out;
  out.reserve(bytes.size() * 2);
  for (unsigned char b : bytes) out += symbol_[b];
  return out;
}

}  // namespace ls::tok
