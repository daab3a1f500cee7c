// GBNF parsing: a recursive descent over the text; rule names are declared on first sight, so a
// rule may be used before it is defined (a rule used and never defined is an error).
#include "structured/ebnf.h"

#include <cctype>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "structured/regex.h"
#include "tokenizer/utf8.h"

namespace ls::structured {
namespace {

class Parser {
 public:
  // The grammar's rules go into `b`; its `root` is the rule `root` of b.
  Parser(GrammarBuilder& b, int32_t root, std::string_view text) : t_(text), b_(b) {
    rules_["root"] = root;
    defined_.assign(b_.num_rules(), false);
  }

  absl::Status Parse() {
    Skip();
    while (i_ < t_.size() && ok()) {
      const std::string name = Name();
      if (name.empty()) {
        Fail(absl::StrCat("unexpected '", std::string(1, t_[i_]), "' where a rule should start (name ::= ...)"));
        break;
      }
      Skip();
      if (t_.substr(i_, 3) != "::=") {
        Fail(absl::StrCat("expected '::=' after '", name, "'"));
        break;
      }
      i_ += 3;
      const int32_t rule = RuleId(name);
      if (defined_[rule]) {
        Fail(absl::StrCat("rule '", name, "' is defined twice (give one rule its alternatives with |)"));
        break;
      }
      defined_[rule] = true;
      for (auto& alt : Alternatives(false)) b_.AddAlternative(rule, std::move(alt));
      Skip();
    }
    if (!ok()) return absl::InvalidArgumentError(error_);
    for (const auto& [name, id] : rules_)
      if (!defined_[id])
        return absl::InvalidArgumentError(
            name == "root" ? std::string("grammar: no 'root' rule") : absl::StrCat("grammar: rule '", name, "' is used but never defined"));
    return absl::OkStatus();
  }

 private:
  bool ok() const { return error_.empty(); }
  // The error, on the line of `at` (default: where parsing is).
  void Fail(const std::string& what, size_t at = std::string_view::npos) {
    if (!ok()) return;
    if (at == std::string_view::npos) at = i_;
    int line = 1;
    for (size_t k = 0; k < at && k < t_.size(); ++k) line += t_[k] == '\n';
    error_ = absl::StrCat("grammar line ", line, ": ", what);
  }

  // Skips spaces and comments; with `newlines` false a line end stops it (a rule ends at a line
  // end that is not followed by an indented continuation or an operator).
  void Skip(bool newlines = true) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else if (c == ' ' || c == '\t' || c == '\r' || (newlines && c == '\n')) {
        ++i_;
      } else {
        break;
      }
    }
  }

  std::string Name() {
    const size_t start = i_;
    while (i_ < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[i_])) || t_[i_] == '-' || t_[i_] == '_')) ++i_;
    return std::string(t_.substr(start, i_ - start));
  }

  int32_t RuleId(const std::string& name) {
    auto [it, fresh] = rules_.try_emplace(name, 0);
    if (fresh) it->second = b_.Declare(name);
    defined_.resize(b_.num_rules(), false);
    return it->second;
  }

  // Whether the text at i_ (after spaces) continues the current rule rather than starting the
  // next one (`name ::=`).
  bool RuleContinues() {
    size_t j = i_;
    while (j < t_.size() && (std::isspace(static_cast<unsigned char>(t_[j])) || t_[j] == '#')) {
      if (t_[j] == '#')
        while (j < t_.size() && t_[j] != '\n') ++j;
      else
        ++j;
    }
    if (j >= t_.size()) return false;
    size_t k = j;
    while (k < t_.size() && (std::isalnum(static_cast<unsigned char>(t_[k])) || t_[k] == '-' || t_[k] == '_')) ++k;
    if (k == j) return true;
    while (k < t_.size() && (t_[k] == ' ' || t_[k] == '\t')) ++k;
    return t_.substr(k, 3) != "::=";
  }

  std::vector<std::vector<Symbol>> Alternatives(bool nested) {
    std::vector<std::vector<Symbol>> alts;
    alts.push_back(Sequence(nested));
    while (ok()) {
      if (nested) Skip();
      else if (!RuleContinues()) break;
      else Skip();
      if (i_ < t_.size() && t_[i_] == '|') {
        ++i_;
        alts.push_back(Sequence(nested));
      } else {
        break;
      }
    }
    return alts;
  }

  std::vector<Symbol> Sequence(bool nested) {
    std::vector<Symbol> seq;
    while (ok()) {
      if (nested) {
        Skip();
      } else {
        if (!RuleContinues()) break;
        Skip();
      }
      if (i_ >= t_.size() || t_[i_] == '|' || t_[i_] == ')') break;
      std::vector<Symbol> item = Primary();
      if (!ok()) break;
      Quantified(item, &seq);
    }
    return seq;
  }

  void Quantified(const std::vector<Symbol>& item, std::vector<Symbol>* seq) {
    int64_t min = 1, max = 1;
    if (i_ < t_.size()) {
      const char q = t_[i_];
      if (q == '*' || q == '+' || q == '?') {
        ++i_;
        min = q == '+' ? 1 : 0;
        max = q == '?' ? 1 : -1;
      } else if (q == '{') {
        ++i_;
        auto number = [&](int64_t* out) {
          Skip();
          const size_t start = i_;
          int64_t v = 0;
          while (i_ < t_.size() && std::isdigit(static_cast<unsigned char>(t_[i_])) && v < 100000)
            v = v * 10 + (t_[i_++] - '0');
          *out = v;
          return i_ > start;
        };
        if (!number(&min)) return Fail("expected a number after '{'");
        Skip();
        if (i_ < t_.size() && t_[i_] == ',') {
          ++i_;
          if (!number(&max)) max = -1;
          Skip();
        } else {
          max = min;
        }
        if (i_ >= t_.size() || t_[i_] != '}') return Fail("expected '}'");
        ++i_;
        if (max >= 0 && max < min) return Fail("a repetition's upper bound is below its lower bound");
      }
    }
    if (min == 1 && max == 1) {
      seq->insert(seq->end(), item.begin(), item.end());
    } else {
      seq->push_back(b_.Repeat(item, min, max, "repeat"));
    }
  }

  std::vector<Symbol> Primary() {
    const char c = t_[i_];
    if (c == '"') return Literal();
    if (c == '[') return Class();
    if (c == '.') {
      ++i_;
      return Regex("[\\s\\S]");
    }
    if (c == '(') {
      const size_t open = i_++;
      auto alts = Alternatives(true);
      Skip();
      if (i_ >= t_.size() || t_[i_] != ')') {
        Fail("a group is not closed", open);
        return {};
      }
      ++i_;
      return {b_.OneOf(alts, "group")};
    }
    const std::string name = Name();
    if (name.empty()) {
      Fail(absl::StrCat("unexpected '", std::string(1, c), "'"));
      return {};
    }
    return {GrammarBuilder::Ref(RuleId(name))};
  }

  std::vector<Symbol> Regex(const std::string& pattern) {
    auto s = AddRegex(b_, pattern, RegexText::kRaw);
    if (!s.ok()) {
      Fail(std::string(s.status().message()));
      return {};
    }
    return {*s};
  }

  std::vector<Symbol> Class() {
    const size_t start = i_;
    ++i_;
    if (i_ < t_.size() && t_[i_] == '^') ++i_;
    if (i_ < t_.size() && t_[i_] == ']') ++i_;
    while (i_ < t_.size() && t_[i_] != ']' && t_[i_] != '\n') i_ += t_[i_] == '\\' ? 2 : 1;
    if (i_ >= t_.size() || t_[i_] != ']') {
      Fail("a character class is not closed", start);
      return {};
    }
    ++i_;
    return Regex(std::string(t_.substr(start, i_ - start)));
  }

  std::vector<Symbol> Literal() {
    ++i_;  // "
    std::string bytes;
    while (true) {
      if (i_ >= t_.size() || t_[i_] == '\n') {
        Fail("a string is not closed");
        return {};
      }
      const char c = t_[i_++];
      if (c == '"') break;
      if (c != '\\') {
        bytes += c;
        continue;
      }
      if (i_ >= t_.size()) break;
      const char e = t_[i_++];
      switch (e) {
        case 'n': bytes += '\n'; break;
        case 't': bytes += '\t'; break;
        case 'r': bytes += '\r'; break;
        case '\\': bytes += '\\'; break;
        case '"': bytes += '"'; break;
        case '[': bytes += '['; break;
        case ']': bytes += ']'; break;
        case 'x':
        case 'u': {
          const size_t digits = e == 'x' ? 2 : 4;
          uint32_t cp = 0;
          for (size_t k = 0; k < digits; ++k) {
            if (i_ >= t_.size() || !std::isxdigit(static_cast<unsigned char>(t_[i_]))) {
              Fail("a \\x or \\u escape needs hex digits");
              return {};
            }
            const char h = t_[i_++];
            cp = cp * 16 + (h <= '9' ? h - '0' : (h | 0x20) - 'a' + 10);
          }
          tok::AppendUtf8(cp, &bytes);
          break;
        }
        default:
          Fail(absl::StrCat("unknown escape \\", std::string(1, e), " in a string"));
          return {};
      }
    }
    return b_.Literal(bytes);
  }

  std::string_view t_;
  size_t i_ = 0;
  GrammarBuilder& b_;
  std::map<std::string, int32_t> rules_;
  std::vector<bool> defined_;
  std::string error_;
};

}  // namespace

absl::StatusOr<Grammar> EbnfGrammar(std::string_view text) {
  GrammarBuilder b;
  if (auto st = Parser(b, 0, text).Parse(); !st.ok()) return st;
  return std::move(b).Finish();
}

absl::StatusOr<Symbol> AddEbnf(GrammarBuilder& b, std::string_view text) {
  const int32_t root = b.Declare("root");
  if (auto st = Parser(b, root, text).Parse(); !st.ok()) return st;
  return GrammarBuilder::Ref(root);
}

}  // namespace ls::structured
