// Sampler implementation.
#include "engine/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <unordered_map>

#include "base/logits_row.h"

namespace ls {

namespace {

constexpr float kNoChance = -std::numeric_limits<float>::infinity();

// A logit as the sampler counts it: NaN is a token that cannot be chosen.
inline float Counted(float v) { return std::isnan(v) ? kNoChance : v; }

}  // namespace

TokenLogprob Sampler::Logprobs(const float* raw, int32_t vocab, int32_t token, int32_t top_n) {
  const float lse = LogSumExpRow(raw, vocab);  // over the values that are not NaN
  TokenLogprob lp{token, Counted(raw[token]) - lse, {}};
  lp.rank = 1;
  for (int32_t v = 0; v < vocab; ++v) lp.rank += Counted(raw[v]) > Counted(raw[token]);
  if (top_n > 0) {
    const int32_t n = std::min(top_n, vocab);
    std::vector<int32_t> idx(vocab);
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), [&](int32_t a, int32_t b) {
      const float x = Counted(raw[a]), y = Counted(raw[b]);
      return x != y ? x > y : a < b;
    });
    for (int32_t i = 0; i < n; ++i) lp.top.emplace_back(idx[i], Counted(raw[idx[i]]) - lse);
  }
  return lp;
}

int32_t Sampler::Argmax(const float* logits, int32_t vocab) { return ArgmaxRow(logits, vocab); }

SampleResult Sampler::FromGreedyRecord(const float* record, const SamplingParams& params, int32_t draft) {
  SampleResult r;
  r.token_id = static_cast<int32_t>(record[0]);  // −1 from ArgmaxRows: no token can be chosen
  r.accepted = r.token_id >= 0 && r.token_id == draft;
  if (params.logprobs) {
    r.has_logprobs = true;
    r.logprob = {r.token_id, record[1], {}};
  }
  return r;
}

void Sampler::ApplyPenalties(float* logits, int32_t vocab, const SamplingParams& p, const std::vector<int32_t>& tokens,
                             int32_t num_prompt_tokens) {
  if (p.repetition_penalty != 1.f) {
    std::vector<bool> seen(vocab, false);
    for (int32_t t : tokens) seen[t] = true;
    for (int32_t v = 0; v < vocab; ++v)
      if (seen[v]) logits[v] = logits[v] > 0 ? logits[v] / p.repetition_penalty : logits[v] * p.repetition_penalty;
  }
  if (p.presence_penalty != 0.f || p.frequency_penalty != 0.f) {
    std::unordered_map<int32_t, int32_t> counts;
    for (size_t i = num_prompt_tokens; i < tokens.size(); ++i) ++counts[tokens[i]];
    for (auto [t, c] : counts) logits[t] -= p.frequency_penalty * c + p.presence_penalty;
  }
}

SampleResult Sampler::Sample(float* logits, int32_t vocab, const SamplingParams& p, const std::vector<int32_t>& tokens,
                             int32_t num_prompt_tokens, std::mt19937_64* rng, int32_t draft) {
  SampleResult r;
  std::vector<float> raw;
  if (p.logprobs) raw.assign(logits, logits + vocab);
  // NaN never chosen, and never met by the orderings below (they need a strict weak order); with
  // allowed_token_ids, no other token either.
  if (!p.allowed_token_ids.empty()) {
    std::vector<float> kept(static_cast<size_t>(vocab), kNoChance);
    for (int32_t id : p.allowed_token_ids) kept[id] = logits[id];
    std::copy(kept.begin(), kept.end(), logits);
  }
  // bad_words: a word's last token where the output ends with the rest of it.
  const size_t output = tokens.size() - std::min(tokens.size(), static_cast<size_t>(std::max(num_prompt_tokens, 0)));
  for (const std::vector<int32_t>& w : p.bad_words_ids)
    if (w.size() - 1 <= output && std::equal(w.begin(), w.end() - 1, tokens.end() - static_cast<int64_t>(w.size() - 1)))
      logits[w.back()] = kNoChance;
  float best = kNoChance;
  for (int32_t v = 0; v < vocab; ++v) best = std::max(best, logits[v] = Counted(logits[v]));
  if (best == kNoChance) return r;  // no token can be chosen: none is made up
  for (auto [id, bias] : p.logit_bias) logits[id] += bias;
  ApplyPenalties(logits, vocab, p, tokens, num_prompt_tokens);

  if (p.greedy()) {
    r.token_id = Argmax(logits, vocab);
    r.accepted = r.token_id == draft;
  } else {
    const float inv_t = 1.f / p.temperature;
    const bool truncate = (p.top_k > 0 && p.top_k < vocab) || p.top_p < 1.f || p.min_p > 0.f;
    // Candidates: every token in id order, or (when truncating) sorted by logit (descending, ties
    // by id) and cut by top-k.
    std::vector<int32_t> idx(vocab);
    std::iota(idx.begin(), idx.end(), 0);
    int32_t n = vocab;
    if (truncate) {
      auto by_logit = [&](int32_t a, int32_t b) { return logits[a] != logits[b] ? logits[a] > logits[b] : a < b; };
      if (p.top_k > 0 && p.top_k < vocab) {
        n = p.top_k;
        std::partial_sort(idx.begin(), idx.begin() + n, idx.end(), by_logit);
      } else {
        std::sort(idx.begin(), idx.end(), by_logit);
      }
    }
    float mx = logits[idx[0]];
    for (int32_t i = 1; i < n; ++i) mx = std::max(mx, logits[idx[i]]);
    mx *= inv_t;
    std::vector<double> prob(n);
    double sum = 0;
    for (int32_t i = 0; i < n; ++i) sum += (prob[i] = std::exp(static_cast<double>(logits[idx[i]] * inv_t - mx)));
    for (auto& q : prob) q /= sum;
    // top-p: the smallest prefix whose mass reaches top_p (always at least one token).
    if (p.top_p < 1.f) {
      double cum = 0;
      int32_t keep = 0;
      while (keep < n && (keep == 0 || cum < p.top_p)) cum += prob[keep++];
      n = keep;
    }
    // min-p: drop tokens below min_p times the most likely one.
    if (p.min_p > 0.f) {
      const double cut = p.min_p * prob[0];
      int32_t keep = 1;
      while (keep < n && prob[keep] >= cut) ++keep;
      n = keep;
    }
    double mass = 0;
    for (int32_t i = 0; i < n; ++i) mass += prob[i];
    // One draw per token, with a draft or without: the token is drawn from the distribution, and a
    // draft is accepted when it is the token drawn. That accepts it with its probability and, on
    // rejection, leaves a draw from the rest — the rule for a deterministic draft — while the random
    // stream advances as it would without speculation, so a seeded request's tokens do not depend
    // on whether (or how far) a step speculated.
    const double u = std::uniform_real_distribution<double>(0.0, mass)(*rng);
    double cum = 0;
    r.token_id = idx[n - 1];  // rounding left u at the end
    for (int32_t i = 0; i < n; ++i) {
      cum += prob[i];
      if (u < cum) {
        r.token_id = idx[i];
        break;
      }
    }
    r.accepted = r.token_id == draft;
  }
  if (p.logprobs) {
    r.has_logprobs = true;
    r.logprob = Logprobs(raw.data(), vocab, r.token_id, *p.logprobs);
  }
  return r;
}

}  // namespace ls
