// Python string semantics over UTF-8 (see pystr.h). Character classes come from utf8proc.
#include "jinja/pystr.h"

#include <utf8proc.h>

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace ls::jinja::py {
namespace {

constexpr char32_t kEscapeBase = 0xDC00;  // invalid byte b travels as U+DC00+b (b >= 0x80)

utf8proc_category_t Category(char32_t c) {
  if (c > 0x10FFFF) return UTF8PROC_CATEGORY_CN;
  return utf8proc_category(static_cast<utf8proc_int32_t>(c));
}

// Decodes one code point at s[*i], advancing *i; an invalid sequence yields one escaped byte.
char32_t Next(std::string_view s, size_t* i) {
  const auto b0 = static_cast<unsigned char>(s[*i]);
  if (b0 < 0x80) {
    ++*i;
    return b0;
  }
  const int n = (b0 >= 0xC2 && b0 <= 0xDF) ? 1 : (b0 >= 0xE0 && b0 <= 0xEF) ? 2 : (b0 >= 0xF0 && b0 <= 0xF4) ? 3 : 0;
  if (n > 0 && *i + n < s.size()) {
    char32_t c = b0 & (0x3F >> n);
    bool ok = true;
    for (int k = 1; k <= n; ++k) {
      const auto b = static_cast<unsigned char>(s[*i + k]);
      if ((b & 0xC0) != 0x80) ok = false;
      c = (c << 6) | (b & 0x3F);
    }
    const bool overlong = (n == 2 && c < 0x800) || (n == 3 && c < 0x10000);
    if (ok && !overlong && c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF)) {
      *i += n + 1;
      return c;
    }
  }
  ++*i;
  return kEscapeBase + b0;
}

bool InSet(char32_t c, const std::u32string& set) { return set.find(c) != std::u32string::npos; }

char32_t MapCase(char32_t c, int which) {  // 0 upper, 1 lower, 2 title
  if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF)) return c;
  const auto x = static_cast<utf8proc_int32_t>(c);
  return static_cast<char32_t>(which == 0   ? utf8proc_toupper(x)
                               : which == 1 ? utf8proc_tolower(x)
                                            : utf8proc_totitle(x));
}

// Unconditional full case mappings (Unicode SpecialCasing) that Python applies and simple
// mappings lack: {code point, upper, title, lower}; empty means the simple mapping.
struct FullCase {
  char32_t c;
  const char* upper;
  const char* title;
  const char* lower;
};
constexpr FullCase kFullCase[] = {
    {0xDF, "SS", "Ss", ""},                               // ß
    {0x130, "", "", "i\xcc\x87"},                         // İ
    {0x149, "\xca\xbcN", "\xca\xbcN", ""},                // ŉ
    {0x1F0, "J\xcc\x8c", "J\xcc\x8c", ""},                // ǰ
    {0x587, "\xd4\xb5\xd5\x92", "\xd4\xb5\xd6\x82", ""},  // և
    {0x1E96, "H\xcc\xb1", "H\xcc\xb1", ""},
    {0x1E97, "T\xcc\x88", "T\xcc\x88", ""},
    {0x1E98, "W\xcc\x8a", "W\xcc\x8a", ""},
    {0x1E99, "Y\xcc\x8a", "Y\xcc\x8a", ""},
    {0x1E9A, "A\xca\xbe", "A\xca\xbe", ""},
    {0x1E9E, "", "", "\xc3\x9f"},  // ẞ lower is ß
    {0xFB00, "FF", "Ff", ""},
    {0xFB01, "FI", "Fi", ""},
    {0xFB02, "FL", "Fl", ""},
    {0xFB03, "FFI", "Ffi", ""},
    {0xFB04, "FFL", "Ffl", ""},
    {0xFB05, "ST", "St", ""},
    {0xFB06, "ST", "St", ""},
};

// Appends the case mapping of u[i] (with Greek final sigma for lower case).
void AppendCase(const std::u32string& u, size_t i, int which, std::string* out) {
  const char32_t c = u[i];
  for (const auto& f : kFullCase) {
    if (f.c != c) continue;
    const char* m = which == 0 ? f.upper : which == 2 ? f.title : f.lower;
    if (*m) {
      out->append(m);
      return;
    }
    break;
  }
  if (which == 1 && c == 0x3A3) {  // Σ: ς at the end of a word, σ elsewhere
    const bool after_cased = i > 0 && IsCased(u[i - 1]);
    const bool before_cased = i + 1 < u.size() && IsCased(u[i + 1]);
    AppendUtf8(after_cased && !before_cased ? 0x3C2 : 0x3C3, out);
    return;
  }
  AppendUtf8(MapCase(c, which), out);
}

std::string MapAll(std::string_view s, int which) {
  if (IsAscii(s)) {
    std::string out(s);
    for (char& ch : out) {
      if (which == 0 && ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 32);
      if (which == 1 && ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch + 32);
    }
    return out;
  }
  const std::u32string u = Decode(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < u.size(); ++i) AppendCase(u, i, which, &out);
  return out;
}

// Python's digit-string grammar: digits with single underscores between them.
bool ValidDigits(std::string_view d, int base) {
  if (d.empty() || d.front() == '_' || d.back() == '_') return false;
  for (size_t i = 0; i < d.size(); ++i) {
    const char ch = d[i];
    if (ch == '_') {
      if (d[i + 1] == '_') return false;
      continue;
    }
    int v = ch >= '0' && ch <= '9'   ? ch - '0'
            : ch >= 'a' && ch <= 'z' ? ch - 'a' + 10
            : ch >= 'A' && ch <= 'Z' ? ch - 'A' + 10
                                     : 99;
    if (v >= base) return false;
  }
  return true;
}

}  // namespace

void AppendUtf8(char32_t c, std::string* out) {
  if (c >= kEscapeBase + 0x80 && c <= kEscapeBase + 0xFF) {
    out->push_back(static_cast<char>(c - kEscapeBase));
  } else if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::u32string Decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) out.push_back(Next(s, &i));
  return out;
}

std::string Encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) AppendUtf8(c, &out);
  return out;
}

size_t Length(std::string_view s) {
  if (IsAscii(s)) return s.size();
  size_t n = 0;
  for (size_t i = 0; i < s.size(); ++n) Next(s, &i);
  return n;
}

bool IsAscii(std::string_view s) {
  for (char ch : s)
    if (static_cast<unsigned char>(ch) >= 0x80) return false;
  return true;
}

bool IsSpace(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 ||
         c == 0x202F || c == 0x205F || c == 0x3000;
}

bool IsPrintable(char32_t c) {
  if (c == ' ') return true;
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  switch (Category(c)) {
    case UTF8PROC_CATEGORY_CC:
    case UTF8PROC_CATEGORY_CF:
    case UTF8PROC_CATEGORY_CS:
    case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
    case UTF8PROC_CATEGORY_ZL:
    case UTF8PROC_CATEGORY_ZP:
    case UTF8PROC_CATEGORY_ZS:
      return false;
    default:
      return true;
  }
}

bool IsCased(char32_t c) {
  const auto k = Category(c);
  return k == UTF8PROC_CATEGORY_LU || k == UTF8PROC_CATEGORY_LL || k == UTF8PROC_CATEGORY_LT;
}

bool IsAlpha(char32_t c) {
  const auto k = Category(c);
  return k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO;
}

bool IsDigit(char32_t c) { return Category(c) == UTF8PROC_CATEGORY_ND; }

bool IsIdentifierStart(char32_t c) {
  if (c < 0x80) return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
  const auto k = Category(c);
  return (k >= UTF8PROC_CATEGORY_LU && k <= UTF8PROC_CATEGORY_LO) || k == UTF8PROC_CATEGORY_NL;
}

bool IsIdentifierChar(char32_t c) {
  if (c < 0x80) return IsIdentifierStart(c) || (c >= '0' && c <= '9');
  const auto k = Category(c);
  return IsIdentifierStart(c) || k == UTF8PROC_CATEGORY_MN || k == UTF8PROC_CATEGORY_MC || k == UTF8PROC_CATEGORY_ND ||
         k == UTF8PROC_CATEGORY_PC;
}

std::string Upper(std::string_view s) { return MapAll(s, 0); }
std::string Lower(std::string_view s) { return MapAll(s, 1); }

std::string Title(std::string_view s) {
  const std::u32string u = Decode(s);
  std::string out;
  out.reserve(s.size());
  bool prev_cased = false;
  for (size_t i = 0; i < u.size(); ++i) {
    AppendCase(u, i, prev_cased ? 1 : 2, &out);
    prev_cased = IsCased(u[i]);
  }
  return out;
}

std::string Capitalize(std::string_view s) {
  const std::u32string u = Decode(s);
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < u.size(); ++i) AppendCase(u, i, i == 0 ? 2 : 1, &out);
  return out;
}

bool IsLowerStr(std::string_view s) {
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = Next(s, &i);
    if (Category(c) == UTF8PROC_CATEGORY_LU || Category(c) == UTF8PROC_CATEGORY_LT) return false;
    if (Category(c) == UTF8PROC_CATEGORY_LL) cased = true;
  }
  return cased;
}

bool IsUpperStr(std::string_view s) {
  bool cased = false;
  for (size_t i = 0; i < s.size();) {
    const char32_t c = Next(s, &i);
    if (Category(c) == UTF8PROC_CATEGORY_LL || Category(c) == UTF8PROC_CATEGORY_LT) return false;
    if (Category(c) == UTF8PROC_CATEGORY_LU) cased = true;
  }
  return cased;
}

std::string Strip(std::string_view s, const std::optional<std::string>& chars, bool left, bool right) {
  if (!chars && IsAscii(s)) {
    size_t b = 0, e = s.size();
    auto sp = [](char ch) { return IsSpace(static_cast<unsigned char>(ch)); };
    if (left)
      while (b < e && sp(s[b])) ++b;
    if (right)
      while (e > b && sp(s[e - 1])) --e;
    return std::string(s.substr(b, e - b));
  }
  const std::u32string u = Decode(s);
  const std::u32string set = chars ? Decode(*chars) : std::u32string();
  auto strip = [&](char32_t c) { return chars ? InSet(c, set) : IsSpace(c); };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && strip(u[b])) ++b;
  if (right)
    while (e > b && strip(u[e - 1])) --e;
  return Encode(std::u32string_view(u).substr(b, e - b));
}

std::vector<std::string> Split(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, pos);
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(pos, at - pos));
      pos = at + sep->size();
    }
    out.emplace_back(s.substr(pos));
    return out;
  }
  const std::u32string u = Decode(s);
  size_t i = 0;
  while (true) {
    while (i < u.size() && IsSpace(u[i])) ++i;
    if (i >= u.size()) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      out.push_back(Encode(std::u32string_view(u).substr(i)));  // the rest keeps its trailing space
      break;
    }
    size_t j = i;
    while (j < u.size() && !IsSpace(u[j])) ++j;
    out.push_back(Encode(std::u32string_view(u).substr(i, j - i)));
    i = j;
  }
  return out;
}

std::vector<std::string> RSplit(std::string_view s, const std::optional<std::string>& sep, int64_t maxsplit) {
  if (maxsplit < 0) return Split(s, sep, -1);
  std::vector<std::string> out;
  if (sep) {
    size_t end = s.size();
    while (static_cast<int64_t>(out.size()) < maxsplit) {
      if (end < sep->size()) break;
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.emplace_back(s.substr(at + sep->size(), end - at - sep->size()));
      end = at;
    }
    out.emplace_back(s.substr(0, end));
  } else {
    const std::u32string u = Decode(s);
    size_t e = u.size();
    while (true) {
      while (e > 0 && IsSpace(u[e - 1])) --e;
      if (e == 0) break;
      if (static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(Encode(std::u32string_view(u).substr(0, e)));  // the rest keeps its leading space
        break;
      }
      size_t b = e;
      while (b > 0 && !IsSpace(u[b - 1])) --b;
      out.push_back(Encode(std::u32string_view(u).substr(b, e - b)));
      e = b;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<std::string> SplitLines(std::string_view s, bool keepends) {
  const std::u32string u = Decode(s);
  std::vector<std::string> out;
  size_t start = 0;
  for (size_t i = 0; i < u.size(); ++i) {
    const char32_t c = u[i];
    const bool brk = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E ||
                     c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!brk) continue;
    size_t end = i + 1;
    if (c == '\r' && i + 1 < u.size() && u[i + 1] == '\n') end = i + 2;
    out.push_back(Encode(std::u32string_view(u).substr(start, (keepends ? end : i) - start)));
    start = end;
    i = end - 1;
  }
  if (start < u.size()) out.push_back(Encode(std::u32string_view(u).substr(start)));
  return out;
}

std::optional<std::string> Replace(std::string_view s, std::string_view old, std::string_view repl, int64_t count,
                                   size_t max_bytes) {
  std::string out;
  if (old.empty()) {
    const std::u32string u = Decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= u.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i < u.size()) AppendUtf8(u[i], &out);
      if (out.size() > max_bytes) return std::nullopt;
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    const size_t at = s.find(old, pos);
    if (at == std::string_view::npos) break;
    out.append(s.substr(pos, at - pos));
    out.append(repl);
    if (out.size() > max_bytes) return std::nullopt;
    pos = at + old.size();
    ++done;
  }
  out.append(s.substr(pos));
  if (out.size() > max_bytes) return std::nullopt;
  return out;
}

int64_t Find(std::string_view s, std::string_view sub, bool reverse) {
  const size_t at = reverse ? s.rfind(sub) : s.find(sub);
  if (at == std::string_view::npos) return -1;
  return static_cast<int64_t>(Length(s.substr(0, at)));
}

int64_t Count(std::string_view s, std::string_view sub) {
  if (sub.empty()) return static_cast<int64_t>(Length(s)) + 1;
  int64_t n = 0;
  for (size_t at = s.find(sub); at != std::string_view::npos; at = s.find(sub, at + sub.size())) ++n;
  return n;
}

std::string FloatRepr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);
  std::string out;
  if (sci[0] == '-') {
    out = "-";
    sci.erase(0, 1);
  }
  const size_t epos = sci.find('e');
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (sci[i] != '.') digits.push_back(sci[i]);
  const int exp = std::atoi(sci.c_str() + epos + 1);
  const int decpt = exp + 1;
  const int n = static_cast<int>(digits.size());
  if (decpt <= -4 || decpt > 16) {
    out += digits[0];
    if (n > 1) out += "." + digits.substr(1);
    std::snprintf(buf, sizeof buf, "e%+03d", exp);
    out += buf;
  } else if (decpt <= 0) {
    out += "0." + std::string(-decpt, '0') + digits;
  } else if (decpt >= n) {
    out += digits + std::string(decpt - n, '0') + ".0";
  } else {
    out += digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  return out;
}

std::string StrRepr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  std::string out(1, quote);
  char buf[16];
  for (size_t i = 0; i < s.size();) {
    const char32_t c = Next(s, &i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out.push_back('\\');
      out.push_back(static_cast<char>(c));
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c >= kEscapeBase + 0x80 && c <= kEscapeBase + 0xFF) {
      std::snprintf(buf, sizeof buf, "\\udc%02x", static_cast<unsigned>(c - kEscapeBase));
      out += buf;
    } else if (IsPrintable(c)) {
      AppendUtf8(c, &out);
    } else {
      std::snprintf(buf, sizeof buf,
                    c <= 0xFF     ? "\\x%02x"
                    : c <= 0xFFFF ? "\\u%04x"
                                  : "\\U%08x",
                    static_cast<unsigned>(c));
      out += buf;
    }
  }
  out.push_back(quote);
  return out;
}

bool ParseInt(std::string_view s, int base, int64_t* out) {
  const std::string trimmed = Strip(s, std::nullopt, true, true);
  std::string_view t = trimmed;
  bool neg = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    neg = t[0] == '-';
    t.remove_prefix(1);
  }
  if (base == 0 || base == 16 || base == 8 || base == 2) {
    if (t.size() > 2 && t[0] == '0') {
      const char p = static_cast<char>(t[1] | 0x20);
      const int pb = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
      if (pb && (base == 0 || base == pb)) {
        base = pb;
        t.remove_prefix(2);
        if (!t.empty() && t[0] == '_') t.remove_prefix(1);
      }
    }
    if (base == 0) {
      base = 10;
      if (t.size() > 1 && t[0] == '0') {  // Python: no leading zeros in base 0 except all-zero
        for (char ch : t)
          if (ch != '0' && ch != '_') return false;
      }
    }
  }
  if (base < 2 || base > 36 || !ValidDigits(t, base)) return false;
  uint64_t v = 0;
  for (char ch : t) {
    if (ch == '_') continue;
    const int d = ch >= '0' && ch <= '9' ? ch - '0' : (ch | 0x20) - 'a' + 10;
    if (v > (static_cast<uint64_t>(INT64_MAX) + 1 - d) / base) return false;
    v = v * base + d;
  }
  if (!neg && v > static_cast<uint64_t>(INT64_MAX)) return false;
  *out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

bool ParseFloat(std::string_view s, double* out) {
  const std::string trimmed = Strip(s, std::nullopt, true, true);
  std::string_view t = trimmed;
  std::string lower;
  for (char ch : t) lower.push_back(static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch + 32 : ch));
  std::string_view body = lower;
  bool neg = false;
  if (!body.empty() && (body[0] == '+' || body[0] == '-')) {
    neg = body[0] == '-';
    body.remove_prefix(1);
  }
  if (body == "inf" || body == "infinity") {
    *out = neg ? -HUGE_VAL : HUGE_VAL;
    return true;
  }
  if (body == "nan") {
    *out = std::nan("");
    return true;
  }
  // digits [. digits] [e [sign] digits], at least one digit in the mantissa.
  size_t i = 0;
  auto digits = [&](bool required) {
    const size_t b = i;
    while (i < body.size() && ((body[i] >= '0' && body[i] <= '9') || body[i] == '_')) ++i;
    if (i == b) return !required;
    return ValidDigits(body.substr(b, i - b), 10);
  };
  const size_t m0 = i;
  if (!digits(false)) return false;
  const bool int_part = i > m0;
  if (i < body.size() && body[i] == '.') {
    ++i;
    const size_t f0 = i;
    if (!digits(false)) return false;
    if (!int_part && i == f0) return false;
  } else if (!int_part) {
    return false;
  }
  if (i < body.size() && body[i] == 'e') {
    ++i;
    if (i < body.size() && (body[i] == '+' || body[i] == '-')) ++i;
    if (!digits(true)) return false;
  }
  if (i != body.size()) return false;
  std::string clean;
  for (char ch : body)
    if (ch != '_') clean.push_back(ch);
  const double v = std::strtod(clean.c_str(), nullptr);
  *out = neg ? -v : v;
  return true;
}

}  // namespace ls::jinja::py
