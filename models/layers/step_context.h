// StepContext: what the layers of one forward step share — the backend, the step's tokens and
// attention sequences, the cache, reusable activation buffers, the expert statistics and the
// profile. Built by the model for each step; layers read it and write only its buffers and
// counters.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/backend.h"
#include "kernels/device_buffer.h"
#include "kernels/ops.h"
#include "kernels/rank_transport.h"
#include "models/kv_cache.h"
#include "models/placed_experts.h"
#include "models/step_profile.h"

namespace ls {

// Activations reused across steps and layers (backend memory), each grown to the largest step.
struct StepBuffers {
  explicit StepBuffers(Backend* backend)
      : x(backend), h(backend), q(backend), k(backend), v(backend), attn(backend), gate(backend), up(backend),
        act(backend), ffn_out(backend), gate_logits(backend), router_logits(backend), topk_w(backend),
        topk_ids(backend), z(backend), c(backend), dz(backend), dy(backend), dids(backend), dw(backend),
        rows(backend), res_blocks(backend), res_mix(backend), res_other(backend) {}
  DeviceBuffer x;     // [T, d] the residual stream
  DeviceBuffer h;     // [T, d] the normed input of a sublayer
  DeviceBuffer q, k, v, attn;         // attention
  DeviceBuffer gate, up, act;         // GLU intermediates
  DeviceBuffer ffn_out, gate_logits;  // a gated shared expert's output and its gate
  DeviceBuffer router_logits, topk_w, topk_ids, z, c;  // MoE
  DeviceBuffer dz, dy, dids, dw, rows;                 // expert-parallel dispatch and combine
  int64_t unit_rows = 0;                               // leading values of dw that hold 1.0
  DeviceBuffer res_blocks, res_mix, res_other;         // attention residuals: blocks, a mix, a second stream
};

// Expert statistics and placement, shared by the model's MoE layers.
struct ExpertState {
  int32_t num_experts = 0;
  std::vector<int64_t> tokens;  // [layers * N] tokens routed to each expert since the last reset
  // While set, every MoE layer appends its router logits ([T, N]) to (*router_sink)[layer].
  std::vector<std::vector<float>>* router_sink = nullptr;
  std::shared_ptr<const PlacedExperts> placed;  // expert parallelism, or null
  std::vector<int64_t> device_rows;             // [layers * D] routed rows this process sent to each device
  // The group of processes the placed devices split over (null: this process holds them all).
  RankTransport* ranks = nullptr;
};

struct StepContext {
  Backend* backend = nullptr;
  int64_t num_tokens = 0;                        // T
  const int32_t* positions = nullptr;            // host [T]
  const std::vector<AttentionSeq>* seqs = nullptr;
  KvCache* cache = nullptr;
  StepBuffers* buf = nullptr;
  ExpertState* experts = nullptr;
  StepProfile* profile = nullptr;
};

}  // namespace ls
