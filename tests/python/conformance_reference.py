#!/usr/bin/python3
"""Writes tests/conformance_reference.inc: the special-value inputs of
tests/test_conformance.cpp and PyTorch's results for them.

    /usr/bin/python3 tests/python/conformance_reference.py > tests/conformance_reference.inc

Needs torch (1.13 made the committed file); the test itself does not. Every
unary and binary op of anvil runs on every special value (binary ops: every
ordered pair, out[i * n + j] = op(v[i], v[j])) for each dtype anvil's frontend
accepts for it; a pair is left out when PyTorch rejects it or returns another
dtype than anvil (anvil's rule is `anvil_out_dtype` below). Values are bit
patterns of the dtype in hex (bool: 0/1 digits), so -0, NaN and denormals
survive.

Integer division: anvil's frontend divides integers in f32, as PyTorch; the
integer Div primitive itself truncates (src/kernels/scalar.h). Its reference
is torch.div(rounding_mode='trunc') except where PyTorch raises or traps:
x / 0, where anvil defines 0, and INT_MIN / -1, where anvil defines INT_MIN.
"""
import math
import re
import struct
import sys
from pathlib import Path

import numpy as np
import torch

nan, inf = float("nan"), float("inf")

F32 = [nan, inf, -inf, 0.0, -0.0, 1.401298464324817e-45, -1.401298464324817e-45, 1.1754942106924411e-38,
       1.1754943508222875e-38, 1.0, -1.0, 0.5, -2.0, 2.5, -2.5, 3.0, 10.0, -10.0, 88.5, -88.5, -104.0,
       3.4028234663852886e38, -3.4028234663852886e38]
F64 = [nan, inf, -inf, 0.0, -0.0, 5e-324, -5e-324, 2.225073858507201e-308, 2.2250738585072014e-308, 1.0, -1.0,
       0.5, -2.0, 2.5, -2.5, 3.0, 10.0, -10.0, 709.5, -709.5, -746.0, 1.7976931348623157e308,
       -1.7976931348623157e308]
I32 = [-2**31, -2**31 + 1, -46341, -100, -3, -2, -1, 0, 1, 2, 3, 31, 46341, 2**31 - 1]
I64 = [-2**63, -2**63 + 1, -3037000500, -100, -3, -2, -1, 0, 1, 2, 3, 63, 3037000500, 2**63 - 1]
U8 = [0, 1, 2, 3, 7, 15, 16, 127, 128, 255]
BOOL = [0, 1]

DTYPES = {"f32": (torch.float32, F32), "f64": (torch.float64, F64), "i32": (torch.int32, I32),
          "i64": (torch.int64, I64), "u8": (torch.uint8, U8), "bool": (torch.bool, BOOL)}
NAMES = {v[0]: k for k, v in DTYPES.items()}

# The unary ops of one tensor and their dtype rule, from the op table: rows
# `ANVIL_UNARY_OP(Op, name, rule, ...` of include/anvil/ops.def, in enum order.
OPS_DEF = Path(__file__).resolve().parents[2] / "include" / "anvil" / "ops.def"
UNARY_ROWS = re.findall(r"^ANVIL_UNARY_OP\(\s*\w+\s*,\s*(\w+)\s*,\s*(\w+)\s*,", OPS_DEF.read_text(), re.M)
FLOAT_ONLY = {name for name, rule in UNARY_ROWS if rule == "Float"} | {"atan2", "copysign", "hypot", "logaddexp", "logaddexp2"}
TO_BOOL = {name for name, rule in UNARY_ROWS if rule == "ToBool"}
COMPARE = {"eq", "ne", "lt", "le", "gt", "ge"}

# Clamp bounds per dtype class: (name, lo, hi); None = open.
CLAMP_FLOAT = [("clamp(-1,1)", -1.0, 1.0), ("clamp(0.5,)", 0.5, None), ("clamp(,-0.5)", None, -0.5),
               ("clamp(2,1)", 2.0, 1.0), ("clamp(nan,1)", nan, 1.0)]
CLAMP_INT = [("clamp(-5,5)", -5, 5), ("clamp(0,)", 0, None), ("clamp(,0)", None, 0), ("clamp(5,-5)", 5, -5)]
CLAMP_U8 = [("clamp(3,100)", 3, 100), ("clamp(100,3)", 100, 3)]


def clamp_cases(dt):
    return CLAMP_FLOAT if dt in ("f32", "f64") else CLAMP_U8 if dt == "u8" else CLAMP_INT if dt != "bool" else []


def anvil_out_dtype(op, dt):
    if op in COMPARE or op in TO_BOOL:
        return "bool"
    if op in FLOAT_ONLY or op == "div":
        return dt if dt in ("f32", "f64") else "f32"
    return dt


def bits(t):
    name = NAMES[t.dtype]
    vals = t.flatten().tolist()
    if name == "bool":
        return "".join("1" if v else "0" for v in vals)
    if name == "f32":
        return " ".join("%08x" % struct.unpack("<I", struct.pack("<f", v))[0] for v in vals)
    if name == "f64":
        return " ".join("%016x" % struct.unpack("<Q", struct.pack("<d", v))[0] for v in vals)
    width = {"i32": 32, "i64": 64, "u8": 8}[name]
    return " ".join("%x" % (v & ((1 << width) - 1)) for v in vals)


def gelu_aten(x):
    """ATen's own GELU kernel: PyTorch's f32 CPU path goes through oneDNN when it
    is enabled, which returns +0 for gelu(-0) and gelu(-large); ATen's kernel
    (and PyTorch's f64) computes x/2 (1 + erf(x/sqrt 2)) and keeps the -0."""
    with torch.backends.mkldnn.flags(enabled=False):
        return torch.nn.functional.gelu(x)


def log1p_exact(x):
    """torch.log1p, except where it overflows: PyTorch's CPU log1p is SLEEF's,
    which returns inf above 1e38 (f32) and 1e307 (f64), where log1p is finite
    (88.7 at FLT_MAX). There the reference is the correctly rounded value."""
    r = torch.log1p(x)
    if not r.is_floating_point():
        return r
    wrong = torch.isinf(r) & torch.isfinite(x)
    exact = torch.tensor([math.log1p(v) for v in x.double().tolist()], dtype=torch.float64).to(r.dtype)
    return torch.where(wrong, exact, r)


def numpy_shift(fn, a, b):
    """NumPy's shifts: PyTorch 1.13's CPU leaves a count outside [0, bits) to the
    processor (int32 << 32 is the identity there, int64 << 32 is not); NumPy and
    PyTorch 2 define it (0; -1 for >> of a negative). Integers only."""
    if a.dtype == torch.bool or a.is_floating_point():
        raise TypeError("shifts take integers")
    return torch.from_numpy(fn(a.numpy(), b.numpy()))


def int_trunc_div(a, b, lo):
    safe = (b != 0) & ~((a == lo) & (b == -1))
    q = torch.div(a, torch.where(safe, b, torch.ones_like(b)), rounding_mode="trunc")
    q = torch.where(b == 0, torch.zeros_like(q), q)
    return torch.where((a == lo) & (b == -1), a, q)


def floor_divide_ref(a, b):
    """Python's // (torch.floor_divide), with the array API's floor(a / b)
    where an operand is not finite, b is 0 (PyTorch gives a / b there and
    Python's -1 for 1 // -inf) or a / b overflows (PyTorch's CPU gives NaN);
    integers: // 0 is 0 and INT_MIN // -1 is INT_MIN, where PyTorch raises or
    traps."""
    if a.is_floating_point():
        regular = torch.isfinite(a) & torch.isfinite(b) & (b != 0) & torch.isfinite(a / b)
        return torch.where(regular, torch.floor_divide(a, torch.where(regular, b, torch.ones_like(b))),
                           torch.floor(a / b))
    if a.dtype == torch.bool:
        raise TypeError("floor_divide takes numbers")
    lo = torch.iinfo(a.dtype).min
    wraps = (a == lo) & (b == -1) if lo < 0 else torch.zeros_like(a, dtype=torch.bool)
    safe = (b != 0) & ~wraps
    q = torch.floor_divide(a, torch.where(safe, b, torch.ones_like(b)))
    return torch.where(wraps, a, torch.where(b == 0, torch.zeros_like(q), q))


def remainder_ref(a, b):
    """Python's % (NumPy's remainder): a zero result takes the divisor's sign,
    where PyTorch keeps the dividend's; integers % 0 and INT_MIN % -1 are 0."""
    if a.is_floating_point():
        with np.errstate(all="ignore"):
            return torch.from_numpy(np.remainder(a.numpy(), b.numpy()))
    if a.dtype == torch.bool:
        raise TypeError("remainder takes numbers")
    safe = (b != 0) & (b != -1) if torch.iinfo(a.dtype).min < 0 else b != 0
    r = torch.remainder(a, torch.where(safe, b, torch.ones_like(b)))
    return torch.where(safe, r, torch.zeros_like(r))


def in_f32(fn):
    """fn where integers and bool compute in f32, as anvil's Float rows do
    (PyTorch's hypot, logaddexp and logaddexp2 reject them)."""
    return lambda a, b: fn(a, b) if a.is_floating_point() else fn(a.float(), b.float())


def logaddexp_ref(a, b):
    """NumPy's logaddexp, max + log1p(exp(-|a - b|)): PyTorch 1.13's CPU
    rounds 1 + exp(-|a - b|) before its log, so logaddexp(0, -10) comes out
    4e-4 relative too high in f32 and logaddexp(0, -88.5) is 0."""
    with np.errstate(all="ignore"):
        return torch.from_numpy(np.logaddexp(a.numpy(), b.numpy()))


def logaddexp2_ref(a, b):
    """NumPy's logaddexp2, as logaddexp_ref (PyTorch 1.13's CPU rounds the same way)."""
    with np.errstate(all="ignore"):
        return torch.from_numpy(np.logaddexp2(a.numpy(), b.numpy()))


# torch.<name> unless PyTorch's function for the op is another.
UNARY_REFERENCE = {"log1p": lambda x: log1p_exact(x), "gelu": lambda x: gelu_aten(x),
                   "softplus": torch.nn.functional.softplus}
UNARY = {name: UNARY_REFERENCE.get(name, getattr(torch, name, None)) for name, _ in UNARY_ROWS}


def gelu_backward_aten(g, x):
    """ATen's own kernel, as gelu_aten (oneDNN's f32 path is another)."""
    with torch.backends.mkldnn.flags(enabled=False):
        return torch.ops.aten.gelu_backward(g, x)


BINARY = {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "pow": torch.pow,
    "maximum": torch.maximum, "minimum": torch.minimum, "eq": torch.eq, "ne": torch.ne, "lt": torch.lt,
    "le": torch.le, "gt": torch.gt, "ge": torch.ge, "atan2": torch.atan2, "copysign": torch.copysign,
    "hypot": in_f32(torch.hypot), "logaddexp": in_f32(logaddexp_ref),
    "logaddexp2": in_f32(logaddexp2_ref), "floor_divide": floor_divide_ref, "remainder": remainder_ref,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or, "bitwise_xor": torch.bitwise_xor,
    "bitwise_left_shift": lambda a, b: numpy_shift(np.left_shift, a, b),
    "bitwise_right_shift": lambda a, b: numpy_shift(np.right_shift, a, b),
}
# The activations' backward ops (anvil's internal BinaryOps; a = grad, b = the
# forward's output or input), through the ATen ops PyTorch's autograd calls.
# Floats only in anvil.
ACTIVATION_BACKWARD = {
    "relu_backward": lambda g, y: torch.ops.aten.threshold_backward(g, y, 0),
    "sigmoid_backward": torch.ops.aten.sigmoid_backward, "tanh_backward": torch.ops.aten.tanh_backward,
    "gelu_backward": gelu_backward_aten,
    "softplus_backward": lambda g, x: torch.ops.aten.softplus_backward(g, x, 1, 20),
}


def main():
    out = sys.stdout
    out.write("// Generated by tests/python/conformance_reference.py from PyTorch %s (CPU); do not edit.\n"
              % torch.__version__)
    out.write("//   /usr/bin/python3 tests/python/conformance_reference.py > tests/conformance_reference.inc\n")
    out.write("// Bit patterns in hex (bool: one 0/1 digit each); binary ops: out[i * n + j] = op(v[i], v[j]).\n")
    out.write("inline constexpr RefInputs kRefInputs[] = {\n")
    for name, (dt, vals) in DTYPES.items():
        out.write('    {"%s", "%s"},\n' % (name, bits(torch.tensor(vals, dtype=dt))))
    out.write("};\n\ninline constexpr RefResult kRefResults[] = {\n")
    left_out = []
    for name, (dt, vals) in DTYPES.items():
        x = torch.tensor(vals, dtype=dt)
        n = len(vals)
        cases = [(op, lambda f=f: f(x)) for op, f in UNARY.items()]
        for cname, lo, hi in clamp_cases(name):
            cases.append((cname, lambda lo=lo, hi=hi: torch.clamp(x, min=lo, max=hi)))
        a, b = x.repeat_interleave(n), x.repeat(n)
        cases += [(op, lambda f=f: f(a, b)) for op, f in BINARY.items()]
        if name in ("f32", "f64"):
            cases += [(op, lambda f=f: f(a, b)) for op, f in ACTIVATION_BACKWARD.items()]
        if name in ("i32", "i64", "u8"):
            lo = torch.iinfo(dt).min
            cases.append(("div_int", lambda lo=lo: int_trunc_div(a, b, lo)))
        for op, f in cases:
            base = op.split("(")[0]
            want = name if op == "div_int" else anvil_out_dtype(base, name)
            try:
                r = f()
            except Exception as e:  # PyTorch rejects the pair
                left_out.append("%s %s: %s" % (op, name, str(e).splitlines()[0][:70]))
                continue
            if NAMES[r.dtype] != want:
                left_out.append("%s %s: PyTorch gives %s, anvil %s" % (op, name, NAMES[r.dtype], want))
                continue
            out.write('    {"%s", "%s", "%s", "%s"},\n' % (op, name, want, bits(r)))
    out.write("};\n")
    out.write("// Without a PyTorch reference:\n")
    for line in left_out:
        out.write("//   %s\n" % line)


if __name__ == "__main__":
    main()
