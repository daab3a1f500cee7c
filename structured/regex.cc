// Regex parsing (recursive descent over the pattern) straight into grammar rules.
#include "structured/regex.h"

#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tokenizer/utf8.h"

namespace ls::structured {
namespace {

// A set of characters: ASCII as bits, non-ASCII either all (negated classes, ., \D ...) or listed.
struct CharClass {
  ByteSet ascii;
  bool all_non_ascii = false;
  std::vector<std::string> non_ascii;  // UTF-8 characters
};

ByteSet Ascii(std::string_view chars) {
  ByteSet s;
  for (char c : chars) s.set(static_cast<uint8_t>(c));
  return s;
}
ByteSet Digits() {
  ByteSet s;
  for (int c = '0'; c <= '9'; ++c) s.set(c);
  return s;
}
ByteSet Word() {
  ByteSet s = Digits();
  for (int c = 'a'; c <= 'z'; ++c) s.set(c);
  for (int c = 'A'; c <= 'Z'; ++c) s.set(c);
  s.set('_');
  return s;
}
ByteSet Space() { return Ascii(" \t\n\r\f\v"); }
ByteSet AsciiAll() {
  ByteSet s;
  for (int c = 0; c < 128; ++c) s.set(c);
  return s;
}

std::string Utf8(uint32_t cp) {
  std::string s;
  tok::AppendUtf8(cp, &s);
  return s;
}

// JSON's escape of an ASCII character that cannot appear bare in a string, or "" when it can.
std::string JsonEscape(uint8_t c) {
  switch (c) {
    case '"': return "\\\"";
    case '\\': return "\\\\";
    case '\n': return "\\n";
    case '\r': return "\\r";
    case '\t': return "\\t";
    case '\b': return "\\b";
    case '\f': return "\\f";
    default: return c < 0x20 ? absl::StrFormat("\\u%04x", c) : "";
  }
}

class Parser {
 public:
  Parser(GrammarBuilder& b, std::string_view p, RegexText text) : b_(b), p_(p), text_(text) {}

  absl::StatusOr<Symbol> Parse() {
    if (!p_.empty() && p_[0] == '^') ++i_;
    auto alts = Alternation();
    if (error_.empty() && i_ != p_.size()) Fail(absl::StrCat("unexpected '", std::string(1, p_[i_]), "'"));
    if (!error_.empty()) return absl::InvalidArgumentError(error_);
    return b_.OneOf(alts, "regex");
  }

 private:
  // Records the first error; parsing unwinds on it (Done()).
  void Fail(const std::string& what) {
    if (error_.empty()) error_ = absl::StrCat("regex ", Quoted(), ": ", what, " at offset ", i_);
  }
  std::string Quoted() const { return absl::StrCat("'", std::string(p_.substr(0, 200)), "'"); }
  bool Done() const { return i_ >= p_.size() || !error_.empty(); }

  std::vector<std::vector<Symbol>> Alternation() {
    std::vector<std::vector<Symbol>> alts;
    alts.push_back(Sequence());
    while (!Done() && p_[i_] == '|') {
      ++i_;
      alts.push_back(Sequence());
    }
    return alts;
  }

  std::vector<Symbol> Sequence() {
    std::vector<Symbol> seq;
    while (!Done() && p_[i_] != '|' && p_[i_] != ')') {
      if (p_[i_] == '$' && i_ + 1 == p_.size()) {  // an end anchor: the whole text is matched anyway
        ++i_;
        break;
      }
      std::vector<Symbol> atom = Atom();
      if (!error_.empty()) return seq;
      Quantified(atom, &seq);
    }
    return seq;
  }

  void Quantified(const std::vector<Symbol>& atom, std::vector<Symbol>* seq) {
    int64_t min = 1, max = 1;
    if (!Done()) {
      const char q = p_[i_];
      if (q == '*' || q == '+' || q == '?') {
        ++i_;
        min = q == '+' ? 1 : 0;
        max = q == '?' ? 1 : -1;
      } else if (q == '{' && Bounds(&min, &max)) {
      }
      if (!Done() && (min != 1 || max != 1) && (p_[i_] == '?' || p_[i_] == '+')) ++i_;  // lazy / possessive
    }
    if (min == 1 && max == 1) {
      seq->insert(seq->end(), atom.begin(), atom.end());
    } else {
      seq->push_back(b_.Repeat(atom, min, max, "regex-repeat"));
    }
  }

  // {n}, {n,}, {n,m}; false (nothing consumed) when the brace is a literal.
  bool Bounds(int64_t* min, int64_t* max) {
    size_t j = i_ + 1;
    auto number = [&](int64_t* out) {
      const size_t start = j;
      int64_t v = 0;  // every digit is read; a count past a million stays there (refused as too many)
      for (; j < p_.size() && p_[j] >= '0' && p_[j] <= '9'; ++j) v = std::min<int64_t>(v * 10 + (p_[j] - '0'), 1000000);
      *out = v;
      return j > start;
    };
    int64_t lo = 0, hi = 0;
    if (!number(&lo)) return false;
    if (j < p_.size() && p_[j] == '}') {
      hi = lo;
    } else if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(&hi)) hi = -1;
      if (j >= p_.size() || p_[j] != '}') return false;
    } else {
      return false;
    }
    if (hi >= 0 && hi < lo) {
      Fail("a repetition's upper bound is below its lower bound");
      return false;
    }
    i_ = j + 1;
    *min = lo;
    *max = hi;
    return true;
  }

  std::vector<Symbol> Atom() {
    const char c = p_[i_];
    if (c == '(') {
      ++i_;
      if (i_ < p_.size() && p_[i_] == '?') {
        if (i_ + 1 < p_.size() && p_[i_ + 1] == ':') {
          i_ += 2;
        } else {
          Fail("lookaround, named groups and inline flags are not supported");
          return {};
        }
      }
      auto alts = Alternation();
      if (Done() || p_[i_] != ')') {
        Fail("a group is not closed");
        return {};
      }
      ++i_;
      return {b_.OneOf(alts, "regex-group")};
    }
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (c == '{') {
        ++i_;
        return Chars(Single('{'));
      }
      Fail("a quantifier has nothing to repeat");
      return {};
    }
    if (c == '.') {
      ++i_;
      CharClass cls;
      cls.ascii = AsciiAll();
      cls.ascii.reset('\n');
      cls.all_non_ascii = true;
      return Chars(cls);
    }
    if (c == '[') return Chars(Class());
    if (c == '\\') return Chars(Escape(false));
    if (c == '^') {
      Fail("'^' is supported only at the start");
      return {};
    }
    if (c == '$') {
      Fail("'$' is supported only at the end");
      return {};
    }
    return Chars(Single(Utf8At()));
  }

  // The UTF-8 character at i_ (consumed).
  std::string Utf8At() {
    const auto lead = static_cast<uint8_t>(p_[i_]);
    // A sequence cut short by the end of the pattern is taken as far as it goes.
    const size_t n = std::min<size_t>(lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2, p_.size() - i_);
    std::string s(p_.substr(i_, n));
    i_ += n;
    return s;
  }

  static CharClass Single(const std::string& ch) {
    CharClass c;
    if (ch.size() == 1) {
      c.ascii.set(static_cast<uint8_t>(ch[0]));
    } else {
      c.non_ascii.push_back(ch);
    }
    return c;
  }
  static CharClass Single(char ch) { return Single(std::string(1, ch)); }

  // An escape after '\' (in a class: `in_class`).
  CharClass Escape(bool in_class) {
    ++i_;
    if (i_ >= p_.size()) {
      Fail("a trailing backslash");
      return {};
    }
    const char e = p_[i_++];
    CharClass c;
    switch (e) {
      case 'd': c.ascii = Digits(); return c;
      case 'w': c.ascii = Word(); return c;
      case 's': c.ascii = Space(); return c;
      case 'D': c.ascii = AsciiAll() & ~Digits(); c.all_non_ascii = true; return c;
      case 'W': c.ascii = AsciiAll() & ~Word(); c.all_non_ascii = true; return c;
      case 'S': c.ascii = AsciiAll() & ~Space(); c.all_non_ascii = true; return c;
      case 't': return Single('\t');
      case 'n': return Single('\n');
      case 'r': return Single('\r');
      case 'f': return Single('\f');
      case 'v': return Single('\v');
      case '0': return Single('\0');
      case 'x':
      case 'u': {
        const size_t digits = e == 'x' ? 2 : 4;
        uint32_t cp = 0;
        for (size_t k = 0; k < digits; ++k) {
          if (i_ >= p_.size() || !std::isxdigit(static_cast<unsigned char>(p_[i_]))) {
            Fail(absl::StrCat("\\", std::string(1, e), " needs ", digits, " hex digits"));
            return {};
          }
          const char h = p_[i_++];
          cp = cp * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
        }
        return Single(Utf8(cp));
      }
      case 'b':
        if (in_class) return Single('\b');
        [[fallthrough]];
      case 'B':
        Fail("word boundaries are not supported");
        return {};
      default:
        if (e >= '1' && e <= '9') {
          Fail("backreferences are not supported");
          return {};
        }
        if (std::isalnum(static_cast<unsigned char>(e))) {
          Fail(absl::StrCat("the escape \\", std::string(1, e), " is not supported"));
          return {};
        }
        --i_;
        return Single(Utf8At());
    }
  }

  CharClass Class() {
    ++i_;  // [
    bool negate = false;
    if (i_ < p_.size() && p_[i_] == '^') {
      negate = true;
      ++i_;
    }
    CharClass c;
    bool first = true;
    while (true) {
      if (i_ >= p_.size()) {
        Fail("a character class is not closed");
        return {};
      }
      if (p_[i_] == ']' && !first) break;
      first = false;
      CharClass item;
      std::string single;
      if (p_[i_] == '\\') {
        item = Escape(true);
        if (!error_.empty()) return {};
        if (item.ascii.count() == 1 && item.non_ascii.empty() && !item.all_non_ascii) {
          for (int b = 0; b < 128; ++b)
            if (item.ascii.test(b)) single = std::string(1, static_cast<char>(b));
        } else if (item.ascii.none() && item.non_ascii.size() == 1) {
          single = item.non_ascii[0];
        }
      } else {
        single = Utf8At();
        item = Single(single);
      }
      // A range a-b (not at the end of the class).
      if (!single.empty() && i_ + 1 < p_.size() && p_[i_] == '-' && p_[i_ + 1] != ']') {
        ++i_;
        std::string hi;
        if (p_[i_] == '\\') {
          CharClass h = Escape(true);
          if (!error_.empty()) return {};
          for (int b = 0; b < 128; ++b)
            if (h.ascii.count() == 1 && h.ascii.test(b)) hi = std::string(1, static_cast<char>(b));
          if (h.non_ascii.size() == 1) hi = h.non_ascii[0];
        } else {
          hi = Utf8At();
        }
        if (single.size() != 1 || hi.size() != 1) {
          Fail("ranges of non-ASCII characters in a class are not supported");
          return {};
        }
        if (static_cast<uint8_t>(hi[0]) < static_cast<uint8_t>(single[0])) {
          Fail("a class range runs backwards");
          return {};
        }
        for (int b = static_cast<uint8_t>(single[0]); b <= static_cast<uint8_t>(hi[0]); ++b) c.ascii.set(b);
        continue;
      }
      c.ascii |= item.ascii;
      c.all_non_ascii |= item.all_non_ascii;
      c.non_ascii.insert(c.non_ascii.end(), item.non_ascii.begin(), item.non_ascii.end());
    }
    ++i_;  // ]
    if (negate) {
      if (!c.non_ascii.empty()) {
        Fail("a negated class listing non-ASCII characters is not supported");
        return {};
      }
      c.ascii = AsciiAll() & ~c.ascii;
      c.all_non_ascii = !c.all_non_ascii;
    }
    return c;
  }

  // The symbols of one character of `cls`, written as text_ says.
  std::vector<Symbol> Chars(const CharClass& cls) {
    if (!error_.empty()) return {};
    ByteSet plain = cls.ascii;
    std::vector<std::vector<Symbol>> alts;
    if (text_ == RegexText::kJsonString) {
      for (int c = 0; c < 128; ++c) {
        if (!plain.test(c)) continue;
        const std::string esc = JsonEscape(static_cast<uint8_t>(c));
        if (esc.empty()) continue;
        plain.reset(c);
        alts.push_back(b_.Literal(esc));
      }
    }
    if (cls.all_non_ascii) {
      alts.push_back({b_.Utf8Char(plain, "regex-char")});
    } else if (plain.any()) {
      alts.push_back({b_.Bytes(plain)});
    }
    for (const std::string& ch : cls.non_ascii) alts.push_back(b_.Literal(ch));
    if (alts.empty()) {
      Fail("a class that matches no character");
      return {};
    }
    if (alts.size() == 1) return alts[0];
    return {b_.OneOf(alts, "regex-class")};
  }

  GrammarBuilder& b_;
  std::string_view p_;
  RegexText text_;
  size_t i_ = 0;
  std::string error_;
};

}  // namespace

absl::StatusOr<Symbol> AddRegex(GrammarBuilder& b, std::string_view pattern, RegexText text) {
  return Parser(b, pattern, text).Parse();
}

absl::StatusOr<Grammar> RegexGrammar(std::string_view pattern) {
  GrammarBuilder b;
  auto s = AddRegex(b, pattern, RegexText::kRaw);
  if (!s.ok()) return s.status();
  b.AddAlternative(0, {*s});
  auto g = std::move(b).Finish();
  if (!g.ok())  // a check of the whole grammar: named as the parser's errors are
    return absl::Status(g.status().code(), absl::StrCat("regex '", std::string(pattern), "': ", g.status().message()));
  return g;
}

}  // namespace ls::structured
