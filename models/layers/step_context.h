// StepContext: what the layers of one forward step share — the backend, the step's tokens and
// attention sequences, the cache, reusable activation buffers, the expert statistics and the
// profile. Built by the model for each step; layers read it and write only its buffers and
// counters.
#pragma once

#include <cstdint>
#include <memory>
#include <typeindex>
#include <utility>
#include <vector>

#include "kernels/backend.h"
#include "kernels/device_buffer.h"
#include "kernels/ops.h"
#include "kernels/rank_transport.h"
#include "models/kv_cache.h"
#include "models/placed_experts.h"
#include "models/step_profile.h"

namespace ls {

// Activations reused across steps and layers (backend memory), each grown to the largest step:
// the residual stream and the feed-forward sublayers' buffers here, and each attention kind's
// own scratch (Scratch<GqaScratch>(), ...), which the layers of that kind share.
struct StepBuffers {
  explicit StepBuffers(Backend* backend)
      : x(backend),
        h(backend),
        gate(backend),
        up(backend),
        act(backend),
        ffn_out(backend),
        gate_logits(backend),
        router_logits(backend),
        topk_w(backend),
        topk_ids(backend),
        z(backend),
        c(backend),
        dz(backend),
        dy(backend),
        dids(backend),
        dw(backend),
        rows(backend),
        partial(backend),
        backend_(backend) {}
  DeviceBuffer x;     // [T, d] the residual stream
  DeviceBuffer h;     // [T, d] the normed input of a sublayer
  DeviceBuffer gate, up, act;         // GLU intermediates
  DeviceBuffer ffn_out, gate_logits;  // a gated shared expert's output and its gate
  DeviceBuffer router_logits, topk_w, topk_ids, z, c;  // MoE
  DeviceBuffer dz, dy, dids, dw, rows;                 // expert-parallel dispatch and combine
  int64_t unit_rows = 0;                               // leading values of dw that hold 1.0
  DeviceBuffer partial;  // [T, d] a tensor-parallel rank's part of a sublayer's output, before the sum

  // The scratch of one layer kind, made on first use: a struct of DeviceBuffers constructible
  // from the Backend*.
  template <typename T>
  T& Scratch() {
    for (auto& [type, scratch] : scratch_)
      if (type == std::type_index(typeid(T))) return *static_cast<T*>(scratch.get());
    scratch_.emplace_back(std::type_index(typeid(T)), std::make_shared<T>(backend_));
    return *static_cast<T*>(scratch_.back().second.get());
  }

 private:
  Backend* backend_;
  std::vector<std::pair<std::type_index, std::shared_ptr<void>>> scratch_;
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
