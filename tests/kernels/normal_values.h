// Vectors of normally distributed floats that the attention kernel tests draw their inputs from.
#pragma once

#include <cstddef>
#include <random>
#include <vector>

namespace ls::test {

inline std::vector<float> NormalValues(size_t n, std::mt19937& rng, float scale = 1.f) {
  std::normal_distribution<float> nd(0.f, scale);
  std::vector<float> x(n);
  for (auto& e : x) e = nd(rng);
  return x;
}

}  // namespace ls::test
