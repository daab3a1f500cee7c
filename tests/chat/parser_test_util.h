// Helpers for the chat output parser tests: feeding text in pieces, deterministic call ids, and a
// vocabulary that knows a few marker tokens.
#pragma once

#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "chat/chat_output_parser.h"
#include "chat/tool_call_parser.h"
#include "tokenizer/tokenizer.h"

namespace ls::chat {

struct Reply {
  ChatDelta delta;  // everything the parser returned, merged
  std::string warning;
};

// Feeds the pieces (token ids 1, 2, ...) and finishes.
inline Reply Parse(std::unique_ptr<ChatOutputParser> p, const std::vector<std::string>& pieces) {
  Reply r;
  int32_t id = 1;
  for (const std::string& s : pieces) r.delta.Append(p->Feed(id++, s));
  r.delta.Append(p->Finish());
  r.warning = p->warning();
  return r;
}

inline std::vector<std::string> Bytes(const std::string& s) {
  std::vector<std::string> out;
  for (char c : s) out.emplace_back(1, c);
  return out;
}

// `s` cut at random byte offsets (pieces of 0 to 12 bytes).
inline std::vector<std::string> RandomPieces(const std::string& s, std::mt19937* rng) {
  std::vector<std::string> out;
  for (size_t at = 0; at < s.size();) {
    const size_t n = std::uniform_int_distribution<size_t>(0, 12)(*rng);
    out.push_back(s.substr(at, n));
    at += n;
  }
  return out;
}

// Call ids "call-0", "call-1", ... for one parser.
inline ToolParserOptions CountingIds() {
  ToolParserOptions o;
  o.new_call_id = [n = std::make_shared<int>(0)] { return "call-" + std::to_string((*n)++); };
  return o;
}

// A tokenizer that only knows some tokens by name (for MarkerTokens).
class FakeVocab final : public tok::Tokenizer {
 public:
  explicit FakeVocab(std::vector<std::pair<std::string, int32_t>> tokens) : tokens_(std::move(tokens)) {}
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view, const tok::EncodeOptions&) const override {
    return absl::UnimplementedError("fake");
  }
  std::unique_ptr<tok::DecodeStream> NewDecodeStream(bool) const override { return nullptr; }
  bool AppendTokenBytes(int32_t, bool, std::string*) const override { return false; }
  int32_t vocab_size() const override { return 1000; }
  int32_t TokenToId(const std::string& token) const override {
    for (const auto& [t, id] : tokens_)
      if (t == token) return id;
    return -1;
  }
  bool IsSpecial(int32_t) const override { return true; }
  tok::TokenizerLayout layout() const override { return tok::TokenizerLayout::kByteLevelBpe; }

 private:
  std::vector<std::pair<std::string, int32_t>> tokens_;
};

}  // namespace ls::chat
