// ResidualStream: the decoder's block shape, i.e. what each sublayer's norm reads from the
// residual stream and where the stream goes after the last layer. Plain pre-norm reads the stream
// itself; K3's attention residuals (AttnResStream, attn_res.h) read learned mixes of the stream
// kept at each block's start. DecoderModel runs its layers through one, built at load by
// NewResidualStream, and has no branch of its own for either shape.
#pragma once

#include <cstdint>
#include <memory>

#include "models/layers/layer.h"
#include "models/layers/step_context.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_binder.h"

namespace ls {

class ResidualStream {
 public:
  virtual ~ResidualStream() = default;
  // A step begins with the embeddings in x[T, d].
  virtual void Begin(StepContext& /*ctx*/) {}
  // What layer `layer`'s input norm reads. The stream may move to another buffer (x is updated);
  // the returned rows stay valid until the next call.
  virtual const float* AttentionInput(StepContext& /*ctx*/, int32_t /*layer*/, float*& x) { return x; }
  // What its post-attention norm reads, after the attention added to x.
  virtual const float* FfnInput(StepContext& /*ctx*/, int32_t /*layer*/, const float* x) { return x; }
  // What the final norm reads, after the last layer.
  virtual const float* Output(StepContext& /*ctx*/, const float* x) { return x; }
  virtual void ForEachWeight(const WeightFn& /*fn*/) {}
};

// The plain stream, or attention residuals when config.attn_res_block_size > 0 (binding their
// tensors).
std::unique_ptr<ResidualStream> NewResidualStream(WeightBinder& b, const ModelConfig& config, Backend* backend);

}  // namespace ls
