// UTF-8 validation and lossy decoding.
#include "tokenizer/utf8.h"

namespace ls::tok {
namespace {

// Length of the sequence led by `b` and the valid range of its second byte; 0 if `b` cannot lead.
int SequenceInfo(unsigned char b, unsigned char* lo, unsigned char* hi) {
  *lo = 0x80;
  *hi = 0xbf;
  if (b < 0x80) return 1;
  if (b >= 0xc2 && b <= 0xdf) return 2;
  if (b == 0xe0) { *lo = 0xa0; return 3; }
  if ((b >= 0xe1 && b <= 0xec) || b == 0xee || b == 0xef) return 3;
  if (b == 0xed) { *hi = 0x9f; return 3; }
  if (b == 0xf0) { *lo = 0x90; return 4; }
  if (b >= 0xf1 && b <= 0xf3) return 4;
  if (b == 0xf4) { *hi = 0x8f; return 4; }
  return 0;
}

// Length of the valid prefix of the sequence at s[i] (== len when complete), and its length.
int ValidPrefix(std::string_view s, size_t i, int* len) {
  unsigned char lo, hi;
  *len = SequenceInfo(static_cast<unsigned char>(s[i]), &lo, &hi);
  if (*len <= 1) return *len;
  int n = 1;
  for (; n < *len && i + n < s.size(); ++n) {
    const unsigned char c = static_cast<unsigned char>(s[i + n]);
    if (n == 1 ? (c < lo || c > hi) : (c < 0x80 || c > 0xbf)) break;
  }
  return n;
}

}  // namespace

size_t FindInvalidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    int len;
    const int n = ValidPrefix(s, i, &len);
    if (len == 0 || n < len) return i;
    i += len;
  }
  return std::string_view::npos;
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out->push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

uint32_t NextCodePoint(std::string_view s, size_t* i) {
  const unsigned char b = static_cast<unsigned char>(s[*i]);
  int len = b < 0x80 ? 1 : b < 0xe0 ? 2 : b < 0xf0 ? 3 : 4;
  uint32_t cp = len == 1 ? b : len == 2 ? (b & 0x1f) : len == 3 ? (b & 0x0f) : (b & 0x07);
  for (int k = 1; k < len; ++k) cp = cp << 6 | (static_cast<unsigned char>(s[*i + k]) & 0x3f);
  *i += len;
  return cp;
}

uint32_t PrevCodePoint(std::string_view s, size_t end) {
  size_t b = end - 1;
  while (b > 0 && (static_cast<unsigned char>(s[b]) & 0xc0) == 0x80) --b;
  return NextCodePoint(s, &b);
}

size_t DecodeUtf8Lossy(std::string_view bytes, bool final, std::string* out) {
  static constexpr char kReplacement[] = "\xef\xbf\xbd";
  size_t i = 0;
  while (i < bytes.size()) {
    int len;
    const int n = ValidPrefix(bytes, i, &len);
    if (len > 0 && n == len) {
      out->append(bytes.data() + i, len);
      i += len;
    } else if (len > 0 && i + n == bytes.size() && !final) {
      break;  // incomplete at the end: wait for more bytes
    } else {
      out->append(kReplacement);
      i += n > 0 ? n : 1;
    }
  }
  return i;
}

}  // namespace ls::tok
