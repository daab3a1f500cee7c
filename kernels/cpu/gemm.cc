// GEMM dispatch by weight layout, activation-row preparation and the GEMM loops over the pool.
#include "kernels/cpu/gemm.h"

#include <algorithm>

#include "kernels/cpu/packed_gemm.h"
#include "kernels/cpu/quantized_gemm.h"
#include "kernels/cpu/simd/kernel_table.h"

namespace ls::cpu {

void GemmRange(const float* x, int64_t ldx, int64_t M, const Tensor& w, int64_t n_begin,
               int64_t n_end, float* y, int64_t ldy, bool accumulate) {
  if (w.layout == Layout::kPanels) {
    PackedGemmRange(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
  } else if (w.layout == Layout::kPanelsInt8Dot) {
    Int8DotGemmRange(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
  } else if (w.layout == Layout::kPanelsBf16Dot) {
    thread_local std::vector<uint16_t> rounded;
    Bf16DotGemmRange(RoundRowsToBf16(x, ldx, M, w.cols, &rounded), w, n_begin, n_end, y, ldy, accumulate);
  } else if (w.quantized()) {
    internal::RowMajorQuantizedGemmRange(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
  } else {
    ActiveKernels().RowMajorGemmRange(x, ldx, M, w, n_begin, n_end, y, ldy, accumulate);
  }
}

GemmRows PrepareRows(const float* x, int64_t ldx, int64_t M, const Tensor& w, GemmRowsStorage* storage) {
  GemmRows r;
  r.x = x;
  r.ldx = ldx;
  r.rows = M;
  if (w.layout == Layout::kPanelsInt8Dot) {
    r.layout = w.layout;
    r.i8 = internal::QuantizeRows(x, ldx, M, w.cols, internal::RowGroup(w), &storage->i8);
    r.i8_group = internal::RowGroup(w);
  } else if (w.layout == Layout::kPanelsBf16Dot) {
    r.layout = w.layout;
    r.bf16 = RoundRowsToBf16(x, ldx, M, w.cols, &storage->bf16);
    AddSwappedRows(&r.bf16, &storage->bf16_swapped);
  }
  return r;
}

void GemmRange(const GemmRows& x, const Tensor& w, int64_t n_begin, int64_t n_end, float* y, int64_t ldy,
               bool accumulate) {
  if (w.layout == Layout::kPanelsInt8Dot && x.layout == w.layout && x.i8_group == internal::RowGroup(w)) {
    Int8DotGemmRange(x.i8, w, n_begin, n_end, y, ldy, accumulate);
  } else if (w.layout == Layout::kPanelsBf16Dot && x.layout == w.layout) {
    Bf16DotGemmRange(x.bf16, w, n_begin, n_end, y, ldy, accumulate);
  } else {
    GemmRange(x.x, x.ldx, x.rows, w, n_begin, n_end, y, ldy, accumulate);
  }
}

namespace {

// Tiles of few rows run over several panels at once (one row: four), so that the streams of codes
// of as many panels are read side by side: a task of one panel would leave each row's tile a single
// stream and chain of sums. At one row, tasks of four panels instead of one made one sequence's
// decode 8-16% faster with int8, int4 and BF16 weights, on the AVX-512 and AVX2 targets of a 2-core
// AMD Zen 5 (the attention projections and the LM head; the routed experts split their own work).
constexpr int64_t kWidePanelRows = 4;
constexpr int64_t kWidePanels = 4;

}  // namespace

int64_t GemmColumnChunk(const ThreadPool& pool, int64_t M, const Tensor& w) {
  const int64_t N = w.rows, work_per_col = M * w.cols;
  int64_t chunk = std::max<int64_t>(16, (int64_t{1} << 16) / std::max<int64_t>(1, work_per_col));
  if (w.layout != Layout::kRowMajor && M < kWidePanelRows) chunk = std::max(chunk, kWidePanels * kPanelRows);
  chunk = std::min<int64_t>(chunk, std::max<int64_t>(16, (N + 4 * pool.num_threads() - 1) /
                                                             (4 * pool.num_threads())));
  const int64_t align = w.layout == Layout::kRowMajor ? 16 : kPanelRows;
  return (chunk + align - 1) / align * align;
}

void Gemm(ThreadPool& pool, const float* x, int64_t M, const Tensor& w, float* y, bool accumulate) {
  const GemmOutput out{&w, y, accumulate};
  GemmMany(pool, x, M, &out, 1);
}

void GemmMany(ThreadPool& pool, const float* x, int64_t M, const GemmOutput* outs, int32_t n) {
  if (M == 0) return;
  // The tasks of all outputs in one list: task t belongs to the last output whose first task
  // is at or before t.
  int64_t first[8], chunk[8];
  if (n > 8) {
    GemmMany(pool, x, M, outs, 8);
    return GemmMany(pool, x, M, outs + 8, n - 8);
  }
  int64_t tasks = 0;
  for (int32_t i = 0; i < n; ++i) {
    first[i] = tasks;
    chunk[i] = GemmColumnChunk(pool, M, *outs[i].w);
    tasks += (outs[i].w->rows + chunk[i] - 1) / chunk[i];
  }
  // Weights with int8 or BF16 activations: x is rounded once for all their tasks (in the first
  // such weight's form; another form rounds per task).
  thread_local GemmRowsStorage storage;
  const Tensor* form = outs[0].w;
  for (int32_t i = 0; i < n; ++i) {
    const Layout l = outs[i].w->layout;
    if (l == Layout::kPanelsInt8Dot || l == Layout::kPanelsBf16Dot) {
      form = outs[i].w;
      break;
    }
  }
  const GemmRows rows = PrepareRows(x, form->cols, M, *form, &storage);
  pool.ParallelFor(tasks, [&](int64_t t) {
    int32_t i = n - 1;
    while (first[i] > t) --i;
    const Tensor& w = *outs[i].w;
    const int64_t n0 = (t - first[i]) * chunk[i], n1 = std::min(w.rows, n0 + chunk[i]);
    GemmRange(rows, w, n0, n1, outs[i].y + n0, w.rows, outs[i].accumulate);
  });
}

void HeadGemm(ThreadPool& pool, const float* x, RowStrides xs, int64_t M, int32_t heads, const Tensor* w, float* y,
              RowStrides ys) {
  if (M == 0 || heads == 0) return;
  // Tasks over (head, column chunk); every output element is GemmRange's dot product.
  const int64_t chunk = GemmColumnChunk(pool, M, w[0]);
  const int64_t per_head = (w[0].rows + chunk - 1) / chunk;
  pool.ParallelFor(heads * per_head, [&](int64_t task) {
    const int64_t h = task / per_head;
    const Tensor& wh = w[h];
    const int64_t n0 = (task % per_head) * chunk, n1 = std::min(wh.rows, n0 + chunk);
    if (n0 >= n1) return;
    GemmRange(x + h * xs.head, xs.token, M, wh, n0, n1, y + h * ys.head + n0, ys.token, false);
  });
}

}  // namespace ls::cpu
