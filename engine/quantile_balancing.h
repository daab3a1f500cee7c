// Quantile Balancing: the histogram estimator of the MoE router's selection biases,
// as the reference trainer uses it — per token the bias each expert needs to be chosen, one
// fixed-range histogram per expert, the K/N quantile read off the cumulative counts with linear
// interpolation inside the bin, and an EMA step. The exact rules are in docs/quantile-balancing.md.
// Pure functions plus a histogram that adds across batches; no model, not thread-safe.
#pragma once

#include <cstdint>
#include <vector>

namespace ls {

struct HistogramSpec {
  int32_t num_bins = 1024;
  double lo = -1.5;
  double hi = 1.5;
  double bin_width() const { return (hi - lo) / num_bins; }
};

// r[t, e] = θ(t, e) − s[t, e]: θ is the (K+1)-th largest s + b of token t if e is in its top-K
// (ties to the lower index), else the K-th.                       scores [T, N] -> r [T, N]
void BiasThresholds(const float* scores, const float* bias, int64_t T, int32_t N, int32_t K, float* r);

class BiasHistogram {
 public:
  BiasHistogram(int32_t num_experts, HistogramSpec spec);
  // Counts r [T, N] into the per-expert bins (values outside the range go to the edge bins).
  void Add(const float* r, int64_t T);
  // b_q[e]: where expert e's cumulative count reaches K·T/N, interpolated inside the bin.
  std::vector<double> Quantile(int32_t K) const;
  const std::vector<int64_t>& counts() const { return counts_; }  // [N, B]

 private:
  int32_t n_;
  HistogramSpec spec_;
  std::vector<int64_t> counts_;
};

// One estimator step on a batch: returns b + η (b_q − b).
std::vector<float> QuantileBalancingUpdate(const float* scores, int64_t T, int32_t N, int32_t K,
                                           const std::vector<float>& bias, double eta, HistogramSpec spec);

// Router scores from logits, as the router computes them (sigmoid or softmax over N).
void RouterScores(const float* logits, int64_t T, int32_t N, bool sigmoid, float* scores);

}  // namespace ls
