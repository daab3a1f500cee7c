#!/usr/bin/env python3
"""No code built for a wider instruction set is reachable except through the SIMD dispatch.

Disassembles each binary (objdump) and checks, function by function, that
  - an instruction encoded with VEX or EVEX (every x86 mnemonic that starts with "v": AVX and
    later) appears only in functions of the SIMD targets' namespaces (ls::cpu::simd_avx2...,
    ls::cpu::simd_avx512...), never in baseline code: an inline function or template emitted out
    of line by a kernel source and kept by the linker for baseline callers would show up here;
  - AVX-512 state (zmm registers, opmask registers, xmm16-31) and EVEX-encoded instructions (an
    AVX-512VL form of an xmm or ymm instruction reads like its AVX2 form, so the encoding's first
    byte, 0x62, is checked) appear only in the simd_avx512 namespaces, never in the AVX2 ones;
  - the targets' tables (Table()), which the dispatch calls before it knows a target is usable,
    hold no AVX instruction;
  - nothing calls fma or fmaf through the PLT (the fused multiply-adds are inlined everywhere).
Usage: isa_linkage_test.py BINARY...   (x86-64 only; elsewhere it reports SKIPPED, exit 77)
"""
import platform
import re
import subprocess
import sys

if platform.machine() not in ("x86_64", "AMD64"):
    print("SKIPPED: the check reads x86-64 encodings")
    sys.exit(77)

FUNC = re.compile(r"^[0-9a-f]+ <(.*)>:$")
AVX512_STATE = re.compile(r"%zmm|%k[0-7]\b|\{%k|%xmm(1[6-9]|2[0-9]|3[01])\b|%ymm(1[6-9]|2[0-9]|3[01])\b")
PLT_FMA = re.compile(r"<(fmaf?)@plt>")
# Bytes that may come before an instruction's opcode (operand and address size, segments, rep).
LEGACY_PREFIXES = {"66", "67", "f2", "f3", "2e", "36", "3e", "26", "64", "65"}
# A line worth a closer look: a function's header, or an instruction that is AVX or later (mnemonic
# starting with "v", possibly after an {encoding} prefix), EVEX-encoded (first byte after any legacy
# prefixes 0x62), touching AVX-512 state, or calling fma through the PLT. Everything else (most of a
# binary) is skipped by the regex engine, not looked at line by line.
INTERESTING = re.compile(
    FUNC.pattern
    + r"|^ *[0-9a-f]+:\t(?:(?:" + "|".join(sorted(LEGACY_PREFIXES)) + r") )*62 .*$"
    + r"|^ *[0-9a-f]+:\t[^\t\n]*\t(?:\{[a-z0-9]+\} )?v.*$"
    + r"|^ *[0-9a-f]+:\t[^\n]*(?:" + AVX512_STATE.pattern + "|" + PLT_FMA.pattern + r").*$",
    re.M)


def check(binary, failures):
    out = subprocess.run(["objdump", "-d", "-C", binary], check=True, capture_output=True, text=True).stdout
    func = None
    reported = set()
    functions = 0
    for match in INTERESTING.finditer(out):
        line = match.group(0)
        m = FUNC.match(line)
        if m:
            func = m.group(1)
            functions += 1
            continue
        fields = line.split("\t")
        if func is None or len(fields) < 3:  # not an instruction (a long one's further bytes)
            continue
        encoding = [b for b in fields[1].split() if b not in LEGACY_PREFIXES]
        evex = bool(encoding) and encoding[0] == "62"
        insn = fields[2].strip()
        mnemonic = insn.split()[0] if insn else ""
        if mnemonic.startswith("{"):  # an encoding prefix such as {evex}
            mnemonic = insn.split()[1] if len(insn.split()) > 1 else ""
        in_avx2 = "ls::cpu::simd_avx2" in func
        in_avx512 = "ls::cpu::simd_avx512" in func
        table = func.endswith("::Table()") or "::Table()::" in func
        problem = None
        if mnemonic.startswith("v") and (table or not (in_avx2 or in_avx512)):
            problem = "an AVX instruction outside the SIMD targets' code"
        elif (AVX512_STATE.search(insn) or evex) and not in_avx512:
            problem = "AVX-512 state outside the AVX-512 targets"
        elif PLT_FMA.search(insn):
            problem = "a call to " + PLT_FMA.search(insn).group(1) + " through the PLT"
        if problem and (func, problem) not in reported:
            reported.add((func, problem))
            failures.append(f"{binary}: {func}: {problem}: {insn}")
    if functions == 0:
        failures.append(f"{binary}: objdump listed no functions")
    print(f"{binary}: {functions} functions checked")


failures = []
for binary in sys.argv[1:]:
    check(binary, failures)

for f in failures[:50]:
    print("FAIL", f)
if failures:
    print(f"{len(failures)} problems")
    sys.exit(1)
print("ok: wider instruction sets only inside their targets, no fma through the PLT")
