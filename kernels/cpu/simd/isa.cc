// CPU feature probe (CPUID and XGETBV on x86, the auxiliary vector on AArch64) and the targets'
// names, order and caps. Compiled for the baseline instruction set. On Linux the probe also asks
// the kernel for the AMX tile state (arch_prctl), which a process must request before its first
// tile instruction; the grant holds for every thread of the process.
#include "kernels/cpu/simd/isa.h"

#include <array>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace ls::cpu {
namespace {

constexpr std::array<std::string_view, kNumSimdTargets> kNames = {
    "portable", "avx2", "avx2_vnni", "avx512", "avx512_vnni", "avx512_bf16", "avx512_amx", "neon", "neon_dot"};

bool IsX86(SimdTarget t) { return t >= SimdTarget::kAvx2 && t <= SimdTarget::kAvx512Amx; }
bool IsArm(SimdTarget t) { return t == SimdTarget::kNeon || t == SimdTarget::kNeonDot; }

// The base target an extension target adds to (a base target is its own base).
SimdTarget Base(SimdTarget t) {
  switch (t) {
    case SimdTarget::kAvx2Vnni: return SimdTarget::kAvx2;
    case SimdTarget::kAvx512Vnni:
    case SimdTarget::kAvx512Bf16:
    case SimdTarget::kAvx512Amx:
      return SimdTarget::kAvx512;
    case SimdTarget::kNeonDot: return SimdTarget::kNeon;
    default: return t;
  }
}

struct Features {
  std::array<bool, kNumSimdTargets> has{};
};

#if defined(__x86_64__) || defined(__i386__)
uint64_t Xcr0() {
  uint32_t lo, hi;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// Whether this process may run AMX tile instructions: the OS enables the tile state (XCR0 bits 17
// and 18) and, on Linux, grants this process the tile data (ARCH_REQ_XCOMP_PERM for
// XFEATURE_XTILEDATA; refused by kernels before 5.16).
bool AmxUsable(uint64_t xcr0) {
  if ((xcr0 & (3ull << 17)) != (3ull << 17)) return false;
#if defined(__linux__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}
#endif

Features Probe() {
  Features f;
  f.has[static_cast<int>(SimdTarget::kPortable)] = true;
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), avx = c & (1u << 28), f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = Xcr0();
  const bool ymm_state = (xcr0 & 0x6) == 0x6, zmm_state = (xcr0 & 0xe6) == 0xe6;
  unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0;
  if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d7)) {
    if (a >= 1) __get_cpuid_count(7, 1, &a71, &b, &c, &d);
  }
  const bool avx2 = b7 & (1u << 5), avx512f = b7 & (1u << 16), avx512dq = b7 & (1u << 17);
  const bool avx512bw = b7 & (1u << 30), avx512vl = b7 & (1u << 31), avx512vnni = c7 & (1u << 11);
  const bool avxvnni = a71 & (1u << 4), avx512bf16 = a71 & (1u << 5);
  const bool amx = (d7 & (1u << 24)) && (d7 & (1u << 25));  // AMX-TILE, AMX-INT8
  const bool base2 = ymm_state && avx2 && fma && f16c;
  const bool base512 = base2 && zmm_state && avx512f && avx512dq && avx512bw && avx512vl;
  f.has[static_cast<int>(SimdTarget::kAvx2)] = base2;
  f.has[static_cast<int>(SimdTarget::kAvx2Vnni)] = base2 && avxvnni;
  f.has[static_cast<int>(SimdTarget::kAvx512)] = base512;
  f.has[static_cast<int>(SimdTarget::kAvx512Vnni)] = base512 && avx512vnni;
  f.has[static_cast<int>(SimdTarget::kAvx512Bf16)] = base512 && avx512bf16;
  f.has[static_cast<int>(SimdTarget::kAvx512Amx)] = base512 && avx512vnni && amx && AmxUsable(xcr0);
#elif defined(__aarch64__)
  f.has[static_cast<int>(SimdTarget::kNeon)] = true;
#if defined(__linux__)
  f.has[static_cast<int>(SimdTarget::kNeonDot)] = getauxval(AT_HWCAP) & (1ul << 20);  // HWCAP_ASIMDDP
#endif
#endif
  return f;
}

const Features& Cpu() {
  static const Features f = Probe();
  return f;
}

}  // namespace

std::string_view SimdTargetName(SimdTarget t) { return kNames[static_cast<int>(t)]; }

std::optional<SimdTarget> ParseSimdTarget(std::string_view name) {
  for (int i = 0; i < kNumSimdTargets; ++i)
    if (kNames[i] == name) return static_cast<SimdTarget>(i);
  return std::nullopt;
}

bool CpuSupports(SimdTarget t) { return Cpu().has[static_cast<int>(t)]; }

std::vector<SimdTarget> CompiledTargets() {
  // The build names each target it compiled besides portable (kernels/CMakeLists.txt).
  std::vector<SimdTarget> out{SimdTarget::kPortable};
#if defined(LS_SIMD_HAS_AVX2)
  out.push_back(SimdTarget::kAvx2);
#endif
#if defined(LS_SIMD_HAS_AVX2_VNNI)
  out.push_back(SimdTarget::kAvx2Vnni);
#endif
#if defined(LS_SIMD_HAS_AVX512)
  out.push_back(SimdTarget::kAvx512);
#endif
#if defined(LS_SIMD_HAS_AVX512_VNNI)
  out.push_back(SimdTarget::kAvx512Vnni);
#endif
#if defined(LS_SIMD_HAS_AVX512_BF16)
  out.push_back(SimdTarget::kAvx512Bf16);
#endif
#if defined(LS_SIMD_HAS_AVX512_AMX)
  out.push_back(SimdTarget::kAvx512Amx);
#endif
#if defined(LS_SIMD_HAS_NEON)
  out.push_back(SimdTarget::kNeon);
#endif
#if defined(LS_SIMD_HAS_NEON_DOT)
  out.push_back(SimdTarget::kNeonDot);
#endif
  return out;
}

bool WithinCap(SimdTarget t, SimdTarget cap) {
  if (t == SimdTarget::kPortable) return true;
  const bool same_arch = (IsX86(t) && IsX86(cap)) || (IsArm(t) && IsArm(cap));
  if (!same_arch || static_cast<int>(t) > static_cast<int>(cap)) return false;
  return Base(t) == t || Base(t) == Base(cap);
}

SimdTarget BestTarget() {
  SimdTarget best = SimdTarget::kPortable;
  for (SimdTarget t : CompiledTargets())
    if (CpuSupports(t)) best = t;
  return best;
}

}  // namespace ls::cpu
