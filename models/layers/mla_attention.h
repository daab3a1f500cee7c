// MlaAttention: multi-head latent attention (DeepSeek-V2/V3, Kimi) over the paged latent cache.
// Each token caches one normed latent c (kv_lora_rank) and one rope key shared by all heads; the
// cache holds nothing else. Each sequence of a step takes one of two forms, chosen from its own
// chunk's shape (ChoosesExpanded): the absorbed form (the key up-projection W_UK folded into the
// query, attention over the cached rows, the value up-projection W_UV applied to the result; every
// decode) or the expanded form (per-head keys W_UK·c and values W_UV·c built for the whole context
// as transient scratch, tile by tile, then ordinary causal attention at the head width; long
// prefill chunks). Both are tested equal within float rounding. Under tensor parallelism a rank
// holds its share of the heads and the whole latent cache; its partial output is summed over the
// group.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "models/layers/layer.h"
#include "models/layers/rope_table.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_binder.h"

namespace ls {

// Which form a layer runs: by the cost rule (serving), or one form for every sequence (tests and
// benchmarks of the two forms).
enum class MlaForm : uint8_t { kByCost, kAbsorbed, kExpanded };

// The step's activations of the MLA layers (H heads, latent L, rope R, value v).
struct MlaScratch {
  explicit MlaScratch(Backend* b)
      : q(b), latents(b), q_latent(b), out(b), q_lora(b), gate(b), tile_rows(b), tile_kv(b), softmax_state(b) {}
  DeviceBuffer q;              // [T, H, nope + R] queries
  DeviceBuffer latents;        // [T, L] normed latents, then [T, R] rope keys
  DeviceBuffer q_latent;       // absorbed form: [absorbed tokens, H, L] queries in latent space
  DeviceBuffer out;            // [absorbed tokens, H, L] their results, then [T, H, v] every token's values
  DeviceBuffer q_lora;         // [T, q_lora_rank] the query's low-rank rows
  DeviceBuffer gate;           // [T, H·v] the output gate
  DeviceBuffer tile_rows;      // expanded form: [tile, L + R] cached rows
  DeviceBuffer tile_kv;        // [tile, H, nope] keys, then [tile, H, v] values
  DeviceBuffer softmax_state;  // [T, H, 2] running max and sum across tiles
};

class MlaAttention final : public AttentionLayer {
 public:
  // Binds `<prefix>{q_a_proj,q_a_layernorm,q_b_proj | q_proj}`, `kv_a_proj_with_mqa`,
  // `kv_a_layernorm`, `kv_b_proj`, `o_proj` (biases where the config has them).
  MlaAttention(WeightBinder& b, const std::string& prefix, const ModelConfig& config);

  // One cached row per token: kv_lora_rank + qk_rope_head_dim values.
  KvLayerSpec kv_spec() const override { return KvLayerSpec{c_.kv_lora_rank + c_.qk_rope_head_dim, 0}; }
  void Forward(StepContext& ctx, int32_t layer, const float* h, float* x) override;
  void ForEachWeight(const WeightFn& fn) override;
  void WeightsPrepared() override;

  void set_form(MlaForm form) { form_ = form; }
  // Whether a sequence's chunk of `new_tokens` after `cached` tokens runs the expanded form.
  bool ChoosesExpanded(int64_t new_tokens, int64_t cached) const;
  // Context positions expanded at a time (bounds the scratch; fixed by the model's shapes, so a
  // sequence's tiles do not depend on its batch).
  int32_t expand_tile() const { return expand_tile_; }
  void set_expand_tile(int32_t positions) { expand_tile_ = positions; }

 private:
  // The expanded form for one sequence: its context's keys and values tile by tile.
  void AttendExpanded(StepContext& ctx, int32_t layer, const AttentionSeq& s, const float* q, float* o);

  MlaConfig c_;  // with this rank's head count
  RopeTable rope_;
  int64_t qh_;                              // qk_nope + qk_rope
  bool tensor_parallel_;
  Tensor q_a_, q_a_bias_, q_a_norm_, q_b_;  // q_lora: [q_lora, d] / [q_lora] / [q_lora] / [H*qh, q_lora]
  Tensor q_;                                // no q_lora: [H*qh, d]
  Tensor kv_a_c_, kv_a_rope_;               // kv_a_proj_with_mqa's rows: [L, d] and [R, d]
  Tensor kv_a_c_bias_, kv_a_rope_bias_;     // [L], [R] (bias only)
  Tensor kv_a_norm_;                        // [L]
  std::vector<float> kv_a_values_, kv_b_values_;  // quantized kv_a / kv_b dequantized, until prepared
  std::vector<unsigned char> uk_t_bytes_;   // the transposed copies below, as stored, until prepared
  std::vector<Tensor> uk_t_;                // [H] of [L, qk_nope]: q_latent_h = q_nope_h · W_UK_h
  std::vector<Tensor> uv_;                  // [H] of [v, L]: head h's value rows of kv_b_proj
  std::vector<Tensor> uk_;                  // [H] of [nope, L]: head h's key rows of kv_b_proj (expanded form)
  Tensor g_;                                // [H*v, d] the output gate (output_gate only)
  Tensor o_, o_bias_;                       // [d, H*v], [d]
  MlaForm form_ = MlaForm::kByCost;
  int32_t expand_tile_ = 0;
  std::vector<AttentionSeq> absorbed_, expanded_;  // the step's sequences by form
};

}  // namespace ls
