// Binding checkpoint tensors to ModelWeights roles.
#include "models/model_weights.h"

#include "absl/strings/str_cat.h"

namespace ls {
namespace {

// Collects the first error so the binding code reads as a list of tensors.
class Binder {
 public:
  explicit Binder(const WeightStore& store) : store_(store) {}
  Tensor Get(const std::string& name, int64_t rows, int64_t cols) {
    if (!status_.ok()) return {};
    auto t = store_.Get(name, rows, cols);
    if (!t.ok()) {
      status_ = t.status();
      return {};
    }
    return *t;
  }
  GluWeights Glu(const std::string& prefix, int64_t width, int64_t in, int64_t out) {
    return {Get(prefix + "gate_proj.weight", width, in), Get(prefix + "up_proj.weight", width, in),
            Get(prefix + "down_proj.weight", out, width)};
  }
  const absl::Status& status() const { return status_; }

 private:
  const WeightStore& store_;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<ModelWeights> BindModelWeights(const ModelConfig& c, const WeightStore& store) {
  Binder b(store);
  ModelWeights w;
  const int64_t d = c.hidden_size, hd = c.head_dim, H = c.num_attention_heads, Hkv = c.num_key_value_heads;
  w.embed = b.Get("model.embed_tokens.weight", c.vocab_size, d);
  w.final_norm = b.Get("model.norm.weight", 0, d);
  w.lm_head = c.tie_word_embeddings ? w.embed : b.Get("lm_head.weight", c.vocab_size, d);
  w.layers.resize(c.num_hidden_layers);
  for (int32_t i = 0; i < c.num_hidden_layers && b.status().ok(); ++i) {
    LayerWeights& L = w.layers[i];
    const std::string p = absl::StrCat("model.layers.", i, ".");
    L.input_norm = b.Get(p + "input_layernorm.weight", 0, d);
    L.q = b.Get(p + "self_attn.q_proj.weight", H * hd, d);
    L.k = b.Get(p + "self_attn.k_proj.weight", Hkv * hd, d);
    L.v = b.Get(p + "self_attn.v_proj.weight", Hkv * hd, d);
    L.o = b.Get(p + "self_attn.o_proj.weight", d, H * hd);
    if (c.qk_norm) {
      L.q_norm = b.Get(p + "self_attn.q_norm.weight", 0, hd);
      L.k_norm = b.Get(p + "self_attn.k_norm.weight", 0, hd);
    }
    L.post_attention_norm = b.Get(p + "post_attention_layernorm.weight", 0, d);
    L.is_moe = c.is_moe_layer(i);
    if (!L.is_moe) {
      L.dense = b.Glu(p + "mlp.", c.intermediate_size, d, d);
      continue;
    }
    const int64_t N = c.n_routed_experts, f = c.moe_intermediate_size, wdt = c.expert_width();
    L.router = b.Get(p + "mlp.gate.weight", N, d);
    L.router_bias.assign(N, 0.f);
    const std::string bias_name = p + "mlp.gate.e_score_correction_bias";
    if (store.Has(bias_name)) {
      Tensor bias = b.Get(bias_name, 0, N);
      if (b.status().ok())
        for (int64_t e = 0; e < N; ++e) L.router_bias[e] = LoadAsF32(bias.data, bias.dtype, e);
    }
    if (c.moe_latent_size > 0) {
      L.latent_down = b.Get(p + "mlp.latent_down_proj.weight", wdt, d);
      L.latent_up = b.Get(p + "mlp.latent_up_proj.weight", d, wdt);
    }
    if (c.expert_output_norm) L.latent_norm = b.Get(p + "mlp.latent_norm.weight", 0, wdt);
    for (int64_t e = 0; e < N; ++e) {
      GluWeights g = b.Glu(absl::StrCat(p, "mlp.experts.", e, "."), f, wdt, wdt);
      L.expert_gate.push_back(g.gate);
      L.expert_up.push_back(g.up);
      L.expert_down.push_back(g.down);
    }
    L.has_shared = c.n_shared_experts > 0;
    if (L.has_shared) L.shared = b.Glu(p + "mlp.shared_experts.", c.shared_expert_intermediate_size, d, d);
  }
  if (!b.status().ok()) return b.status();
  return w;
}


namespace {

// Calls fn(tensor, use) for every tensor of the model.
template <typename Fn>
void ForEachTensor(ModelWeights& w, Fn&& fn) {
  auto glu = [&](GluWeights& g) {
    fn(g.gate, WeightUse::kMatmul);
    fn(g.up, WeightUse::kMatmul);
    fn(g.down, WeightUse::kMatmul);
  };
  fn(w.embed, WeightUse::kOther);
  fn(w.final_norm, WeightUse::kOther);
  fn(w.lm_head, WeightUse::kMatmul);
  for (LayerWeights& L : w.layers) {
    for (Tensor* t : {&L.input_norm, &L.q_norm, &L.k_norm, &L.post_attention_norm, &L.latent_norm,
                      &L.router_bias_view})
      fn(*t, WeightUse::kOther);
    for (Tensor* t : {&L.q, &L.k, &L.v, &L.o, &L.router, &L.latent_down, &L.latent_up}) fn(*t, WeightUse::kMatmul);
    glu(L.dense);
    glu(L.shared);
    for (auto* experts : {&L.expert_gate, &L.expert_up, &L.expert_down})
      for (Tensor& t : *experts) fn(t, WeightUse::kMatmul);
  }
}

size_t Aligned(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

ModelWeights PrepareModelWeights(const ModelWeights& host, Backend* backend, DeviceBuffer* storage,
                                 std::vector<Tensor>* copied) {
  ModelWeights out = host;
  for (LayerWeights& L : out.layers)
    L.router_bias_view = L.router_bias.empty() ? Tensor{}
                                               : Tensor{L.router_bias.data(), DType::kF32, 1,
                                                        static_cast<int64_t>(L.router_bias.size())};
  size_t total = 0;
  ForEachTensor(out, [&](Tensor& t, WeightUse use) {
    if (!t.empty()) total += Aligned(backend->PreparedWeightBytes(t, use));
  });
  *storage = DeviceBuffer(backend, std::max<size_t>(total, 64));
  auto* next = static_cast<unsigned char*>(storage->data());
  ForEachTensor(out, [&](Tensor& t, WeightUse use) {
    if (t.empty()) return;
    const size_t bytes = backend->PreparedWeightBytes(t, use);
    if (bytes && copied && use == WeightUse::kMatmul) copied->push_back(t);
    t = backend->PrepareWeight(t, use, bytes ? next : nullptr);
    next += Aligned(bytes);
  });
  return out;
}

void UpdateRouterBiasView(LayerWeights& layer, Backend* backend) {
  const Tensor host{layer.router_bias.data(), DType::kF32, 1, static_cast<int64_t>(layer.router_bias.size())};
  if (backend->PreparedWeightBytes(host, WeightUse::kOther) == 0) {
    layer.router_bias_view = host;
  } else {
    backend->CopyToDevice(const_cast<void*>(layer.router_bias_view.data), host.data, host.bytes());
  }
}

}  // namespace ls
