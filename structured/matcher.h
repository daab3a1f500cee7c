// Constrained decoding over a Grammar (grammar.h): which tokens may come next, and advancing by
// the token chosen.
//
// The matcher is a pushdown automaton over bytes. A stack is a chain of positions (a place in a
// rule's alternative, and below it the places the rules were entered from); stacks are interned
// as nodes (position, parent), so two sequences in the same place share them. A state is the
// sorted set of stacks whose next symbol is a byte set, plus whether the root may end there;
// states are interned too, and the transitions between them (state, byte) are computed once and
// kept: the automaton is made lazily, as decoding meets it, and shared by every sequence that
// follows the grammar (CompiledGrammar). A state's token mask walks the vocabulary's byte trie
// along those transitions (a subtree ends where no stack survives) and is cached per state, so a
// mask costs one lookup wherever the same state recurs (inside a string, between fields, ...).
//
// Thread safety: a CompiledGrammar's caches are guarded by its mutex; Matchers are per sequence.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "base/mutex.h"
#include "structured/grammar.h"

namespace ls::structured {

// The vocabulary as a byte trie: token t's bytes lead from the root to a node that lists t.
// Tokens without bytes (control tokens) are not in it: the grammar never matches them.
class TokenTrie {
 public:
  explicit TokenTrie(const std::vector<std::string>& token_bytes);
  int32_t vocab_size() const { return vocab_size_; }
  const std::string& bytes(int32_t token) const { return bytes_[token]; }

  struct Node {
    std::vector<std::pair<uint8_t, int32_t>> children;  // (byte, node), ascending
    std::vector<int32_t> tokens;                          // tokens whose bytes end here
  };
  const std::vector<Node>& nodes() const { return nodes_; }

 private:
  int32_t vocab_size_;
  std::vector<std::string> bytes_;
  std::vector<Node> nodes_;
};

// Allowed tokens as bits (bit t of word t / 64).
using TokenMask = std::vector<uint64_t>;
inline bool Allowed(const TokenMask& m, int32_t t) { return (m[t >> 6] >> (t & 63)) & 1; }

class CompiledGrammar {
 public:
  CompiledGrammar(Grammar grammar, std::shared_ptr<const TokenTrie> trie, std::string description);
  const std::string& description() const { return description_; }
  const TokenTrie& trie() const { return *trie_; }

  int32_t Initial();
  // The state after `byte`, or -1 when no stack takes it.
  int32_t Next(int32_t state, uint8_t byte);
  // The state after a token's bytes, or -1.
  int32_t NextToken(int32_t state, int32_t token);
  // The root may end here.
  bool Accepting(int32_t state);
  // No byte continues from here.
  bool Final(int32_t state);
  // The tokens whose bytes lead somewhere from `state` (cached per state).
  std::shared_ptr<const TokenMask> Mask(int32_t state);

  // Sizes of the lazily built automaton, for tests and the metrics.
  size_t num_states();
  size_t num_masks();

 private:
  struct StateInfo {
    std::vector<int32_t> nodes;  // stacks whose next symbol is a byte set, sorted
    bool accepting = false;
  };
  int32_t Position(int32_t rule, int32_t alt, int32_t index) const { return alt_start_[rule][alt] + index; }
  int32_t Node(int32_t pos, int32_t parent) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The byte-set stacks (and root ends) reached from stack (pos, parent) without consuming input.
  void Settle(int32_t pos, int32_t parent, std::vector<int32_t>* out, bool* accept, std::unordered_set<uint64_t>* seen)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t InternState(std::vector<int32_t> nodes, bool accept) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  int32_t NextLocked(int32_t state, uint8_t byte) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Walk(int32_t trie_node, int32_t state, TokenMask* mask) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Grammar g_;
  std::shared_ptr<const TokenTrie> trie_;
  std::string description_;
  // Positions: every (rule, alternative, index ≤ size) in one numbering; pos_symbol_ is the
  // symbol there (index == size: the alternative's end, kind kRule with index −1).
  std::vector<std::vector<int32_t>> alt_start_;
  std::vector<Symbol> pos_symbol_;

  // The automaton, built lazily by the sequences that share the grammar.
  Mutex mu_;
  std::vector<std::pair<int32_t, int32_t>> nodes_ ABSL_GUARDED_BY(mu_);  // (pos, parent node or −1)
  std::unordered_map<uint64_t, int32_t> node_ids_ ABSL_GUARDED_BY(mu_);
  std::vector<StateInfo> states_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<std::string, int32_t> state_ids_ ABSL_GUARDED_BY(mu_);
  static constexpr int32_t kUnknown = -2;
  // [state * 256 + byte]: the next state, −1 (none) or kUnknown.
  std::vector<int32_t> transitions_ ABSL_GUARDED_BY(mu_);
  std::unordered_map<int32_t, std::shared_ptr<const TokenMask>> masks_ ABSL_GUARDED_BY(mu_);
  int32_t initial_ ABSL_GUARDED_BY(mu_) = -1;
};

// One sequence's place in a grammar.
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<CompiledGrammar> grammar);
  // From a state of the grammar (what a prefilled reply reached), not its start.
  Matcher(std::shared_ptr<CompiledGrammar> grammar, int32_t state);
  // Logits of tokens the grammar does not allow next become −∞; the end tokens (eos, stop ids)
  // stay only where the grammar may end. False when no token at all may follow (never after a
  // token Accept took; a grammar that can neither go on nor end).
  bool MaskLogits(float* logits, int32_t vocab, const std::vector<int32_t>& end_tokens);
  // Advances by `token`; false (and no change) when the grammar does not allow it.
  bool Accept(int32_t token);
  // The output so far is a whole match; nothing more may follow.
  bool accepting() const;
  bool finished() const;
  const CompiledGrammar& grammar() const { return *grammar_; }

 private:
  std::shared_ptr<CompiledGrammar> grammar_;
  int32_t state_;
};

}  // namespace ls::structured
