// DecoderModel: the pre-norm decoder MoE checkpoints are — embedding; per layer
// x += Attn(RMSNorm(x)) and x += FFN(RMSNorm(x)) with the attention and FFN the layer plan names
// (models/layers/); final norm and LM head. What each norm reads is the ResidualStream's: the
// stream itself, or with attention residuals (K3) mixes of the block residuals. Every family
// loads as one, each with its tensor names. A checkpoint's multi-token-prediction (MTP) layer loads
// as one too (ModelConfig::next_token_layer): its single layer reads
// x = eh_proj([enorm(embed(t_{p+1})), hnorm(h_p)]) from the next token and the target's final
// hidden row h_p (StepBatch::prev_hidden), and its norm and head are the layer's shared_head.
// Under tensor parallelism (ModelConfig::tensor_parallel) the embedding, head, attention heads and
// dense widths are split over the group's ranks (docs/rank-groups.md, "Tensor parallelism").
#pragma once

#include <memory>
#include <vector>

#include "models/families/family.h"
#include "models/layers/layer.h"
#include "models/layers/residual_stream.h"
#include "models/model.h"

namespace ls {

class DecoderModel final : public Model {
 public:
  // Binds every tensor of `store` by the family's names; a tensor no layer reads is an error
  // unless the family skips it on purpose.
  static absl::StatusOr<std::unique_ptr<Model>> Load(const Family& family, ModelConfig config,
                                                     std::unique_ptr<WeightStore> store, Backend* backend);

  DType dtype() const override { return dtype_; }
  std::vector<KvLayerSpec> kv_layout() const override;
  absl::Status Forward(const StepBatch& batch, KvCache& cache, std::vector<float>* logits) override;

 private:
  struct Layer {
    Tensor input_norm, post_attention_norm;  // [d]
    std::unique_ptr<AttentionLayer> attention;
    std::unique_ptr<FfnLayer> ffn;
  };
  // An MTP layer's input projection.
  struct NextTokenInput {
    Tensor enorm, hnorm;  // [d]
    Tensor eh_proj;       // [d, 2d]
  };
  DecoderModel(ModelConfig config, std::unique_ptr<WeightStore> store, Backend* backend);
  void ForEachWeight(const WeightFn& fn);
  // x[T, d] = the tokens' embedding rows (under tensor parallelism: each rank's vocabulary rows,
  // summed over the group).
  void Embed(const std::vector<int32_t>& tokens, float* x);
  // x[T, d] = the MTP layer's input over the batch's tokens and hidden rows.
  absl::Status NextTokenEmbedding(const StepBatch& batch, float* x);
  // The last layer's FFN over the rows last_rows_ of x[T, d] alone, reading them from `in` (what
  // its norm reads); x's other rows keep the attention's output, which no one reads.
  void LastFfnOverRows(StepContext& ctx, Layer& L, int32_t layer, const float* in, float* x);

  DType dtype_ = DType::kF32;
  Tensor embed_;       // [V, d]
  Tensor final_norm_;  // [d]
  Tensor lm_head_;     // [V, d] (the embedding when tied)
  std::vector<Layer> layers_;
  std::unique_ptr<NextTokenInput> next_token_;  // set for an MTP layer
  std::vector<int64_t> cat_rows_;               // host [2T]: where an MTP step's input rows go
  std::unique_ptr<ResidualStream> residual_;
  std::vector<int32_t> positions_;
  std::vector<int32_t> local_ids_;   // host: a tensor-parallel rank's tokens in its vocabulary rows
  std::vector<int64_t> local_rows_;  // and where they go
  std::vector<AttentionSeq> seqs_;
  std::vector<int64_t> last_rows_;  // host: the rows the last layer's FFN runs over (LastLayerRows)
  DeviceBuffer last_x_;             // [rows, d] those rows of the stream
};

}  // namespace ls
