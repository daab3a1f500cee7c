// CPU MoE router: sigmoid/softmax scores over all experts, top-K of score + frozen bias (ties to
// the lower index) among the eligible experts (all, or those of the best groups with group-limited
// routing), weights from the unbiased scores, optionally normalised, then scaled.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/vector_math.h"

namespace ls::cpu {

void SelectTopK(const float* scores, const float* bias, int32_t n, int32_t k, int32_t* ids) {
  // Insertion into a short sorted list; a strictly greater key is needed to move ahead, so among
  // equal keys the lower index (seen first) stays in front.
  thread_local std::vector<float> best;
  best.resize(k);
  int32_t filled = 0;
  for (int32_t e = 0; e < n; ++e) {
    const float key = scores[e] + (bias ? bias[e] : 0.f);
    if (filled == k && !(key > best[k - 1])) continue;
    int32_t pos = filled < k ? filled++ : k - 1;
    while (pos > 0 && key > best[pos - 1]) {
      best[pos] = best[pos - 1];
      ids[pos] = ids[pos - 1];
      --pos;
    }
    best[pos] = key;
    ids[pos] = e;
  }
}

void GroupLimitedKeys(const float* scores, const float* bias, int32_t n, int32_t n_group, int32_t topk_group,
                      GroupScore rank, std::vector<float>* keys) {
  const int32_t size = n / n_group;
  keys->resize(n);
  for (int32_t e = 0; e < n; ++e) (*keys)[e] = scores[e] + (bias ? bias[e] : 0.f);
  // Each group's rank: the sum of its two largest keys, or its largest.
  thread_local std::vector<float> group_score;
  thread_local std::vector<int32_t> best_groups;
  group_score.resize(n_group);
  for (int32_t g = 0; g < n_group; ++g) {
    int32_t top[2];
    const int32_t k = rank == GroupScore::kTop2Sum ? 2 : 1;
    SelectTopK(keys->data() + g * size, nullptr, size, k, top);
    group_score[g] = (*keys)[g * size + top[0]] + (k == 2 ? (*keys)[g * size + top[1]] : 0.f);
  }
  best_groups.resize(topk_group);
  SelectTopK(group_score.data(), nullptr, n_group, topk_group, best_groups.data());
  thread_local std::vector<char> eligible;
  eligible.assign(n_group, 0);
  for (int32_t g : best_groups) eligible[g] = 1;
  for (int32_t e = 0; e < n; ++e)
    if (!eligible[e / size]) (*keys)[e] = -std::numeric_limits<float>::infinity();
}

void Router(ThreadPool& pool, const RouterParams& p) {
  const int32_t n = p.num_experts, k = p.top_k;
  auto token = [&](int64_t t) {
    const float* logits = p.logits + t * n;
    thread_local std::vector<float> s;
    s.resize(n);
    if (p.scoring == ScoringFunc::kSigmoid) {
      SigmoidRow(logits, s.data(), n);
    } else {
      float mx = logits[0];
      for (int32_t e = 1; e < n; ++e) mx = std::max(mx, logits[e]);
      const float sum = ExpRow(logits, mx, s.data(), n);
      for (int32_t e = 0; e < n; ++e) s[e] /= sum;
    }
    int32_t* ids = p.topk_ids + t * k;
    float* w = p.topk_weights + t * k;
    if (p.n_group > 1) {
      thread_local std::vector<float> keys;
      GroupLimitedKeys(s.data(), p.bias, n, p.n_group, p.topk_group, p.group_score, &keys);
      SelectTopK(keys.data(), nullptr, n, k, ids);
    } else {
      SelectTopK(s.data(), p.bias, n, k, ids);
    }
    float sum = 0.f;
    for (int32_t j = 0; j < k; ++j) sum += (w[j] = s[ids[j]]);
    const float scale = p.routed_scaling_factor / (p.norm_topk_prob && sum > 0.f ? sum : 1.f);
    for (int32_t j = 0; j < k; ++j) w[j] *= scale;
  };
  // A few nanoseconds per expert (an exponential each, then the selection).
  pool.ParallelForRanges(p.num_tokens, n, 2048, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) token(t);
  });
}

}  // namespace ls::cpu
