# Which CPU kernel targets (kernels/cpu/simd/isa.h) a build compiles, from LATENTSERVE_SIMD_TARGETS:
#   all     every target of the architecture: the binary runs at full speed on any CPU of it (the
#           default, and what packages and images ship);
#   native  the targets this machine's CPU runs, read from /proc/cpuinfo with the rules of the
#           runtime probe (kernels/cpu/simd/isa.cc): a local build that compiles no kernel it cannot
#           run (on an AVX2-only CPU a third less kernel code; tools/run.sh and the sanitizer builds);
#   a list  such as "avx2;avx2_vnni": those (an extension target needs its base target).
# The portable target is always compiled: it is the fallback and the reference of every kernel.
# Usable in script mode too (tests/cmake/simd_targets_test.cmake).

# The targets' rows, from kernels/cpu/simd/targets.def: LS_SIMD_TARGETS (every name, in order),
# LS_SIMD_X86_TARGETS and LS_SIMD_ARM_TARGETS, and per name LS_SIMD_ID_<name> (the enum suffix),
# LS_SIMD_BASE_<name>, LS_SIMD_FAMILIES_<name> (a list), LS_SIMD_COMPILE_<name> (the compile
# attribute) and LS_SIMD_NEEDS_<name> (the /proc/cpuinfo feature words, a list).
set(ls_simd_def ${CMAKE_CURRENT_LIST_DIR}/../kernels/cpu/simd/targets.def)
if(NOT CMAKE_SCRIPT_MODE_FILE)
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${ls_simd_def})
endif()
file(READ ${ls_simd_def} ls_simd_text)
string(REGEX REPLACE "//[^\n]*" "" ls_simd_text "${ls_simd_text}")
string(REGEX MATCHALL "LS_SIMD_TARGET_ROW\\([^)]*\\)" ls_simd_rows "${ls_simd_text}")
set(LS_SIMD_TARGETS "")
set(LS_SIMD_X86_TARGETS "")
set(LS_SIMD_ARM_TARGETS "")
set(ls_q "[ \t\n]*\"([^\"]*)\"")  # one quoted field
foreach(row IN LISTS ls_simd_rows)
  if(NOT row MATCHES "^LS_SIMD_TARGET_ROW\\([ \t\n]*([A-Za-z0-9]+),${ls_q},${ls_q},${ls_q},${ls_q},${ls_q},${ls_q}[ \t\n]*\\)$")
    message(FATAL_ERROR "${ls_simd_def}: a row that is not Id and six quoted fields: ${row}")
  endif()
  set(name ${CMAKE_MATCH_2})
  set(arch "${CMAKE_MATCH_4}")
  set(families "${CMAKE_MATCH_5}")
  set(needs "${CMAKE_MATCH_7}")
  list(APPEND LS_SIMD_TARGETS ${name})
  set(LS_SIMD_ID_${name} ${CMAKE_MATCH_1})
  set(LS_SIMD_BASE_${name} ${CMAKE_MATCH_3})
  set(LS_SIMD_COMPILE_${name} "${CMAKE_MATCH_6}")
  string(REGEX REPLACE "[ \t]+" ";" LS_SIMD_FAMILIES_${name} "${families}")
  string(REGEX REPLACE "[ \t]+" ";" LS_SIMD_NEEDS_${name} "${needs}")
  if(arch STREQUAL "x86")
    list(APPEND LS_SIMD_X86_TARGETS ${name})
  elseif(arch STREQUAL "arm")
    list(APPEND LS_SIMD_ARM_TARGETS ${name})
  endif()
endforeach()
if(NOT "portable" IN_LIST LS_SIMD_TARGETS)
  message(FATAL_ERROR "${ls_simd_def}: no portable target")
endif()

# The base target an extension target adds its kernels to (a base target names itself).
function(ls_simd_base target out)
  set(${out} ${LS_SIMD_BASE_${target}} PARENT_SCOPE)
endfunction()

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
