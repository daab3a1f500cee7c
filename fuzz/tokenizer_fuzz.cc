// Fuzz target: tokenizer encode and decode. Valid UTF-8 text must round-trip exactly; any id
// sequence must decode (or be refused) without crashing, and streaming must equal the full decode.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "engine/tokenizer/incremental_detokenizer.h"
#include "engine/tokenizer/tokenizer.h"

namespace {
std::unique_ptr<ls::tok::Tokenizer> tok;
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  auto t = ls::tok::Tokenizer::FromFile(LS_FUZZ_DATA_DIR "/tokenizer/llama3_4096/tokenizer.json");
  if (!t.ok()) std::abort();
  tok = std::move(*t);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto ids = tok->Encode(rest);
    if (ids.ok()) {
      auto back = tok->Decode(*ids);
      if (!back.ok() || *back != rest) std::abort();
    }
  } else {
    std::vector<int32_t> ids(rest.size() / 2);
    for (size_t i = 0; i < ids.size(); ++i) {
      uint16_t v;
      std::memcpy(&v, rest.data() + 2 * i, 2);
      ids[i] = v % (tok->vocab_size() + 8);  // a few out-of-range ids too
    }
    auto full = tok->Decode(ids, data[0] & 2);
    ls::tok::IncrementalDetokenizer d(tok.get(), data[0] & 2);
    std::string streamed;
    bool ok = true;
    for (int32_t id : ids) {
      auto piece = d.Push(id);
      if (!piece.ok()) {
        ok = false;
        break;
      }
      streamed += *piece;
    }
    if (ok) {
      streamed += d.Finish();
      if (!full.ok() || streamed != *full) std::abort();
    } else if (full.ok()) {
      std::abort();
    }
  }
  return 0;
}
