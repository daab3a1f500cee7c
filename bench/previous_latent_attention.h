// The CPU latent attention (MLA, absorbed) as it was before its AVX-512 microkernels — each cached
// row widened into a scratch row, then one dot product per head and one scaled add per head —
// kept as the baseline that attention_kinds_bench measures the op against in the same run.
#pragma once

#include "kernels/ops.h"
#include "kernels/thread_pool.h"

namespace ls::bench {

// Same contract and results (within rounding) as Backend::PagedLatentAttention on the CPU.
void PreviousLatentAttention(ThreadPool& pool, const LatentAttentionParams& p);

}  // namespace ls::bench
