// The CPU backend's buffers: small ones on cache-line boundaries, large ones (the weights' arena,
// the KV cache) on 2 MiB boundaries and in whole 2 MiB pages, so that the kernel may back them
// with huge pages (whether it does is its choice: transparent huge pages may be off).
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

#include "kernels/cpu/cpu_backend.h"

namespace ls {
namespace {

TEST(CpuBackendMemory, SmallBuffersAreCacheLineAligned) {
  CpuBackend be(1);
  for (size_t bytes : {size_t{1}, size_t{63}, size_t{1000}, size_t{1} << 20}) {
    void* p = be.Allocate(bytes);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << bytes;
    std::memset(p, 1, bytes);
    be.Free(p);
  }
}

TEST(CpuBackendMemory, LargeBuffersStartOnHugePageBoundaries) {
  CpuBackend be(1);
  for (size_t bytes : {size_t{32} << 20, (size_t{40} << 20) + 3}) {
    auto* p = static_cast<unsigned char*>(be.Allocate(bytes));
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u) << bytes;
    p[0] = 1;
    p[bytes - 1] = 2;  // every requested byte is usable
    EXPECT_EQ(p[0] + p[bytes - 1], 3);
    be.Free(p);
  }
}

}  // namespace
}  // namespace ls
