// Helpers shared by the XTML chat tests: the tiny K3 tokenizer (tests/data/k3), request building,
// and feeding ids to a parser one at a time as the server does.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "chat/chat_output_parser.h"
#include "chat/xtml_chat.h"
#include "nlohmann/json.hpp"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace ls::chat::testing {

using ojson = nlohmann::ordered_json;

inline std::string K3Dir() { return std::string(LS_TEST_DATA_DIR) + "/k3/k3_tiny_bf16"; }

// The tiny K3 tokenizer, loaded once.
inline const tok::Tokenizer& K3Tokenizer() {
  static const tok::Tokenizer* t = [] {
    auto loaded = tok::LoadTokenizer(K3Dir());
    if (!loaded.ok()) {
      ADD_FAILURE() << loaded.status();
      std::abort();
    }
    return loaded->release();
  }();
  return *t;
}

inline const XtmlChat& K3Chat() {
  static const XtmlChat* chat = [] {
    auto made = XtmlChat::ForTokenizer(K3Tokenizer());
    if (!made.ok()) {
      ADD_FAILURE() << made.status();
      std::abort();
    }
    return new XtmlChat(*made);
  }();
  return *chat;
}

inline chat::ChatRequestInputs Request(ojson messages, ojson kwargs = ojson::object(),
                                      bool add_generation_prompt = true) {
  chat::ChatRequestInputs in;
  in.messages = std::move(messages);
  in.chat_template_kwargs = std::move(kwargs);
  in.add_generation_prompt = add_generation_prompt;
  return in;
}

// What a parser made of a stream: every delta, and their sum.
struct Parsed {
  std::vector<ChatDelta> deltas;  // one per Feed, then Finish's
  ChatDelta all;
  std::string warning;
};

// Feeds `ids` one at a time with the incremental detokenizer's text (as the server would), then
// Finish.
inline Parsed ParseIds(ChatOutputParser& parser, const std::vector<int32_t>& ids) {
  Parsed p;
  tok::IncrementalDetokenizer detok(&K3Tokenizer(), /*skip_special=*/false);
  for (int32_t id : ids) {
    auto text = detok.Push(id);
    p.deltas.push_back(parser.Feed(id, text.ok() ? *text : ""));
    p.all.Append(p.deltas.back());
  }
  p.deltas.push_back(parser.Finish());
  p.all.Append(p.deltas.back());
  p.warning = parser.warning();
  return p;
}

inline Parsed Parse(const chat::ChatRequestInputs& prompt, const std::vector<int32_t>& ids) {
  auto parser = K3Chat().NewParser(prompt);
  return ParseIds(*parser, ids);
}

inline std::vector<int32_t> Encode(const std::string& text) {
  auto ids = K3Tokenizer().Encode(text, tok::EncodeOptions{false, tok::SpecialText::kAsText});
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<int32_t>{};
}

}  // namespace ls::chat::testing
