// StableLatentMoe: the forward step of a Stable LatentMoE decoder (DESIGN.md §3) over a batch of
// sequences, built from Backend ops: attention over the paged KV cache, then a dense GLU FFN or
// the MoE block (router → latent down → grouped experts → expert-output norm → latent up, plus
// shared experts). Not thread-safe: one step at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/device_buffer.h"
#include "models/kv_cache.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_store.h"
#include "models/model_weights.h"
#include "models/placed_experts.h"
#include "models/step_batch.h"
#include "models/step_profile.h"

namespace ls {

class StableLatentMoe {
 public:
  // Reads DIR/config.json and the weights; the model keeps the mappings alive.
  static absl::StatusOr<std::unique_ptr<StableLatentMoe>> Load(const std::string& model_dir, Backend* backend);

  const ModelConfig& config() const { return config_; }
  Backend* backend() const { return backend_; }
  size_t weight_bytes() const { return store_->total_bytes(); }
  // The checkpoint's floating-point type (that of its embedding table).
  DType dtype() const { return weights_.embed.dtype; }

  // Runs one step. `logits` receives batch.num_logit_rows() rows of vocab_size floats, in
  // sequence order (all new tokens of a sequence when all_logits, else its last token).
  // The caller guarantees block tables cover every position written.
  absl::Status Forward(const StepBatch& batch, KvCache& cache, std::vector<float>* logits);

  // One sequence alone from position 0, with a KV cache of its own: logits of its last token, or
  // of every token when all_logits ([len, vocab]). For evaluation, calibration and benchmarks.
  absl::Status ForwardSequence(const std::vector<int32_t>& ids, bool all_logits, std::vector<float>* logits);

  // Tokens routed to each expert since the last reset: [num_hidden_layers * n_routed_experts].
  const std::vector<int64_t>& expert_token_counts() const { return expert_tokens_; }
  void ResetExpertTokenCounts() { std::fill(expert_tokens_.begin(), expert_tokens_.end(), 0); }

  // Calibration hooks. While a sink is set, every MoE layer appends its router logits
  // ([T, N] row-major) to (*sink)[layer]. Biases of a MoE layer can be replaced.
  void CaptureRouterLogits(std::vector<std::vector<float>>* sink) { router_sink_ = sink; }
  const std::vector<float>& router_bias(int32_t layer) const { return weights_.layers[layer].router_bias; }
  absl::Status SetRouterBias(int32_t layer, std::vector<float> bias);
  const WeightStore& weight_store() const { return *store_; }

  // While set, every step adds its time per part of the layer to *profile (null: off).
  void SetProfile(StepProfile* profile) { profile_ = profile; }

  // Expert parallelism: with placed experts, every MoE layer dispatches its routed rows to the
  // devices holding their experts (split over replicas), each device computes its share with its
  // own weight copies, and the results are combined — numerically the same as without. Set
  // between steps; null turns it off. BuildPlacedExperts may run on another thread.
  absl::StatusOr<std::shared_ptr<const PlacedExperts>> BuildPlacedExperts(
      const std::vector<std::pair<int32_t, ExpertPlacement>>& placements) const;
  void SetPlacedExperts(std::shared_ptr<const PlacedExperts> placed);
  const std::shared_ptr<const PlacedExperts>& placed_experts() const { return placed_; }
  // Routed rows computed per (layer, device) since the last reset: [layers * devices].
  const std::vector<int64_t>& device_row_counts() const { return device_rows_; }
  void ResetDeviceRowCounts() { std::fill(device_rows_.begin(), device_rows_.end(), 0); }

 private:
  StableLatentMoe(ModelConfig config, std::unique_ptr<WeightStore> store, ModelWeights weights, Backend* backend);

  void Attention(const LayerWeights& L, int32_t layer, const std::vector<AttentionSeq>& seqs,
                 const std::vector<int32_t>& positions, KvCache& cache, int64_t T);
  void DenseFfn(const LayerWeights& L, int64_t T);
  void MoeFfn(const LayerWeights& L, int32_t layer, int64_t T);
  void SharedGlu(const GluWeights& w, const float* h, int64_t T, int64_t width);
  // Routed experts over the placed devices: dispatch, per-device compute, combine. out: [T, w];
  // adds the routed tokens to tokens_per_expert (host).
  void PlacedMoe(const PlacedLayer& pl, int32_t layer, const float* z, const int32_t* topk_ids, const float* weights,
                 int64_t T, float* out, int64_t* tokens_per_expert);

  ModelConfig config_;
  std::unique_ptr<WeightStore> store_;
  ModelWeights host_weights_;  // views into store_
  Backend* backend_;
  DeviceBuffer weight_storage_;  // the backend's prepared copies (packed GEMM weights on the CPU)
  std::vector<Tensor> copied_weights_;  // host GEMM weights the backend copied (their pages are released)
  ModelWeights weights_;         // as the ops read them: host_weights_ or weight_storage_
  std::vector<int64_t> expert_tokens_;
  std::vector<std::vector<float>>* router_sink_ = nullptr;
  StepProfile* profile_ = nullptr;
  std::shared_ptr<const PlacedExperts> placed_;
  std::vector<int64_t> device_rows_;

  // Activations, reused across steps (backend memory).
  DeviceBuffer x_, h_, q_, k_, v_, attn_, gate_, up_, act_, router_logits_, topk_w_, topk_ids_, z_, c_;
  DeviceBuffer dz_, dy_, dids_, dw_, rows_;  // per-device dispatch buffers
  int64_t unit_rows_ = 0;                     // leading values of dw_ that hold 1.0
};

}  // namespace ls
