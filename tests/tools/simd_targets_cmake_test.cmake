# cmake/SimdTargets.cmake in script mode: which CPU kernel targets LATENTSERVE_SIMD_TARGETS selects
# for CPUs described by their /proc/cpuinfo feature lines, and the errors of wrong lists. (That the
# rule agrees with the runtime probe on this machine: tests/kernels/simd_targets_test.cc.)
# Usage: cmake -DSRC=SOURCE_DIR -DWORK=SCRATCH_DIR -P simd_targets_cmake_test.cmake
cmake_minimum_required(VERSION 3.25)
include(${SRC}/cmake/SimdTargets.cmake)

function(expect what got want)
  if(NOT "${got}" STREQUAL "${want}")
    message(SEND_ERROR "${what}: got '${got}', want '${want}'")
  endif()
endfunction()

# native for one CPU: its feature line written as /proc/cpuinfo shows it, after other lines.
function(expect_native name arch line want)
  set(file ${WORK}/${name}.cpuinfo)
  file(WRITE ${file} "processor\t: 0\nvendor_id\t: test\nvmx flags\t: vnmi avx512f\n${line}\n\nprocessor\t: 1\n")
  ls_resolve_simd_targets(${arch} native ${file} got)
  expect("native on ${name}" "${got}" "${want}")
endfunction()

# AMD EPYC 7002 (Zen 2), as a cloud VM shows it: AVX2, FMA and F16C, no AVX-512, no AVX-VNNI.
expect_native(zen2 x86 "flags\t\t: fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ht syscall nx mmxext fxsr_opt pdpe1gb rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid extd_apicid tsc_known_freq pni pclmulqdq ssse3 fma cx16 sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm cmp_legacy cr8_legacy abm sse4a misalignsse 3dnowprefetch osvw topoext ssbd ibrs ibpb stibp vmmcall fsgsbase tsc_adjust bmi1 avx2 smep bmi2 rdseed adx smap clflushopt clwb sha_ni xsaveopt xsavec xgetbv1 clzero xsaveerptr wbnoinvd arat umip rdpid"
              "avx2")
# Intel Sapphire Rapids: every x86 target.
expect_native(sapphire_rapids x86 "flags\t\t: fpu sse sse2 ssse3 fma sse4_1 sse4_2 avx f16c avx2 bmi2 avx512f avx512dq avx512ifma avx512cd avx512bw avx512vl avx512_bf16 avx_vnni amx_tile avx512vbmi avx512_vnni avx512_bitalg avx512_vpopcntdq amx_bf16 amx_int8"
              "avx2;avx2_vnni;avx512;avx512_vnni;avx512_bf16;avx512_amx")
# AMX tiles without AVX512-VNNI (no such CPU ships; a hypervisor may mask the one): not taken.
expect_native(amx_without_vnni x86 "flags\t\t: fpu sse sse2 fma avx f16c avx2 avx512f avx512dq avx512bw avx512vl avx512_bf16 amx_tile amx_int8"
              "avx2;avx512;avx512_bf16")
# Intel Ice Lake server: AVX512-VNNI, but neither AVX-VNNI nor AVX512-BF16.
expect_native(ice_lake x86 "flags\t\t: fpu sse sse2 fma avx f16c avx2 avx512f avx512dq avx512cd avx512bw avx512vl avx512vbmi avx512_vnni"
              "avx2;avx512;avx512_vnni")
# Intel Alder Lake client: AVX-VNNI on 256-bit registers, no AVX-512.
expect_native(alder_lake x86 "flags\t\t: fpu sse sse2 fma avx f16c avx2 avx_vnni" "avx2;avx2_vnni")
# An AVX-512 foundation without BW/VL (Knights Landing): AVX2 only.
expect_native(knights_landing x86 "flags\t\t: fpu sse sse2 fma avx f16c avx2 avx512f avx512cd avx512er avx512pf" "avx2")
# An extension's feature without its base's (a hypervisor that masks AVX-512 BW and VL): not taken.
expect_native(masked_base x86 "flags\t\t: fpu sse sse2 fma avx f16c avx2 avx512f avx512dq avx512_vnni avx512_bf16" "avx2")
# Without AVX (Westmere), and AVX2 without FMA: the portable target alone.
expect_native(westmere x86 "flags\t\t: fpu sse sse2 ssse3 sse4_1 sse4_2 popcnt aes" "")
expect_native(avx2_without_fma x86 "flags\t\t: fpu sse sse2 avx f16c avx2" "")
# Arm Neoverse N1 (dot product) and Cortex-A72 (without).
expect_native(neoverse_n1 arm "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp ssbs"
              "neon;neon_dot")
expect_native(cortex_a72 arm "Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 cpuid" "neon")

# all: every target of the architecture, whatever the CPU.
ls_resolve_simd_targets(x86 all "" got)
expect("all on x86" "${got}" "avx2;avx2_vnni;avx512;avx512_vnni;avx512_bf16;avx512_amx")
ls_resolve_simd_targets(arm all "" got)
expect("all on arm" "${got}" "neon;neon_dot")

# Lists: in the targets' order, portable allowed; an unknown name or an extension without its base
# is an error that names it.
ls_resolve_simd_targets(x86 "avx512;portable;avx2" "" got)
expect("a list" "${got}" "avx2;avx512")
expect("a list's error" "${got_ERROR}" "")
ls_resolve_simd_targets(x86 "avx2;neon" "" got)
expect("an Arm target on x86" "${got}" "")
if(NOT got_ERROR MATCHES "'neon' is not a CPU kernel target")
  message(SEND_ERROR "an Arm target on x86: error '${got_ERROR}'")
endif()
ls_resolve_simd_targets(x86 "avx2;avx512_vnni" "" got)
if(NOT got_ERROR MATCHES "'avx512_vnni' adds kernels to 'avx512'")
  message(SEND_ERROR "an extension without its base: error '${got_ERROR}'")
endif()
ls_resolve_simd_targets(arm "neon_dot" "" got)
if(NOT got_ERROR MATCHES "'neon_dot' adds kernels to 'neon'")
  message(SEND_ERROR "neon_dot without neon: error '${got_ERROR}'")
endif()
