// Writes a random checkpoint (config.json + BF16 model.safetensors) of given sizes, for
// benchmarks that need a model of a particular shape rather than a trained one: this project's
// format with GQA attention, a DeepSeek-V3 checkpoint with MLA attention (mla_latent > 0), or a
// Kimi-Linear checkpoint with KDA attention (kda).
#pragma once

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "kernels/backend.h"
#include "models/model.h"

namespace ls::bench {

struct RandomModelSpec {
  int vocab = 8192, d = 1024, layers = 4, heads = 16, kv_heads = 4, head_dim = 64;
  int experts = 64, top_k = 8, f = 512, d_lat = 256;  // d_lat 0: plain MoE
  int shared_f = 0;                                   // shared expert width, 0: none
  bool situ = true, sigmoid = true, expert_output_norm = true;
  // MLA (a DeepseekV3ForCausalLM directory; plain MoE, SiLU, sigmoid router, the heads above):
  int mla_latent = 0, mla_rope = 32, mla_nope = 64, mla_v = 64;
  // KDA (a KimiLinearForCausalLM directory; plain MoE as for MLA): heads of head_dim, a short
  // convolution of 4; on every layer, or with full_attn_every N on all but every Nth, which is
  // MLA attention as Kimi-Linear has it (3 KDA : 1 MLA is N = 4).
  bool kda = false;
  int full_attn_every = 0;
  // The routed experts stored as compressed-tensors mxfp4-pack-quantized (random E2M1 codes, E8M0
  // scales per 32), with its quantization_config; this project's format only.
  bool mxfp4_experts = false;
  // The routed experts stored as compressed-tensors pack-quantized INT4 in groups of this many
  // (0: not), random codes with BF16 scales, symmetric or with random zero points; this project's
  // format only.
  int int4_experts_group = 0;
  bool int4_zero_points = false;
  // MLA only: one multi-token-prediction layer (model.layers.{layers}, num_nextn_predict_layers 1)
  // built to imitate the model: its block a copy of the last layer, eh_proj [I | 0] (it reads the
  // next token's embedding and ignores the hidden row), unit norms, the model's head, and the
  // embedding's rows scaled to RMS 1 so that enorm leaves them as they are. With one layer the MTP
  // layer at position p computes what the model computes at p + 1 over the context without the
  // first token, so its drafts are mostly accepted.
  bool mtp_copy = false;
};

absl::Status WriteRandomModel(const RandomModelSpec& spec, const std::string& dir, unsigned seed);
// Writes one (seed 1) into `dir` and loads it on `backend`; on failure prints why and exits.
std::unique_ptr<Model> WriteAndLoadRandomModel(const RandomModelSpec& spec, const std::string& dir, Backend* backend);

}  // namespace ls::bench
