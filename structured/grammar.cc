// GrammarBuilder and the grammar checks (undefined or empty rules, left recursion through
// nullable prefixes, alternatives that can never finish).
#include "structured/grammar.h"

#include <algorithm>
#include <array>

#include "absl/strings/str_cat.h"

namespace ls::structured {
namespace {

constexpr int64_t kMaxRepeat = 4096;  // copies one repetition may unroll into

// Whether every symbol of `alt` holds: a byte set where `bytes_hold(set)`, a rule where `rules` says.
template <class BytesHold>
bool EverySymbolHolds(const Grammar& g, const std::vector<Symbol>& alt, const std::vector<char>& rules,
                      BytesHold bytes_hold) {
  for (const Symbol& s : alt)
    if (s.kind == Symbol::kBytes ? !bytes_hold(g.sets[s.index]) : !rules[s.index]) return false;
  return true;
}

// The rules that have an alternative whose every symbol holds — a byte set where
// `bytes_hold(set)`, a rule where it is itself in the result — to a fixed point: the nullable
// rules (no byte set holds) and the rules that can finish (every non-empty byte set holds).
template <class BytesHold>
std::vector<char> RulesWithAnAlternativeWhere(const Grammar& g, BytesHold bytes_hold) {
  const size_t n = g.rules.size();
  std::vector<char> holds(n, 0);
  const auto alt_holds = [&](const std::vector<Symbol>& alt) { return EverySymbolHolds(g, alt, holds, bytes_hold); };
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < n; ++r) {
      if (holds[r]) continue;
      if (std::any_of(g.rules[r].begin(), g.rules[r].end(), alt_holds)) holds[r] = changed = true;
    }
  }
  return holds;
}

}  // namespace

GrammarBuilder::GrammarBuilder() { Declare("root"); }

int32_t GrammarBuilder::Declare(std::string name) {
  g_.rules.emplace_back();
  g_.names.push_back(std::move(name));
  return static_cast<int32_t>(g_.rules.size() - 1);
}

void GrammarBuilder::AddAlternative(int32_t rule, std::vector<Symbol> symbols) {
  g_.rules[rule].push_back(std::move(symbols));
}

Symbol GrammarBuilder::Bytes(const ByteSet& set) {
  for (size_t i = 0; i < g_.sets.size(); ++i)
    if (g_.sets[i] == set) return {Symbol::kBytes, static_cast<int32_t>(i)};
  g_.sets.push_back(set);
  return {Symbol::kBytes, static_cast<int32_t>(g_.sets.size() - 1)};
}

Symbol GrammarBuilder::Byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return Bytes(s);
}

std::vector<Symbol> GrammarBuilder::Literal(std::string_view text) {
  std::vector<Symbol> out;
  for (char c : text) out.push_back(Byte(static_cast<uint8_t>(c)));
  return out;
}

Symbol GrammarBuilder::Repeat(const std::vector<Symbol>& inner, int64_t min, int64_t max, const std::string& name) {
  const int32_t rule = Declare(name);
  std::vector<Symbol> head;
  const int64_t copies = max < 0 ? min : max;
  if (copies > kMaxRepeat) {
    // Refused by Finish: a rule without alternatives.
    g_.names[rule] = absl::StrCat(name, " (more than ", kMaxRepeat, " repetitions)");
    return Ref(rule);
  }
  for (int64_t i = 0; i < min; ++i) head.insert(head.end(), inner.begin(), inner.end());
  if (max < 0) {  // tail ::= inner tail | ε
    const int32_t tail = Declare(name + "*");
    std::vector<Symbol> again = inner;
    again.push_back(Ref(tail));
    AddAlternative(tail, std::move(again));
    AddAlternative(tail, {});
    head.push_back(Ref(tail));
  } else if (max > min) {  // opt_k ::= inner opt_{k−1} | ε, nested (max − min) deep
    int32_t next = -1;
    for (int64_t k = 0; k < max - min; ++k) {
      const int32_t opt = Declare(absl::StrCat(name, "?", k));
      std::vector<Symbol> body = inner;
      if (next >= 0) body.push_back(Ref(next));
      AddAlternative(opt, std::move(body));
      AddAlternative(opt, {});
      next = opt;
    }
    head.push_back(Ref(next));
  }
  AddAlternative(rule, std::move(head));
  return Ref(rule);
}

Symbol GrammarBuilder::OneOf(const std::vector<std::vector<Symbol>>& alternatives, const std::string& name) {
  const int32_t rule = Declare(name);
  for (const auto& a : alternatives) AddAlternative(rule, a);
  return Ref(rule);
}

Symbol GrammarBuilder::Utf8Char(const ByteSet& ascii, const std::string& name) {
  if (utf8_tail_ < 0) {
    utf8_tail_ = Declare("utf8-continuation");
    AddAlternative(utf8_tail_, {Bytes(ByteRange(0x80, 0xBF))});
  }
  const Symbol t = Ref(utf8_tail_);
  ByteSet low = ascii;
  for (int b = 0x80; b < 256; ++b) low.reset(b);
  std::vector<std::vector<Symbol>> alts;
  if (low.any()) alts.push_back({Bytes(low)});
  // Well-formed UTF-8 (RFC 3629): no overlong forms, no surrogates, nothing past U+10FFFF.
  alts.push_back({Bytes(ByteRange(0xC2, 0xDF)), t});
  alts.push_back({Byte(0xE0), Bytes(ByteRange(0xA0, 0xBF)), t});
  alts.push_back({Bytes(ByteRange(0xE1, 0xEC)), t, t});
  alts.push_back({Byte(0xED), Bytes(ByteRange(0x80, 0x9F)), t});
  alts.push_back({Bytes(ByteRange(0xEE, 0xEF)), t, t});
  alts.push_back({Byte(0xF0), Bytes(ByteRange(0x90, 0xBF)), t, t});
  alts.push_back({Bytes(ByteRange(0xF1, 0xF3)), t, t, t});
  alts.push_back({Byte(0xF4), Bytes(ByteRange(0x80, 0x8F)), t, t});
  return OneOf(alts, name);
}

Symbol GrammarBuilder::TextWithout(std::string_view stop, const std::string& name) {
  return TextWithoutAny({std::string(stop)}, name);
}

Symbol GrammarBuilder::TextWithoutAny(const std::vector<std::string>& stops, const std::string& name) {
  // The automaton that finds any of `stops` (Aho–Corasick): a trie of the stops, each node the
  // longest prefix of a stop that the text so far ends with. A node where a stop ends, or whose
  // longer-to-shorter suffix chain reaches one, is a match: the text may not go there.
  std::vector<std::array<int32_t, 256>> child(1);
  child[0].fill(-1);
  std::vector<char> match(1, 0);
  for (const std::string& stop : stops) {
    int32_t n = 0;
    for (char ch : stop) {
      const uint8_t c = static_cast<uint8_t>(ch);
      if (child[n][c] < 0) {
        child[n][c] = static_cast<int32_t>(child.size());
        child.emplace_back().fill(-1);
        match.push_back(0);
      }
      n = child[n][c];
    }
    match[n] = 1;
  }
  // Breadth first: each node's suffix link, then its transitions completed through it.
  const size_t count = child.size();
  std::vector<int32_t> link(count, 0), order = {0};
  for (size_t i = 0; i < order.size(); ++i) {
    const int32_t n = order[i];
    if (link[n] != n && match[link[n]]) match[n] = 1;
    for (int c = 0; c < 256; ++c) {
      const int32_t to = child[n][c];
      if (to < 0) {
        child[n][c] = n == 0 ? 0 : child[link[n]][c];
        continue;
      }
      link[to] = n == 0 ? 0 : child[link[n]][c];
      order.push_back(to);
    }
  }
  std::vector<int32_t> rules(count, -1);
  for (size_t n = 0; n < count; ++n)
    if (!match[n]) rules[n] = Declare(absl::StrCat(name, "#", n));
  for (size_t n = 0; n < count; ++n) {
    if (match[n]) continue;
    std::vector<ByteSet> to(count);  // bytes leading from n to each node short of a match
    for (int c = 0; c < 256; ++c) {
      if (c == kSpecialTokenByte) continue;
      const int32_t j = child[n][c];
      if (!match[j]) to[j].set(c);
    }
    for (size_t j = 0; j < count; ++j)
      if (to[j].any()) AddAlternative(rules[n], {Bytes(to[j]), Ref(rules[j])});
    AddAlternative(rules[n], {});
  }
  return Ref(rules[0]);
}

absl::StatusOr<Grammar> GrammarBuilder::Finish() && {
  if (auto s = CheckGrammar(g_); !s.ok()) return s;
  if (auto s = DropUnfinishable(&g_); !s.ok()) return s;
  return std::move(g_);
}

absl::Status DropUnfinishable(Grammar* g) {
  const size_t n = g->rules.size();
  // A rule finishes when one of its alternatives does: every symbol a non-empty byte set or a
  // rule that finishes.
  const auto non_empty = [](const ByteSet& set) { return set.any(); };
  const std::vector<char> finishes = RulesWithAnAlternativeWhere(*g, non_empty);
  const auto alt_finishes = [&](const std::vector<Symbol>& alt) {
    return EverySymbolHolds(*g, alt, finishes, non_empty);
  };
  if (n > 0 && !finishes[0]) {
    // Name a rule on the way down the first alternatives that never finishes, other than the root
    // (a grammar's own `root` may sit below the builder's).
    std::string culprit;
    for (int32_t r = 0, depth = 0; depth < 16 && culprit.empty() && !g->rules[r].empty(); ++depth) {
      int32_t next = -1;
      for (const Symbol& s : g->rules[r][0])
        if (s.kind == Symbol::kRule && !finishes[s.index]) {
          next = s.index;
          break;
        }
      if (next < 0 || next == r) break;
      if (g->names[next] != g->names[0]) culprit = absl::StrCat(", such as '", g->names[next], "'");
      r = next;
    }
    return absl::InvalidArgumentError(absl::StrCat("the grammar matches no text: its root rule '", g->names[0],
                                                   "' never finishes (every alternative needs itself or a rule that "
                                                   "never finishes",
                                                   culprit, ")"));
  }
  // The other alternatives are dead ends: entered, they would leave the matcher no token to allow.
  for (auto& alts : g->rules) std::erase_if(alts, [&](const std::vector<Symbol>& alt) { return !alt_finishes(alt); });
  return absl::OkStatus();
}

absl::Status CheckGrammar(const Grammar& g) {
  const size_t n = g.rules.size();
  if (n == 0) return absl::InvalidArgumentError("the grammar has no rules");
  for (size_t r = 0; r < n; ++r) {
    if (g.rules[r].empty())
      return absl::InvalidArgumentError(absl::StrCat("grammar rule '", g.names[r], "' has no alternative"));
    for (const auto& alt : g.rules[r])
      for (const Symbol& s : alt) {
        if (s.kind == Symbol::kRule && (s.index < 0 || static_cast<size_t>(s.index) >= n))
          return absl::InvalidArgumentError(absl::StrCat("grammar rule '", g.names[r], "' refers to an undefined rule"));
        if (s.kind == Symbol::kBytes && (s.index < 0 || static_cast<size_t>(s.index) >= g.sets.size()))
          return absl::InvalidArgumentError(absl::StrCat("grammar rule '", g.names[r], "' has an invalid byte set"));
      }
  }
  // Nullable rules: an alternative of rules alone, each nullable.
  const std::vector<char> nullable = RulesWithAnAlternativeWhere(g, [](const ByteSet&) { return false; });
  // Left recursion: a cycle among the rules entered at the left edge (through nullable symbols)
  // that pushes the stack, i.e. takes at least one edge not in tail position (a reference ending
  // its alternative returns straight to the caller's caller, so a cycle of those only loops in
  // place, which the matcher's closure stops). Found per strongly connected component.
  struct Edge {
    int32_t to;
    bool tail;
  };
  std::vector<std::vector<Edge>> edges(n);
  for (size_t r = 0; r < n; ++r)
    for (const auto& alt : g.rules[r])
      for (size_t i = 0; i < alt.size(); ++i) {
        const Symbol& s = alt[i];
        if (s.kind == Symbol::kBytes) break;
        edges[r].push_back({s.index, i + 1 == alt.size()});
        if (!nullable[s.index]) break;
      }
  // Tarjan's components, iteratively (large schemas make thousands of rules).
  std::vector<int32_t> index(n, -1), low(n, 0), comp(n, -1), stack;
  std::vector<char> on_stack(n, 0);
  int32_t next_index = 0, next_comp = 0;
  for (size_t root = 0; root < n; ++root) {
    if (index[root] >= 0) continue;
    std::vector<std::pair<int32_t, size_t>> work = {{static_cast<int32_t>(root), 0}};
    while (!work.empty()) {
      auto& [v, e] = work.back();
      if (e == 0 && index[v] < 0) {
        index[v] = low[v] = next_index++;
        stack.push_back(v);
        on_stack[v] = 1;
      }
      if (e < edges[v].size()) {
        const int32_t w = edges[v][e++].to;
        if (index[w] < 0) {
          work.push_back({w, 0});
        } else if (on_stack[w]) {
          low[v] = std::min(low[v], index[w]);
        }
        continue;
      }
      if (low[v] == index[v]) {
        for (int32_t w = -1; w != v;) {
          w = stack.back();
          stack.pop_back();
          on_stack[w] = 0;
          comp[w] = next_comp;
        }
        ++next_comp;
      }
      const int32_t done = v;
      work.pop_back();
      if (!work.empty()) low[work.back().first] = std::min(low[work.back().first], low[done]);
    }
  }
  for (size_t r = 0; r < n; ++r)
    for (const Edge& e : edges[r])
      if (!e.tail && comp[e.to] == comp[r])
        return absl::InvalidArgumentError(absl::StrCat(
            "grammar rule '", g.names[e.to], "' is left recursive (it can reach itself without consuming input)"));
  return absl::OkStatus();
}

}  // namespace ls::structured
