// Character classes over utf8proc's general categories.
#include "tokenizer/unicode_props.h"

#include <utf8proc.h>

#include <algorithm>
#include <iterator>

namespace ls::tok {
namespace {

// Word characters assigned after utf8proc's Unicode 15 that the reference's regex tables (Unicode
// 16) know. Written by models/reference/hf_unicode_pin.py.
constexpr CodePointRange kNewerWordChars[] = {
#include "tokenizer/hf_word_newer.inc"
};

bool InNewerWordChars(uint32_t cp) { return InRanges(kNewerWordChars, cp); }

}  // namespace

bool IsWhiteSpace(uint32_t cp) {
  if ((cp >= 0x09 && cp <= 0x0d) || cp == 0x20 || cp == 0x85 || cp == 0xa0) return true;
  if (cp < 0x1680) return false;
  const utf8proc_category_t c = utf8proc_category(static_cast<utf8proc_int32_t>(cp));
  return c == UTF8PROC_CATEGORY_ZS || c == UTF8PROC_CATEGORY_ZL || c == UTF8PROC_CATEGORY_ZP;
}

bool IsWordChar(uint32_t cp) {
  if (cp < 0x80) return (cp >= '0' && cp <= '9') || (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') || cp == '_';
  if (cp == 0x200c || cp == 0x200d) return true;  // Join_Control
  // Other_Alphabetic characters outside the mark categories: circled and squared Latin letters.
  if ((cp >= 0x24b6 && cp <= 0x24e9) || (cp >= 0x1f130 && cp <= 0x1f149) || (cp >= 0x1f150 && cp <= 0x1f169) ||
      (cp >= 0x1f170 && cp <= 0x1f189))
    return true;
  switch (utf8proc_category(static_cast<utf8proc_int32_t>(cp))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    case UTF8PROC_CATEGORY_CN:
      return InNewerWordChars(cp);
    default:
      return false;
  }
}

bool IsPythonSpace(uint32_t cp) {
  // Bidi classes B (U+000A, U+000D, U+001C..U+001E, U+0085, U+2029), S (U+0009, U+000B, U+001F),
  // WS (U+000C, U+0020, U+2028 and the Zs spaces) together with category Zs.
  if ((cp >= 0x09 && cp <= 0x0d) || (cp >= 0x1c && cp <= 0x20) || cp == 0x85 || cp == 0xa0) return true;
  if (cp < 0x1680) return false;
  if (cp == 0x2028 || cp == 0x2029) return true;
  return utf8proc_category(static_cast<utf8proc_int32_t>(cp)) == UTF8PROC_CATEGORY_ZS;
}

}  // namespace ls::tok
