// NgramProposer: speculative decoding's draft from the sequence itself (prompt lookup): the longest
// n-gram ending the sequence (n from max_n down to min_n) that occurred before is looked up, and
// the tokens that followed its latest earlier occurrence are proposed. No model, no state.
#pragma once

#include <cstdint>
#include <vector>

#include "engine/draft_proposer.h"

namespace ls {

// Up to `k` tokens to follow `tokens`; empty when no n-gram of min_n..max_n tokens recurs.
std::vector<int32_t> ProposeNgram(const std::vector<int32_t>& tokens, int32_t min_n, int32_t max_n, int32_t k);

class NgramProposer : public DraftProposer {
 public:
  NgramProposer(int32_t min_n, int32_t max_n) : min_n_(min_n), max_n_(max_n) {}
  absl::Status Propose(const std::vector<DraftQuery>& queries) override;

 private:
  int32_t min_n_, max_n_;
};

}  // namespace ls
