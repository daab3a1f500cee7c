// The interfaces of the layer library: a decoder layer's attention and feed-forward sublayers.
// Each reads the normed input h and adds its output to the residual stream x; it binds its own
// tensors at load and lists them for the backend to prepare. Implementations: attention
// GqaAttention (grouped-query, causal or sliding-window), MlaAttention (multi-head latent)
// and KdaAttention (Kimi Delta Attention, recurrent), built by kind in attention_kinds.cc, each
// stating its cache needs and keeping its scratch in StepBuffers::Scratch; feed-forward GluMlp
// (dense) and MoeBlock (routed and shared experts). A ResidualStream (residual_stream.h) is how
// the sublayers read the stream: plainly, or through K3's attention residuals (attn_res.h).
#pragma once

#include <cstdint>
#include <functional>

#include "kernels/backend.h"
#include "kernels/tensor.h"
#include "models/layers/step_context.h"

namespace ls {

// Called once per weight tensor with how the ops read it; the callee may replace the tensor
// (PrepareWeight returns the backend's view).
using WeightFn = std::function<void(Tensor&, WeightUse)>;

class AttentionLayer {
 public:
  virtual ~AttentionLayer() = default;
  // What the layer keeps in the cache: K/V values per token, and state per sequence.
  virtual KvLayerSpec kv_spec() const = 0;
  // x[T, d] += attention output over h[T, d] (the input norm's output), reading and writing the
  // layer's cache.
  virtual void Forward(StepContext& ctx, int32_t layer, const float* h, float* x) = 0;
  virtual void ForEachWeight(const WeightFn& fn) = 0;
  // The backend has prepared every weight: host copies made at load may go.
  virtual void WeightsPrepared() {}
};

class FfnLayer {
 public:
  virtual ~FfnLayer() = default;
  // x[T, d] += FFN(h[T, d]), T = ctx.num_tokens. Each row's result depends on that row alone, and
  // nothing of the step's sequences is read: the decoder may hand it a subset of the step's rows.
  virtual void Forward(StepContext& ctx, int32_t layer, const float* h, float* x) = 0;
  virtual void ForEachWeight(const WeightFn& fn) = 0;
};

}  // namespace ls
