// Engine's speculative decoding work per step: drafts proposed before scheduling, verified from
// the step's logits rows after it, and a recurrent state taken back after a rejection.
#include <algorithm>
#include <chrono>
#include <vector>

#include "engine/engine.h"
#include "engine/engine_stream.h"

namespace ls {

using Clock = std::chrono::steady_clock;

void Engine::ProposeDrafts() {
  if (!proposer_) return;
  const int32_t k = config_.speculative.num_speculative_tokens;
  std::vector<DraftQuery> queries;
  for (const auto& [id, s] : streams_) {
    Sequence& seq = s->seq;
    seq.draft.clear();
    // Decoding: its last token alone uncomputed. Under a grammar too: its draft is cut at the first
    // token the grammar forbids, and verification masks each row with the grammar's state after
    // the draft tokens accepted before it.
    if (seq.status != SeqStatus::kRunning || seq.num_uncomputed() != 1 || seq.num_computed < seq.num_prompt_tokens)
      continue;
    // Room for the draft and the token after it within max_tokens and the context length.
    const int32_t room =
        std::min(s->request.params.max_tokens - seq.num_output_tokens(), max_model_len_ - seq.num_tokens());
    if (room <= 1) continue;
    queries.push_back({seq.arrival, &seq.tokens, std::min(k, room - 1), &seq.draft});
  }
  if (queries.empty()) return;
  const auto t0 = Clock::now();
  const absl::Status st = proposer_->Propose(queries);
  // A constrained sequence's draft ends before the first token its grammar forbids (verification
  // would reject it): drafts are proposed without the grammar.
  for (const auto& [id, s] : streams_) {
    std::vector<int32_t>& draft = s->seq.draft;
    if (!s->matcher || draft.empty()) continue;
    structured::Matcher place = *s->matcher;
    size_t keep = 0;
    while (keep < draft.size() && !place.finished() && place.Accept(draft[keep])) ++keep;
    draft.resize(keep);
  }
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  metrics_.Update([&](MetricsSnapshot& m) {
    m.spec_propose_seconds += seconds;
    if (!st.ok()) ++m.spec_propose_errors;
  });
}

void Engine::TakeBackState(Stream* s, int32_t accepted) {
  // The state went through the last token and the whole draft; its copy is from before the last
  // token. Back to the copy, and the last token and the accepted draft tokens are computed again
  // (their KV rows are rewritten with the same values), with the token after them.
  s->take_back_state = true;
  scheduler_.RecomputeLast(&s->seq, 1 + accepted);
}

int32_t Engine::VerifyDraft(Stream* s, int32_t num_draft, const LogitRows& logits) {
  // Row j holds the logits after the last token (j = 0) or after draft token j. Each accepted draft
  // token counts as computed; the first rejection (or the token after the whole draft) ends the step.
  const std::vector<int32_t> draft(s->seq.draft.begin(), s->seq.draft.begin() + num_draft);
  int32_t accepted = 0;
  bool live = true;
  for (int32_t j = 0; j <= num_draft && live; ++j) {
    const int32_t want = j < num_draft ? draft[j] : -1;
    bool took = false;
    live = HandleToken(s, logits.row(j), logits.greedy, want, &took);
    if (!took) break;
    ++accepted;
    if (live) scheduler_.AcceptDraftToken(&s->seq);
  }
  // A rejection on a live sequence: the recurrent state went through the whole draft.
  if (live && accepted < num_draft && spare_slot_base_ >= 0 && s->seq.state_slot >= 0) TakeBackState(s, accepted);
  return accepted;
}

}  // namespace ls
