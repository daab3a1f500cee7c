// KdaAttention: Kimi Delta Attention (Kimi-Linear, K3), linear attention with a recurrent state
// per sequence instead of a per-token cache: q, k and v projections through short causal
// convolutions with SiLU, a per-channel forget gate from a low-rank projection (Kimi-Linear's
// softplus form or K3's bounded sigmoid), β = σ(b_proj x), the gated delta rule over each head's
// state, then a per-head RMSNorm times a sigmoid output gate (low-rank, or full-rank in K3) and
// the output projection. Under tensor parallelism a rank holds its share of the heads (and of each
// sequence's state); its partial output is summed over the group.
#pragma once

#include <cstdint>
#include <string>

#include "models/layers/layer.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_binder.h"

namespace ls {

// The step's activations of the KDA layers (C = H·d channels).
struct KdaScratch {
  explicit KdaScratch(Backend* b) : q(b), k(b), v(b), conv(b), forget(b), beta(b), out(b), gate(b), low_rank(b) {}
  DeviceBuffer q, k, v;   // [T, C] projections before the convolutions
  DeviceBuffer conv;      // [3, T, C] q, k and v after them
  DeviceBuffer forget;    // [T, C] the forget gate before its activation
  DeviceBuffer beta;      // [T, H]
  DeviceBuffer out;       // [T, C] the delta rule's output
  DeviceBuffer gate;      // [T, C] the output gate
  DeviceBuffer low_rank;  // [T, d] a low-rank projection's inner rows (forget gate, output gate)
};

class KdaAttention final : public AttentionLayer {
 public:
  // Binds `<prefix>{q,k,v}_proj`, `{q,k,v}_conv1d` [H·d, 1, K], `f_a_proj`, `f_b_proj`, `b_proj`,
  // `A_log` (the first H values), `dt_bias`, `g_a_proj`/`g_b_proj` or `g_proj`, `o_norm`, `o_proj`.
  KdaAttention(WeightBinder& b, const std::string& prefix, const ModelConfig& config);

  KvLayerSpec kv_spec() const override { return KvLayerSpec{0, 0, c_.state_floats()}; }
  void Forward(StepContext& ctx, int32_t layer, const float* h, float* x) override;
  void ForEachWeight(const WeightFn& fn) override;

 private:
  KdaConfig c_;  // with this rank's head count
  float eps_;
  bool tensor_parallel_;
  Tensor q_, k_, v_;                   // [H·d, hidden]
  Tensor q_conv_, k_conv_, v_conv_;    // [H·d, K]
  Tensor f_a_, f_b_, b_;               // [d, hidden], [H·d, d], [H, hidden]
  Tensor a_log_, dt_bias_;             // [≥ H], [H·d]
  Tensor g_a_, g_b_, g_;               // [d, hidden], [H·d, d] or [H·d, hidden]
  Tensor o_norm_, o_;                  // [d], [hidden, H·d]
};

}  // namespace ls
