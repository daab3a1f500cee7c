// LoadModel: the one entry point from a model directory to a runnable Model. It reads
// config.json, picks the family from architectures[0] (or model_type), opens the weights and
// builds the family's model on the backend. Unsupported architectures, keys and tensors are
// errors that name them.
#pragma once

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "kernels/backend.h"
#include "models/model.h"

namespace ls {

struct LoadOptions {
  // Online quantization of a float checkpoint's GEMM weights (--quantization); an error on a
  // checkpoint that is quantized already.
  QuantScheme quantization = QuantScheme::kNone;
  // Keep the routed experts in host memory until an expert placement copies this process's share
  // (ModelConfig::routed_experts_on_host): for the ranks of a group, each of which holds only its
  // devices' experts. Such a model serves with a placement only.
  bool routed_experts_on_host = false;
  // Load the checkpoint's first multi-token-prediction layer alone, as a one-layer model that
  // reads the target's final hidden rows (ModelConfig::next_token_layer): speculative decoding's
  // MTP proposer. An error naming the directory when the checkpoint has none.
  bool next_token_layer = false;
  // This process's part of a tensor-parallel group (--tensor_parallel_size): it binds only its
  // part of every split weight. Errors name the config key a group size does not divide, and the
  // layer kinds not split yet.
  TensorParallel tensor_parallel = {};
  // Read only the checkpoint's headers (a shapes-only checkpoint serves): every tensor binds as
  // zeros and none is prepared, so the model counts its bytes (checkpoint_bytes_bound,
  // routed_expert_bytes) but cannot run a step. For memory plans of models too large for this host.
  bool shapes_only = false;
};

absl::StatusOr<std::unique_ptr<Model>> LoadModel(const std::string& model_dir, Backend* backend,
                                                 const LoadOptions& options = {});

// Whether a model loaded on a backend with `activation_dtype` (BackendOptions, the
// --activation_dtype flag) runs as asked: int8 activations apply to int8 and int4 GEMM weights
// only, so a model with none of them is refused, naming how to get some, rather than run with
// float32 activations unannounced. Any other value is fine.
absl::Status CheckActivationDtype(const Model& model, const std::string& activation_dtype);

// Parses a --quantization value: none, int8, fp8, int4, w8a8 or w4a8.
absl::StatusOr<QuantScheme> ParseQuantScheme(const std::string& name);
const char* QuantSchemeName(QuantScheme scheme);

}  // namespace ls
