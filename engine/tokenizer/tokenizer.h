// Tokenizer: a Hugging Face tokenizer.json (byte-level BPE family) loaded into an encoder and
// decoder that give the same ids and text as the `tokenizers` library: NFC or no normalizer,
// added tokens matched before pre-tokenization, Split / ByteLevel / Sequence pre-tokenizers,
// a BPE model, and ByteLevel / ByteFallback decoding. Anything else in the file is refused with
// "unsupported: <component>". Immutable after loading, so thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/tokenizer/bpe_model.h"
#include "engine/tokenizer/pre_tokenizer.h"

namespace ls::tok {

struct AddedToken {
  int32_t id;
  std::string content;
  bool special = false;
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;
};

class Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromFile(const std::string& path);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> FromJson(std::string_view json_text);

  // Text to ids. The text must be valid UTF-8 (an error names the byte offset otherwise).
  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text) const;
  // Ids to text; special added tokens are dropped when skip_special. Invalid UTF-8 produced by
  // the ids becomes U+FFFD. Ids outside the vocabulary are an error.
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  // Appends the raw bytes token `id` stands for (before UTF-8 decoding); false if out of range.
  bool AppendTokenBytes(int32_t id, bool skip_special, std::string* bytes) const;

  int32_t vocab_size() const { return vocab_size_; }
  // Id of a vocabulary or added token string, or -1.
  int32_t TokenToId(const std::string& token) const;
  bool IsSpecial(int32_t id) const;
  const std::vector<AddedToken>& added_tokens() const { return added_; }
  const BpeModel& model() const { return *model_; }

 private:
  Tokenizer() = default;
  // Splits normalized text into segments: (text, -1) for ordinary text, ("", id) for an added token.
  std::vector<std::pair<std::string, int32_t>> SplitAdded(const std::string& text) const;

  bool nfc_ = false;
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<BpeModel> model_;
  bool byte_level_decoder_ = false;
  bool byte_fallback_decoder_ = false;
  std::vector<AddedToken> added_;
  std::unordered_map<int32_t, size_t> added_by_id_;
  int32_t vocab_size_ = 0;
};

}  // namespace ls::tok
