// Greedy token ids from a GGUF model through the CPU peer's llama.h API, for comparing greedy
// output with latentserve-generate on the same weights (bench/peer_compare.sh builds it against
// the peer's build). Usage: peer_greedy MODEL.gguf NEW_TOKENS ID [ID ...]; prints ids, comma-separated.
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "llama.h"

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s MODEL.gguf NEW_TOKENS ID [ID ...]\n", argv[0]);
    return 2;
  }
  llama_backend_init();
  llama_model* model = llama_model_load_from_file(argv[1], llama_model_default_params());
  if (!model) return 1;
  llama_context_params cp = llama_context_default_params();
  cp.n_ctx = 512;
  cp.n_batch = 512;
  cp.n_threads = cp.n_threads_batch = 2;
  llama_context* ctx = llama_init_from_model(model, cp);
  if (!ctx) return 1;
  const int new_tokens = std::atoi(argv[2]), vocab = llama_n_vocab(model);
  std::vector<llama_token> feed;
  for (int i = 3; i < argc; ++i) feed.push_back(std::atoi(argv[i]));
  int pos = 0;
  for (int step = 0; step < new_tokens; ++step) {
    if (llama_decode(ctx, llama_batch_get_one(feed.data(), static_cast<int>(feed.size()), pos, 0)) != 0) return 1;
    pos += static_cast<int>(feed.size());
    const float* logits = llama_get_logits_ith(ctx, -1);
    int best = 0;  // ties: lowest id, as the engine's greedy sampler
    for (int v = 1; v < vocab; ++v)
      if (logits[v] > logits[best]) best = v;
    std::printf("%d%s", best, step + 1 < new_tokens ? "," : "\n");
    feed = {best};
  }
  llama_free(ctx);
  llama_free_model(model);
  return 0;
}
