// The two reductions of one row of logits that greedy decoding needs, shared by the sampler
// (engine/sampler.h) and the CPU backend's ArgmaxRows so that both give the same bits.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace ls {

// The first index holding the row's largest value; NaN never wins. -1 when no value is above
// −∞ (a row of NaN: the model's numbers broke, and no token may be made up for them).
inline int32_t ArgmaxRow(const float* row, int64_t n) {
  // The maximum over 16 independent lanes (a loop the compiler vectorises), then its first index.
  constexpr int64_t kLanes = 16;
  float lanes[kLanes];
  std::fill_n(lanes, kLanes, -std::numeric_limits<float>::infinity());
  int64_t v = 0;
  for (; v + kLanes <= n; v += kLanes)
    for (int64_t j = 0; j < kLanes; ++j) lanes[j] = row[v + j] > lanes[j] ? row[v + j] : lanes[j];
  for (int64_t j = 0; v + j < n; ++j) lanes[j] = row[v + j] > lanes[j] ? row[v + j] : lanes[j];
  float mx = lanes[0];
  for (float l : lanes) mx = l > mx ? l : mx;
  if (mx == -std::numeric_limits<float>::infinity()) return -1;
  for (v = 0; v < n; ++v)
    if (row[v] == mx) return static_cast<int32_t>(v);
  return -1;
}

// log Σ exp(row[i]) over the values that are not NaN: the largest value plus the log of a
// double-precision sum of the shifted exponentials (−∞ when no value is above −∞).
inline float LogSumExpRow(const float* row, int64_t n) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t v = 0; v < n; ++v) mx = row[v] > mx ? row[v] : mx;
  if (mx == -std::numeric_limits<float>::infinity()) return mx;
  double sum = 0;
  for (int64_t v = 0; v < n; ++v)
    if (!std::isnan(row[v])) sum += std::exp(static_cast<double>(row[v] - mx));
  return mx + static_cast<float>(std::log(sum));
}

}  // namespace ls
