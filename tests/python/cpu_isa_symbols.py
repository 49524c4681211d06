#!/usr/bin/env python3
"""No AVX-512 instruction outside the avx512 build of the CPU kernels.

Note [One kernel source, a build per instruction set] (src/backends/cpu/isa.h):
the AVX-512 build's inline code must never stand in for another build's, or a
CPU without AVX-512 would run it. Disassembles libanvil and fails on every
function that holds an AVX-512 instruction (a zmm or mask register, the upper
sixteen vector registers, an EVEX-only mnemonic) and is not in the
isa_avx512 namespace, nor libxsmm's (statically linked, with its own CPUID
dispatch), nor a local clone.

usage: cpu_isa_symbols.py LIBANVIL (exit 77, a skip, without objdump)
"""
import re
import shutil
import subprocess
import sys

AVX512 = re.compile(
    r"%zmm|%k[0-7]\b|%[xy]mm(1[6-9]|2\d|3[01])\b|\{1to|vpternlog|vperm[it]2|vpmov[su]*[qdw][bwd]\b|"
    r"2u?qq\b|u?qq2|2udq\b|udq2|vrndscale|vrange|vreduce|vgetexp|vgetmant|vscalef|vfixupimm|vrcp14|"
    r"vrsqrt14|vpabsq|vp(max|min)[su]q|vpsraq|vpmullq|vpro[lr]|valign[dq]|vpcompress|vpexpand|blendm|"
    r"vpconflict|vplzcnt|[if](32x4|64x2|32x8|64x4)|vpermw|vps[lr][la]vw")
# GCC's clones ("[clone .constprop.0]", .isra, .part, .cold) are local
# symbols: called only from their own object, so one in an avx512 object
# serves avx512 code alone.
ALLOWED = re.compile(r"isa_avx512|^libxsmm|^internal_|^LIBXSMM|\[clone \.")


def main(lib):
    if shutil.which("objdump") is None:
        print("skipped: no objdump here")
        return 77
    dis = subprocess.run(["objdump", "-d", "--no-show-raw-insn", "-C", lib], check=True, capture_output=True,
                         text=True).stdout
    function, offending, checked = None, {}, 0
    header = re.compile(r"^[0-9a-f]+ <(.*)>:$")
    skip = True  # outside any function, or in one that may hold AVX-512
    for line in dis.splitlines():
        if line.endswith(">:"):
            m = header.match(line)
            if m:
                function = m.group(1)
                checked += 1
                skip = bool(ALLOWED.search(function))
                continue
        # Only vector (v...) and mask (k...) instructions name AVX-512's
        # registers; testing that first keeps the run to seconds.
        if skip or ("\tv" not in line and "\tk" not in line):
            continue
        if AVX512.search(line):
            offending.setdefault(function, line.strip())
    print(f"{checked} functions in {lib}")
    for f, insn in sorted(offending.items())[:40]:
        print(f"AVX-512 outside isa_avx512: {f}\n    {insn}")
    if offending:
        print(f"{len(offending)} functions")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
