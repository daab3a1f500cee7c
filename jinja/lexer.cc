// The Jinja lexer (see lexer.h). Rules follow jinja2's: the text before a tag is stripped by
// `{%-` / `{{-` / `{#-`, or up to the line start by lstrip_blocks for block and comment tags;
// a block or comment end eats one newline (trim_blocks) unless written `+%}`; `-%}` eats all
// whitespace after it.
#include "jinja/lexer.h"

#include <cstdio>

#include "jinja/pystr.h"
#include "jinja/value.h"

namespace ls::jinja {
namespace {

bool IsDigitAt(std::string_view s, size_t i) { return i < s.size() && s[i] >= '0' && s[i] <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string src) : s_(std::move(src)) {}

  std::vector<Token> Run() {
    while (pos_ < s_.size()) {
      const size_t at = FindOpener(pos_);
      if (at == std::string::npos) {
        Emit(TokenType::kData, s_.substr(pos_));
        Advance(s_.size());
        break;
      }
      const char kind = s_[at + 1];
      const char sign = at + 2 < s_.size() && (s_[at + 2] == '-' || s_[at + 2] == '+') ? s_[at + 2] : 0;
      size_t raw_body = 0;
      const bool raw = kind == '%' && MatchRawBegin(at, &raw_body);
      EmitText(s_.substr(pos_, at - pos_), sign, kind != '{');
      Advance(at);
      if (raw) {
        Advance(raw_body);
        LexRaw();
      } else if (kind == '#') {
        LexComment(at + 2 + (sign ? 1 : 0));
      } else {
        const bool block = kind == '%';
        Emit(block ? TokenType::kBlockBegin : TokenType::kVarBegin, "");
        Advance(at + 2 + (sign ? 1 : 0));
        LexTag(block);
      }
    }
    // jinja2 reports the end of the template on the line where its last token started.
    tokens_.push_back({TokenType::kEof, tokens_.empty() ? 1 : tokens_.back().line, ""});
    return std::move(tokens_);
  }

 private:
  [[noreturn]] void Error(const std::string& msg) const { throw TemplateError(msg, line_); }

  size_t FindOpener(size_t from) const {
    for (size_t i = s_.find('{', from); i != std::string::npos && i + 1 < s_.size(); i = s_.find('{', i + 1)) {
      const char c = s_[i + 1];
      if (c == '{' || c == '%' || c == '#') return i;
    }
    return std::string::npos;
  }

  // Whitespace as Python's \s sees it, starting at i; returns the end.
  size_t SkipSpace(size_t i) const {
    while (i < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[i]);
      if (c < 0x80) {
        if (!py::IsSpace(c)) break;
        ++i;
        continue;
      }
      const std::u32string one = py::Decode(s_.substr(i, std::min<size_t>(4, s_.size() - i)));
      if (one.empty() || !py::IsSpace(one[0])) break;
      std::string enc;
      py::AppendUtf8(one[0], &enc);
      i += enc.size();
    }
    return i;
  }

  // `{%[-+]?\s*raw\s*(-%}\s*|%})` at `at`; *end is where the raw body starts.
  bool MatchRawBegin(size_t at, size_t* end) const {
    size_t i = at + 2;
    if (i < s_.size() && (s_[i] == '-' || s_[i] == '+')) ++i;
    i = SkipSpace(i);
    if (s_.compare(i, 3, "raw") != 0) return false;
    i = SkipSpace(i + 3);
    if (s_.compare(i, 3, "-%}") == 0) {
      *end = SkipSpace(i + 3);
      return true;
    }
    if (s_.compare(i, 2, "%}") == 0) {
      *end = i + 2;
      return true;
    }
    return false;
  }

  // Text before a tag, with the tag's whitespace control applied.
  void EmitText(std::string text, char sign, bool lstrip_applies) {
    if (sign == '-') {
      text = py::Strip(text, std::nullopt, false, true);
    } else if (sign != '+' && lstrip_applies) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size()) {
        const std::string tail = text.substr(l_pos);
        if (py::Strip(tail, std::nullopt, true, true).empty()) text.resize(l_pos);
      }
    }
    if (!text.empty()) Emit(TokenType::kData, std::move(text));
  }

  void Emit(TokenType t, std::string text) { tokens_.push_back({t, line_, std::move(text)}); }

  // Moves to `to`, counting lines and noting whether the consumed text ended a line.
  void Advance(size_t to) {
    for (size_t i = pos_; i < to; ++i)
      if (s_[i] == '\n') ++line_;
    if (to > pos_) line_starting_ = s_[to - 1] == '\n';
    pos_ = to;
  }

  // An end tag `close` (e.g. "%}") at i, as `-close\s*` or `close`, and for blocks and comments
  // also `+close` and `close` + one newline (trim_blocks). Returns the end of the match, or npos.
  size_t MatchEnd(size_t i, std::string_view close, bool block_like) const {
    const bool trim_newline = block_like;
    if (block_like && i < s_.size() && s_[i] == '+' && s_.compare(i + 1, close.size(), close) == 0)
      return i + 1 + close.size();
    if (i < s_.size() && s_[i] == '-' && s_.compare(i + 1, close.size(), close) == 0)
      return SkipSpace(i + 1 + close.size());
    if (s_.compare(i, close.size(), close) == 0) {
      size_t e = i + close.size();
      if (trim_newline && e < s_.size() && s_[e] == '\n') ++e;
      return e;
    }
    return std::string::npos;
  }

  void LexComment(size_t body) {
    for (size_t i = body; i < s_.size(); ++i) {
      if (s_[i] != '#' && s_[i] != '+' && s_[i] != '-') continue;
      const size_t e = MatchEnd(i, "#}", true);
      if (e != std::string::npos) {
        Advance(e);
        return;
      }
    }
    Error("missing end of comment tag");
  }

  void LexRaw() {
    for (size_t i = s_.find("{%", pos_); i != std::string::npos; i = s_.find("{%", i + 1)) {
      size_t j = i + 2;
      const char sign = j < s_.size() && (s_[j] == '-' || s_[j] == '+') ? s_[j] : 0;
      if (sign) ++j;
      j = SkipSpace(j);
      if (s_.compare(j, 6, "endraw") != 0) continue;
      const size_t e = MatchEnd(SkipSpace(j + 6), "%}", true);
      if (e == std::string::npos) continue;
      EmitText(s_.substr(pos_, i - pos_), sign, true);
      Advance(e);
      return;
    }
    Error("missing end of raw directive");
  }

  void LexTag(bool block) {
    std::string balance;
    while (true) {
      if (pos_ >= s_.size()) return;  // the parser reports the unclosed tag
      if (balance.empty()) {
        const size_t e = MatchEnd(pos_, block ? "%}" : "}}", block);
        if (e != std::string::npos) {
          Emit(block ? TokenType::kBlockEnd : TokenType::kVarEnd, "");
          Advance(e);
          return;
        }
      }
      const size_t ws = SkipSpace(pos_);
      if (ws > pos_) {
        Advance(ws);
        continue;
      }
      if (LexNumber() || LexName() || LexString()) continue;
      LexOperator(&balance);
    }
  }

  size_t ScanDigits(size_t i) const {  // (\d+_)*\d+ ; returns i when no digit
    if (!IsDigitAt(s_, i)) return i;
    while (IsDigitAt(s_, i)) ++i;
    while (i + 1 < s_.size() && s_[i] == '_' && IsDigitAt(s_, i + 1)) {
      ++i;
      while (IsDigitAt(s_, i)) ++i;
    }
    return i;
  }

  bool LexNumber() {
    if (!IsDigitAt(s_, pos_)) return false;
    // float: digits then (.digits)? e[+-]?digits, or .digits; not right after a '.'
    if (pos_ == 0 || s_[pos_ - 1] != '.') {
      const size_t d = ScanDigits(pos_);
      size_t end = std::string::npos;
      size_t i = d;
      if (i < s_.size() && s_[i] == '.' && ScanDigits(i + 1) > i + 1) i = ScanDigits(i + 1);
      if (i < s_.size() && (s_[i] == 'e' || s_[i] == 'E')) {
        size_t j = i + 1;
        if (j < s_.size() && (s_[j] == '+' || s_[j] == '-')) ++j;
        if (ScanDigits(j) > j) end = ScanDigits(j);
      }
      if (end == std::string::npos && i > d) end = i;
      if (end != std::string::npos) {
        std::string clean;
        for (size_t k = pos_; k < end; ++k)
          if (s_[k] != '_') clean.push_back(s_[k]);
        Token t{TokenType::kFloat, line_, s_.substr(pos_, end - pos_)};
        t.float_value = std::strtod(clean.c_str(), nullptr);
        tokens_.push_back(std::move(t));
        Advance(end);
        return true;
      }
    }
    size_t end = pos_ + 1;
    int base = 10;
    const char p = pos_ + 1 < s_.size() ? static_cast<char>(s_[pos_ + 1] | 0x20) : 0;
    auto digit_ok = [&](char c, int b) {
      const int v = c >= '0' && c <= '9'                     ? c - '0'
                    : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10
                                                             : 99;
      return v < b;
    };
    auto scan = [&](size_t i, int b) {  // (_?digit)*
      while (i < s_.size()) {
        if (digit_ok(s_[i], b)) {
          ++i;
        } else if (s_[i] == '_' && i + 1 < s_.size() && digit_ok(s_[i + 1], b)) {
          i += 2;
        } else {
          break;
        }
      }
      return i;
    };
    if (s_[pos_] == '0' && (p == 'b' || p == 'o' || p == 'x')) {
      base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
      end = scan(pos_ + 2, base);
      if (end == pos_ + 2) base = 10, end = pos_ + 1;
    }
    if (base == 10) {
      if (s_[pos_] == '0') {
        end = pos_ + 1;
        while (end < s_.size() && (s_[end] == '0' || (s_[end] == '_' && end + 1 < s_.size() && s_[end + 1] == '0')))
          end += s_[end] == '_' ? 2 : 1;
      } else {
        end = scan(pos_ + 1, 10);
      }
    }
    int64_t v = 0;
    const std::string text = s_.substr(pos_, end - pos_);
    if (!py::ParseInt(text, base == 10 ? 10 : 0, &v)) Error("integer literal too large: " + text);
    Token t{TokenType::kInt, line_, text};
    t.int_value = v;
    tokens_.push_back(std::move(t));
    Advance(end);
    return true;
  }

  bool LexName() {
    size_t i = pos_;
    bool first = true;
    while (i < s_.size()) {
      const auto c = static_cast<unsigned char>(s_[i]);
      char32_t cp = c;
      size_t len = 1;
      if (c >= 0x80) {
        const std::u32string one = py::Decode(s_.substr(i, std::min<size_t>(4, s_.size() - i)));
        cp = one[0];
        std::string enc;
        py::AppendUtf8(cp, &enc);
        len = enc.size();
      }
      if (first ? !py::IsIdentifierStart(cp) : !py::IsIdentifierChar(cp)) break;
      first = false;
      i += len;
    }
    if (i == pos_) return false;
    Emit(TokenType::kName, s_.substr(pos_, i - pos_));
    Advance(i);
    return true;
  }

  bool LexString() {
    const char q = s_[pos_];
    if (q != '\'' && q != '"') return false;
    size_t i = pos_ + 1;
    while (i < s_.size() && s_[i] != q) i += s_[i] == '\\' ? 2 : 1;
    if (i >= s_.size()) Error(std::string("unexpected char '") + q + "' (unterminated string)");
    Token t{TokenType::kString, line_, Unescape(std::string_view(s_).substr(pos_ + 1, i - pos_ - 1))};
    tokens_.push_back(std::move(t));
    Advance(i + 1);
    return true;
  }

  // Python's unicode-escape decoding of a string literal's body.
  std::string Unescape(std::string_view b) const {
    std::string out;
    char buf[16];
    for (size_t i = 0; i < b.size();) {
      if (b[i] != '\\') {
        out.push_back(b[i++]);
        continue;
      }
      if (i + 1 >= b.size()) Error("\\ at end of string");
      const char c = b[i + 1];
      i += 2;
      auto hex = [&](int n) -> char32_t {
        if (i + n > b.size()) Error("truncated \\" + std::string(1, c) + " escape");
        char32_t v = 0;
        for (int k = 0; k < n; ++k) {
          const char h = static_cast<char>(b[i + k] | 0x20);
          const int d = b[i + k] >= '0' && b[i + k] <= '9' ? b[i + k] - '0' : h >= 'a' && h <= 'f' ? h - 'a' + 10 : -1;
          if (d < 0) Error("truncated \\" + std::string(1, c) + " escape");
          v = v * 16 + d;
        }
        i += n;
        return v;
      };
      switch (c) {
        case '\n':
          break;
        case '\\':
          out.push_back('\\');
          break;
        case '\'':
          out.push_back('\'');
          break;
        case '"':
          out.push_back('"');
          break;
        case 'a':
          out.push_back('\a');
          break;
        case 'b':
          out.push_back('\b');
          break;
        case 'f':
          out.push_back('\f');
          break;
        case 'n':
          out.push_back('\n');
          break;
        case 'r':
          out.push_back('\r');
          break;
        case 't':
          out.push_back('\t');
          break;
        case 'v':
          out.push_back('\v');
          break;
        case 'x':
          py::AppendUtf8(hex(2), &out);
          break;
        case 'u':
          py::AppendUtf8(hex(4), &out);
          break;
        case 'U': {
          const char32_t v = hex(8);
          if (v > 0x10FFFF) Error("illegal Unicode character in \\U escape");
          py::AppendUtf8(v, &out);
          break;
        }
        case 'N':
          Error("\\N{...} escapes are not supported");
        default:
          if (c >= '0' && c <= '7') {
            int v = c - '0';
            for (int k = 0; k < 2 && i < b.size() && b[i] >= '0' && b[i] <= '7'; ++k) v = v * 8 + (b[i++] - '0');
            py::AppendUtf8(static_cast<char32_t>(v), &out);
          } else if (static_cast<unsigned char>(c) >= 0x80) {
            // Python sees the backslash-replaced form of the character (e.g. \xe9) after the backslash.
            size_t j = i - 1;
            const std::u32string one = py::Decode(b.substr(j, std::min<size_t>(4, b.size() - j)));
            std::string enc;
            py::AppendUtf8(one[0], &enc);
            std::snprintf(buf, sizeof buf,
                          one[0] <= 0xFF     ? "\\x%02x"
                          : one[0] <= 0xFFFF ? "\\u%04x"
                                             : "\\U%08x",
                          static_cast<unsigned>(one[0]));
            out += buf;
            i = j + enc.size();
          } else {
            out.push_back('\\');
            out.push_back(c);
          }
      }
    }
    return out;
  }

  void LexOperator(std::string* balance) {
    static constexpr std::string_view kTwo[] = {"//", "**", "==", "!=", ">=", "<="};
    for (std::string_view op : kTwo) {
      if (s_.compare(pos_, 2, op) == 0) {
        Emit(TokenType::kOp, std::string(op));
        Advance(pos_ + 2);
        return;
      }
    }
    const char c = s_[pos_];
    if (std::string_view("+-/*%~[](){}><=.:|,;").find(c) == std::string_view::npos) {
      std::string shown;
      py::AppendUtf8(py::Decode(s_.substr(pos_, std::min<size_t>(4, s_.size() - pos_)))[0], &shown);
      Error("unexpected char '" + shown + "'");
    }
    if (c == '(' || c == '[' || c == '{') balance->push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
    if (c == ')' || c == ']' || c == '}') {
      if (balance->empty()) Error(std::string("unexpected '") + c + "'");
      if (balance->back() != c) Error(std::string("unexpected '") + c + "', expected '" + balance->back() + "'");
      balance->pop_back();
    }
    Emit(TokenType::kOp, std::string(1, c));
    Advance(pos_ + 1);
  }

  std::string s_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

std::string Normalize(std::string_view src) {
  std::string out;
  out.reserve(src.size());
  for (size_t i = 0; i < src.size(); ++i) {
    if (src[i] == '\r') {
      out.push_back('\n');
      if (i + 1 < src.size() && src[i + 1] == '\n') ++i;
    } else {
      out.push_back(src[i]);
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

}  // namespace

std::vector<Token> Lex(std::string_view source) { return Lexer(Normalize(source)).Run(); }

}  // namespace ls::jinja
