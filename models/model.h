// Model: what the engine drives — one forward step over a batch of sequences (StepBatch) with
// their caches, and the hooks around it: expert load counters, calibration (router logits in,
// router biases out) and expert placement. A structure of model (DecoderModel for pre-norm
// decoders) implements Forward; everything else is shared here over the MoE layers it
// registers. Loaded by LoadModel (models/registry.h). Not thread-safe: one step at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "kernels/device_buffer.h"
#include "models/expert_placement.h"
#include "models/kv_cache.h"
#include "models/layers/layer.h"
#include "models/layers/moe_block.h"
#include "models/layers/step_context.h"
#include "models/loader/model_config.h"
#include "models/loader/weight_store.h"
#include "models/placed_experts.h"
#include "models/step_batch.h"
#include "models/step_profile.h"

namespace ls {

class Model {
 public:
  virtual ~Model() = default;
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  Backend* backend() const { return backend_; }
  size_t weight_bytes() const { return store_->total_bytes(); }
  // Checkpoint bytes the layers bound at load: under tensor parallelism, this rank's parts of the
  // split weights and the whole of the rest.
  int64_t checkpoint_bytes_bound() const { return checkpoint_bytes_bound_; }
  // Checkpoint bytes of all the routed experts as bound (a shapes-only model, or experts left on the
  // host; prepared experts are counted in the backend's form).
  int64_t routed_expert_bytes() const;
  // Backend memory holding the weights as the ops read them (packed, converted), placed experts aside.
  size_t prepared_weight_bytes() const { return weight_storage_.capacity(); }
  // GEMM weights the backend prepared for int8 activations (their input rows rounded to int8), out
  // of the GEMM weights it prepared (routed experts left on the host aside).
  int64_t int8_activation_weights() const { return int8_activation_weights_; }
  int64_t gemm_weights() const { return gemm_weights_; }
  const WeightStore& weight_store() const { return *store_; }
  // The checkpoint's floating-point type (that of its embedding table).
  virtual DType dtype() const = 0;
  // What each layer keeps in the KV cache per token.
  virtual std::vector<KvLayerSpec> kv_layout() const = 0;

  // Runs one step. `logits` receives batch.num_logit_rows() rows in sequence order (all new tokens
  // of a sequence when all_logits, else its last token): vocab_size floats each, or a greedy
  // sequence's records (StepSequence::greedy), batch.num_logit_floats(vocab_size) floats in all.
  // The caller guarantees block tables cover every position written.
  virtual absl::Status Forward(const StepBatch& batch, KvCache& cache, std::vector<float>* logits) = 0;
  // One sequence alone from position 0, with a KV cache of its own: logits of its last token, or
  // of every token when all_logits ([len, vocab]). For evaluation, calibration and benchmarks.
  absl::Status ForwardSequence(const std::vector<int32_t>& ids, bool all_logits, std::vector<float>* logits);

  // Tokens routed to each expert since the last reset: [num_hidden_layers * num_experts].
  const std::vector<int64_t>& expert_token_counts() const { return experts_.tokens; }
  void ResetExpertTokenCounts() { std::fill(experts_.tokens.begin(), experts_.tokens.end(), 0); }

  // Calibration hooks. While a sink is set, every MoE layer appends its router logits
  // ([T, N] row-major) to (*sink)[layer]. Biases of a MoE layer can be replaced.
  void CaptureRouterLogits(std::vector<std::vector<float>>* sink);
  const std::vector<float>& router_bias(int32_t layer) const { return moe_blocks_[layer]->router_bias(); }
  // The checkpoint name of a MoE layer's selection-bias tensor (where calibration writes it).
  const std::string& router_bias_name(int32_t layer) const { return moe_blocks_[layer]->router_bias_name(); }
  absl::Status SetRouterBias(int32_t layer, std::vector<float> bias);

  // While set, every step adds its time per part of the layer to *profile (null: off).
  void SetProfile(StepProfile* profile) { profile_ = profile; }

  // Whether every token runs the whole last layer. Off (the default), the last layer's FFN runs
  // over the rows whose logits the step asks for and no others (the others' outputs are never
  // read): a prompt's tokens before its last are not routed there, and the expert counts of that
  // layer leave them out. On where routing over every token is what is measured (calibration);
  // every row runs anyway while hidden rows or router logits are captured, and under tensor
  // parallelism.
  void RouteEveryToken(bool on) { every_token_ = on; }

  // While set, every Forward also writes each new token's final hidden row, after the final norm,
  // to *sink ([T, d] in token order): what a multi-token-prediction layer reads. Null: off.
  void CaptureHidden(std::vector<float>* sink) { hidden_sink_ = sink; }
  // This model is a checkpoint's multi-token-prediction layer (LoadOptions::next_token_layer).
  bool is_next_token_layer() const { return config_.next_token_layer >= 0; }

  // Expert parallelism: with placed experts, every MoE layer dispatches its routed rows to the
  // devices holding their experts (split over replicas), each device computes its share with its
  // own weight copies, and the results are combined — numerically the same as without. Set
  // between steps; null turns it off. BuildPlacedExperts may run on another thread; in a rank
  // group it copies only this rank's devices' experts.
  absl::StatusOr<std::shared_ptr<const PlacedExperts>> BuildPlacedExperts(
      const std::vector<std::pair<int32_t, ExpertPlacement>>& placements) const;
  // The same built a slot at a time (PlacedExpertsBuild), for a switch spread over several steps.
  absl::StatusOr<std::unique_ptr<PlacedExpertsBuild>> StartPlacedExpertsBuild(
      const std::vector<std::pair<int32_t, ExpertPlacement>>& placements) const;
  void SetPlacedExperts(std::shared_ptr<const PlacedExperts> placed);
  const std::shared_ptr<const PlacedExperts>& placed_experts() const { return experts_.placed; }
  // Routed rows computed per (layer, device) since the last reset: [layers * devices].
  const std::vector<int64_t>& device_row_counts() const { return experts_.device_rows; }
  void ResetDeviceRowCounts() { std::fill(experts_.device_rows.begin(), experts_.device_rows.end(), 0); }

  // Makes this process one rank of a group of processes that serve the model together (every
  // rank calls it at start-up, before any step): the placed devices split over the ranks, each
  // step runs on every rank at once over its own sequences, and the MoE layers exchange rows over
  // `ranks` (which outlives the model) and the backend's transport. Errors name the backend's.
  absl::Status JoinRankGroup(RankTransport* ranks);
  // Makes this process one rank of the tensor-parallel group `group` (which outlives the model;
  // its size and this rank's place in it are ModelConfig::tensor_parallel's): the ranks' parts of
  // every split sublayer are summed over it. Collective; errors name the backend's.
  absl::Status JoinTensorGroup(RankTransport* group);
  RankTransport* rank_group() const { return experts_.ranks; }
  // Adds expert counts that other ranks recorded ([layers * N] tokens, [layers * D] rows; sizes
  // as expert_token_counts() and device_row_counts(); the rows are ignored when they differ).
  void AddExpertCounts(const std::vector<int64_t>& tokens, const std::vector<int64_t>& device_rows);

 protected:
  Model(ModelConfig config, std::unique_ptr<WeightStore> store, Backend* backend);

  // Hands every weight `for_each` lists to the backend once (Backend::PrepareWeight), replacing
  // each tensor with the backend's view, after quantizing it when config_.online_quantization asks
  // (models/model.cc says which weights); host pages of copied weights are released. With
  // config_.routed_experts_on_host the routed experts keep their host views (the MoE blocks
  // registered in moe_blocks_ name them). An error when a quantized tensor is not a matrix weight.
  absl::Status PrepareWeights(const std::function<void(const WeightFn&)>& for_each);
  // Makes the batch's cache copies, then checks the batch against the cache and the vocabulary and
  // fills the token positions [T] and the attention sequences.
  absl::Status BeginStep(const StepBatch& batch, KvCache& cache, std::vector<int32_t>* positions,
                         std::vector<AttentionSeq>* seqs);
  // The token rows whose logits the batch asks for, ascending, when the last layer's FFN may run
  // over them alone: they are fewer than the step's tokens, nothing reads every row
  // (RouteEveryToken, CaptureHidden, CaptureRouterLogits), and the model is not split over a
  // tensor-parallel group. Otherwise false.
  bool LastLayerRows(const StepBatch& batch, const std::vector<AttentionSeq>& seqs, std::vector<int64_t>* rows) const;
  // Final norm and LM head over the rows of x[T, d] whose logits the batch asks for.
  void Logits(const StepBatch& batch, const std::vector<AttentionSeq>& seqs, const float* x, const Tensor& final_norm,
              const Tensor& lm_head, std::vector<float>* logits);
  // A StepContext for this step over the model's buffers and expert state.
  StepContext Context(int64_t num_tokens, const std::vector<int32_t>& positions, const std::vector<AttentionSeq>& seqs,
                      KvCache& cache);

  ModelConfig config_;
  std::unique_ptr<WeightStore> store_;
  Backend* backend_;
  DeviceBuffer weight_storage_;    // the backend's prepared copies (packed GEMM weights on the CPU)
  std::vector<MoeBlock*> moe_blocks_;  // [layers] the MoE block of each layer, null elsewhere
  ExpertState experts_;
  StepBuffers buf_;
  StepProfile* profile_ = nullptr;
  int64_t checkpoint_bytes_bound_ = 0;
  int64_t int8_activation_weights_ = 0, gemm_weights_ = 0;
  std::vector<float>* hidden_sink_ = nullptr;
  bool every_token_ = false;
  // Host staging of the head's results when some rows are greedy (kept so memory is reused).
  std::vector<int32_t> greedy_ids_;
  std::vector<float> greedy_logprob_, full_rows_;
  std::vector<int64_t> head_order_;  // host: a tensor-parallel head's gathered rows in logits order
};

}  // namespace ls
