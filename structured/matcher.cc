// The lazily built pushdown automaton of a grammar, its token masks, and per-sequence matchers.
#include "structured/matcher.h"

#include <algorithm>
#include <cstring>
#include <limits>

namespace ls::structured {

TokenTrie::TokenTrie(const std::vector<std::string>& token_bytes)
    : vocab_size_(static_cast<int32_t>(token_bytes.size())), bytes_(token_bytes) {
  nodes_.emplace_back();
  for (int32_t t = 0; t < vocab_size_; ++t) {
    const std::string& b = token_bytes[t];
    if (b.empty()) continue;
    int32_t n = 0;
    for (char ch : b) {
      const auto c = static_cast<uint8_t>(ch);
      auto& kids = nodes_[n].children;
      auto it = std::lower_bound(kids.begin(), kids.end(), std::make_pair(c, int32_t{-1}));
      if (it != kids.end() && it->first == c) {
        n = it->second;
      } else {
        const int32_t child = static_cast<int32_t>(nodes_.size());
        kids.insert(it, {c, child});
        nodes_.emplace_back();  // invalidates `kids`: not used after this
        n = child;
      }
    }
    nodes_[n].tokens.push_back(t);
  }
}

CompiledGrammar::CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> trie, std::string description)
    : g_(std::move(grammar)), trie_(std::move(trie)), description_(std::move(description)) {
  alt_start_.resize(g_.rules.size());
  for (size_t r = 0; r < g_.rules.size(); ++r)
    for (const auto& alt : g_.rules[r]) {
      alt_start_[r].push_back(static_cast<int32_t>(pos_symbol_.size()));
      for (const Symbol& s : alt) pos_symbol_.push_back(s);
      pos_symbol_.push_back({Symbol::kRule, -1});  // the alternative's end
    }
}

int32_t CompiledGrammar::Node(int32_t pos, int32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
  auto [it, fresh] = node_ids_.try_emplace(key, static_cast<int32_t>(nodes_.size()));
  if (fresh) nodes_.emplace_back(pos, parent);
  return it->second;
}

void CompiledGrammar::Settle(int32_t pos, int32_t parent, std::vector<int32_t>* out, bool* accept,
                             std::unordered_set<uint64_t>* seen) {
  // Each (position, stack) once per closure: tail calls through nullable rules loop in place.
  const uint64_t key = (static_cast<uint64_t>(static_cast<uint32_t>(pos)) << 32) | static_cast<uint32_t>(parent);
  if (!seen->insert(key).second) return;
  const Symbol s = pos_symbol_[pos];
  if (s.kind == Symbol::kBytes) {
    out->push_back(Node(pos, parent));
    return;
  }
  if (s.index < 0) {  // an alternative's end: back to the symbol after the rule reference
    if (parent < 0) {
      *accept = true;
      return;
    }
    const auto [ppos, pparent] = nodes_[parent];
    Settle(ppos + 1, pparent, out, accept, seen);
    return;
  }
  // A rule reference: enter each alternative, returning to this position's node; or, when the
  // reference ends its alternative, straight to where that alternative returns (a tail call, so
  // that a repetition written as `tail ::= inner tail | ε` keeps its stack flat).
  const Symbol after = pos_symbol_[pos + 1];
  const int32_t here = after.kind == Symbol::kRule && after.index < 0 ? parent : Node(pos, parent);
  for (size_t a = 0; a < g_.rules[s.index].size(); ++a)
    Settle(Position(s.index, static_cast<int32_t>(a), 0), here, out, accept, seen);
}

int32_t CompiledGrammar::InternState(std::vector<int32_t> nodes, bool accept) {
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  if (nodes.empty() && !accept) return -1;
  std::string key(reinterpret_cast<const char*>(nodes.data()), nodes.size() * sizeof(int32_t));
  key.push_back(accept ? 'a' : 'n');
  auto [it, fresh] = state_ids_.try_emplace(std::move(key), static_cast<int32_t>(states_.size()));
  if (fresh) {
    states_.push_back({std::move(nodes), accept});
    transitions_.resize(states_.size() * 256, kUnknown);
  }
  return it->second;
}

int32_t CompiledGrammar::Initial() {
  MutexLock lock(&mu_);
  if (initial_ < 0) {
    std::vector<int32_t> out;
    bool accept = false;
    std::unordered_set<uint64_t> seen;
    for (size_t a = 0; a < g_.rules[0].size(); ++a)
      Settle(Position(0, static_cast<int32_t>(a), 0), -1, &out, &accept, &seen);
    initial_ = InternState(std::move(out), accept);
  }
  return initial_;
}

int32_t CompiledGrammar::NextLocked(int32_t state, uint8_t byte) {
  if (state < 0) return -1;
  if (int32_t known = transitions_[static_cast<size_t>(state) * 256 + byte]; known != kUnknown) return known;
  std::vector<int32_t> out;
  bool accept = false;
  const std::vector<int32_t> nodes = states_[state].nodes;  // Settle may grow states_
  std::unordered_set<uint64_t> seen;
  for (int32_t n : nodes) {
    const auto [pos, parent] = nodes_[n];
    if (g_.sets[pos_symbol_[pos].index].test(byte)) Settle(pos + 1, parent, &out, &accept, &seen);
  }
  const int32_t next = out.empty() && !accept ? -1 : InternState(std::move(out), accept);
  transitions_[static_cast<size_t>(state) * 256 + byte] = next;  // after InternState, which may grow it
  return next;
}

int32_t CompiledGrammar::Next(int32_t state, uint8_t byte) {
  MutexLock lock(&mu_);
  return NextLocked(state, byte);
}

int32_t CompiledGrammar::NextToken(int32_t state, int32_t token) {
  MutexLock lock(&mu_);
  const std::string& b = trie_->bytes(token);
  if (b.empty()) return -1;
  for (char c : b) {
    state = NextLocked(state, static_cast<uint8_t>(c));
    if (state < 0) return -1;
  }
  return state;
}

bool CompiledGrammar::Accepting(int32_t state) {
  MutexLock lock(&mu_);
  return state >= 0 && states_[state].accepting;
}

bool CompiledGrammar::Final(int32_t state) {
  MutexLock lock(&mu_);
  return state >= 0 && states_[state].nodes.empty();
}

void CompiledGrammar::Walk(int32_t trie_node, int32_t state, TokenMask* mask) {
  for (const auto& [byte, child] : trie_->nodes()[trie_node].children) {
    const int32_t next = NextLocked(state, byte);
    if (next < 0) continue;
    for (int32_t t : trie_->nodes()[child].tokens) (*mask)[t >> 6] |= uint64_t{1} << (t & 63);
    if (!states_[next].nodes.empty()) Walk(child, next, mask);
  }
}

std::shared_ptr<const TokenMask> CompiledGrammar::Mask(int32_t state) {
  MutexLock lock(&mu_);
  if (auto it = masks_.find(state); it != masks_.end()) return it->second;
  auto mask = std::make_shared<TokenMask>((trie_->vocab_size() + 63) / 64, 0);
  if (state >= 0 && !states_[state].nodes.empty()) Walk(0, state, mask.get());
  masks_.emplace(state, mask);
  return mask;
}

size_t CompiledGrammar::num_states() {
  MutexLock lock(&mu_);
  return states_.size();
}

size_t CompiledGrammar::num_masks() {
  MutexLock lock(&mu_);
  return masks_.size();
}

Matcher::Matcher(std::shared_ptr<CompiledGrammar> grammar) : grammar_(std::move(grammar)), state_(grammar_->Initial()) {}
Matcher::Matcher(std::shared_ptr<CompiledGrammar> grammar, int32_t state) : grammar_(std::move(grammar)), state_(state) {}

bool Matcher::MaskLogits(float* logits, int32_t vocab, const std::vector<int32_t>& end_tokens) {
  const std::shared_ptr<const TokenMask> mask = grammar_->Mask(state_);
  const bool can_end = grammar_->Accepting(state_);
  std::vector<std::pair<int32_t, float>> ends;  // end tokens' logits, kept where the grammar may end
  if (can_end)
    for (int32_t t : end_tokens)
      if (t >= 0 && t < vocab) ends.emplace_back(t, logits[t]);
  const int32_t n = std::min(vocab, grammar_->trie().vocab_size());
  bool any = !ends.empty();
  for (int32_t t = 0; t < vocab; ++t) {
    if (t < n && Allowed(*mask, t)) {
      any = true;
    } else {
      logits[t] = -std::numeric_limits<float>::infinity();
    }
  }
  for (const auto& [t, v] : ends) logits[t] = v;
  return any;
}

bool Matcher::Accept(int32_t token) {
  const int32_t next = grammar_->NextToken(state_, token);
  if (next < 0) return false;
  state_ = next;
  return true;
}

bool Matcher::accepting() const { return grammar_->Accepting(state_); }
bool Matcher::finished() const { return grammar_->Final(state_); }

}  // namespace ls::structured
