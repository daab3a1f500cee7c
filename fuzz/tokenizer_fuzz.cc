// Fuzz target: every tokenizer layout, encode and decode. The first byte picks the tokenizer (a
// byte-level, SentencePiece-style, flagged-added-token, or Kimi tiktoken fixture), the operation
// and the options; the rest is text or ids. Lossless layouts (byte-level without a
// post-processor, tiktoken) must round-trip valid UTF-8 exactly; any id sequence must decode (or be
// refused) without crashing, and streaming must equal the full decode.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/incremental_detokenizer.h"
#include "tokenizer/load_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace {

struct Fixture {
  const char* dir;
  bool lossless;  // Decode(Encode(text, no post-processor, special text as text)) == text
};
constexpr Fixture kFixtures[] = {{"llama3_4096", true},   {"sp_llama2", false},   {"sp_metaspace_split", false},
                                 {"added_tokens", false}, {"kimi_k3", true},      {"sp_unk", false},
                                 {"llama3_post", false},  {"sp_metaspace", false}};
std::vector<std::unique_ptr<ls::tok::Tokenizer>> toks;

void CheckStreaming(const ls::tok::Tokenizer& tok, const std::vector<int32_t>& ids, bool skip) {
  auto full = tok.Decode(ids, skip);
  ls::tok::IncrementalDetokenizer d(&tok, skip);
  std::string streamed;
  for (int32_t id : ids) {
    auto piece = d.Push(id);
    if (!piece.ok()) {
      if (full.ok()) std::abort();
      return;
    }
    streamed += *piece;
  }
  streamed += d.Finish();
  if (!full.ok() || streamed != *full) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  for (const Fixture& f : kFixtures) {
    auto t = ls::tok::LoadTokenizer(std::string(LS_FUZZ_DATA_DIR "/tokenizer/") + f.dir);
    if (!t.ok()) std::abort();
    toks.push_back(std::move(*t));
  }
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t which = data[1] % toks.size();
  const ls::tok::Tokenizer& tok = *toks[which];
  const std::string rest(reinterpret_cast<const char*>(data) + 2, size - 2);
  const bool skip = data[0] & 2;
  if (data[0] & 1) {
    ls::tok::EncodeOptions o;
    o.add_special_tokens = data[0] & 4;
    o.special = static_cast<ls::tok::SpecialText>((data[0] >> 3) % 3);
    auto ids = tok.Encode(rest, o);
    if (!ids.ok()) return 0;
    for (int32_t id : *ids)
      if (id < 0 || id >= tok.vocab_size()) std::abort();
    CheckStreaming(tok, *ids, skip);
    if (kFixtures[which].lossless) {
      auto plain = tok.Encode(rest, {false, ls::tok::SpecialText::kAsText});
      auto back = tok.Decode(*plain);
      if (!back.ok() || *back != rest) std::abort();
    }
  } else {
    std::vector<int32_t> ids(rest.size() / 3);
    for (size_t i = 0; i < ids.size(); ++i) {
      uint32_t v = 0;
      std::memcpy(&v, rest.data() + 3 * i, 3);
      ids[i] = static_cast<int32_t>(v % static_cast<uint32_t>(tok.vocab_size() + 8));  // a few out-of-range ids too
    }
    CheckStreaming(tok, ids, skip);
  }
  return 0;
}
