// The vector layer the CPU kernels are written in, once for every SIMD target (isa.h). A kernel
// source includes its standard and project headers first, then this header, and writes its code
// between LS_SIMD_BEGIN and LS_SIMD_END: that region is compiled for the target named by
// LS_SIMD_NS (set per object library by kernels/CMakeLists.txt) inside its own namespace,
// ls::cpu::LS_SIMD_NS, so nothing compiled there is shared with code built for another target
// (inline functions and templates of the headers included before the region stay baseline code).
//
// The unit of arithmetic is 16 float32 lanes (V16), 16 int32 lanes (I16) and 64 bytes (B64): one
// AVX-512 register, two AVX2 registers, four NEON registers, or plain arrays. Every operation
// gives the same bits on every target, which makes every kernel's result the same on every CPU:
//   Zero Set Load LoadN Store StoreN LoadBf16 LoadBf16N LoadF16 LoadBf16Pairs    (N: the first n
//     lanes, the rest zero; nothing past them is read or written; Pairs: 2·pairs values, even
//     elements to one vector, odd to the other)
//   Add Sub Mul Div Abs, Min Max (x86's rule: the second operand when either is NaN),
//   Fma(a, b, c) = a·b + c and Fnma(a, b, c) = c − a·b, each rounded once,
//   ReduceAdd (lanes summed as u_j = (a_j + a_{8+j}) + (a_{4+j} + a_{12+j}), then
//     (u_0 + u_1) + (u_2 + u_3)), ReduceAdd4 (four of them), ReduceQuarters(a0, a1, a2, a3)
//     (lanes 4k .. 4k + 3: a_k's u_0 .. u_3) and ReduceAdd16(y0, y1, y2, y3, out) (out[4m + k] =
//     (u_0 + u_1) + (u_2 + u_3) of y_m's quarter k: sixteen ReduceAdds in two steps), ReduceMax,
//   RoundEven (to an integer, ties to even), MulPow2(p, n) = p · 2^n for integral n in [−127, 127]
//     (one rounding), Interleave / Deinterleave (even and odd lanes of 32 values),
//   AllWithin(v, lo, hi) (every lane in [lo, hi]),
//   SetI LoadI32 LoadI8 LoadU8 LoadU16 AddI SubI MulI (the low 32 bits) AndI OrI XorI MinI MaxI
//     ShlI<n> ShrI<n> (logical)
//     EqI (all ones where equal) SelectI(mask, a, b), ToFloat, RoundToInt (nearest even; NaN and
//     out of range: INT32_MIN, as x86's conversion), AsFloat AsInt (bit casts),
//     Lookup16(table, i) = table[i & 15], StoreI8N (the low byte of n lanes), ReduceAddI,
//   LoadB64 NibbleLo NibbleHi, DotI8(acc, w, q, u) (acc_i += Σ_j w[4i+j]·q_j, w and q signed
//     bytes, u = q + 128 as unsigned bytes; with kI8Offset the target sums u·w instead and the
//     caller subtracts 128·Σw), DotU4(acc, c, q) (acc_i += Σ_j c[4i+j]·q_j, c in 0..15, in the
//     target's own sum form for at most kU4PairQuads calls from zero; WidenU4(acc) gives the int32
//     sums: AVX2 and AVX-512 without VNNI keep 16-bit pair sums and widen them once),
//   LoadBf16X(xp) (a row's BF16 pair x₀ = xp[0], x₁ = xp[1] in the target's form), Bf16Dot(acc, w,
//     x) (lane i: (acc + x₁·w[2i+1]) + x₀·w[2i], the AVX512-BF16 rule, inside a Bf16DotMode
//     scope), Prefetch.
// kTileRegs is the number of V16 values the target's registers hold, which sizes the GEMM tiles.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/fused_multiply_add.h"
#include "kernels/cpu/simd/kernel_table.h"
#include "kernels/dtype.h"

// kernels/CMakeLists.txt compiles each target of targets.def with LS_SIMD_NS (its namespace),
// LS_SIMD_IS_<NAME> and LS_SIMD_BASE_<BASE NAME> (for code that differs by target), and
// LS_SIMD_FLAGS (its compile attribute; not defined for a baseline target).
#ifndef LS_SIMD_NS
#error "LS_SIMD_NS names the target a kernel source is compiled for (kernels/CMakeLists.txt)"
#endif

#if defined(LS_SIMD_BASE_AVX2)
#define LS_SIMD_X86_AVX2 1
#elif defined(LS_SIMD_BASE_AVX512)
#define LS_SIMD_X86_AVX512 1
#elif defined(LS_SIMD_BASE_NEON)
#define LS_SIMD_ARM_NEON 1
#endif

#if defined(LS_SIMD_X86_AVX2) || defined(LS_SIMD_X86_AVX512)
#include <immintrin.h>
#elif defined(LS_SIMD_ARM_NEON)
#include <arm_neon.h>
#endif
#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>  // the MXCSR of Bf16DotMode (SSE: baseline)
#endif

// The target's namespace without its instruction set (code that must run on any CPU, such as the
// target's table, which the dispatch reads before it knows the target is usable).
#define LS_SIMD_NS_BEGIN namespace ls::cpu::LS_SIMD_NS {
#define LS_SIMD_NS_END }

// The region compiled for the target: GCC's target pragma, or clang's attribute on every function
// declared inside (both leave the headers included before it alone).
#define LS_SIMD_DO_PRAGMA(x) _Pragma(#x)
#define LS_SIMD_PRAGMA(x) LS_SIMD_DO_PRAGMA(x)  // x macro-expanded first (the flags)
#if !defined(LS_SIMD_FLAGS)
#define LS_SIMD_BEGIN namespace ls::cpu::LS_SIMD_NS {
#define LS_SIMD_END }
#elif defined(__clang__)
#define LS_SIMD_BEGIN                                                                            \
  LS_SIMD_PRAGMA(clang attribute push(__attribute__((target(LS_SIMD_FLAGS))), apply_to = function)) \
  namespace ls::cpu::LS_SIMD_NS {
#define LS_SIMD_END } LS_SIMD_PRAGMA(clang attribute pop)
#else
#define LS_SIMD_BEGIN                              \
  LS_SIMD_PRAGMA(GCC push_options)                 \
  LS_SIMD_PRAGMA(GCC target(LS_SIMD_FLAGS))        \
  namespace ls::cpu::LS_SIMD_NS {
#define LS_SIMD_END } LS_SIMD_PRAGMA(GCC pop_options)
#endif

LS_SIMD_BEGIN
// kU4PairQuads of a target whose DotU4 sums are int32 already (WidenU4 is then the identity).
inline constexpr int64_t kNoPairLimit = int64_t{1} << 40;
#if defined(LS_SIMD_X86_AVX512)
#include "kernels/cpu/simd/vec_avx512.inc"
#elif defined(LS_SIMD_X86_AVX2)
#include "kernels/cpu/simd/vec_avx2.inc"
#elif defined(LS_SIMD_ARM_NEON)
#include "kernels/cpu/simd/vec_neon.inc"
#else
#include "kernels/cpu/simd/vec_portable.inc"
#endif
#include "kernels/cpu/simd/vec_common.inc"
// This target's kernels (defined by the *_simd.cc sources of its families).
#define LS_KERNEL(family, name, ret, params) ret name params;
#include "kernels/cpu/simd/kernels.def"
#undef LS_KERNEL
LS_SIMD_END
