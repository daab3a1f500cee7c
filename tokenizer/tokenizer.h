// Tokenizer: the interface every tokenizer layout a model ships implements — a Hugging Face
// tokenizer.json (byte-level BPE as GPT-2/Llama-3/Qwen use, or SentencePiece-style BPE as
// Llama-2/Mistral/Mixtral use; see HfTokenizer) or a tiktoken.model (Kimi K2/K3; see
// TiktokenTokenizer). load_tokenizer.h picks and loads one. Implementations are immutable after
// loading and thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ls::tok {

// What special-token text written in the input turns into.
enum class SpecialText {
  // What the layout's reference library does by default: tokenizer.json matches its added tokens
  // in the text (Hugging Face `tokenizers`); tiktoken.model encodes control-token text as plain
  // text (tiktoken `disallowed_special=()`), so `<|open|>` typed by a user never becomes a control id.
  kLayoutDefault,
  // Special tokens written in the text become their ids (tiktoken `allowed_special="all"`). For
  // text the server itself rendered around user content, e.g. a Jinja chat template.
  kMatch,
  // Special tokens are encoded as plain text (`tokenizers` encode_special_tokens=True; tiktoken
  // `disallowed_special=()`). Non-special added tokens of a tokenizer.json still match, as in HF.
  kAsText,
};

struct EncodeOptions {
  // Run the post-processor (tokenizer.json TemplateProcessing, e.g. Llama-3's <|begin_of_text|>).
  // Hugging Face's default; tiktoken.model has no post-processor.
  bool add_special_tokens = true;
  SpecialText special = SpecialText::kLayoutDefault;

  // For a chat rendered to text by a template that already wrote BOS and the control tokens.
  static EncodeOptions RenderedChat() { return {false, SpecialText::kMatch}; }
};

enum class TokenizerLayout { kByteLevelBpe, kSentencePieceBpe, kTiktoken };
const char* LayoutName(TokenizerLayout layout);

// Streaming decoder for one sequence: the concatenation of every Push and the final Finish equals
// Decode(all ids). A piece is emitted as soon as the ids seen so far fix it (complete UTF-8, no
// pending byte-fallback run or strippable tail). Not thread-safe.
class DecodeStream {
 public:
  virtual ~DecodeStream() = default;
  // Adds one id; returns the text that became final (possibly empty). Unknown ids are an error.
  virtual absl::StatusOr<std::string> Push(int32_t id) = 0;
  // Flushes what is still pending at the end of the stream.
  virtual std::string Finish() = 0;
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Text to ids. The text must be valid UTF-8 (an error names the byte offset otherwise); NUL
  // bytes are ordinary characters.
  virtual absl::StatusOr<std::vector<int32_t>> Encode(std::string_view text,
                                                      const EncodeOptions& options = {}) const = 0;
  // Ids to text; special tokens are dropped when skip_special. Invalid UTF-8 produced by the ids
  // becomes U+FFFD. Ids outside the vocabulary are an error.
  virtual absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  virtual std::unique_ptr<DecodeStream> NewDecodeStream(bool skip_special) const = 0;
  // Appends what token `id` reads as on its own (raw bytes, possibly part of a UTF-8 character);
  // nothing for a skipped special token. False if `id` is outside the vocabulary.
  virtual bool AppendTokenBytes(int32_t id, bool skip_special, std::string* bytes) const = 0;

  virtual int32_t vocab_size() const = 0;
  // Id of a vocabulary, added or control token string, or -1.
  virtual int32_t TokenToId(const std::string& token) const = 0;
  virtual bool IsSpecial(int32_t id) const = 0;
  virtual TokenizerLayout layout() const = 0;
};

}  // namespace ls::tok
