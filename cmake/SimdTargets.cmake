# Which CPU kernel targets (kernels/cpu/simd/isa.h) a build compiles, from LATENTSERVE_SIMD_TARGETS:
#   all     every target of the architecture: the binary runs at full speed on any CPU of it (the
#           default, and what packages and images ship);
#   native  the targets this machine's CPU runs, read from /proc/cpuinfo with the rules of the
#           runtime probe (kernels/cpu/simd/isa.cc): a local build that compiles no kernel it cannot
#           run (on an AVX2-only CPU a third less kernel code; tools/run.sh and the sanitizer builds);
#   a list  such as "avx2;avx2_vnni": those (an extension target needs its base target).
# The portable target is always compiled: it is the fallback and the reference of every kernel.
# Usable in script mode too (tests/cmake/simd_targets_test.cmake).

set(LS_SIMD_X86_TARGETS avx2 avx2_vnni avx512 avx512_vnni avx512_bf16 avx512_amx)
set(LS_SIMD_ARM_TARGETS neon neon_dot)

# The base target an extension target adds its kernels to (a base target names itself).
function(ls_simd_base target out)
  if(target MATCHES "^avx512")
    set(${out} avx512 PARENT_SCOPE)
  elseif(target MATCHES "^avx2")
    set(${out} avx2 PARENT_SCOPE)
  elseif(target MATCHES "^neon")
    set(${out} neon PARENT_SCOPE)
  else()
    set(${out} ${target} PARENT_SCOPE)
  endif()
endfunction()

# The /proc/cpuinfo feature words each target needs (the runtime probe's rules); an extension
# target also needs its base target. Advanced SIMD is part of AArch64: neon needs nothing.
set(LS_SIMD_NEEDS_avx2 avx2 fma f16c)
set(LS_SIMD_NEEDS_avx2_vnni avx_vnni)
set(LS_SIMD_NEEDS_avx512 avx2 fma f16c avx512f avx512dq avx512bw avx512vl)
set(LS_SIMD_NEEDS_avx512_vnni avx512_vnni)
set(LS_SIMD_NEEDS_avx512_bf16 avx512_bf16)
# AMX: the CPU's features only; whether the OS grants this process the tile state is known at run
# time (the probe asks the kernel), so native may compile a target the probe then refuses.
set(LS_SIMD_NEEDS_avx512_amx avx512_vnni amx_tile amx_int8)
set(LS_SIMD_NEEDS_neon "")
set(LS_SIMD_NEEDS_neon_dot asimddp)

# The targets of `arch` (x86 or arm) that a CPU with the given /proc/cpuinfo text runs.
function(ls_simd_targets_of_cpuinfo arch cpuinfo out)
  set(${out} "" PARENT_SCOPE)
  # The first processor's feature line (x86: "flags", Arm: "Features"), as a list of words.
  if(NOT cpuinfo MATCHES "(^|\n)(flags|Features)[ \t]*:([^\n]*)")
    return()
  endif()
  string(STRIP "${CMAKE_MATCH_3}" line)
  string(REGEX REPLACE "[ \t]+" ";" words "${line}")
  set(known "")
  if(arch STREQUAL "x86")
    set(known ${LS_SIMD_X86_TARGETS})
  elseif(arch STREQUAL "arm")
    set(known ${LS_SIMD_ARM_TARGETS})
  endif()
  set(targets "")
  foreach(t IN LISTS known)  # bases before their extensions
    ls_simd_base(${t} base)
    set(runs TRUE)
    if(NOT base STREQUAL t AND NOT base IN_LIST targets)
      set(runs FALSE)
    endif()
    foreach(f IN LISTS LS_SIMD_NEEDS_${t})
      if(NOT f IN_LIST words)
        set(runs FALSE)
      endif()
    endforeach()
    if(runs)
      list(APPEND targets ${t})
    endif()
  endforeach()
  set(${out} "${targets}" PARENT_SCOPE)
endfunction()

# The targets besides portable that `request` (all, native or a list) compiles for `arch`;
# `cpuinfo_file` is read for native (where it cannot be read, native means all, with a warning).
# A wrong request leaves `out` empty and says what was wrong in `<out>_ERROR`.
function(ls_resolve_simd_targets arch request cpuinfo_file out)
  set(${out}_ERROR "" PARENT_SCOPE)
  set(known ${LS_SIMD_X86_TARGETS})
  if(arch STREQUAL "arm")
    set(known ${LS_SIMD_ARM_TARGETS})
  elseif(NOT arch STREQUAL "x86")
    set(known "")
  endif()
  if(request STREQUAL "all" OR request STREQUAL "")
    set(${out} "${known}" PARENT_SCOPE)
    return()
  endif()
  if(request STREQUAL "native")
    if(NOT cpuinfo_file OR NOT EXISTS "${cpuinfo_file}")
      message(WARNING "LATENTSERVE_SIMD_TARGETS=native: this machine's CPU features cannot be read here; compiling every target")
      set(${out} "${known}" PARENT_SCOPE)
      return()
    endif()
    file(READ "${cpuinfo_file}" text)
    ls_simd_targets_of_cpuinfo("${arch}" "${text}" targets)
    set(${out} "${targets}" PARENT_SCOPE)
    return()
  endif()
  set(${out} "" PARENT_SCOPE)
  string(REPLACE ";" ", " choices "portable;${known}")
  foreach(t IN LISTS request)
    if(NOT t STREQUAL "portable" AND NOT t IN_LIST known)
      set(${out}_ERROR "'${t}' is not a CPU kernel target of this architecture (expected all, native or a list of: ${choices})"
          PARENT_SCOPE)
      return()
    endif()
  endforeach()
  foreach(t IN LISTS request)
    ls_simd_base(${t} base)
    if(NOT base IN_LIST request)
      set(${out}_ERROR "'${t}' adds kernels to '${base}', which the list leaves out" PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(ordered "")  # in the order of the known targets
  foreach(t IN LISTS known)
    if(t IN_LIST request)
      list(APPEND ordered ${t})
    endif()
  endforeach()
  set(${out} "${ordered}" PARENT_SCOPE)
endfunction()
