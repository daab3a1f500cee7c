// CPU routed experts the way the GPU runs them: count rows per expert, permute token rows into
// expert-contiguous groups, run each active expert once over its group (gate and up GEMMs, GLU,
// down GEMM), then un-permute with a weighted sum over each token's K slots in slot order.
// The per-row arithmetic does not depend on the other rows, so results are batch invariant.
#include <algorithm>
#include <vector>

#include "kernels/cpu/cpu_ops.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/vector_math.h"

namespace ls::cpu {
namespace {

constexpr int64_t kColChunk = 128;  // output columns per task in the expert GEMMs (whole panels)
constexpr int64_t kRowBlock = 48;   // rows per task (four tiles of twelve): a busy expert is split

struct Work {
  int32_t expert;
  int64_t row_begin, row_end;  // the expert's slots
  int64_t col_begin, col_end;
};

// Tasks of (expert, row block, column chunk) over the active experts.
void AddWork(const std::vector<int64_t>& offsets, int64_t cols, std::vector<Work>* work) {
  work->clear();
  for (int32_t e = 0; e + 1 < static_cast<int32_t>(offsets.size()); ++e)
    for (int64_t r = offsets[e]; r < offsets[e + 1]; r += kRowBlock)
      for (int64_t c = 0; c < cols; c += kColChunk)
        work->push_back({e, r, std::min(offsets[e + 1], r + kRowBlock), c, std::min(cols, c + kColChunk)});
}

}  // namespace

void MoeExperts(ThreadPool& pool, const MoeParams& p) {
  const int64_t T = p.num_tokens, K = p.top_k, N = p.num_experts;
  const int64_t din = p.in_width, dout = p.out_width;
  const int64_t rows = T * K;

  // Permute: slot ranges per expert, assigned in token order.
  std::vector<int64_t> offsets(N + 1, 0), cursor(N);
  for (int64_t i = 0; i < rows; ++i) ++offsets[p.topk_ids[i] + 1];
  for (int64_t e = 0; e < N; ++e) offsets[e + 1] += offsets[e];
  if (p.tokens_per_expert)
    for (int64_t e = 0; e < N; ++e) p.tokens_per_expert[e] += offsets[e + 1] - offsets[e];
  std::copy(offsets.begin(), offsets.end() - 1, cursor.begin());
  // Scratch kept by the calling thread across steps: fresh large vectors every layer would be
  // mapped, faulted in and zeroed each time.
  // (Bound to locals: inside the parallel tasks the names must mean this thread's buffers.)
  thread_local std::vector<int64_t> slot_buf, token_buf;
  thread_local std::vector<float> zp_buf, act_buf, yp_buf;
  std::vector<int64_t>&slot_of = slot_buf, &token_of = token_buf;
  std::vector<float>&zp = zp_buf, &act = act_buf, &yp = yp_buf;
  slot_of.resize(rows);
  token_of.resize(rows);
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t slot = cursor[p.topk_ids[i]]++;
    slot_of[i] = slot;
    token_of[slot] = i / K;
  }
  zp.resize(rows * din);
  pool.ParallelForRanges(rows, din, 16384, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) std::copy_n(p.z + token_of[s] * din, din, zp.data() + s * din);
  });

  int64_t f = 0;  // expert width, from any active expert (slots of a device may be empty)
  for (int64_t e = 0; e < N && f == 0; ++e)
    if (offsets[e + 1] > offsets[e]) f = p.gate[e].rows;
  act.resize(rows * f);
  yp.resize(rows * dout);
  // Experts whose weights take int8 or BF16 activations: each GEMM's input rows are rounded once,
  // here, rather than in every task (every expert of a layer shares one format).
  const Tensor* any = nullptr;
  for (int64_t e = 0; e < N && !any; ++e)
    if (offsets[e + 1] > offsets[e]) any = &p.gate[e];
  if (!any) return;  // no rows
  thread_local GemmRowsStorage zq_buf, aq_buf;
  const GemmRows zq = PrepareRows(zp.data(), din, rows, *any, &zq_buf);

  // Gate/up GEMMs with the GLU.
  std::vector<Work> work;
  AddWork(offsets, f, &work);
  pool.ParallelFor(static_cast<int64_t>(work.size()), [&](int64_t i) {
    const Work& w = work[i];
    const int64_t r0 = w.row_begin, n = w.row_end - r0, cols = w.col_end - w.col_begin;
    thread_local std::vector<float> g, u;
    g.resize(n * kColChunk);
    u.resize(n * kColChunk);
    const GemmRows x = zq.Slice(r0, n);
    GemmRange(x, p.gate[w.expert], w.col_begin, w.col_end, g.data(), kColChunk, false);
    GemmRange(x, p.up[w.expert], w.col_begin, w.col_end, u.data(), kColChunk, false);
    for (int64_t r = 0; r < n; ++r)
      GluRow(p.act, g.data() + r * kColChunk, u.data() + r * kColChunk, act.data() + (r0 + r) * f + w.col_begin, cols);
  });

  // Down GEMMs.
  AddWork(offsets, dout, &work);
  const GemmRows aq = PrepareRows(act.data(), f, rows, p.down[any - p.gate], &aq_buf);
  pool.ParallelFor(static_cast<int64_t>(work.size()), [&](int64_t i) {
    const Work& w = work[i];
    const int64_t r0 = w.row_begin, n = w.row_end - r0;
    GemmRange(aq.Slice(r0, n), p.down[w.expert], w.col_begin, w.col_end, yp.data() + r0 * dout + w.col_begin, dout,
              false);
  });

  // Un-permute: weighted sum over each token's slots, in slot order k = 0 .. K-1.
  CombineExpertOutputs(pool, yp.data(), slot_of.data(), p.topk_weights, T, static_cast<int32_t>(K), dout, p.out);
}

void CombineExpertOutputs(ThreadPool& pool, const float* y, const int64_t* rows, const float* weights, int64_t T,
                          int32_t K, int64_t width, float* out) {
  auto token = [&](int64_t t) {
    float* o = out + t * width;
    std::fill_n(o, width, 0.f);
    for (int64_t k = 0; k < K; ++k) {
      const int64_t row = rows ? rows[t * K + k] : t * K + k;
      Axpy(weights[t * K + k], y + row * width, o, width);
    }
  };
  pool.ParallelForRanges(T, K * width, 16384, [&](int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; ++t) token(t);
  });
}
void CombineExpertOutputs(ThreadPool& pool, const float* y, const float* weights, int64_t T, int32_t K, int64_t width,
                          float* out) {
  CombineExpertOutputs(pool, y, nullptr, weights, T, K, width, out);
}

}  // namespace ls::cpu
