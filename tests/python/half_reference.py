"""Reference for tests/test_core_half.cpp: every f16 bit pattern through NumPy.

Prints one line per pattern h = 0..65535: "<f32 bits of float16(h)> <f16 bits of
that f32 converted back>", both in hex. Run with /usr/bin/python3 (NumPy).
"""
import sys

import numpy as np

h = np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16)
f = h.astype(np.float32)
back = f.astype(np.float16).view(np.uint16)
bits = f.view(np.uint32)
sys.stdout.write("".join(f"{int(a):08x} {int(b):04x}\n" for a, b in zip(bits, back)))
