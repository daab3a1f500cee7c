// HfTokenizer: a Hugging Face tokenizer.json with a BPE model, encoding and decoding as the
// `tokenizers` library (0.23) does. One pipeline serves both BPE layouts published models use:
// byte-level (GPT-2/Llama-3/Qwen: ByteLevel pre-tokenizer and decoder) and SentencePiece-style
// (Llama-2/Mistral/Mixtral: Prepend/Replace normalizers or a Metaspace pre-tokenizer,
// byte_fallback, fuse_unk, Replace/ByteFallback/Fuse/Strip decoder). Added tokens are cut out
// first (non-normalized ones from the raw text, normalized ones from each normalized stretch),
// then normalizer, pre-tokenizer, model, post-processor. Anything else is refused with
// "unsupported: <component>". Immutable after loading; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "tokenizer/added_vocabulary.h"
#include "tokenizer/bpe_model.h"
#include "tokenizer/decoder.h"
#include "tokenizer/normalizer.h"
#include "tokenizer/post_processor.h"
#include "tokenizer/pre_tokenizer.h"
#include "tokenizer/tokenizer.h"

namespace ls::tok {

class HfTokenizer final : public Tokenizer {
 public:
  static absl::StatusOr<std::unique_ptr<HfTokenizer>> FromJson(std::string_view json_text);

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, const EncodeOptions& options = {}) const override;
  std::unique_ptr<DecodeStream> NewDecodeStream(bool skip_special) const override;
  bool AppendTokenBytes(int32_t id, bool skip_special, std::string* bytes) const override;
  int32_t vocab_size() const override { return vocab_size_; }
  int32_t TokenToId(const std::string& token) const override;
  bool IsSpecial(int32_t id) const override;
  TokenizerLayout layout() const override {
    return decoder_->byte_level() ? TokenizerLayout::kByteLevelBpe : TokenizerLayout::kSentencePieceBpe;
  }

  const BpeModel& model() const { return *model_; }
  const std::vector<AddedToken>& added_tokens() const { return added_.tokens(); }
  const PostProcessor& post_processor() const { return post_; }
  // The string decoding starts from for `id` (an added token's normalized form when it has
  // one), or nullptr; and whether skip_special drops it (its string is a special token's).
  const std::string* DecodeForm(int32_t id) const;
  bool Skipped(int32_t id) const;

 private:
  class Stream;
  HfTokenizer() = default;
  void EncodeSegment(std::string text, bool at_start, bool skip_special, std::vector<int32_t>* ids) const;

  std::unique_ptr<Normalizer> normalizer_;
  std::unique_ptr<PreTokenizer> pre_;
  std::unique_ptr<BpeModel> model_;
  std::unique_ptr<Decoder> decoder_;
  PostProcessor post_;
  AddedVocabulary added_;
  std::unordered_map<std::string, int32_t> added_by_content_;
  std::unordered_map<int32_t, size_t> added_by_id_;  // id -> index in added_.tokens()
  std::unordered_map<int32_t, std::string> added_decode_form_;
  std::vector<bool> skipped_;  // by id
  int32_t vocab_size_ = 0;
};

}  // namespace ls::tok
