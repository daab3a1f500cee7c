// Parameter structs shared by every backend's ops (CPU and CUDA), so that op signatures stay
// short and the two backends cannot drift. Pointers are backend memory; shapes are beside them.
#pragma once

#include <cstdint>

#include "kernels/tensor.h"

// Strips one pair of parentheses: the parameter and argument lists of kernels/ops.def's entries.
#define LS_UNPARENTHESIZED(...) __VA_ARGS__

namespace ls {

enum class Activation : uint8_t { kSiTU, kSiLU };  // gate functions of the GLU experts

// A GLU's gate function with its parameters: SiLU(g)·u, or the general SiTU of docs/math.md ("Gates and GLU MLPs"),
// SiTU(g, u) = β·tanh(g/β)·σ(g) · γ·tanh(u/γ) (β = 1 and no γ: σ(g)·tanh(g)·u).
struct GluAct {
  Activation kind = Activation::kSiTU;
  float beta = 1.f;         // SiTU's bound β on the gate
  float linear_beta = 0.f;  // SiTU's bound γ on the up branch; 0: none
  constexpr GluAct() = default;
  constexpr GluAct(Activation k) : kind(k) {}  // a plain activation converts implicitly
  constexpr GluAct(Activation k, float b, float lb) : kind(k), beta(b), linear_beta(lb) {}
  // SiLU, or SiTU with β = 1 and no γ. (constexpr: device code calls it too.)
  constexpr bool plain() const { return kind == Activation::kSiLU || (beta == 1.f && linear_beta == 0.f); }
};
enum class ScoringFunc : uint8_t { kSigmoid, kSoftmax };
// How group-limited routing ranks a group: the sum of its two best keys (DeepSeek-V3), or its
// best key (DeepSeek-V2).
enum class GroupScore : uint8_t { kTop2Sum, kMax };

// Where row (token t, head h) of a [tokens, heads, width] activation lies: at t·token + h·head.
struct RowStrides {
  int64_t token = 0;
  int64_t head = 0;
};

// One output of Backend::GemmMany: y[M, w.rows] (+)= x · wᵀ.
struct GemmOutput {
  const Tensor* w;
  float* y;
  bool accumulate = false;
};

// One sequence's slice of a step, for attention over the paged KV cache.
struct AttentionSeq {
  int32_t token_offset = 0;  // first row of this sequence in the step's [T, ...] activations
  int32_t num_tokens = 0;    // new tokens this step (a prefill chunk, or 1 for decode)
  int32_t start_pos = 0;     // position of the first new token = tokens already cached
  const int32_t* block_table = nullptr;  // [num_blocks] physical block of each logical block
  int32_t num_blocks = 0;
  int32_t state_slot = -1;  // the sequence's slot of recurrent state (layers that keep one), else -1
};

// One layer of the paged KV cache: [num_blocks, block_size, num_kv_heads, head_dim] each, of
// float32 or (CPU backend) BF16 elements, rounded to nearest even when written.
struct KvLayer {
  void* k = nullptr;
  void* v = nullptr;
  int32_t num_blocks = 0;
  int32_t block_size = 0;
  DType dtype = DType::kF32;
  // Layers with recurrent state (KDA): one slot of state_floats float32 values per running
  // sequence, slot s at state + s · state_floats.
  float* state = nullptr;
  int64_t state_floats = 0;
};

// Rotary position embedding of one attention layer's heads. Rotate-half pairs are (i, i + r/2)
// over the first r = rotary_dim dims of each head, interleaved pairs (2i, 2i + 1); pair i turns
// by pos · inv_freq[i], and cos and sin are scaled by attention_scaling (YaRN), as transformers does.
struct RopeParams {
  int32_t num_heads = 0;
  int32_t head_dim = 0;
  int32_t rotary_dim = 0;             // even, at most head_dim; the rest of each head is left as is
  bool interleaved = false;
  const float* inv_freq = nullptr;    // host [rotary_dim / 2]
  float attention_scaling = 1.f;
};

struct AttentionParams {
  const float* q = nullptr;      // [T, H * hd], RoPE applied
  const float* k_new = nullptr;  // [T, Hkv * hd], RoPE applied; written into the cache
  const float* v_new = nullptr;  // [T, Hkv * hd]
  float* out = nullptr;          // [T, H * hd]
  int32_t num_heads = 0;
  int32_t num_kv_heads = 0;
  int32_t head_dim = 0;
  float scale = 1.f;
  int32_t sliding_window = 0;    // a token attends to its last sliding_window positions (0: all)
  KvLayer cache;
  const AttentionSeq* seqs = nullptr;  // [num_seqs], token ranges ascending and disjoint
  int32_t num_seqs = 0;
};

// Multi-head latent attention (MLA) in its absorbed form over a paged latent cache: every cached
// position keeps one row [c (latent_dim) | k_rope (rope_dim)] shared by all heads; head h scores
// position p as scale · (q_latent_h · c_p + q_rope_h · k_rope_p) and returns Σ_p softmax · c_p.
// The caller absorbs the key up-projection into q_latent and applies the value up-projection to
// the output.
struct LatentAttentionParams {
  const float* q_latent = nullptr;  // [T, H, latent_dim]
  const float* q_rope = nullptr;    // head h of token t at q_rope + (t·H + h)·q_rope_stride, rope_dim values
  int64_t q_rope_stride = 0;
  const float* c_new = nullptr;       // [T, latent_dim] the new tokens' normed latents; written into the cache
  const float* k_rope_new = nullptr;  // [T, rope_dim] their rope keys (rotated); written beside them
  float* out = nullptr;               // [T, H, latent_dim]
  int32_t num_heads = 0;
  int32_t latent_dim = 0;
  int32_t rope_dim = 0;
  float scale = 1.f;
  KvLayer cache;  // k: [num_blocks, block_size, latent_dim + rope_dim]; v unused
  const AttentionSeq* seqs = nullptr;  // [num_seqs], token ranges ascending and disjoint
  int32_t num_seqs = 0;
};

// The expanded form of MLA attention for one sequence's new tokens against a tile of its
// context, whose per-head keys and values the caller expanded from the latent rows
// (k_nope = W_UK_h·c, v = W_UV_h·c): head h scores key j as
// scale · (q_nope_h · k_nope[j, h] + q_rope_h · k_rope[j]) and returns Σ_j softmax · v[j, h].
// Causal: the query at position p reads the keys at positions ≤ p. A context split into tiles
// (attended in position order, the first holding position 0) gives one softmax over all of them:
// `state` keeps each (token, head)'s running max and sum between tiles, and `out` the running
// sum of weighted values until the last tile divides it.
struct ExpandedLatentAttentionParams {
  const float* q = nullptr;       // [T, H, nope_dim + rope_dim]: q_nope then q_rope (rotated) per head
  const float* k_nope = nullptr;  // [num_keys, H, nope_dim]
  const float* k_rope = nullptr;  // key j's rope part (shared by the heads) at k_rope + j·k_rope_stride
  int64_t k_rope_stride = 0;
  const float* v = nullptr;  // [num_keys, H, v_dim]
  float* out = nullptr;      // [T, H, v_dim]; the sequence's rows only are written
  float* state = nullptr;    // [T, H, 2] running max and sum of (token, head) between tiles
  int32_t num_heads = 0;
  int32_t nope_dim = 0;
  int32_t rope_dim = 0;
  int32_t v_dim = 0;
  float scale = 1.f;
  AttentionSeq seq;       // the queries: rows token_offset + i at positions start_pos + i (block_table unused)
  int32_t first_key = 0;  // position of key 0
  int32_t num_keys = 0;
  bool first_tile = true;  // out and state start afresh (first_key is 0)
  bool last_tile = true;   // out is divided by the sums (the tile ends at the last query's position)
};

// A causal depthwise convolution over each sequence's new tokens with SiLU (the short convolution
// of linear-attention layers): out_t[c] = SiLU(Σ_j w[c, j] · in_{t−(K−1)+j}[c]), continuing from
// the K − 1 inputs before the step kept in the sequence's state slot (zeros at start_pos 0), which
// it then updates to the last K − 1 inputs.
struct ShortConvParams {
  const float* in = nullptr;  // [T, channels]
  float* out = nullptr;       // [T, channels]; must not overlap in
  int64_t channels = 0;
  const Tensor* weight = nullptr;  // [channels, kernel], F32/BF16/F16
  int32_t kernel = 0;
  KvLayer cache;             // state slots
  int64_t tail_offset = 0;   // where the [kernel − 1, channels] inputs lie within a slot (floats)
  const AttentionSeq* seqs = nullptr;
  int32_t num_seqs = 0;
};

// Forget gates of Kimi Delta Attention, per key channel c of head h, from g = graw + dt_bias:
// Kimi-Linear's −exp(A_log[h]) · softplus(g), or K3's lower_bound · σ(exp(A_log[h]) · g).
enum class KdaGate : uint8_t { kSoftplus, kBoundedSigmoid };

// Kimi Delta Attention, the gated delta rule with a per-channel forget gate, per head over a
// [head_dim, head_dim] recurrent state S kept in the sequence's state slot (zero at start_pos 0):
// q̂ = q / √(Σq² + 1e-6) · head_dim^−½, k̂ = k / √(Σk² + 1e-6), β = σ(beta logit), then per token
// S ← diag(exp(gate))·S; S ← S + β·k̂ ⊗ (v − Sᵀk̂); out = Sᵀq̂. Sequences with more than `chunk` new
// tokens may run the chunked (WY) form of the same recurrence.
struct KdaParams {
  const float* q = nullptr;     // [T, H, d] after the short convolution
  const float* k = nullptr;     // [T, H, d]
  const float* v = nullptr;     // [T, H, d]
  const float* graw = nullptr;  // [T, H, d] the gate projection's output, before dt_bias
  const float* beta = nullptr;  // [T, H] logits of β
  float* out = nullptr;         // [T, H, d]
  int32_t num_heads = 0;
  int32_t head_dim = 0;
  Tensor a_log;    // [H] or longer (the first H used), F32/BF16/F16
  Tensor dt_bias;  // [H · d]
  KdaGate gate = KdaGate::kSoftplus;
  float lower_bound = 0.f;  // kBoundedSigmoid
  KvLayer cache;            // state slots: S [H, d, d] at the start of each
  const AttentionSeq* seqs = nullptr;
  int32_t num_seqs = 0;
  int32_t chunk = 64;  // a sequence with more new tokens than this runs the chunked form (0: never)
};

// Attention residuals (AttnRes, K3): the depth-wise mix of a token's block residuals and its
// current residual p. With sources V_0..V_{n−1} = the num_blocks rows of `blocks`, then `last`:
// s_i = Σ_d (V_i[d] / √(mean(V_i²) + eps)) · norm_w[d] · proj_w[d], out = Σ_i softmax(s)_i · V_i, in
// float32.
struct AttnResParams {
  const float* blocks = nullptr;  // [num_blocks, T, d]
  int32_t num_blocks = 0;
  const float* last = nullptr;    // [T, d] the current residual
  int64_t num_tokens = 0;
  int64_t width = 0;              // d
  Tensor norm_weight;             // [d]
  Tensor proj_weight;             // [1, d]
  float eps = 1e-6f;
  float* out = nullptr;           // [T, d], apart from the sources
};

struct RouterParams {
  const float* logits = nullptr;  // [T, N] router logits h·Wrᵀ
  const float* bias = nullptr;    // [N] frozen selection bias, or null
  int64_t num_tokens = 0;
  int32_t num_experts = 0;
  int32_t top_k = 0;
  ScoringFunc scoring = ScoringFunc::kSigmoid;
  // Group-limited selection: experts form n_group equal groups, each ranked by group_score over
  // its score + bias; only the topk_group best groups (ties: lower group) are eligible.
  int32_t n_group = 1;
  int32_t topk_group = 1;
  GroupScore group_score = GroupScore::kTop2Sum;
  bool norm_topk_prob = true;
  float routed_scaling_factor = 1.f;
  int32_t* topk_ids = nullptr;      // [T, K] chosen experts, best first (ties: lower index)
  float* topk_weights = nullptr;    // [T, K] unbiased scores, normalised and scaled
};

// Routed experts over a batch: out[t] = Σ_k w[t,k] · GLU_{e[t,k]}(z[t]).
struct MoeParams {
  const float* z = nullptr;  // [T, in_width] expert inputs (latent z, or h without a latent)
  int64_t num_tokens = 0;
  int64_t in_width = 0;
  int64_t out_width = 0;
  const int32_t* topk_ids = nullptr;    // [T, K]
  const float* topk_weights = nullptr;  // [T, K]
  int32_t top_k = 0;
  int32_t num_experts = 0;
  const Tensor* gate = nullptr;  // [N] of [f, in_width]
  const Tensor* up = nullptr;    // [N] of [f, in_width]
  const Tensor* down = nullptr;  // [N] of [out_width, f]
  GluAct act;
  float* out = nullptr;              // [T, out_width]
  // [N] host counters incremented by the rows routed to each expert (optional), by the time the
  // backend next synchronizes (Backend::CopyToHost or Synchronize).
  int64_t* tokens_per_expert = nullptr;
};

}  // namespace ls
