// Engine's start-up: Create checks the configuration and sizes the KV cache, the recurrent state
// slots, the prefix cache's state snapshots and a draft model's cache out of one budget, builds the
// engine and starts its loop, whose first act is Warmup (the largest step, once).
#include <algorithm>
#include <future>

#include "absl/strings/str_cat.h"
#include "engine/device_memory_budget.h"
#include "engine/draft_model_proposer.h"
#include "engine/engine.h"
#include "engine/ngram_proposer.h"

namespace ls {
namespace {

// State snapshots per rank at most, whatever the budget: past a few thousand the hit rate no longer grows.
constexpr size_t kMaxSnapshotSlots = 4096;

}  // namespace

using Clock = std::chrono::steady_clock;

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(Model* model, const tok::Tokenizer* tokenizer,
                                                       EngineConfig config) {
  const ModelConfig& mc = model->config();
  if (config.block_size <= 0) return absl::InvalidArgumentError("block_size must be positive");
  if (config.max_model_len < 0)
    return absl::InvalidArgumentError(absl::StrCat("max_model_len must not be negative (0: the model's ",
                                                   mc.max_position_embeddings, "), got ", config.max_model_len));
  if (config.max_model_len > mc.max_position_embeddings)
    return absl::InvalidArgumentError(absl::StrCat("max_model_len ", config.max_model_len,
                                                   " exceeds the model's max_position_embeddings (",
                                                   mc.max_position_embeddings, ")"));
  auto kv_dtype = ChooseKvCacheDType(config.kv_cache_dtype, model->dtype(), *model->backend());
  if (!kv_dtype.ok()) return kv_dtype.status();
  config.kv_cache_dtype = *kv_dtype;
  if (config.scheduler.max_num_seqs < 1) return absl::InvalidArgumentError("max_num_seqs must be at least 1");
  if (config.gpu_memory_utilization != 0) {
    if (config.num_kv_blocks > 0)
      return absl::InvalidArgumentError("gpu_memory_utilization and num_kv_blocks both size the KV cache: give one");
    auto bytes = KvCacheBytesFromDeviceMemory(model, tokenizer, config);
    if (!bytes.ok()) return bytes.status();
    config.kv_cache_bytes = *bytes;
    config.gpu_memory_utilization = 0;
  }
  // Models with recurrent layers keep a state slot per running sequence, paid out of the same
  // budget first, then the prefix cache's state snapshots.
  const std::vector<KvLayerSpec> layout = model->kv_layout();
  const size_t slot_bytes = KvCache::BytesPerStateSlot(layout);
  const int32_t slots = slot_bytes > 0 ? config.scheduler.max_num_seqs : 0;
  if (config.state_snapshot_interval < 0 || config.state_snapshot_interval % config.block_size != 0)
    return absl::InvalidArgumentError(absl::StrCat("state_snapshot_interval must be a multiple of block_size (",
                                                   config.block_size, "), got ", config.state_snapshot_interval));
  SpeculativeConfig& speculative = config.speculative;
  if (speculative.num_speculative_tokens < 0 || speculative.num_speculative_tokens > 16 ||
      speculative.prompt_lookup_min < 1 || speculative.prompt_lookup_max < speculative.prompt_lookup_min)
    return absl::InvalidArgumentError(absl::StrCat(
        "speculative decoding: num_speculative_tokens must be in [0, 16] and 1 <= prompt_lookup_min <= "
        "prompt_lookup_max, got ",
        speculative.num_speculative_tokens, ", ", speculative.prompt_lookup_min, ", ", speculative.prompt_lookup_max));
  if (speculative.num_speculative_tokens == 0) speculative.draft_model = nullptr;
  // With recurrent layers, each running sequence's state is copied before a step that verifies a
  // draft (to one spare slot per running sequence), so that a rejection can take it back.
  const int32_t spare_slots = slots > 0 && speculative.num_speculative_tokens > 0 ? slots : 0;
  // A draft model's cache holds as many tokens as the target's, out of the same budget.
  size_t draft_block_bytes = 0;
  DType draft_kv_dtype = DType::kF32;
  if (speculative.draft_model) {
    auto dt = ChooseKvCacheDType(config.kv_cache_dtype, speculative.draft_model->dtype(),
                                 *speculative.draft_model->backend());
    if (!dt.ok()) return dt.status();
    draft_kv_dtype = *dt;
    draft_block_bytes = KvCache::BytesPerBlock(speculative.draft_model->kv_layout(), config.block_size, draft_kv_dtype);
  }
  int32_t snapshots = 0;
  if (slots > 0 && config.enable_prefix_caching) {
    const size_t budget =
        config.state_cache_bytes < 0 ? config.kv_cache_bytes / 4 : static_cast<size_t>(config.state_cache_bytes);
    snapshots = static_cast<int32_t>(std::min<size_t>(budget / slot_bytes, kMaxSnapshotSlots));
    if (snapshots == 0) config.enable_prefix_caching = false;  // not even one fits: the ready line says so
  }
  const size_t block_bytes = KvCache::BytesPerBlock(layout, config.block_size, *config.kv_cache_dtype);
  int32_t blocks = config.num_kv_blocks;
  if (blocks <= 0) {
    const size_t state_bytes = static_cast<size_t>(slots + spare_slots + snapshots) * slot_bytes;
    if (state_bytes >= config.kv_cache_bytes)
      return absl::InvalidArgumentError(
          absl::StrCat("KV cache too small: the recurrent state of max_num_seqs (", slots, ") sequences",
                       spare_slots > 0 ? " (twice, for speculative decoding)" : "", " and ", snapshots,
                       " prefix-cache snapshots alone needs ", (state_bytes + (1 << 20) - 1) >> 20, " MiB"));
    // A model whose every layer is recurrent keeps no per-token cache: its blocks are bookkeeping only.
    blocks = block_bytes == 0
                 ? static_cast<int32_t>(std::min<int64_t>(
                       (1 << 30) / config.block_size,
                       static_cast<int64_t>(slots) *
                           ((mc.max_position_embeddings + config.block_size - 1) / config.block_size)))
                 : static_cast<int32_t>((config.kv_cache_bytes - state_bytes) / (block_bytes + draft_block_bytes));
  }
  if (blocks < 2) return absl::InvalidArgumentError("KV cache too small: fewer than 2 blocks");
  if (config.scheduler.max_num_batched_tokens < 1)
    return absl::InvalidArgumentError("max_num_batched_tokens must be at least 1");
  if (tokenizer && tokenizer->vocab_size() > mc.vocab_size)
    return absl::InvalidArgumentError(absl::StrCat("tokenizer vocabulary (", tokenizer->vocab_size(),
                                                   ") is larger than the model's (", mc.vocab_size, ")"));
  std::unique_ptr<DraftProposer> proposer;
  if (speculative.draft_model) {
    auto p =
        DraftModelProposer::Create(speculative.draft_model, blocks, config.block_size, draft_kv_dtype, mc.vocab_size);
    if (!p.ok()) return p.status();
    proposer = std::move(*p);
  } else if (speculative.num_speculative_tokens > 0) {
    proposer = std::make_unique<NgramProposer>(speculative.prompt_lookup_min, speculative.prompt_lookup_max);
  }
  std::unique_ptr<Engine> engine(
      new Engine(model, tokenizer, config, blocks, slots, snapshots, spare_slots, std::move(proposer)));
  auto balancer = ExpertBalancer::Create(model, config.experts, &engine->metrics_, engine->group_);
  if (!balancer.ok()) return balancer.status();
  engine->balancer_ = std::move(*balancer);
  // The other ranks make their caches and install the placement before the first (warm-up) step.
  const RankCacheSpec spec{blocks, config.block_size, slots + snapshots + spare_slots, *config.kv_cache_dtype};
  if (absl::Status st = engine->group_->Start(spec, engine->balancer_->Placements()); !st.ok()) return st;
  engine->balancer_->UpdateRankMemory();
  // The warm-up runs on the loop thread, whose kernel scratch (thread-local) it is meant to size.
  std::promise<absl::Status> warmed;
  std::future<absl::Status> warm_result = warmed.get_future();
  engine->loop_ = std::thread([e = engine.get(), &warmed, warm = config.warmup] {
    absl::Status st = warm ? e->Warmup() : absl::OkStatus();
    const bool ok = st.ok();
    if (ok) e->UpdateGauges();        // per-layer counters sized in the snapshot before any reader sees it
    warmed.set_value(std::move(st));  // the last use of `warmed`: Create waits for it
    if (ok) e->Loop();
  });
  if (absl::Status st = warm_result.get(); !st.ok()) {
    engine->loop_.join();
    return st;
  }
  return engine;
}

absl::Status Engine::Warmup() {
  // The largest plan: max_num_batched_tokens tokens over up to max_num_seqs sequences, each
  // wanting logits, as far as the KV blocks and max_model_len allow. Dummy tokens (id 0) in
  // blocks that are all free now; nothing is recorded in the block manager.
  const int32_t bs = cache_.block_size();
  const int64_t tokens =
      std::min<int64_t>(config_.scheduler.max_num_batched_tokens, static_cast<int64_t>(cache_.num_blocks()) * bs);
  const int64_t seqs = std::max<int64_t>(1, std::min<int64_t>(config_.scheduler.max_num_seqs, tokens));
  const int64_t per_seq = std::min<int64_t>((tokens + seqs - 1) / seqs, max_model_len_);
  StepBatch batch;
  int32_t next_block = 0;
  for (int64_t left = tokens; left > 0 && static_cast<int64_t>(batch.seqs.size()) < seqs;) {
    const int32_t n = static_cast<int32_t>(std::min(left, per_seq));
    const int32_t blocks = (n + bs - 1) / bs;
    if (next_block + blocks > cache_.num_blocks()) break;
    StepSequence s;
    s.num_tokens = n;
    if (slots_.num_slots() > 0) s.state_slot = static_cast<int32_t>(batch.seqs.size());  // all free now
    for (int32_t b = 0; b < blocks; ++b) s.block_table.push_back(next_block++);
    batch.tokens.insert(batch.tokens.end(), n, 0);
    batch.seqs.push_back(std::move(s));
    left -= n;
  }
  if (batch.tokens.empty()) return absl::OkStatus();
  const auto t0 = Clock::now();
  // Every rank runs the largest step (each may be given that many tokens).
  const absl::Status st =
      group_->Step(std::vector<StepBatch>(group_->size(), batch), cache_, &logits_, /*hidden=*/nullptr);
  warmup_seconds_ = std::chrono::duration<double>(Clock::now() - t0).count();
  warmup_tokens_ = static_cast<int64_t>(batch.tokens.size());
  // The dummy step's routing is not load: the statistics start from zero.
  balancer_->ResetLoad();
  if (!st.ok())
    return absl::InternalError(absl::StrCat("warm-up step of ", warmup_tokens_, " tokens in ", batch.seqs.size(),
                                            " sequences failed: ", st.message()));
  if (proposer_)
    if (absl::Status ps = proposer_->Warmup(config_.scheduler.max_num_seqs, config_.speculative.num_speculative_tokens);
        !ps.ok())
      return absl::InternalError(absl::StrCat("warm-up of the speculative proposer failed: ", ps.message()));
  return absl::OkStatus();
}

Engine::Engine(Model* model, const tok::Tokenizer* tokenizer, EngineConfig config, int32_t num_blocks,
               int32_t num_state_slots, int32_t num_snapshot_slots, int32_t num_spare_slots,
               std::unique_ptr<DraftProposer> proposer)
    : model_(model),
      tokenizer_(tokenizer),
      config_(config),
      local_group_(model),
      group_(config.ranks ? config.ranks : &local_group_),
      max_model_len_(config.max_model_len > 0  // Create checked it is within the model's
                         ? config.max_model_len
                         : static_cast<int32_t>(model->config().max_position_embeddings)),
      cache_(model->backend(), model->kv_layout(), num_blocks, config.block_size, *config.kv_cache_dtype,
             num_state_slots + num_snapshot_slots + num_spare_slots),
      spare_slot_base_(num_spare_slots > 0 ? num_state_slots + num_snapshot_slots : -1),
      blocks_(num_blocks * group_->size(), config.block_size, config.enable_prefix_caching, group_->size(),
              /*track_branches=*/num_snapshot_slots > 0),
      slots_(num_state_slots * group_->size(), group_->size()),
      // Snapshot slots follow the running sequences' slots in each rank's cache.
      snapshots_(&blocks_, num_snapshot_slots, num_state_slots, group_->size(), config.state_snapshot_interval),
      proposer_(std::move(proposer)),
      scheduler_(config.scheduler, &blocks_, num_state_slots > 0 ? &slots_ : nullptr,
                 num_snapshot_slots > 0 ? &snapshots_ : nullptr),
      eos_ids_(model->config().eos_token_ids) {
  metrics_.Update([&](MetricsSnapshot& m) {
    m.kv_blocks_total = blocks_.num_blocks();
    m.state_slots_total = slots_.num_slots();
    m.snapshot_slots_total = num_snapshot_slots * group_->size();
    m.snapshot_slot_bytes = static_cast<int64_t>(KvCache::BytesPerStateSlot(model->kv_layout()));
    m.num_ranks = group_->size();
    if (config.speculative.num_speculative_tokens > 0) m.spec_method = config.speculative.method();
    m.kv_block_size = config.block_size;
    m.num_layers = model->config().num_hidden_layers;
    m.num_experts = model->config().moe.num_experts;
    for (int32_t l = 0; l < m.num_layers; ++l)
      if (model->config().is_moe_layer(l)) m.moe_layers.push_back(l);
  });
}

}  // namespace ls
