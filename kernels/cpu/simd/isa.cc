// CPU feature probe (CPUID and XGETBV on x86, the auxiliary vector on AArch64) and the targets'
// names, order and caps, all from the rows of targets.def, and the L2 size the kernels block for.
// Compiled for the baseline instruction set. The probe names the CPU's features as Linux's
// /proc/cpuinfo does (the words the rows' `needs` list, which the build's native rule reads from
// that file), and only those the OS enables. On Linux it also asks the kernel for the AMX tile
// state (arch_prctl), which a process must request before its first tile instruction; the grant
// holds for every thread of the process.
#include "kernels/cpu/simd/isa.h"

#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdint>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#if defined(__linux__)
#include <sys/syscall.h>
#endif
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#endif

namespace ls::cpu {
namespace {

struct Row {
  std::string_view name, base, arch, needs;
};

constexpr std::array<Row, kNumSimdTargets> kRows = {{
#define LS_SIMD_TARGET_ROW(id, name, base, arch, families, compile, needs) {name, base, arch, needs},
#include "kernels/cpu/simd/targets.def"
#undef LS_SIMD_TARGET_ROW
}};

#if defined(__x86_64__) || defined(__i386__)
constexpr std::string_view kArch = "x86";
#elif defined(__aarch64__)
constexpr std::string_view kArch = "arm";
#else
constexpr std::string_view kArch = "none";
#endif

// Every base names a base target of the same architecture at or above its row.
constexpr bool RowsAreWellFormed() {
  for (int i = 0; i < kNumSimdTargets; ++i) {
    bool found = false;
    for (int j = 0; j <= i; ++j)
      found |= kRows[j].name == kRows[i].base && kRows[j].base == kRows[j].name && kRows[j].arch == kRows[i].arch;
    if (!found) return false;
  }
  return true;
}
static_assert(RowsAreWellFormed(), "targets.def: a base that is not a base target of the row's architecture above it");

const Row& RowOf(SimdTarget t) { return kRows[static_cast<int>(t)]; }

// Whether a row's target is of this binary's architecture (portable's empty arch: every one).
bool OfThisArch(const Row& r) { return r.arch.empty() || r.arch == kArch; }

// The base target an extension target adds to (a base target is its own base).
SimdTarget Base(SimdTarget t) { return *ParseSimdTarget(RowOf(t).base); }

// The CPU's features that the rows ask for, by their /proc/cpuinfo names.
struct Features {
  std::vector<std::string_view> words;
  bool Has(std::string_view w) const {
    for (std::string_view x : words)
      if (x == w) return true;
    return false;
  }
  // Whether every word of the space-separated list is here.
  bool HasAll(std::string_view list) const {
    while (!list.empty()) {
      const size_t space = list.find(' ');
      const std::string_view w = list.substr(0, space);
      if (!w.empty() && !Has(w)) return false;
      list = space == std::string_view::npos ? std::string_view() : list.substr(space + 1);
    }
    return true;
  }
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
  auto add = [&f](bool has, std::string_view w) {
    if (has) f.words.push_back(w);
  };
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27), avx = c & (1u << 28);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = Xcr0();
  const bool ymm = (xcr0 & 0x6) == 0x6, zmm = ymm && (xcr0 & 0xe6) == 0xe6;
  add(ymm && (c & (1u << 12)), "fma");
  add(ymm && (c & (1u << 29)), "f16c");
  unsigned b7 = 0, c7 = 0, d7 = 0, a71 = 0;
  if (__get_cpuid_count(7, 0, &a, &b7, &c7, &d7)) {
    if (a >= 1) __get_cpuid_count(7, 1, &a71, &b, &c, &d);
  }
  add(ymm && (b7 & (1u << 5)), "avx2");
  add(ymm && (a71 & (1u << 4)), "avx_vnni");
  add(zmm && (b7 & (1u << 16)), "avx512f");
  add(zmm && (b7 & (1u << 17)), "avx512dq");
  add(zmm && (b7 & (1u << 30)), "avx512bw");
  add(zmm && (b7 & (1u << 31)), "avx512vl");
  add(zmm && (c7 & (1u << 11)), "avx512_vnni");
  add(zmm && (a71 & (1u << 5)), "avx512_bf16");
  const bool amx = (d7 & (1u << 24)) && (d7 & (1u << 25)) && AmxUsable(xcr0);  // AMX-TILE, AMX-INT8
  add(amx, "amx_tile");
  add(amx, "amx_int8");
#elif defined(__aarch64__) && defined(__linux__)
  add(getauxval(AT_HWCAP) & (1ul << 20), "asimddp");  // HWCAP_ASIMDDP
#endif
  return f;
}

// Which targets this CPU runs: those of its architecture whose features (and whose base's) it has.
std::array<bool, kNumSimdTargets> Supported() {
  const Features f = Probe();
  std::array<bool, kNumSimdTargets> has{};
  for (int i = 0; i < kNumSimdTargets; ++i) {  // bases come before their extensions
    const auto t = static_cast<SimdTarget>(i);
    const Row& r = kRows[i];
    has[i] = OfThisArch(r) && f.HasAll(r.needs) && (Base(t) == t || has[static_cast<int>(Base(t))]);
  }
  return has;
}

const std::array<bool, kNumSimdTargets>& Cpu() {
  static const std::array<bool, kNumSimdTargets> has = Supported();
  return has;
}

}  // namespace

std::string_view SimdTargetName(SimdTarget t) { return RowOf(t).name; }

std::optional<SimdTarget> ParseSimdTarget(std::string_view name) {
  for (int i = 0; i < kNumSimdTargets; ++i)
    if (kRows[i].name == name) return static_cast<SimdTarget>(i);
  return std::nullopt;
}

bool CpuSupports(SimdTarget t) { return Cpu()[static_cast<int>(t)]; }

std::vector<SimdTarget> CompiledTargets() {
  // The build lists the targets it compiled, portable first (kernels/CMakeLists.txt).
  std::vector<SimdTarget> out;
#define LS_SIMD_COMPILED(id, name) out.push_back(SimdTarget::k##id);
#include "kernels/cpu/simd/compiled_targets.inc"
#undef LS_SIMD_COMPILED
  return out;
}

std::vector<SimdTarget> ArchitectureTargets() {
  std::vector<SimdTarget> out;
  for (int i = 0; i < kNumSimdTargets; ++i)
    if (OfThisArch(kRows[i])) out.push_back(static_cast<SimdTarget>(i));
  return out;
}

bool WithinCap(SimdTarget t, SimdTarget cap) {
  if (t == SimdTarget::kPortable) return true;
  if (RowOf(t).arch != RowOf(cap).arch || static_cast<int>(t) > static_cast<int>(cap)) return false;
  return Base(t) == t || Base(t) == Base(cap);
}

int64_t CpuL2Bytes() {
  static const int64_t bytes = [] {
#if defined(_SC_LEVEL2_CACHE_SIZE)
    const long v = sysconf(_SC_LEVEL2_CACHE_SIZE);
    if (v > 0) return std::clamp<int64_t>(v, int64_t{256} << 10, int64_t{16} << 20);
#endif
    return int64_t{1} << 20;
  }();
  return bytes;
}

SimdTarget BestTarget() {
  SimdTarget best = SimdTarget::kPortable;
  for (SimdTarget t : CompiledTargets())
    if (CpuSupports(t)) best = t;
  return best;
}

}  // namespace ls::cpu
