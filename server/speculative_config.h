// The --speculative_config flag: a JSON object in vLLM's shape, read into the engine's speculative
// configuration — {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_min": n,
// "prompt_lookup_max": m}, {"method": "draft_model", "model": DIR, "num_speculative_tokens": k} or
// {"method": "mtp", "num_speculative_tokens": k} (the served checkpoint's own MTP layer).
// Other methods, unknown keys and keys of the other method are errors that name them. The draft
// model or MTP layer itself is loaded by the caller (LoadDraftModel, LoadModel).
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "engine/draft_proposer.h"
#include "kernels/backend.h"
#include "models/model.h"
#include "tokenizer/tokenizer.h"

namespace ls::server {

struct SpeculativeFlag {
  SpeculativeConfig config;     // draft_model unset: the caller loads draft_model_dir
  std::string draft_model_dir;  // method "draft_model": the model directory
  bool mtp = false;             // method "mtp": the served checkpoint's MTP layer
};

// Empty text: speculation off.
absl::StatusOr<SpeculativeFlag> ParseSpeculativeConfig(std::string_view text);

// Loads the draft model of `dir` on `backend` and checks that it speaks the target's vocabulary:
// the same tokenizer (every token's bytes and specialness) where the target has one, else the same
// vocab_size. Errors name the directory and the first difference.
absl::StatusOr<std::unique_ptr<Model>> LoadDraftModel(const std::string& dir, Backend* backend, const Model& target,
                                                      const tok::Tokenizer* target_tokenizer);

}  // namespace ls::server
