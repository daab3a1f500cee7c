// TiktokenTokenizer: a tiktoken.model vocabulary (one "base64(token bytes) rank" line per token)
// as Kimi K2/K3 ship it: byte-level BPE merging by the rank of the merged bytes, a pre-tokenizer
// regex chosen by model_type, and 256 reserved control ids after the base ranks, named by
// tokenizer_config.json's added_tokens_decoder or <|reserved_token_N|>. Encoding first cuts the
// text as the reference does — 400,000-character chunks, then runs of at most 25,000 whitespace
// or non-whitespace characters (Python str.isspace) — which also bounds the regex's work on
// pathological input. Control-token text in the input is plain text unless options ask to
// match it (see SpecialText). Immutable after loading; thread-safe.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "base/mutex.h"
#include "tokenizer/added_vocabulary.h"
#include "tokenizer/regex.h"
#include "tokenizer/tokenizer.h"

namespace ls::tok {

class TiktokenTokenizer final : public Tokenizer {
 public:
  static constexpr int32_t kNumReserved = 256;
  static constexpr size_t kMaxEncodeChars = 400'000;
  static constexpr size_t kMaxRunChars = 25'000;

  // `tokenizer_config_path` may name a missing file (all control ids then get default names).
  static absl::StatusOr<std::unique_ptr<TiktokenTokenizer>> Load(const std::string& model_path,
                                                                 const std::string& tokenizer_config_path,
                                                                 const std::string& pattern);
  // From the files' text; `tokenizer_config_json` may be empty.
  static absl::StatusOr<std::unique_ptr<TiktokenTokenizer>> FromText(std::string_view model_text,
                                                                     std::string_view tokenizer_config_json,
                                                                     const std::string& pattern);

  absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text, const EncodeOptions& options = {}) const override;
  std::unique_ptr<DecodeStream> NewDecodeStream(bool skip_special) const override;
  bool AppendTokenBytes(int32_t id, bool skip_special, std::string* bytes) const override;
  int32_t vocab_size() const override { return num_base_ + kNumReserved; }
  int32_t TokenToId(const std::string& token) const override;
  bool IsSpecial(int32_t id) const override { return id >= num_base_ && id < vocab_size(); }
  TokenizerLayout layout() const override { return TokenizerLayout::kTiktoken; }

  int32_t num_base_tokens() const { return num_base_; }
  // The name of control id `id` (num_base_tokens() <= id < vocab_size()).
  const std::string& ControlName(int32_t id) const { return control_names_[id - num_base_]; }
  // The pieces the reference encodes one by one (chunk guard), as byte ranges of `text`.
  static std::vector<std::pair<size_t, size_t>> GuardChunks(std::string_view text, size_t max_chars = kMaxEncodeChars,
                                                            size_t max_run = kMaxRunChars);

 private:
  class Stream;
  TiktokenTokenizer() = default;
  void EncodeOrdinary(std::string_view text, std::vector<int32_t>* ids) const;
  void EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const;

  absl::flat_hash_map<std::string, int32_t> ranks_;  // token bytes -> rank (= id)
  std::vector<std::string> bytes_of_;                // rank -> token bytes
  int32_t num_base_ = 0;
  std::vector<std::string> control_names_;  // kNumReserved names
  absl::flat_hash_map<std::string, int32_t> control_ids_;
  AddedVocabulary controls_;
  std::unique_ptr<Regex> pattern_;

  static constexpr size_t kCacheCapacity = 1 << 16;
  static constexpr size_t kMaxCachedPiece = 256;
  mutable Mutex cache_mu_;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace ls::tok
