// The tokenizer layouts beyond plain byte-level BPE against their oracles: SentencePiece-style
// tokenizer.json files, Llama-3's post-processor and flagged added tokens against Hugging Face
// `tokenizers`; a Kimi-K3-style tiktoken.model against `tiktoken` driven as Kimi's reference does
// (vectors written by models/reference/tokenizer_layouts.py). Ids, ids without post-processor,
// ids with special text left as text, decodes with and without specials, and streaming.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/escaping.h"
#include "nlohmann/json.hpp"
#include "tests/tokenizer/tokenizer_test_data.h"
#include "tokenizer/hf_tokenizer.h"
#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/tiktoken_patterns.h"
#include "tokenizer/tiktoken_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace ls::tok {
namespace {

using json = nlohmann::json;

using test::Dir;
using test::ReadJsonl;

std::string Show(const std::string& s) { return json(s).dump(-1, ' ', false, json::error_handler_t::replace); }

struct Layout {
  const char* name;
  TokenizerLayout layout;
};

class LayoutVectors : public ::testing::TestWithParam<Layout> {
 protected:
  void SetUp() override {
    auto t = LoadTokenizer(Dir(GetParam().name));
    ASSERT_TRUE(t.ok()) << t.status();
    tok_ = std::move(*t);
  }
  std::unique_ptr<Tokenizer> tok_;
};

TEST_P(LayoutVectors, LoadsAsItsLayout) { EXPECT_EQ(tok_->layout(), GetParam().layout); }

TEST_P(LayoutVectors, EncodeEqualsOracle) {
  const auto vectors = ReadJsonl(Dir(GetParam().name) + "/vectors.jsonl");
  ASSERT_GE(vectors.size(), 1000u);
  const bool tiktoken = GetParam().layout == TokenizerLayout::kTiktoken;
  int failures = 0;
  auto check = [&](const std::string& text, const EncodeOptions& o, const json& want, const char* what) {
    auto ids = tok_->Encode(text, o);
    ASSERT_TRUE(ids.ok()) << ids.status();
    if (*ids != want.get<std::vector<int32_t>>() && ++failures <= 8)
      ADD_FAILURE() << what << " mismatch for " << Show(text) << "\n got " << json(*ids).dump() << "\nwant "
                    << want.dump();
  };
  for (const auto& v : vectors) {
    const std::string text = v["text"];
    if (tiktoken) {
      check(text, {}, v["ids"], "ids (control text as text)");
      check(text, {true, SpecialText::kMatch}, v["ids_special"], "ids (control tokens matched)");
      check(text, {true, SpecialText::kAsText}, v["ids"], "ids (kAsText)");
    } else {
      check(text, {}, v["ids"], "ids");
      check(text, {false, SpecialText::kLayoutDefault}, v["ids_no_special"], "ids without post-processor");
      check(text, {false, SpecialText::kMatch}, v["ids_no_special"], "ids with kMatch");
      check(text, {false, SpecialText::kAsText}, v["ids_special_as_text"], "ids with special text as text");
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(LayoutVectors, DecodeEqualsOracle) {
  int failures = 0;
  for (const char* file : {"vectors.jsonl", "decode_vectors.jsonl"}) {
    for (const auto& v : ReadJsonl(Dir(GetParam().name) + "/" + file)) {
      const auto ids = v["ids"].get<std::vector<int32_t>>();
      auto with = tok_->Decode(ids, false);
      ASSERT_TRUE(with.ok()) << with.status();
      if (*with != v["decoded"].get<std::string>() && ++failures <= 8)
        ADD_FAILURE() << file << " decode of " << v["ids"].dump() << "\n got " << Show(*with) << "\nwant "
                      << Show(v["decoded"]);
      if (v.contains("decoded_skip_special")) {
        auto without = tok_->Decode(ids, true);
        ASSERT_TRUE(without.ok());
        if (*without != v["decoded_skip_special"].get<std::string>() && ++failures <= 8)
          ADD_FAILURE() << file << " skip-special decode of " << v["ids"].dump() << "\n got " << Show(*without)
                        << "\nwant " << Show(v["decoded_skip_special"]);
      }
    }
  }
  EXPECT_EQ(failures, 0);
}

TEST_P(LayoutVectors, StreamingEqualsFullDecodeOneIdAtATime) {
  for (const char* file : {"vectors.jsonl", "decode_vectors.jsonl"}) {
    for (const auto& v : ReadJsonl(Dir(GetParam().name) + "/" + file)) {
      const auto ids = v["ids"].get<std::vector<int32_t>>();
      for (bool skip : {false, true}) {
        IncrementalDetokenizer detok(tok_.get(), skip);
        std::string streamed;
        for (int32_t id : ids) {
          auto piece = detok.Push(id);
          ASSERT_TRUE(piece.ok());
          ASSERT_TRUE(tok_->Encode(*piece).ok()) << "piece is not valid UTF-8 for ids " << v["ids"].dump();
          streamed += *piece;
        }
        streamed += detok.Finish();
        EXPECT_EQ(streamed, *tok_->Decode(ids, skip)) << v["ids"].dump();
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Layouts, LayoutVectors,
                         ::testing::Values(Layout{"sp_llama2", TokenizerLayout::kSentencePieceBpe},
                                           Layout{"sp_metaspace", TokenizerLayout::kSentencePieceBpe},
                                           Layout{"sp_metaspace_split", TokenizerLayout::kSentencePieceBpe},
                                           Layout{"sp_unk", TokenizerLayout::kSentencePieceBpe},
                                           Layout{"sp_unk_nofuse", TokenizerLayout::kSentencePieceBpe},
                                           Layout{"llama3_post", TokenizerLayout::kByteLevelBpe},
                                           Layout{"added_tokens", TokenizerLayout::kByteLevelBpe},
                                           Layout{"kimi_k3", TokenizerLayout::kTiktoken}),
                         [](const auto& info) { return std::string(info.param.name); });

// The vector of `fixture` whose text is `text`.
json VectorFor(const std::string& fixture, const std::string& text) {
  for (const auto& v : ReadJsonl(Dir(fixture) + "/vectors.jsonl"))
    if (v["text"] == text) return v;
  ADD_FAILURE() << "no vector for " << Show(text) << " in " << fixture;
  return json();
}

std::unique_ptr<Tokenizer> Load(const std::string& fixture) {
  auto t = LoadTokenizer(Dir(fixture));
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

void ExpectEncodesAsOracle(const std::string& fixture, const std::string& text) {
  auto t = Load(fixture);
  ASSERT_TRUE(t);
  const json v = VectorFor(fixture, text);
  ASSERT_FALSE(v.is_null());
  EXPECT_EQ(*t->Encode(text), v["ids"].get<std::vector<int32_t>>()) << Show(text);
  EXPECT_EQ(*t->Decode(v["ids"].get<std::vector<int32_t>>()), v["decoded"].get<std::string>()) << Show(text);
}

// The cases the issue found wrong, each against the oracle's answer.

TEST(TokenizerExactness, NfcKeepsTextAfterANul) {
  ExpectEncodesAsOracle("added_tokens", std::string("a\0b", 3));
  ExpectEncodesAsOracle("added_tokens", std::string("cafe\xcc\x81\0e\xcc\x81", 10));
  const std::string j =
      R"({"normalizer": {"type": "NFC"}, "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "\u0000": 2}, "merges": []}})";
  auto t = TokenizerFromJson(j);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(*(*t)->Encode(std::string("a\0b", 3)), (std::vector<int32_t>{0, 2, 1}));
}

TEST(TokenizerExactness, AddedTokenStripsUnicodeWhitespace) {
  for (const char* text : {"\u3000\u3000<rs>\u3000x", "x\u2003<ls>\u2003y", "a\u00a0<lrs>\u00a0b", "\u2009<lrs>\u2009",
                           "\u3000<sep>\u3000", "\u200b<ls>\u200b"})
    ExpectEncodesAsOracle("added_tokens", text);
}

TEST(TokenizerExactness, SingleWordUsesUnicodeWordCharacters) {
  for (const char* text : {"\u4e2dword", "word\u4e2d", "e\u0301word", "\u24b6word", "\u00bdword", "\u200dword",
                           "\u4e2d<sw>\u4e2d", "!<sw>!", "\u00e9word", "a word b"})
    ExpectEncodesAsOracle("added_tokens", text);
}

TEST(TokenizerExactness, NormalizedAddedTokenMatchesNormalizedText) {
  // "cafe\u0301" is added with normalized=true: NFC makes it "café", which then matches in text.
  for (const char* text : {"caf\u00e9", "cafe\u0301", "x cafe\u0301 y", "<nn\u0301>"})
    ExpectEncodesAsOracle("added_tokens", text);
  // Under a Prepend normalizer a normalized "<sep>" is matched as "▁<sep>": only after a space.
  for (const char* text : {"x <sep> y", "a<sep>b", "<sep>"}) ExpectEncodesAsOracle("sp_llama2", text);
}

TEST(TokenizerExactness, AddedTokenContentGoesThroughTheDecoder) {
  // ByteLevel reads "é" (one alphabet symbol) as the byte 0xE9, which alone is invalid UTF-8.
  auto t = Load("added_tokens");
  ASSERT_TRUE(t);
  const int32_t e = t->TokenToId("\u00e9");
  ASSERT_GE(e, 0);
  EXPECT_EQ(*t->Decode({e}), "\xef\xbf\xbd");
  ExpectEncodesAsOracle("added_tokens", "\u00e9");
  ExpectEncodesAsOracle("added_tokens", "a b");
  ExpectEncodesAsOracle("sp_llama2", "x <sep> y");  // decodes from "▁<sep>" through Replace
}

TEST(TokenizerExactness, FuseUnkMakesOneUnkPerRun) {
  const std::string text = "\u16a0\u16a2\u16a6 \u13a0\u13a1";
  ExpectEncodesAsOracle("sp_unk", text);
  ExpectEncodesAsOracle("sp_unk_nofuse", text);
  auto fused = Load("sp_unk"), separate = Load("sp_unk_nofuse");
  ASSERT_TRUE(fused && separate);
  const auto a = *fused->Encode(text), b = *separate->Encode(text);
  EXPECT_LT(std::count(a.begin(), a.end(), 0), std::count(b.begin(), b.end(), 0));
}

TEST(TokenizerExactness, InvalidByteFallbackRunIsOneReplacementPerByte) {
  auto t = Load("sp_llama2");
  ASSERT_TRUE(t);
  const int32_t e4 = t->TokenToId("<0xE4>"), bd = t->TokenToId("<0xBD>"), a0 = t->TokenToId("<0xA0>");
  EXPECT_EQ(*t->Decode({e4, bd, a0}), "\xe4\xbd\xa0");          // valid run: 你
  EXPECT_EQ(*t->Decode({e4, bd}), "\xef\xbf\xbd\xef\xbf\xbd");  // two bytes, two U+FFFD
  // A special token breaks the run; skipped, it is gone before the decoder and the run is whole.
  const int32_t eos = t->TokenToId("</s>");
  EXPECT_EQ(*t->Decode({e4, bd, eos, a0}), "\xef\xbf\xbd\xef\xbf\xbd</s>\xef\xbf\xbd");
  EXPECT_EQ(*t->Decode({e4, bd, eos, a0}, true), "\xe4\xbd\xa0");
}

TEST(TokenizerExactness, NormalizationStaysWithinTheOraclesUnicodeVersion) {
  // utf8proc composes U+11935 U+11930 to U+11938 (Unicode 13); the reference's tables do not.
  ExpectEncodesAsOracle("added_tokens", "\U00011935\U00011930");
  ExpectEncodesAsOracle("added_tokens", "\U00011935\u0301\U00011930");
  EXPECT_EQ(NormalizeUnicode("\U00011935\U00011930", NormalForm::kNfc), "\U00011935\U00011930");
  EXPECT_EQ(NormalizeUnicode("e\u0301", NormalForm::kNfc), "\u00e9");
}

TEST(TokenizerLayouts, LlamaThreeTemplateAddsBeginOfTextOnlyWithSpecialTokens) {
  auto t = Load("llama3_post");
  ASSERT_TRUE(t);
  const int32_t bot = t->TokenToId("<|begin_of_text|>");
  ASSERT_EQ(bot, 8192);
  auto with = t->Encode("Hello");
  auto without = t->Encode("Hello", {false, SpecialText::kLayoutDefault});
  ASSERT_EQ(with->size(), without->size() + 1);
  EXPECT_EQ(with->front(), bot);
  EXPECT_EQ(*t->Encode("<|begin_of_text|>x", EncodeOptions::RenderedChat()),
            *t->Encode("<|begin_of_text|>x", {false, SpecialText::kMatch}));
}

TEST(TokenizerLayouts, PreviouslyRefusedComponentsLoad) {
  for (const char* name : {"sp_llama2", "sp_metaspace", "llama3_post"}) {
    auto t = LoadTokenizerJsonFile(Dir(name) + "/tokenizer.json");
    EXPECT_TRUE(t.ok()) << name << ": " << t.status();
  }
}

// ---------------------------------------------------------------- Kimi K3 (tiktoken.model)

TEST(KimiTokenizer, ControlIdsFollowTheBaseRanksWithTheirConfigNames) {
  auto t = Load("kimi_k3");
  ASSERT_TRUE(t);
  auto* k = dynamic_cast<TiktokenTokenizer*>(t.get());
  ASSERT_NE(k, nullptr);
  const int32_t base = k->num_base_tokens();
  EXPECT_EQ(t->vocab_size(), base + 256);
  EXPECT_EQ(t->TokenToId("[BOS]"), base);
  EXPECT_EQ(t->TokenToId("<|end_of_msg|>"), base + 2);
  EXPECT_EQ(t->TokenToId("<|open|>"), base + 3);
  EXPECT_EQ(t->TokenToId("<|close|>"), base + 4);
  EXPECT_EQ(t->TokenToId("<|sep|>"), base + 5);
  EXPECT_EQ(t->TokenToId("[PAD]"), base + 255);
  EXPECT_EQ(k->ControlName(base + 20), "<|reserved_token_" + std::to_string(base + 20) + "|>");
  EXPECT_TRUE(t->IsSpecial(base + 3));
  EXPECT_FALSE(t->IsSpecial(base - 1));
  EXPECT_EQ(*t->Decode({base + 3, base + 5}), "<|open|><|sep|>");
  EXPECT_EQ(*t->Decode({base + 3, base + 5}, true), "");
}

TEST(KimiTokenizer, UserTextNeverBecomesAControlIdUnlessAsked) {
  auto t = Load("kimi_k3");
  ASSERT_TRUE(t);
  const int32_t open = t->TokenToId("<|open|>");
  auto plain = t->Encode("<|open|>");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(std::find(plain->begin(), plain->end(), open), plain->end());
  EXPECT_EQ(*t->Encode("<|open|>", {true, SpecialText::kMatch}), std::vector<int32_t>{open});
  EXPECT_EQ(*t->Decode(*plain), "<|open|>");
}

TEST(KimiTokenizer, ChunkGuardCutsLikeTheReference) {
  auto cut = [](const std::string& s, size_t max_chars, size_t max_run) {
    std::vector<std::string> out;
    for (auto [b, e] : TiktokenTokenizer::GuardChunks(s, max_chars, max_run)) out.push_back(s.substr(b, e - b));
    return out;
  };
  using V = std::vector<std::string>;
  EXPECT_EQ(cut("abc", 100, 5), V{"abc"});
  EXPECT_EQ(cut("abcdefgh", 100, 5), (V{"abcde", "fgh"}));
  EXPECT_EQ(cut("        ", 100, 5), (V{"     ", "   "}));
  // A cut falls only where a run grows past the limit, not at every space / non-space change.
  EXPECT_EQ(cut("abc  defghij klmno p", 100, 3), (V{"abc  def", "ghi", "j klm", "no p"}));
  EXPECT_EQ(cut("     #####", 100, 3), (V{"   ", "  ###", "##"}));
  EXPECT_EQ(cut("a b c", 100, 1), (V{"a b c"}));
  EXPECT_EQ(cut("aa  bb", 100, 1), (V{"a", "a ", " b", "b"}));
  EXPECT_EQ(cut("abcdefg", 3, 100), (V{"abc", "def", "g"}));  // 3-character chunks, runs restart in each
  EXPECT_EQ(cut("\u4e00\u4e01\u4e02\u4e03", 100, 2), (V{"\u4e00\u4e01", "\u4e02\u4e03"}));  // characters, not bytes
  EXPECT_EQ(cut("x\x1c\x1dy", 100, 1), (V{"x\x1c", "\x1dy"}));  // U+001C..U+001F are str.isspace
  EXPECT_TRUE(cut("", 100, 5).empty());
}

TEST(KimiTokenizer, ModelTypeSelectsTheKimiPatternAndUnknownTypesAreRefused) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("ls_kimi_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(Dir("kimi_k3") + "/tiktoken.model", dir / "tiktoken.model", fs::copy_options::overwrite_existing);
  auto write_config = [&](const std::string& type) {
    std::ofstream(dir / "config.json") << R"({"model_type": ")" << type << R"("})";
  };
  for (const char* type : {"kimi_k2", "kimi_k3", "kimi_linear"}) {
    write_config(type);
    auto t = LoadTokenizer(dir.string());
    ASSERT_TRUE(t.ok()) << type << ": " << t.status();
    EXPECT_EQ((*t)->layout(), TokenizerLayout::kTiktoken);
    // No tokenizer_config.json: every control id gets its reserved name.
    EXPECT_EQ((*t)->TokenToId("<|reserved_token_" + std::to_string((*t)->vocab_size() - 256) + "|>"),
              (*t)->vocab_size() - 256);
    EXPECT_EQ(*(*t)->Encode("\u4e2d\u6587abc"), *Load("kimi_k3")->Encode("\u4e2d\u6587abc"));
  }
  write_config("llama");
  auto refused = LoadTokenizer(dir.string());
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.status().message().find("model_type 'llama'"), std::string::npos) << refused.status();
  auto via_path = LoadTokenizerAt((dir / "tiktoken.model").string());
  EXPECT_FALSE(via_path.ok());
  fs::remove_all(dir);
  EXPECT_FALSE(LoadTokenizer("/nonexistent/model").ok());
  auto by_file = LoadTokenizerAt(Dir("kimi_k3") + "/tiktoken.model");
  ASSERT_TRUE(by_file.ok()) << by_file.status();
  EXPECT_EQ((*by_file)->layout(), TokenizerLayout::kTiktoken);
}

TEST(KimiTokenizer, MalformedVocabulariesAreRefused) {
  auto line = [](const std::string& bytes, int rank) {
    return absl::Base64Escape(bytes) + " " + std::to_string(rank) + "\n";
  };
  std::string good;
  for (int b = 0; b < 256; ++b) good += line(std::string(1, static_cast<char>(b)), b);
  const std::string pattern = kKimiPattern;
  auto ok = TiktokenTokenizer::FromText(good + line("ab", 256), "", pattern);
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)->vocab_size(), 257 + 256);
  EXPECT_EQ(*(*ok)->Encode("ab"), std::vector<int32_t>{256});
  auto refused = [&](const std::string& text, const std::string& config, const std::string& want) {
    auto t = TiktokenTokenizer::FromText(text, config, pattern);
    ASSERT_FALSE(t.ok()) << want;
    EXPECT_NE(t.status().message().find(want), std::string::npos) << t.status();
  };
  refused(good + "!!!! 256\n", "", "line 257: expected");
  refused(good + line("ab", 7), "", "appears twice");
  refused(good + line("ab", 300), "", "rank 300 is not below");
  refused(good.substr(good.find('\n') + 1), "", "rank 255 is not below");
  refused(good + line("a", 256), "", "the bytes of rank 256 appear twice");
  refused("", "", "no tokens");
  refused(good, "{", "tokenizer_config.json is not a JSON object");
  refused(good, R"({"added_tokens_decoder": {"x": {"content": "a"}}})", "added_tokens_decoder");
  auto bad_pattern = TiktokenTokenizer::FromText(good, "", "(");
  EXPECT_FALSE(bad_pattern.ok());
}

}  // namespace
}  // namespace ls::tok
