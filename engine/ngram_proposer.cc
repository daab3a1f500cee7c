// NgramProposer implementation: a backwards scan per n-gram size, the latest match first.
#include "engine/ngram_proposer.h"

#include <algorithm>

namespace ls {

std::vector<int32_t> ProposeNgram(const std::vector<int32_t>& tokens, int32_t min_n, int32_t max_n, int32_t k) {
  const int32_t len = static_cast<int32_t>(tokens.size());
  if (k <= 0) return {};
  for (int32_t n = std::min(max_n, len - 1); n >= std::max(min_n, 1); --n) {
    const int32_t* tail = tokens.data() + len - n;
    // An earlier occurrence starts at i < len - n; the latest one is the likeliest to continue alike.
    for (int32_t i = len - n - 1; i >= 0; --i) {
      if (!std::equal(tail, tail + n, tokens.data() + i)) continue;
      const int32_t from = i + n, count = std::min(k, len - from);
      return std::vector<int32_t>(tokens.begin() + from, tokens.begin() + from + count);
    }
  }
  return {};
}

absl::Status NgramProposer::Propose(const std::vector<DraftQuery>& queries) {
  for (const DraftQuery& q : queries) *q.draft = ProposeNgram(*q.tokens, min_n_, max_n_, q.max_draft);
  return absl::OkStatus();
}

}  // namespace ls
