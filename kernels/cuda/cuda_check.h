// Checks for CUDA runtime calls and kernel launches. A failed call is a device fault the engine
// cannot recover from, so the check reports the call, the error and the place, then aborts.
// Included by the CUDA sources and the backend only (it needs cuda_runtime.h).
#pragma once

#include <cuda_runtime.h>

namespace ls::cuda {

// Prints "CUDA backend failure at file:line: what: error" to stderr and aborts.
[[noreturn]] void Fail(const char* what, const char* error, const char* file, int line);

inline void Check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess) Fail(what, cudaGetErrorString(e), file, line);
}

}  // namespace ls::cuda

// Aborts with a message when a runtime call fails.
#define LS_CUDA_CHECK(expr) ::ls::cuda::Check((expr), #expr, __FILE__, __LINE__)
// After a kernel launch: aborts when the launch was rejected (bad configuration, no device).
#define LS_CUDA_CHECK_LAUNCH() ::ls::cuda::Check(cudaGetLastError(), "kernel launch", __FILE__, __LINE__)
// A broken caller contract (wrong dtype, layout or size): aborts with the condition.
#define LS_CUDA_REQUIRE(cond, msg)                                 \
  do {                                                             \
    if (!(cond)) ::ls::cuda::Fail(#cond, msg, __FILE__, __LINE__); \
  } while (0)
