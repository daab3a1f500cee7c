// Decoder: the `decoder` section of a tokenizer.json — ByteLevel, Replace, ByteFallback, Fuse,
// Strip, Metaspace and Sequence of these, or none (tokens joined by spaces) — run as a stream
// over token strings, so that decoding all ids at once and one id at a time give the same text,
// equal to Hugging Face `tokenizers`' decode. Steps after the first fusing step (Fuse, ByteLevel)
// see one growing token; there only Strip, Fuse, Metaspace and one-character Replace are
// supported. The Decoder is immutable and thread-safe; a Stream belongs to one sequence.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace ls::tok {

class Decoder {
 public:
  struct Step;
  class Stream {
   public:
    explicit Stream(const Decoder* decoder);
    ~Stream();
    // Appends to `out` the text that the token strings seen so far fix.
    void Push(std::string_view token, std::string* out);
    void Finish(std::string* out);

   private:
    void Feed(size_t step, std::string token, std::string* out);
    void Fused(std::string text, std::string* out);
    void FusedSteps(size_t step, std::string text, bool final, std::string* out);
    const Decoder* d_;
    std::vector<std::string> byte_runs_;   // per step: pending ByteFallback bytes
    std::vector<size_t> seen_;             // per step: tokens received (Metaspace's "first")
    std::vector<size_t> strip_left_;       // per fused Strip: leading characters still strippable
    std::vector<std::string> strip_tail_;  // per fused Strip: trailing content characters held back
    std::string pending_bytes_;            // ByteLevel: an incomplete UTF-8 character
    size_t tokens_out_ = 0;                // tokens joined so far (no fusing step)
  };

  // `j` null means no decoder. Unknown types give "unsupported: decoder <type>".
  static absl::StatusOr<std::unique_ptr<Decoder>> FromJson(const nlohmann::json& j);
  ~Decoder();

  std::unique_ptr<Stream> NewStream() const { return std::make_unique<Stream>(this); }
  // Appends what `token` reads as on its own: the token-level steps with the token taken as not
  // the first, a <0xXX> token as its byte, ByteLevel symbols as their bytes; no stream stripping.
  void AppendPiece(std::string_view token, std::string* out) const;
  // Whether a ByteLevel step turns tokens into bytes (the output is then lossy UTF-8 decoded).
  bool byte_level() const { return fuse_ == Fuse::kByteLevel; }

 private:
  enum class Fuse { kNone, kJoin, kByteLevel };
  Decoder();
  std::vector<Step> token_steps_;  // before the first fusing step
  Fuse fuse_ = Fuse::kNone;
  std::vector<Step> fused_steps_;  // after it
  bool join_with_space_ = false;   // no decoder at all
};

}  // namespace ls::tok
