// Quantile Balancing estimator.
#include "engine/quantile_balancing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace ls {

void BiasThresholds(const float* scores, const float* bias, int64_t T, int32_t N, int32_t K, float* r) {
  std::vector<int32_t> order(N);
  std::vector<float> v(N);
  std::vector<bool> in_top(N);
  for (int64_t t = 0; t < T; ++t) {
    const float* s = scores + t * N;
    for (int32_t e = 0; e < N; ++e) v[e] = s[e] + bias[e];
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return v[a] > v[b]; });
    const float theta_in = v[order[std::min(K, N - 1)]];  // (K+1)-th value (K-th when K == N)
    const float theta_out = v[order[K - 1]];              // K-th value
    std::fill(in_top.begin(), in_top.end(), false);
    for (int32_t i = 0; i < K; ++i) in_top[order[i]] = true;
    for (int32_t e = 0; e < N; ++e) r[t * N + e] = (in_top[e] ? theta_in : theta_out) - s[e];
  }
}

BiasHistogram::BiasHistogram(int32_t num_experts, HistogramSpec spec)
    : n_(num_experts), spec_(spec), counts_(static_cast<size_t>(num_experts) * spec.num_bins, 0) {}

void BiasHistogram::Add(const float* r, int64_t T) {
  const double w = spec_.bin_width();
  for (int64_t t = 0; t < T; ++t) {
    for (int32_t e = 0; e < n_; ++e) {
      double j = std::floor((static_cast<double>(r[t * n_ + e]) - spec_.lo) / w);
      j = std::clamp(j, 0.0, static_cast<double>(spec_.num_bins - 1));
      ++counts_[static_cast<size_t>(e) * spec_.num_bins + static_cast<int64_t>(j)];
    }
  }
}

std::vector<double> BiasHistogram::Quantile(int32_t K) const {
  const int32_t B = spec_.num_bins;
  const double w = spec_.bin_width();
  std::vector<double> out(n_);
  for (int32_t e = 0; e < n_; ++e) {
    const int64_t* c = counts_.data() + static_cast<size_t>(e) * B;
    const int64_t total = std::accumulate(c, c + B, int64_t{0});
    const double target = static_cast<double>(K * total) / n_;  // L = K·T/N
    int64_t cum = 0;
    int32_t j = 0;
    for (; j < B; ++j) {
      if (static_cast<double>(cum + c[j]) >= target) break;
      cum += c[j];
    }
    j = std::min(j, B - 1);
    const double in_bin = std::max<double>(1.0, static_cast<double>(c[j]));
    out[e] = spec_.lo + (j + (target - static_cast<double>(cum)) / in_bin) * w;
  }
  return out;
}

std::vector<float> QuantileBalancingUpdate(const float* scores, int64_t T, int32_t N, int32_t K,
                                           const std::vector<float>& bias, double eta, HistogramSpec spec) {
  std::vector<float> r(static_cast<size_t>(T) * N);
  BiasThresholds(scores, bias.data(), T, N, K, r.data());
  BiasHistogram h(N, spec);
  h.Add(r.data(), T);
  const std::vector<double> q = h.Quantile(K);
  std::vector<float> out(N);
  for (int32_t e = 0; e < N; ++e) out[e] = static_cast<float>(bias[e] + eta * (q[e] - bias[e]));
  return out;
}

void RouterScores(const float* logits, int64_t T, int32_t N, bool sigmoid, float* scores) {
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * N;
    float* s = scores + t * N;
    if (sigmoid) {
      for (int32_t e = 0; e < N; ++e) s[e] = 1.f / (1.f + std::exp(-l[e]));
    } else {
      const float mx = *std::max_element(l, l + N);
      float sum = 0.f;
      for (int32_t e = 0; e < N; ++e) sum += (s[e] = std::exp(l[e] - mx));
      for (int32_t e = 0; e < N; ++e) s[e] /= sum;
    }
  }
}

}  // namespace ls
