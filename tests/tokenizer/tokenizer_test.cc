// The tokenizer against the Hugging Face `tokenizers` oracle: ids equal HF's for every committed
// vector, decode round-trips, streaming detokenization equals the full decode, and bad input
// gets clear errors.
#include "tokenizer/tokenizer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "nlohmann/json.hpp"
#include "tests/tokenizer/tokenizer_test_data.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/load_tokenizer.h"

namespace ls::tok {
namespace {

using json = nlohmann::json;

using test::Dir;
using test::ReadJsonl;

class HfVectors : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto t = LoadTokenizerJsonFile(Dir(GetParam()) + "/tokenizer.json");
    ASSERT_TRUE(t.ok()) << t.status();
    tok_ = std::move(*t);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(HfVectors, EncodeEqualsHfAndRoundTrips) {
  auto vectors = ReadJsonl(Dir(GetParam()) + "/vectors.jsonl");
  ASSERT_GE(vectors.size(), 500u);
  int failures = 0;
  for (const auto& v : vectors) {
    const std::string text = v["text"];
    auto ids = tok_->Encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    const auto want = v["ids"].get<std::vector<int32_t>>();
    if (*ids != want && ++failures <= 5) ADD_FAILURE() << "encode mismatch for " << json(text).dump();
    auto back = tok_->Decode(want);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, v["decoded"].get<std::string>()) << json(text).dump();
    EXPECT_EQ(*back, text);
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(HfVectors, DecodeEqualsHfWithAndWithoutSpecials) {
  for (const auto& v : ReadJsonl(Dir(GetParam()) + "/decode_vectors.jsonl")) {
    const auto ids = v["ids"].get<std::vector<int32_t>>();
    auto with = tok_->Decode(ids, false);
    auto without = tok_->Decode(ids, true);
    ASSERT_TRUE(with.ok() && without.ok());
    EXPECT_EQ(*with, v["decoded"].get<std::string>()) << v["ids"].dump();
    EXPECT_EQ(*without, v["decoded_skip_special"].get<std::string>()) << v["ids"].dump();
  }
}

TEST_P(HfVectors, StreamingEqualsFullDecodeOneIdAtATime) {
  for (const auto& src : {"vectors.jsonl", "decode_vectors.jsonl"}) {
    for (const auto& v : ReadJsonl(Dir(GetParam()) + "/" + src)) {
      const auto ids = v["ids"].get<std::vector<int32_t>>();
      for (bool skip : {false, true}) {
        IncrementalDetokenizer detok(tok_.get(), skip);
        std::string streamed;
        for (int32_t id : ids) {
          auto piece = detok.Push(id);
          ASSERT_TRUE(piece.ok());
          // Every emitted piece is valid UTF-8 on its own.
          auto check = tok_->Encode(*piece);
          ASSERT_TRUE(check.ok()) << "piece is not valid UTF-8 for ids " << v["ids"].dump();
          streamed += *piece;
        }
        streamed += detok.Finish();
        EXPECT_EQ(streamed, *tok_->Decode(ids, skip)) << v["ids"].dump();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Tokenizers, HfVectors,
                         ::testing::Values("gpt2_4096", "gpt2_8192", "llama3_4096", "llama3_8192", "qwen2_4096"));

TEST(Tokenizer, SplitMultibyteCharacterWaitsForItsLastByte) {
  auto t = LoadTokenizerJsonFile(Dir("gpt2_4096") + "/tokenizer.json");
  ASSERT_TRUE(t.ok());
  // Byte-level single-byte tokens for the two bytes of "é" (C3 A9).
  const int32_t c3 = (*t)->TokenToId("Ã"), a9 = (*t)->TokenToId("©");
  ASSERT_GE(c3, 0);
  ASSERT_GE(a9, 0);
  IncrementalDetokenizer d(t->get(), false);
  EXPECT_EQ(*d.Push(c3), "");
  EXPECT_EQ(*d.Push(a9), "é");
  IncrementalDetokenizer cut(t->get(), false);
  EXPECT_EQ(*cut.Push(c3), "");
  EXPECT_EQ(cut.Finish(), "\xef\xbf\xbd");
}

TEST(Tokenizer, InvalidInputsGiveClearErrors) {
  auto t = LoadTokenizerJsonFile(Dir("llama3_4096") + "/tokenizer.json");
  ASSERT_TRUE(t.ok());
  auto bad = (*t)->Encode("ok\xff\xfe");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "text is not valid UTF-8 (byte offset 2)");
  auto out = (*t)->Decode({5, 999999});
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("token id 999999 is outside the vocabulary"), std::string::npos);
  IncrementalDetokenizer d(t->get(), false);
  EXPECT_FALSE(d.Push(-1).ok());
}

TEST(Tokenizer, MalformedFilesAreRefused) {
  EXPECT_EQ(TokenizerFromJson("{").status().message(), "invalid JSON");
  EXPECT_NE(TokenizerFromJson(R"({"model": {"type": "WordPiece", "vocab": {}}})").status().message().find(
                "unsupported: model WordPiece"),
            std::string::npos);
  EXPECT_NE(TokenizerFromJson(R"({"normalizer": {"type": "Lowercase"}, "model": {"vocab": {}, "merges": []}})")
                .status()
                .message()
                .find("unsupported: normalizer Lowercase"),
            std::string::npos);
  EXPECT_NE(TokenizerFromJson(R"({"pre_tokenizer": {"type": "Whitespace"}, "model": {"vocab": {}, "merges": []}})")
                .status()
                .message()
                .find("unsupported: pre_tokenizer Whitespace"),
            std::string::npos);
  EXPECT_NE(TokenizerFromJson(R"({"model": {"vocab": {"a": 0}, "merges": ["a b"]}})").status().message().find(
                "missing from the vocab"),
            std::string::npos);
  EXPECT_NE(TokenizerFromJson(R"({"model": {"vocab": {"a": "x"}, "merges": []}})").status().message().find(
                "non-integer id"),
            std::string::npos);
  auto missing = LoadTokenizerJsonFile("/nonexistent/tokenizer.json");
  EXPECT_NE(missing.status().message().find("/nonexistent/tokenizer.json: cannot open"), std::string::npos);
}

TEST(Tokenizer, NfcNormalizerComposes) {
  const std::string j = R"({"normalizer": {"type": "NFC"}, "model": {"type": "BPE", "vocab": {"e": 0, "\u00e9": 1, "\u0301": 2}, "merges": []}})";
  auto t = TokenizerFromJson(j);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*(*t)->Encode("e\xcc\x81"), std::vector<int32_t>{1});
}

TEST(Tokenizer, ByteFallbackForUnknownCharacters) {
  const std::string j = R"({"decoder": {"type": "Sequence", "decoders": [{"type": "ByteFallback"}, {"type": "Fuse"}]},
    "model": {"type": "BPE", "byte_fallback": true, "vocab": {"a": 0, "<0xC3>": 1, "<0xA9>": 2}, "merges": []}})";
  auto t = TokenizerFromJson(j);
  ASSERT_TRUE(t.ok()) << t.status();
  auto ids = (*t)->Encode("a\xc3\xa9");
  EXPECT_EQ(*ids, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(*(*t)->Decode(*ids), "a\xc3\xa9");
}

}  // namespace
}  // namespace ls::tok
