// Engine::Stream: the engine's state of one request (its sequence, sampling, detokenizer, stop
// and grammar state). Internal to the engine's files; owned by the loop thread.
#pragma once

#include <chrono>
#include <memory>
#include <random>
#include <vector>

#include "engine/engine.h"
#include "engine/stop_checker.h"
#include "structured/matcher.h"
#include "tokenizer/incremental_detokenizer.h"

namespace ls {

struct Engine::Stream {
  Sequence seq;
  Request request;
  OutputCallback on_output;
  std::mt19937_64 rng;
  std::unique_ptr<tok::IncrementalDetokenizer> detok;
  std::unique_ptr<StopChecker> stop;
  std::chrono::steady_clock::time_point arrival, first_scheduled, first_token, last_token;
  bool scheduled = false;
  bool counted_queued = true;  // still counted in queued_
  // With params.prompt_logprobs: entry i is prompt token i + 1's, filled as prefill rows arrive
  // (a recomputation after preemption overwrites) and sent with the first output.
  std::vector<TokenLogprob> prompt_logprobs;
  bool prompt_logprobs_sent = false;
  // Recurrent layers: its state is to be copied back from its spare slot before its next step.
  bool take_back_state = false;
  std::unique_ptr<structured::Matcher> matcher;  // with params.grammar: where the output is in it
  bool WantsPromptRows() const {
    return request.params.prompt_logprobs && !prompt_logprobs_sent && seq.num_computed < seq.num_prompt_tokens - 1;
  }
  // Its next tokens are each row's argmax, which the model can reduce where the logits are
  // (StepSequence::greedy): greedy, nothing changing the logits before the choice, and at most the
  // chosen token's log-probability asked for.
  bool Greedy() const {
    const SamplingParams& p = request.params;
    return p.greedy() && !matcher && p.logit_bias.empty() && p.allowed_token_ids.empty() && p.bad_words_ids.empty() &&
           p.repetition_penalty == 1.f && p.presence_penalty == 0.f && p.frequency_penalty == 0.f &&
           (!p.logprobs || *p.logprobs == 0) && !WantsPromptRows();
  }
};

}  // namespace ls
