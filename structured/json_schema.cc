// JSON Schema compilation: one grammar rule per schema node (and per $defs entry, so recursive
// references close into cycles), numbers and bounded integers as digit patterns.
#include "structured/json_schema.h"

#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "structured/regex.h"

namespace ls::structured {
namespace {

using ojson = nlohmann::ordered_json;

// Keywords that say nothing about the value (or that the compiler follows elsewhere).
const std::set<std::string> kAnnotations = {"title",    "description", "default",  "examples", "$schema",
                                            "$id",      "$comment",    "deprecated", "readOnly", "writeOnly",
                                            "$defs",    "definitions", "strict",     "name"};

class Compiler {
 public:
  Compiler(GrammarBuilder& b, const ojson& root, JsonWhitespace ws)
      : b_(b), root_(root), compact_(ws == JsonWhitespace::kCompact) {}

  absl::StatusOr<Symbol> Value(const ojson& schema, const std::string& where) {
    Symbol s = Node(schema, where);
    if (!error_.ok()) return error_;
    return s;
  }

 private:
  void Fail(const std::string& where, const std::string& what) {
    if (error_.ok())
      error_ = absl::InvalidArgumentError(absl::StrCat("JSON schema", where.empty() ? "" : " at " + where, ": ", what));
  }

  // Whitespace between two tokens: none, one space, or one line break and up to 32 characters of
  // indentation (compact and pretty-printed JSON both fit; a model cannot pad forever).
  Symbol Ws() {
    if (ws_ < 0 && compact_) ws_ = b_.OneOf({{}, {b_.Byte(' ')}}, "ws").index;
    if (ws_ < 0) {
      const Symbol indent = b_.Repeat({b_.Bytes(ByteRange(' ', ' ') | ByteRange('\t', '\t'))}, 0, 32, "indent");
      const Symbol r = b_.OneOf({{}, {b_.Byte(' ')}, {b_.Byte('\n'), indent}}, "ws");
      ws_ = r.index;
    }
    return GrammarBuilder::Ref(ws_);
  }

  // A comma and the whitespace after it (the whitespace before it follows the value it ends).
  Symbol Comma() {
    if (comma_ < 0) comma_ = b_.OneOf({{b_.Byte(','), Ws()}}, "comma").index;
    return GrammarBuilder::Ref(comma_);
  }

  Symbol StringChar() {
    if (string_char_ < 0) {
      ByteSet plain = ByteRange(0x20, 0x7F);
      plain.reset('"');
      plain.reset('\\');
      const Symbol ch = b_.Utf8Char(plain, "string-char");
      ByteSet esc_set;
      for (char c : std::string("\"\\/bfnrt")) esc_set.set(static_cast<uint8_t>(c));
      ByteSet hex = ByteRange('0', '9') | ByteRange('a', 'f') | ByteRange('A', 'F');
      const Symbol h = b_.Bytes(hex);
      const Symbol esc = b_.OneOf({{b_.Byte('\\'), b_.Bytes(esc_set)}, {b_.Byte('\\'), b_.Byte('u'), h, h, h, h}},
                                  "string-escape");
      string_char_ = b_.OneOf({{ch}, {esc}}, "string-char-or-escape").index;
    }
    return GrammarBuilder::Ref(string_char_);
  }

  std::vector<Symbol> Quoted(Symbol content) { return {b_.Byte('"'), content, b_.Byte('"')}; }

  Symbol AnyString(int64_t min, int64_t max) {
    return b_.OneOf({Quoted(b_.Repeat({StringChar()}, min, max, "string-chars"))}, "string");
  }

  // A quoted key that is none of `names` (the declared properties, which an undeclared one must not
  // repeat): a walk down the names' trie that leaves it at the first other character, and may not
  // close the string where a name ends. Names are compared as written without escapes.
  Symbol KeyExcept(const std::vector<std::string>& names) {
    if (names.empty()) return AnyString(0, -1);
    struct TrieNode {
      std::map<uint8_t, int> kids;
      bool name = false;
    };
    std::vector<TrieNode> trie(1);
    for (const std::string& n : names) {
      int at = 0;
      for (char ch : n) {
        const auto c = static_cast<uint8_t>(ch);
        auto it = trie[at].kids.find(c);
        if (it == trie[at].kids.end()) {
          trie.push_back({});
          it = trie[at].kids.emplace(c, static_cast<int>(trie.size()) - 1).first;
        }
        at = it->second;
      }
      trie[at].name = true;
    }
    const Symbol rest = b_.Repeat({StringChar()}, 0, -1, "key-rest");
    ByteSet simple;
    for (char c : std::string("\"\\/bfnrt")) simple.set(static_cast<uint8_t>(c));
    const Symbol h = b_.Bytes(ByteRange('0', '9') | ByteRange('a', 'f') | ByteRange('A', 'F'));
    const Symbol escape = b_.OneOf({{b_.Bytes(simple)}, {b_.Byte('u'), h, h, h, h}}, "escape-tail");
    std::vector<int32_t> rules(trie.size());
    for (size_t n = 0; n < trie.size(); ++n) rules[n] = b_.Declare("key-except");
    for (size_t n = 0; n < trie.size(); ++n) {
      ByteSet other = ByteRange(0x20, 0x7F);
      other.reset('"');
      other.reset('\\');
      for (const auto& [c, child] : trie[n].kids) {
        if (c < 0x80 && c != '"' && c != '\\') {
          other.reset(c);
          b_.AddAlternative(rules[n], {b_.Byte(c), GrammarBuilder::Ref(rules[child])});
        }
      }
      // Any other character (an escape or a non-ASCII one included) leaves every name behind.
      if (other.any()) b_.AddAlternative(rules[n], {b_.Bytes(other), rest});
      b_.AddAlternative(rules[n], {b_.Utf8Char(ByteSet(), "key-char"), rest});
      b_.AddAlternative(rules[n], {b_.Byte('\\'), escape, rest});
      if (!trie[n].name) b_.AddAlternative(rules[n], {});
    }
    return b_.OneOf({{b_.Byte('"'), GrammarBuilder::Ref(rules[0]), b_.Byte('"')}}, "undeclared-key");
  }

  Symbol Digits(int64_t min, int64_t max) { return b_.Repeat({b_.Bytes(ByteRange('0', '9'))}, min, max, "digits"); }

  // Non-negative integers without leading zeros: 0 | [1-9][0-9]*.
  std::vector<std::vector<Symbol>> Natural() {
    return {{b_.Byte('0')}, {b_.Bytes(ByteRange('1', '9')), Digits(0, -1)}};
  }

  // Decimal strings of the naturals in [lo, hi] (hi < 0: unbounded), no leading zeros.
  std::vector<std::vector<Symbol>> NaturalRange(int64_t lo, int64_t hi) {
    std::vector<std::vector<Symbol>> out;
    if (hi >= 0 && lo > hi) return out;
    const std::string a = std::to_string(lo);
    const size_t da = a.size();
    const size_t db = hi < 0 ? 19 : std::to_string(hi).size();
    for (size_t d = da; d <= db; ++d) {
      const int64_t pow = static_cast<int64_t>(std::pow(10.0, static_cast<double>(d - 1)));
      const int64_t from = std::max(lo, d == 1 ? int64_t{0} : pow);
      if (hi < 0 && d == db) {  // d digits and more: from..., then any longer number
        SameLength(std::to_string(from), std::string(d, '9'), &out);
        out.push_back({b_.Bytes(ByteRange('1', '9')), Digits(static_cast<int64_t>(d), -1)});
        break;
      }
      const int64_t to = hi >= 0 && d == db ? hi : (d == 1 ? 9 : pow * 10 - 1);  // d ≤ 18 here
      if (from <= to) SameLength(std::to_string(from), std::to_string(to), &out);
    }
    return out;
  }

  // Numbers of the same length between a and b (digit strings), as alternatives.
  void SameLength(const std::string& a, const std::string& b, std::vector<std::vector<Symbol>>* out) {
    if (a.empty()) {
      out->push_back({});
      return;
    }
    if (a[0] == b[0]) {
      std::vector<std::vector<Symbol>> rest;
      SameLength(a.substr(1), b.substr(1), &rest);
      for (auto& r : rest) {
        r.insert(r.begin(), b_.Byte(static_cast<uint8_t>(a[0])));
        out->push_back(std::move(r));
      }
      return;
    }
    const size_t n = a.size() - 1;
    const bool a_low = a.substr(1) == std::string(n, '0'), b_high = b.substr(1) == std::string(n, '9');
    // a[0] with tails ≥ a's tail; the digits strictly between with any tail; b[0] with tails ≤ b's.
    if (a_low && b_high) {
      out->push_back(Prefixed(ByteRange(a[0], b[0]), n));
      return;
    }
    if (a_low) {
      out->push_back(Prefixed(ByteRange(a[0], b[0] - 1), n));
    } else {
      std::vector<std::vector<Symbol>> rest;
      SameLength(a.substr(1), std::string(n, '9'), &rest);
      for (auto& r : rest) {
        r.insert(r.begin(), b_.Byte(static_cast<uint8_t>(a[0])));
        out->push_back(std::move(r));
      }
      if (a[0] + 1 <= b[0] - 1) out->push_back(Prefixed(ByteRange(a[0] + 1, b[0] - 1), n));
    }
    if (b_high && !a_low) {
      out->push_back(Prefixed(ByteRange(b[0], b[0]), n));
    } else if (!b_high) {
      std::vector<std::vector<Symbol>> rest;
      SameLength(std::string(n, '0'), b.substr(1), &rest);
      for (auto& r : rest) {
        r.insert(r.begin(), b_.Byte(static_cast<uint8_t>(b[0])));
        out->push_back(std::move(r));
      }
    }
  }
  std::vector<Symbol> Prefixed(const ByteSet& first, size_t n) {
    std::vector<Symbol> s = {b_.Bytes(first)};
    if (n > 0) s.push_back(Digits(static_cast<int64_t>(n), static_cast<int64_t>(n)));
    return s;
  }

  // Integers in [lo, hi] (either end open).
  Symbol IntegerRange(std::optional<int64_t> lo, std::optional<int64_t> hi) {
    std::vector<std::vector<Symbol>> alts;
    const auto neg = [&](const std::vector<std::vector<Symbol>>& nat) {
      for (auto a : nat) {
        a.insert(a.begin(), b_.Byte('-'));
        alts.push_back(std::move(a));
      }
    };
    // Non-negative part: [max(lo, 0), hi].
    if (!hi || *hi >= 0) {
      const int64_t from = lo ? std::max<int64_t>(*lo, 0) : 0;
      for (auto& a : NaturalRange(from, hi ? *hi : -1)) alts.push_back(std::move(a));
    }
    // Negative part: −[max(1, −hi), −lo].
    if (!lo || *lo < 0) {
      const int64_t from = hi ? std::max<int64_t>(1, -*hi) : 1;
      neg(NaturalRange(from, lo ? -*lo : -1));
    }
    if (alts.empty()) alts.push_back({b_.Bytes(ByteSet())});  // an empty range: matches nothing
    return b_.OneOf(alts, "integer");
  }

  Symbol Fraction() { return b_.OneOf({{b_.Byte('.'), Digits(1, -1)}}, "fraction"); }

  Symbol Number(const ojson& s, const std::string& where) {
    const bool bounded = s.contains("minimum") || s.contains("maximum") || s.contains("exclusiveMinimum") ||
                         s.contains("exclusiveMaximum");
    if (!bounded) {
      std::vector<Symbol> seq;
      seq.push_back(b_.Repeat({b_.Byte('-')}, 0, 1, "sign"));
      seq.push_back(b_.OneOf(Natural(), "natural"));
      seq.push_back(b_.Repeat({Fraction()}, 0, 1, "fraction?"));
      seq.push_back(b_.Repeat({b_.Bytes(ByteRange('e', 'e') | ByteRange('E', 'E')),
                               b_.Repeat({b_.Bytes(ByteRange('+', '+') | ByteRange('-', '-'))}, 0, 1, "exp-sign"),
                               Digits(1, -1)},
                              0, 1, "exponent"));
      return b_.OneOf({seq}, "number");
    }
    for (const char* k : {"exclusiveMinimum", "exclusiveMaximum"})
      if (s.contains(k)) Fail(where, absl::StrCat("'", k, "' on a number is not supported (use it on an integer)"));
    std::optional<int64_t> lo, hi;
    for (const char* k : {"minimum", "maximum"}) {
      if (!s.contains(k)) continue;
      const ojson& v = s[k];
      if (!v.is_number() || std::floor(v.get<double>()) != v.get<double>() || std::fabs(v.get<double>()) > 1e15) {
        Fail(where, absl::StrCat("'", k, "' on a number must be an integer value (got ", v.dump(), ")"));
        return b_.Byte('0');
      }
      (std::string(k) == "minimum" ? lo : hi) = static_cast<int64_t>(v.get<double>());
    }
    // x = ±(I.F): an integer part within the bounds with any fraction, or at a bound with none.
    std::vector<std::vector<Symbol>> alts;
    const Symbol frac = b_.Repeat({Fraction()}, 0, 1, "fraction?");
    const Symbol zeros = b_.Repeat({b_.OneOf({{b_.Byte('.'), b_.Repeat({b_.Byte('0')}, 1, -1, "zeros")}}, "zero-fraction")},
                                   0, 1, "zero-fraction?");
    // Non-negative values: I ≥ max(lo, 0) (with a fraction: I ≥ lo works since lo ≤ I < I.F),
    // I < hi with any fraction, I = hi without one.
    if (!hi || *hi >= 0) {
      const int64_t from = lo ? std::max<int64_t>(*lo, 0) : 0;
      if (!hi) {
        for (auto a : NaturalRange(from, -1)) {
          a.push_back(frac);
          alts.push_back(std::move(a));
        }
      } else {
        if (*hi - 1 >= from)
          for (auto a : NaturalRange(from, *hi - 1)) {
            a.push_back(frac);
            alts.push_back(std::move(a));
          }
        if (*hi >= from)
          for (auto a : NaturalRange(*hi, *hi)) {
            a.push_back(zeros);
            alts.push_back(std::move(a));
          }
      }
    }
    // Negative values −(I.F): I < −lo with any fraction, I = −lo without; I ≥ −hi (hi < 0).
    if (!lo || *lo < 0) {
      const int64_t from = hi ? std::max<int64_t>(0, -*hi) : 0;
      auto negated = [&](std::vector<std::vector<Symbol>> nat, Symbol tail) {
        for (auto& a : nat) {
          a.insert(a.begin(), b_.Byte('-'));
          a.push_back(tail);
          alts.push_back(std::move(a));
        }
      };
      if (!lo) {
        negated(NaturalRange(from, -1), frac);
      } else {
        if (-*lo - 1 >= from) negated(NaturalRange(from, -*lo - 1), frac);
        negated(NaturalRange(-*lo, -*lo), zeros);
      }
    }
    if (alts.empty()) alts.push_back({b_.Bytes(ByteSet())});
    return b_.OneOf(alts, "number-range");
  }

  Symbol Integer(const ojson& s, const std::string& where) {
    std::optional<int64_t> lo, hi;
    auto bound = [&](const char* k, int64_t delta, std::optional<int64_t>* out, bool is_lo) {
      if (!s.contains(k)) return;
      const ojson& v = s[k];
      if (v.is_boolean()) {
        Fail(where, absl::StrCat("'", k, "' as a boolean (draft 4) is not supported"));
        return;
      }
      if (!v.is_number() || std::fabs(v.get<double>()) > 1e15) {
        Fail(where, absl::StrCat("'", k, "' must be a number (got ", v.dump(), ")"));
        return;
      }
      const double d = v.get<double>();
      int64_t b = static_cast<int64_t>(is_lo ? std::ceil(d) : std::floor(d));
      if (delta != 0 && static_cast<double>(b) == d) b += delta;  // exclusive and integral
      if (!*out || (is_lo ? b > **out : b < **out)) *out = b;
    };
    bound("minimum", 0, &lo, true);
    bound("exclusiveMinimum", 1, &lo, true);
    bound("maximum", 0, &hi, false);
    bound("exclusiveMaximum", -1, &hi, false);
    if (!lo && !hi) {
      std::vector<std::vector<Symbol>> alts = Natural();
      for (auto a : Natural()) {
        if (a.size() == 1) continue;  // no −0
        a.insert(a.begin(), b_.Byte('-'));
        alts.push_back(std::move(a));
      }
      return b_.OneOf(alts, "integer");
    }
    return IntegerRange(lo, hi);
  }

  // RFC 3339 dates with each month's days (February's 29th in any year) and times with an offset.
  static constexpr const char* kDate =
      R"(\d{4}-((0[13578]|1[02])-(0[1-9]|[12]\d|3[01])|(0[469]|11)-(0[1-9]|[12]\d|30)|02-(0[1-9]|1\d|2\d)))";
  static constexpr const char* kTime = R"(([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?(Z|[+-]([01]\d|2[0-3]):[0-5]\d))";

  Symbol Format(const std::string& format, const std::string& where) {
    static const std::map<std::string, std::string> kFormats = {
        {"date", kDate},
        {"time", kTime},
        {"date-time", std::string(kDate) + "T" + kTime},
        {"email", R"([a-zA-Z0-9_+-]{1,32}(\.[a-zA-Z0-9_+-]{1,32}){0,3}@[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*\.[a-zA-Z]{2,24})"},
        {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
        {"ipv4", R"(((25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))"},
    };
    auto it = kFormats.find(format);
    if (it == kFormats.end()) {
      Fail(where, absl::StrCat("the string format '", format, "' is not supported (supported: date, time, "
                               "date-time, email, uuid, ipv4)"));
      return b_.Byte('"');
    }
    auto content = AddRegex(b_, it->second, RegexText::kJsonString);
    if (!content.ok()) {
      Fail(where, std::string(content.status().message()));
      return b_.Byte('"');
    }
    return b_.OneOf({Quoted(*content)}, "format-" + format);
  }

  Symbol String(const ojson& s, const std::string& where) {
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string()) Fail(where, "'pattern' must be a string");
      if (s.contains("minLength") || s.contains("maxLength") || s.contains("format"))
        Fail(where, "'pattern' together with 'minLength', 'maxLength' or 'format' is not supported");
      if (!error_.ok()) return b_.Byte('"');
      auto content = AddRegex(b_, s["pattern"].get<std::string>(), RegexText::kJsonString);
      if (!content.ok()) {
        Fail(where, std::string(content.status().message()));
        return b_.Byte('"');
      }
      return b_.OneOf({Quoted(*content)}, "pattern-string");
    }
    if (s.contains("format")) {
      if (!s["format"].is_string()) Fail(where, "'format' must be a string");
      if (s.contains("minLength") || s.contains("maxLength"))
        Fail(where, "'format' together with 'minLength' or 'maxLength' is not supported");
      if (!error_.ok()) return b_.Byte('"');
      return Format(s["format"].get<std::string>(), where);
    }
    int64_t min = 0, max = -1;
    if (!CountBounds(s, "minLength", "maxLength", where, &min, &max)) return b_.Byte('"');
    if (max >= 0 && max < min) Fail(where, "'maxLength' is below 'minLength'");
    return AnyString(min, max);
  }

  // A count's bounds (minLength/maxLength, minItems/maxItems): each, where present, a non-negative
  // integer into *min or *max; false, failing, when one is not.
  bool CountBounds(const ojson& s, const char* min_key, const char* max_key, const std::string& where, int64_t* min,
                   int64_t* max) {
    for (const auto& [k, out] : {std::pair{min_key, min}, std::pair{max_key, max}}) {
      if (!s.contains(k)) continue;
      if (!s[k].is_number_integer() || s[k].get<int64_t>() < 0) {
        Fail(where, absl::StrCat("'", k, "' must be a non-negative integer"));
        return false;
      }
      *out = s[k].get<int64_t>();
    }
    return true;
  }

  Symbol Literal(const ojson& v) { return b_.OneOf({b_.Literal(v.dump())}, "literal"); }

  Symbol Array(const ojson& s, const std::string& where) {
    std::vector<const ojson*> prefix;
    if (s.contains("prefixItems")) {
      if (!s["prefixItems"].is_array()) Fail(where, "'prefixItems' must be an array");
      for (const ojson& p : s["prefixItems"]) prefix.push_back(&p);
    }
    bool more = true;  // items after the prefix
    Symbol item{};
    if (s.contains("items")) {
      const ojson& it = s["items"];
      if (it.is_boolean()) {
        more = it.get<bool>();
        if (more) item = Node(ojson::object(), where + "/items");
      } else if (it.is_object()) {
        item = Node(it, where + "/items");
      } else {
        Fail(where, "'items' must be a schema (an array of schemas is 'prefixItems')");
      }
    } else {
      item = Node(ojson::object(), where + "/items");
    }
    int64_t min = 0, max = -1;
    if (!CountBounds(s, "minItems", "maxItems", where, &min, &max)) return b_.Byte('[');
    if (s.contains("uniqueItems") && s["uniqueItems"] == true) Fail(where, "'uniqueItems' is not supported");
    if (!error_.ok()) return b_.Byte('[');
    if (!more) max = max < 0 ? static_cast<int64_t>(prefix.size()) : std::min<int64_t>(max, prefix.size());
    if (max >= 0 && max < min) {
      Fail(where, "'maxItems' (or the items allowed) is below 'minItems'");
      return b_.Byte('[');
    }
    // Items i = 0, 1, ...: the prefix's schemas, then `item`; each after the first preceded by a comma.
    // Whitespace follows each token (the bracket, an item, a comma), so every gap has one run.
    const Symbol comma = Comma();
    std::vector<Symbol> slots;
    for (size_t i = 0; i < prefix.size(); ++i)
      slots.push_back(b_.OneOf({{Node(*prefix[i], absl::StrCat(where, "/prefixItems/", i)), Ws()}}, "prefix-item"));
    if (more) item = b_.OneOf({{item, Ws()}}, "item");
    // rest(i): the items from i on, i ≥ 1 (each with its comma); rest(0) the whole list.
    const int64_t n_prefix = static_cast<int64_t>(prefix.size());
    std::function<Symbol(int64_t)> rest = [&](int64_t i) -> Symbol {
      // Past the prefix: item repeated between max(min − i, 0) and max − i times, each with a comma.
      if (i >= n_prefix) {
        const int64_t lo = std::max<int64_t>(0, min - i), hi = max < 0 ? -1 : max - i;
        if (hi == 0 || !more) return b_.OneOf({{}}, "no-more-items");
        std::vector<Symbol> one = {comma, item};
        if (i == 0) {  // the first item has no comma before it
          const Symbol tail = b_.Repeat(one, lo > 0 ? lo - 1 : 0, hi < 0 ? -1 : hi - 1, "items");
          if (lo > 0) return b_.OneOf({{item, tail}}, "items");
          return b_.OneOf({{item, tail}, {}}, "items?");
        }
        return b_.Repeat(one, lo, hi, "items");
      }
      if (max >= 0 && i >= max) return b_.OneOf({{}}, "no-more-items");
      std::vector<Symbol> take = {slots[i]};
      if (i > 0) take.insert(take.begin(), comma);
      take.push_back(rest(i + 1));
      if (i >= min) return b_.OneOf({take, {}}, "prefix-items");  // the list may stop before item i
      return b_.OneOf({take}, "prefix-items");
    };
    return b_.OneOf({{b_.Byte('['), Ws(), rest(0), b_.Byte(']')}}, "array");
  }

  Symbol Object(const ojson& s, const std::string& where) {
    struct Prop {
      std::string name;
      Symbol value;
      bool required;
    };
    std::vector<Prop> props;
    std::set<std::string> required;
    if (s.contains("required")) {
      if (!s["required"].is_array()) Fail(where, "'required' must be an array of names");
      for (const ojson& r : s["required"]) {
        if (!r.is_string()) Fail(where, "'required' must be an array of names");
        if (r.is_string()) required.insert(r.get<std::string>());
      }
    }
    if (s.contains("properties")) {
      if (!s["properties"].is_object()) Fail(where, "'properties' must be an object");
      for (auto it = s["properties"].begin(); error_.ok() && it != s["properties"].end(); ++it)
        props.push_back({it.key(), Node(it.value(), absl::StrCat(where, "/properties/", it.key())),
                         required.count(it.key()) > 0});
    }
    for (const std::string& r : required) {
      bool found = false;
      for (const Prop& p : props) found |= p.name == r;
      if (!found) Fail(where, absl::StrCat("required property '", r, "' is not in 'properties'"));
    }
    for (const char* k : {"patternProperties", "propertyNames", "minProperties", "maxProperties", "dependentRequired",
                          "dependentSchemas", "unevaluatedProperties"})
      if (s.contains(k)) Fail(where, absl::StrCat("'", k, "' is not supported"));
    // Properties not declared: only where additionalProperties allows them.
    // Unsaid, undeclared properties are refused where some are declared (as strict schemas mean),
    // and any are taken where none are ({"type": "object"} is any object).
    bool extra = props.empty() && !s.contains("additionalProperties");
    Symbol extra_value{};
    if (extra) extra_value = Node(ojson::object(), where + "/additionalProperties");
    if (s.contains("additionalProperties")) {
      const ojson& a = s["additionalProperties"];
      if (a.is_boolean()) {
        extra = a.get<bool>();
        if (extra) extra_value = Node(ojson::object(), where + "/additionalProperties");
      } else if (a.is_object()) {
        extra = true;
        extra_value = Node(a, where + "/additionalProperties");
      } else {
        Fail(where, "'additionalProperties' must be a boolean or a schema");
      }
    }
    if (!error_.ok()) return b_.Byte('{');
    const Symbol comma = Comma();
    auto pair = [&](const std::string& name, Symbol value) {
      std::vector<Symbol> kv = b_.Literal(ojson(name).dump());
      kv.push_back(Ws());
      kv.push_back(b_.Byte(':'));
      kv.push_back(Ws());
      kv.push_back(value);
      kv.push_back(Ws());
      return kv;
    };
    // extra(first): undeclared pairs, any number, each after a comma unless first.
    auto extras = [&](bool first) -> Symbol {
      if (!extra) return b_.OneOf({{}}, "no-extra-properties");
      std::vector<std::string> declared;
      for (const Prop& p : props) declared.push_back(p.name);
      std::vector<Symbol> kv = {KeyExcept(declared), Ws(), b_.Byte(':'), Ws(), extra_value, Ws()};
      std::vector<Symbol> with_comma = {comma};
      with_comma.insert(with_comma.end(), kv.begin(), kv.end());
      const Symbol more = b_.Repeat(with_comma, 0, -1, "extra-properties");
      if (!first) return more;
      std::vector<Symbol> start = kv;
      start.push_back(more);
      return b_.OneOf({start, {}}, "extra-properties?");
    };
    // rest(i, first): the declared properties from i on; first: no pair written yet.
    std::map<std::pair<size_t, bool>, Symbol> memo;
    std::function<Symbol(size_t, bool)> rest = [&](size_t i, bool first) -> Symbol {
      if (auto it = memo.find({i, first}); it != memo.end()) return it->second;
      Symbol out;
      if (i == props.size()) {
        out = extras(first);
      } else {
        std::vector<Symbol> take = pair(props[i].name, props[i].value);
        if (!first) take.insert(take.begin(), comma);
        take.push_back(rest(i + 1, false));
        if (props[i].required) {
          out = b_.OneOf({take}, "property");
        } else {
          out = b_.OneOf({take, {rest(i + 1, first)}}, "property?");
        }
      }
      memo[{i, first}] = out;
      return out;
    };
    return b_.OneOf({{b_.Byte('{'), Ws(), rest(0, true), b_.Byte('}')}}, "object");
  }

  // A schema with no "type": any JSON value (restricted by what it does say).
  Symbol AnyValue() {
    if (any_ < 0) {
      any_ = b_.Declare("any");
      const Symbol self = GrammarBuilder::Ref(any_);
      const Symbol comma = Comma();
      const Symbol array = b_.OneOf(
          {{b_.Byte('['), Ws(), b_.Byte(']')},
           {b_.Byte('['), Ws(), self, Ws(), b_.Repeat({comma, self, Ws()}, 0, -1, "any-items"), b_.Byte(']')}},
          "any-array");
      std::vector<Symbol> kv = {AnyString(0, -1), Ws(), b_.Byte(':'), Ws(), self, Ws()};
      std::vector<Symbol> more = {comma};
      more.insert(more.end(), kv.begin(), kv.end());
      std::vector<Symbol> full = {b_.Byte('{'), Ws()};
      full.insert(full.end(), kv.begin(), kv.end());
      full.push_back(b_.Repeat(more, 0, -1, "any-pairs"));
      full.push_back(b_.Byte('}'));
      const Symbol object = b_.OneOf({{b_.Byte('{'), Ws(), b_.Byte('}')}, full}, "any-object");
      const Symbol number = Number(ojson::object(), "");
      for (const Symbol& s : {AnyString(0, -1), number, array, object}) b_.AddAlternative(any_, {s});
      for (const char* lit : {"true", "false", "null"}) b_.AddAlternative(any_, b_.Literal(lit));
    }
    return GrammarBuilder::Ref(any_);
  }

  Symbol OfType(const std::string& type, const ojson& s, const std::string& where) {
    if (type == "string") return String(s, where);
    if (type == "integer") return Integer(s, where);
    if (type == "number") return Number(s, where);
    if (type == "boolean") return b_.OneOf({b_.Literal("true"), b_.Literal("false")}, "boolean");
    if (type == "null") return b_.OneOf({b_.Literal("null")}, "null");
    if (type == "object") return Object(s, where);
    if (type == "array") return Array(s, where);
    Fail(where, absl::StrCat("unknown type '", type, "'"));
    return b_.Byte('n');
  }

  Symbol Ref(const std::string& ref, const std::string& where) {
    if (auto it = refs_.find(ref); it != refs_.end()) return GrammarBuilder::Ref(it->second);
    const ojson* target = nullptr;
    if (ref == "#") {
      target = &root_;
    } else {
      for (const char* prefix : {"#/$defs/", "#/definitions/"}) {
        if (ref.rfind(prefix, 0) != 0) continue;
        const std::string name = ref.substr(std::string(prefix).size());
        const auto defs = root_.find(std::string(prefix).substr(2, std::string(prefix).size() - 3));
        if (defs == root_.end() || !defs->is_object()) continue;
        if (const auto it = defs->find(name); it != defs->end()) target = &*it;
      }
    }
    if (!target) {
      Fail(where, absl::StrCat("the reference '", ref, "' does not resolve (supported: #, #/$defs/NAME, #/definitions/NAME)"));
      return b_.Byte('n');
    }
    // Declared before it is compiled, so that a recursive reference closes into a cycle.
    const int32_t rule = b_.Declare("ref " + ref);
    refs_[ref] = rule;
    const Symbol body = Node(*target, ref.substr(1));
    b_.AddAlternative(rule, {body});
    return GrammarBuilder::Ref(rule);
  }

  Symbol Node(const ojson& s, const std::string& where) {
    if (!error_.ok()) return b_.Byte('n');
    if (s.is_boolean()) {
      if (s.get<bool>()) return AnyValue();
      Fail(where, "the schema 'false' accepts no value");
      return b_.Byte('n');
    }
    if (!s.is_object()) {
      Fail(where, "a schema must be an object or a boolean");
      return b_.Byte('n');
    }
    static const std::set<std::string> kKnown = {
        "type",       "properties",       "required",         "additionalProperties", "enum",     "const",
        "anyOf",      "oneOf",            "items",            "prefixItems",          "minItems", "maxItems",
        "minLength",  "maxLength",        "pattern",          "format",               "minimum",  "maximum",
        "exclusiveMinimum", "exclusiveMaximum", "$ref",       "uniqueItems",          "allOf"};
    for (auto it = s.begin(); it != s.end(); ++it)
      if (!kKnown.count(it.key()) && !kAnnotations.count(it.key()))
        Fail(where, absl::StrCat("the keyword '", it.key(), "' is not supported"));
    if (!error_.ok()) return b_.Byte('n');
    if (s.contains("$ref")) {
      if (s.size() > 1)
        for (auto it = s.begin(); it != s.end(); ++it)
          if (it.key() != "$ref" && !kAnnotations.count(it.key()))
            Fail(where, absl::StrCat("'", it.key(), "' beside '$ref' is not supported"));
      if (!s["$ref"].is_string()) Fail(where, "'$ref' must be a string");
      if (!error_.ok()) return b_.Byte('n');
      return Ref(s["$ref"].get<std::string>(), where);
    }
    if (s.contains("allOf")) {
      if (!s["allOf"].is_array() || s["allOf"].size() != 1) {
        Fail(where, "'allOf' is supported only with a single schema");
        return b_.Byte('n');
      }
      return Node(s["allOf"][0], where + "/allOf/0");
    }
    if (s.contains("const")) return Literal(s["const"]);
    if (s.contains("enum")) {
      if (!s["enum"].is_array() || s["enum"].empty()) {
        Fail(where, "'enum' must be a non-empty array");
        return b_.Byte('n');
      }
      std::vector<std::vector<Symbol>> alts;
      for (const ojson& v : s["enum"]) alts.push_back(b_.Literal(v.dump()));
      return b_.OneOf(alts, "enum");
    }
    for (const char* k : {"anyOf", "oneOf"}) {
      if (!s.contains(k)) continue;
      if (!s[k].is_array() || s[k].empty()) {
        Fail(where, absl::StrCat("'", k, "' must be a non-empty array of schemas"));
        return b_.Byte('n');
      }
      std::vector<std::vector<Symbol>> alts;
      for (size_t i = 0; i < s[k].size(); ++i) {
        ojson branch = s[k][i];
        // Keywords beside anyOf apply to every branch (a common form: {"type": "object", "anyOf": [...]}).
        if (branch.is_object())
          for (auto it = s.begin(); it != s.end(); ++it)
            if (it.key() != k && !kAnnotations.count(it.key()) && !branch.contains(it.key())) branch[it.key()] = it.value();
        alts.push_back({Node(branch, absl::StrCat(where, "/", k, "/", i))});
      }
      return b_.OneOf(alts, k);
    }
    if (!s.contains("type")) {
      // No type: the keywords present say which kind (properties: an object, items: an array, ...).
      if (s.contains("properties") || s.contains("required") || s.contains("additionalProperties"))
        return Object(s, where);
      if (s.contains("items") || s.contains("prefixItems")) return Array(s, where);
      if (s.contains("pattern") || s.contains("format") || s.contains("minLength") || s.contains("maxLength"))
        return String(s, where);
      return AnyValue();
    }
    const ojson& type = s["type"];
    if (type.is_string()) return OfType(type.get<std::string>(), s, where);
    if (type.is_array() && !type.empty()) {
      std::vector<std::vector<Symbol>> alts;
      for (const ojson& t : type) {
        if (!t.is_string()) Fail(where, "'type' must be a string or an array of strings");
        if (t.is_string()) alts.push_back({OfType(t.get<std::string>(), s, where)});
      }
      return b_.OneOf(alts, "types");
    }
    Fail(where, "'type' must be a string or an array of strings");
    return b_.Byte('n');
  }

  GrammarBuilder& b_;
  const ojson& root_;
  bool compact_;
  absl::Status error_;
  std::map<std::string, int32_t> refs_;
  int32_t ws_ = -1, comma_ = -1, string_char_ = -1, any_ = -1;
};

}  // namespace

absl::StatusOr<Symbol> AddJsonSchema(GrammarBuilder& b, const ojson& schema, const std::string& name,
                                     JsonWhitespace ws) {
  (void)name;
  return Compiler(b, schema, ws).Value(schema, "");
}

absl::StatusOr<Grammar> JsonSchemaGrammar(const ojson& schema) {
  GrammarBuilder b;
  auto value = AddJsonSchema(b, schema, "root");
  if (!value.ok()) return value.status();
  b.AddAlternative(0, {*value});
  auto g = std::move(b).Finish();
  if (!g.ok())  // a check of the whole grammar: named as the compiler's errors are
    return absl::Status(g.status().code(), absl::StrCat("JSON schema: ", g.status().message()));
  return g;
}

absl::StatusOr<Grammar> JsonObjectGrammar() {
  return JsonSchemaGrammar(ojson{{"type", "object"}, {"additionalProperties", true}});
}

}  // namespace ls::structured
