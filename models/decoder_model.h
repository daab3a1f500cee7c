// DecoderModel: the pre-norm decoder MoE checkpoints are — embedding; per layer
// x += Attn(RMSNorm(x)) and x += FFN(RMSNorm(x)) with the attention and FFN the layer plan names
// (models/layers/); final norm and LM head. With attention residuals (K3) the residual stream
// restarts every block of layers and the sublayers read mixes of the block residuals instead.
// Every family loads as one, each with its tensor names.
#pragma once

#include <memory>
#include <vector>

#include "models/families/family.h"
#include "models/layers/attn_res.h"
#include "models/layers/rope_table.h"
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
    AttnResMixer attention_res, ffn_res;  // attention residuals only (layer 0 reads no attention mix)
  };
  DecoderModel(ModelConfig config, std::unique_ptr<WeightStore> store, Backend* backend);
  void ForEachWeight(const WeightFn& fn);
  // The layers over the residual stream x[T, d] (plain, or with attention residuals); returns
  // the buffer holding the final stream.
  float* RunLayers(StepContext& ctx, float* x);
  float* RunLayersWithAttnRes(StepContext& ctx, float* x);

  DType dtype_ = DType::kF32;
  RopeTable gqa_rope_, mla_rope_;  // the RoPE tables of the GQA and the MLA layers
  Tensor embed_;       // [V, d]
  Tensor final_norm_;  // [d]
  Tensor lm_head_;     // [V, d] (the embedding when tied)
  std::vector<Layer> layers_;
  AttnResMixer output_res_;  // attention residuals: the mix after the last layer
  std::vector<int32_t> positions_;
  std::vector<AttentionSeq> seqs_;
};

}  // namespace ls
