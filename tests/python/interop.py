"""Interop between anvil and the reference implementations (the `safetensors`
package and numpy), bit for bit.

    interop.py write-safetensors FILE   # the reference writes, anvil reads
    interop.py check-safetensors FILE   # anvil wrote, the reference reads
    interop.py write-npy DIR            # numpy writes one .npy per case
    interop.py check-npy DIR            # anvil wrote them; numpy reads

The cases and the byte pattern must match tests/io_test_support.h. The
safetensors side goes through safetensors.torch, the reference's only
framework with bfloat16 (torch comes from the system site packages).
"""
import io
import os
import sys

import numpy as np
import torch
from safetensors import safe_open
from safetensors.torch import load_file, save_file

MASK = (1 << 64) - 1
CASES = [
    ("a.f32", "f32", (2, 3), 1),
    ("b.f64", "f64", (5,), 2),
    ("c.i32", "i32", (4, 1, 2), 3),
    ("d.i64", "i64", (3,), 4),
    ("e.u8", "u8", (7,), 5),
    ("f.bool", "bool", (2, 2), 6),
    ("g.empty", "f32", (0, 3), 7),
    ("h.scalar", "f64", (), 8),
    ("i.big", "f32", (64, 33), 9),
    ("j.f16", "f16", (3, 5), 12),
    ("k.bf16", "bf16", (4, 3), 13),
]
# bf16's bits as uint16: NumPy has no bfloat16 (torch carries it, and .npy skips it).
NUMPY = {"f32": "<f4", "f64": "<f8", "i32": "<i4", "i64": "<i8", "u8": "|u1", "bool": "|b1", "f16": "<f2",
         "bf16": "<u2"}
NPY_CASES = [c for c in CASES if c[1] != "bf16"]
METADATA = {"format": "np", "note": "anvil \u2713 interop"}


def pattern(dtype, shape, salt):
    dt = np.dtype(NUMPY[dtype])
    numel = int(np.prod(shape, dtype=np.int64))
    out = bytearray(numel * dt.itemsize)
    state = (salt * 0x9E3779B97F4A7C15 + 1) & MASK
    for i in range(len(out)):
        state = (state * 6364136223846793005 + 1442695040888963407) & MASK
        out[i] = (state >> 40) & 1 if dtype == "bool" else state >> 56
    return np.frombuffer(bytes(out), dtype=dt).reshape(shape)


def to_torch(dtype, array):
    if dtype == "bf16":
        return torch.from_numpy(array.view(np.int16).copy()).view(torch.bfloat16)
    return torch.from_numpy(array.copy())


def from_torch(t):
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16)
    return t.numpy()


def same(name, got, want):
    if got.dtype != want.dtype or got.shape != want.shape:
        return f"{name}: expected {want.dtype}{want.shape}, got {got.dtype}{got.shape}"
    if np.ascontiguousarray(got).tobytes() != want.tobytes():
        return f"{name}: the bytes differ"
    return None


def finish(errors):
    for e in errors:
        print("interop:", e, file=sys.stderr)
    print("interop: ok" if not errors else f"interop: {len(errors)} mismatches")
    sys.exit(1 if errors else 0)


def main():
    cmd, target = sys.argv[1], sys.argv[2]
    errors = []
    if cmd == "write-safetensors":
        save_file({name: to_torch(dt, pattern(dt, shape, salt)) for name, dt, shape, salt in CASES}, target,
                  metadata=METADATA)
        finish(errors)
    elif cmd == "check-safetensors":
        loaded = load_file(target)
        if sorted(loaded) != sorted(c[0] for c in CASES):
            errors.append(f"names: expected {sorted(c[0] for c in CASES)}, got {sorted(loaded)}")
        for name, dt, shape, salt in CASES:
            if name in loaded:
                if (dt == "bf16") != (loaded[name].dtype == torch.bfloat16):
                    errors.append(f"{name}: expected {dt}, got {loaded[name].dtype}")
                err = same(name, from_torch(loaded[name]), pattern(dt, shape, salt))
                if err:
                    errors.append(err)
        with safe_open(target, framework="pt") as f:
            if f.metadata() != METADATA:
                errors.append(f"metadata: expected {METADATA}, got {f.metadata()}")
        finish(errors)
    elif cmd == "write-npy":
        for name, dt, shape, salt in NPY_CASES:
            np.save(os.path.join(target, name + ".npy"), pattern(dt, shape, salt))
        c_order = pattern("i32", (3, 4), 10)
        np.save(os.path.join(target, "fortran.npy"), np.asfortranarray(c_order))
        np.save(os.path.join(target, "bigendian.npy"), pattern("f64", (5,), 2).astype(">f8"))
        for version in [(2, 0), (3, 0)]:
            with open(os.path.join(target, f"version{version[0]}.npy"), "wb") as f:
                np.lib.format.write_array(f, pattern("i64", (2, 2), 11), version=version)
        finish(errors)
    elif cmd == "check-npy":
        for name, dt, shape, salt in NPY_CASES:
            path = os.path.join(target, name + ".npy")
            want = pattern(dt, shape, salt)
            err = same(name, np.load(path, allow_pickle=False), want)
            if err:
                errors.append(err)
            reference = io.BytesIO()
            np.save(reference, want)
            with open(path, "rb") as f:
                if f.read() != reference.getvalue():
                    errors.append(f"{name}: the file differs from what numpy.save writes")
        finish(errors)
    else:
        print(f"interop.py: unknown command {cmd!r}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
