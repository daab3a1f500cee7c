// Model: the hooks shared by every model structure, and the pieces of a step they share.
#include "models/model.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <optional>
#include <thread>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "kernels/thread_pool.h"
#include "models/loader/weight_binder.h"

namespace ls {

Model::Model(ModelConfig config, std::unique_ptr<WeightStore> store, Backend* backend)
    : config_(std::move(config)), store_(std::move(store)), backend_(backend), buf_(backend) {
  moe_blocks_.assign(config_.num_hidden_layers, nullptr);
  experts_.num_experts = config_.moe.num_experts;
  experts_.tokens.assign(static_cast<size_t>(config_.num_hidden_layers) * config_.moe.num_experts, 0);
}

absl::Status Model::ForwardSequence(const std::vector<int32_t>& ids, bool all_logits, std::vector<float>* logits) {
  constexpr int32_t kBlock = 16;
  const int32_t blocks = std::max<int32_t>(1, static_cast<int32_t>((ids.size() + kBlock - 1) / kBlock));
  KvCache cache(backend_, kv_layout(), blocks, kBlock, DType::kF32, /*num_state_slots=*/1);
  StepSequence s;
  s.state_slot = 0;
  s.num_tokens = static_cast<int32_t>(ids.size());
  s.all_logits = all_logits;
  for (int32_t i = 0; i < blocks; ++i) s.block_table.push_back(i);
  StepBatch b;
  b.tokens = ids;
  b.seqs = {std::move(s)};
  return Forward(b, cache, logits);
}

void Model::CaptureRouterLogits(std::vector<std::vector<float>>* sink) {
  if (sink) sink->resize(config_.num_hidden_layers);
  experts_.router_sink = sink;
}

absl::Status Model::SetRouterBias(int32_t layer, std::vector<float> bias) {
  if (layer < 0 || layer >= config_.num_hidden_layers || !moe_blocks_[layer])
    return absl::InvalidArgumentError(absl::StrCat("layer ", layer, " is not a MoE layer"));
  if (static_cast<int64_t>(bias.size()) != config_.moe.num_experts)
    return absl::InvalidArgumentError(
        absl::StrCat("bias has ", bias.size(), " values, expected ", config_.moe.num_experts));
  moe_blocks_[layer]->SetRouterBias(std::move(bias), backend_);
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<const PlacedExperts>> Model::BuildPlacedExperts(
    const std::vector<std::pair<int32_t, ExpertPlacement>>& placements) const {
  auto build = StartPlacedExpertsBuild(placements);
  if (!build.ok()) return build.status();
  while (!(*build)->done()) (*build)->CopyNextSlot();
  return (*build)->Finish();
}

absl::StatusOr<std::unique_ptr<PlacedExpertsBuild>> Model::StartPlacedExpertsBuild(
    const std::vector<std::pair<int32_t, ExpertPlacement>>& placements) const {
  std::vector<const ExpertWeights*> experts(config_.num_hidden_layers, nullptr);
  for (int32_t l = 0; l < config_.num_hidden_layers; ++l)
    if (moe_blocks_[l]) experts[l] = &moe_blocks_[l]->experts();
  const RankTransport* ranks = experts_.ranks;
  return PlacedExpertsBuild::Start(experts, backend_, placements, ranks ? ranks->rank() : 0, ranks ? ranks->size() : 1,
                                   /*prepare=*/config_.routed_experts_on_host);
}

absl::Status Model::JoinRankGroup(RankTransport* ranks) {
  std::string error;
  if (!backend_->JoinRankGroup(ranks, &error))
    return absl::UnavailableError(
        absl::StrCat("the ", std::string(backend_->name()), " backend cannot join the rank group: ", error));
  experts_.ranks = ranks;
  return absl::OkStatus();
}

absl::Status Model::JoinTensorGroup(RankTransport* group) {
  const TensorParallel& tp = config_.tensor_parallel;
  if (!group || group->size() != tp.size || group->rank() != tp.rank)
    return absl::InvalidArgumentError(absl::StrCat("the model was loaded as tensor-parallel rank ", tp.rank, " of ",
                                                   tp.size, " but joins rank ", group ? group->rank() : 0, " of ",
                                                   group ? group->size() : 1));
  std::string error;
  if (!backend_->JoinTensorGroup(group, &error))
    return absl::UnavailableError(
        absl::StrCat("the ", std::string(backend_->name()), " backend cannot join the tensor-parallel group: ", error));
  return absl::OkStatus();
}

int64_t Model::routed_expert_bytes() const {
  int64_t n = 0;
  for (const MoeBlock* moe : moe_blocks_)
    if (moe)
      for (const auto* list : {&moe->experts().gate, &moe->experts().up, &moe->experts().down})
        for (const Tensor& t : *list) n += CheckpointBytes(t);
  return n;
}

void Model::AddExpertCounts(const std::vector<int64_t>& tokens, const std::vector<int64_t>& device_rows) {
  for (size_t i = 0; i < tokens.size() && i < experts_.tokens.size(); ++i) experts_.tokens[i] += tokens[i];
  if (device_rows.size() == experts_.device_rows.size())
    for (size_t i = 0; i < device_rows.size(); ++i) experts_.device_rows[i] += device_rows[i];
}

void Model::SetPlacedExperts(std::shared_ptr<const PlacedExperts> placed) {
  experts_.placed = std::move(placed);
  experts_.device_rows.assign(
      experts_.placed ? static_cast<size_t>(config_.num_hidden_layers) * experts_.placed->num_devices() : 0, 0);
}

namespace {

// The step row of a sequence's first logits row: the rows whose logits it asks for are its last.
int64_t FirstLogitRow(const AttentionSeq& seq, const StepSequence& want) {
  return seq.token_offset + seq.num_tokens - StepBatch::logit_rows(want);
}

// The online quantization a weight gets: GEMM weights the chosen scheme, the LM head 8 bits (int8
// under int4, as llama.cpp's 4-bit types keep the output matrix wider), routers and gates none.
QuantScheme OnlineScheme(QuantScheme online, WeightUse use) {
  switch (use) {
    case WeightUse::kMatmul:
    case WeightUse::kMatmulExpert:
      return online;
    case WeightUse::kMatmulHead:
      if (online == QuantScheme::kInt4) return QuantScheme::kInt8;
      return online == QuantScheme::kInt4A8 ? QuantScheme::kInt8A8 : online;
    default:
      return QuantScheme::kNone;
  }
}

// The head's greedy reduction: the rows' argmax ids and log-probabilities.
struct GreedyScratch {
  explicit GreedyScratch(Backend* backend) : ids(backend), logprob(backend) {}
  DeviceBuffer ids, logprob;
};

}  // namespace

absl::Status Model::PrepareWeights(const std::function<void(const WeightFn&)>& for_each) {
  const QuantScheme online = config_.online_quantization;
  // The routed experts a rank of a group leaves on the host: placed copies are made from them.
  std::unordered_set<const Tensor*> on_host;
  if (config_.routed_experts_on_host)
    for (const MoeBlock* moe : moe_blocks_)
      if (moe)
        for (const auto* list : {&moe->experts().gate, &moe->experts().up, &moe->experts().down})
          for (const Tensor& t : *list) on_host.insert(&t);
  size_t total = 0;
  absl::Status status;
  for_each([&](Tensor& t, WeightUse use) {
    if (t.empty() || on_host.count(&t)) return;
    if (t.quantized() && !IsMatmul(use) && status.ok())
      status = absl::InvalidArgumentError(absl::StrCat(
          store_->dir(), ": a quantized ", std::string(DTypeName(t.dtype)), " tensor [", t.rows, ", ", t.cols,
          "] is read as a norm, embedding or bias weight; only matrix weights of the GEMMs may be quantized"));
    total += Align64(backend_->PreparedWeightBytes(QuantizedLayout(t, OnlineScheme(online, use)), use));
  });
  if (!status.ok()) return status;
  weight_storage_ = DeviceBuffer(backend_, std::max<size_t>(total, 64));
  auto* next = static_cast<unsigned char*>(weight_storage_.data());
  std::vector<Tensor> copied;
  QuantizedStorage scratch;  // one weight's quantized copy at a time, until the backend has its own
  // Online quantization runs on the backend's host threads, or on threads of its own for a device
  // backend (one per hardware thread: nothing else runs during the load).
  std::optional<ThreadPool> own_threads;
  ThreadPool* threads = backend_->HostThreads();
  if (!threads && online != QuantScheme::kNone)
    threads = &own_threads.emplace(static_cast<int>(std::max(1u, std::thread::hardware_concurrency())));
  for_each([&](Tensor& t, WeightUse use) {
    if (t.empty() || on_host.count(&t)) return;
    const QuantScheme scheme = OnlineScheme(online, use);
    const size_t bytes = backend_->PreparedWeightBytes(QuantizedLayout(t, scheme), use);
    if (bytes && IsMatmul(use)) copied.push_back(t);
    if (bytes && Quantizable(t, scheme)) t = Quantize(t, scheme, &scratch, threads);
    t = backend_->PrepareWeight(t, use, bytes ? next : nullptr);
    next += Align64(bytes);
    if (IsMatmul(use)) {
      ++gemm_weights_;
      int8_activation_weights_ += t.quant.int8_activations;
    }
  });
  // The backend reads its own copies of these: their mapped file pages need not stay resident
  // (otherwise a packed model would hold its GEMM weights twice).
  for (const Tensor& t : copied) WeightStore::ReleaseResidentPages(t);
  return absl::OkStatus();
}

absl::Status Model::BeginStep(const StepBatch& batch, KvCache& cache, std::vector<int32_t>* positions,
                              std::vector<AttentionSeq>* seqs) {
  if (config_.shapes_only)
    return absl::FailedPreconditionError("this model was loaded from its checkpoint's shapes only and cannot run");
  backend_->BeginStep();
  // The copies come first whatever else the batch holds: the engine's bookkeeping already counts them made.
  for (const CacheCopy& c : batch.copies)
    if (absl::Status st = cache.Copy(c); !st.ok()) return st;
  const int64_t T = static_cast<int64_t>(batch.tokens.size());
  int64_t counted = 0;
  for (const auto& s : batch.seqs) counted += s.num_tokens;
  if (counted != T) return absl::InvalidArgumentError("StepBatch: sequence token counts do not add up to tokens");
  for (int32_t id : batch.tokens)
    if (id < 0 || id >= config_.vocab_size)
      return absl::InvalidArgumentError(absl::StrCat("token id ", id, " out of range"));
  bool needs_state = false;
  for (int32_t l = 0; l < cache.num_layers(); ++l) needs_state |= cache.spec(l).state_floats > 0;
  if (needs_state && cache.num_state_slots() == 0)
    return absl::InvalidArgumentError("the cache has no state slots for this model's recurrent layers");
  positions->resize(T);
  seqs->clear();
  int32_t offset = 0;
  for (const auto& s : batch.seqs) {
    const int64_t needed =
        (static_cast<int64_t>(s.start_pos) + s.num_tokens + cache.block_size() - 1) / cache.block_size();
    if (static_cast<int64_t>(s.block_table.size()) < needed)
      return absl::InvalidArgumentError("StepBatch: block table too short for the sequence");
    for (int32_t b : s.block_table)
      if (b < 0 || b >= cache.num_blocks()) return absl::InvalidArgumentError("StepBatch: block id out of range");
    for (int32_t i = 0; i < s.num_tokens; ++i) (*positions)[offset + i] = s.start_pos + i;
    if (needs_state && (s.state_slot < 0 || s.state_slot >= cache.num_state_slots()))
      return absl::InvalidArgumentError("StepBatch: state slot out of range");
    seqs->push_back({offset, s.num_tokens, s.start_pos, s.block_table.data(),
                     static_cast<int32_t>(s.block_table.size()), s.state_slot});
    offset += s.num_tokens;
  }
  return absl::OkStatus();
}

StepContext Model::Context(int64_t num_tokens, const std::vector<int32_t>& positions,
                           const std::vector<AttentionSeq>& seqs, KvCache& cache) {
  StepContext ctx;
  ctx.backend = backend_;
  ctx.num_tokens = num_tokens;
  ctx.positions = positions.data();
  ctx.seqs = &seqs;
  ctx.cache = &cache;
  ctx.buf = &buf_;
  ctx.experts = &experts_;
  ctx.profile = profile_;
  return ctx;
}

bool Model::LastLayerRows(const StepBatch& batch, const std::vector<AttentionSeq>& seqs,
                          std::vector<int64_t>* rows) const {
  // A tensor-parallel group's ranks must split the same rows, and only the leader may capture.
  if (every_token_ || hidden_sink_ || experts_.router_sink || config_.tensor_parallel.on()) return false;
  rows->clear();
  for (size_t i = 0; i < seqs.size(); ++i)
    for (int64_t r = FirstLogitRow(seqs[i], batch.seqs[i]); r < seqs[i].token_offset + seqs[i].num_tokens; ++r)
      rows->push_back(r);
  std::sort(rows->begin(), rows->end());
  return static_cast<int64_t>(rows->size()) < static_cast<int64_t>(batch.tokens.size());
}

void Model::Logits(const StepBatch& batch, const std::vector<AttentionSeq>& seqs, const float* x,
                   const Tensor& final_norm, const Tensor& lm_head, std::vector<float>* logits) {
  PartTimer timer(profile_, StepPart::kLmHead);
  const int64_t d = config_.hidden_size, V = config_.vocab_size;
  // Token rows whose logits were asked for, the full rows and the greedy ones (reduced on the
  // backend), each with where its floats go in *logits (sequence order).
  std::vector<int64_t> wanted, at, greedy_rows, greedy_at;
  std::vector<bool> greedy_lp;  // per greedy row: its sequence asked for the log-probability
  int64_t floats = 0;
  for (size_t i = 0; i < seqs.size(); ++i) {
    const StepSequence& want = batch.seqs[i];
    const int64_t n = StepBatch::logit_rows(want), width = StepBatch::logit_row_floats(want, V);
    const int64_t first = FirstLogitRow(seqs[i], want);
    for (int64_t j = 0; j < n; ++j) {
      (want.greedy ? greedy_rows : wanted).push_back(first + j);
      (want.greedy ? greedy_at : at).push_back(floats + j * width);
      if (want.greedy) greedy_lp.push_back(want.greedy_logprob);
    }
    floats += n * width;
  }
  const int64_t num_full = static_cast<int64_t>(wanted.size());
  wanted.insert(wanted.end(), greedy_rows.begin(), greedy_rows.end());  // the head's rows: full, then greedy
  const int64_t rows = static_cast<int64_t>(wanted.size()), num_greedy = rows - num_full;
  // Captured, every row is normed once here and the head's rows are gathered from them.
  bool normed = false;
  if (hidden_sink_) {
    const int64_t T = static_cast<int64_t>(batch.tokens.size());
    hidden_sink_->resize(static_cast<size_t>(T * d));
    if (T > 0) {  // a rank with no sequence this step runs an empty batch
      float* all = buf_.ffn_out.as<float>(T * d);
      backend_->RmsNorm(x, T, final_norm, config_.rms_norm_eps, all);
      backend_->CopyToHost(hidden_sink_->data(), all, hidden_sink_->size() * sizeof(float));
      x = all;
      normed = true;
    }
  }
  logits->resize(static_cast<size_t>(floats));
  if (rows == 0) {
    backend_->Synchronize();  // the step's expert counts are in place when it returns
    return;
  }
  float* sel = buf_.h.as<float>(rows * d);
  backend_->GatherRows(x, wanted.data(), rows, d, sel);
  if (!normed) backend_->RmsNorm(sel, rows, final_norm, config_.rms_norm_eps, sel);
  float* out = buf_.act.as<float>(rows * V);
  if (!config_.tensor_parallel.on()) {
    backend_->Gemm(sel, rows, lm_head, out, false);
  } else {
    // Each rank's vocabulary rows give its columns of the logits; gathered rank by rank
    // ([ranks][rows][V/ranks]), then put back in row order.
    const int32_t parts = config_.tensor_parallel.size;
    const int64_t cols = lm_head.rows;
    float* part = buf_.gate.as<float>(rows * cols);
    float* gathered = buf_.up.as<float>(rows * V);
    backend_->Gemm(sel, rows, lm_head, part, false);
    backend_->AllGather(part, rows * cols, gathered);
    head_order_.resize(static_cast<size_t>(rows * parts));
    for (int64_t r = 0; r < rows; ++r)
      for (int32_t p = 0; p < parts; ++p) head_order_[r * parts + p] = p * rows + r;
    backend_->GatherRows(gathered, head_order_.data(), rows * parts, cols, out);
  }
  if (num_greedy == 0) {  // every row full: they are *logits as they stand
    backend_->CopyToHost(logits->data(), out, logits->size() * sizeof(float));
    return;
  }
  GreedyScratch& g = buf_.Scratch<GreedyScratch>();
  int32_t* ids = g.ids.as<int32_t>(num_greedy);
  const bool any_logprob = std::find(greedy_lp.begin(), greedy_lp.end(), true) != greedy_lp.end();
  float* logprob = any_logprob ? g.logprob.as<float>(num_greedy) : nullptr;
  backend_->ArgmaxRows(out + num_full * V, num_greedy, V, ids, logprob);
  greedy_ids_.resize(num_greedy);
  greedy_logprob_.resize(num_greedy);
  backend_->CopyToHost(greedy_ids_.data(), ids, num_greedy * sizeof(int32_t));
  if (logprob) backend_->CopyToHost(greedy_logprob_.data(), logprob, num_greedy * sizeof(float));
  for (int64_t r = 0; r < num_greedy; ++r) {
    float* record = logits->data() + greedy_at[r];
    record[0] = static_cast<float>(greedy_ids_[r]);
    record[1] = greedy_lp[r] ? greedy_logprob_[r] : std::numeric_limits<float>::quiet_NaN();
  }
  if (num_full == 0) return;
  full_rows_.resize(static_cast<size_t>(num_full * V));
  backend_->CopyToHost(full_rows_.data(), out, full_rows_.size() * sizeof(float));
  for (int64_t r = 0; r < num_full; ++r)
    std::memcpy(logits->data() + at[r], full_rows_.data() + r * V, static_cast<size_t>(V) * sizeof(float));
}

}  // namespace ls
