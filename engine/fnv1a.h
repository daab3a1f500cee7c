// FNV-1a (64-bit), byte by byte: the hash the prefix cache's chain hashes (block_manager.cc) and
// the cache salt (request.cc) are built from.
#pragma once

#include <cstdint>

namespace ls {

inline constexpr uint64_t kFnv1aOffset = 1469598103934665603ull;
inline constexpr uint64_t kFnv1aPrime = 1099511628211ull;

// The hash `h` followed by one more byte.
inline uint64_t Fnv1aByte(uint64_t h, uint8_t byte) { return (h ^ byte) * kFnv1aPrime; }

}  // namespace ls
