"""Regenerates the seed corpus in fuzz/corpus/ (committed; run by hand).

    python3 fuzz/make_corpus.py      # needs numpy and safetensors
"""
import gzip
import io
import os
import struct

import numpy as np
from safetensors.numpy import save

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def put(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    with open(os.path.join(HERE, target, name), "wb") as f:
        f.write(data)


def main():
    for i, spec in enumerate(["cpu", "cuda", "cuda:1", "opencl", "opencl:0", "opencl:12", "cpu:0", "gpu", "cuda:01",
                              "cuda:-1", "cuda:65536", "opencl:"]):
        put("device", f"seed{i:02d}", spec.encode())

    rng = np.random.default_rng(0)
    put("safetensors", "empty", save({}))
    put("safetensors", "one_f32", save({"w": rng.standard_normal((2, 3)).astype(np.float32)}))
    put("safetensors", "all_dtypes", save({
        "f32": np.arange(3, dtype=np.float32), "f64": np.arange(2, dtype=np.float64),
        "i32": np.arange(4, dtype=np.int32).reshape(2, 2), "i64": np.array(7, dtype=np.int64),
        "u8": np.arange(5, dtype=np.uint8), "bool": np.array([True, False]),
        "zero": np.zeros((0, 4), dtype=np.float32)}, metadata={"format": "np", "k": "v"}))
    put("safetensors", "f16_unsupported", save({"h": np.ones(2, dtype=np.float16)}))

    def npy(arr, version=None):
        b = io.BytesIO()
        if version is None:
            np.save(b, arr)
        else:
            np.lib.format.write_array(b, arr, version=version)
        return b.getvalue()
    put("npy", "f32_2x3", npy(np.arange(6, dtype=np.float32).reshape(2, 3)))
    put("npy", "f64_scalar", npy(np.array(1.5)))
    put("npy", "i32_fortran", npy(np.asfortranarray(np.arange(6, dtype=np.int32).reshape(2, 3))))
    put("npy", "i64_big_endian", npy(np.arange(3, dtype=">i8")))
    put("npy", "u8_v2", npy(np.arange(4, dtype=np.uint8), (2, 0)))
    put("npy", "bool_v3", npy(np.array([True, False, True]), (3, 0)))
    put("npy", "empty", npy(np.zeros((0, 3), dtype=np.float32)))

    def idx(type_code, dims, payload):
        return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload
    images = idx(0x08, [2, 4, 4], bytes(range(32)))
    put("idx", "u8_images", images)
    put("idx", "u8_images.gz", gzip.compress(images, mtime=0))
    put("idx", "u8_labels.gz", gzip.compress(idx(0x08, [3], bytes([9, 0, 3])), mtime=0))
    put("idx", "i32", idx(0x0C, [2], struct.pack(">ii", 258, -2)))
    put("idx", "f32", idx(0x0D, [1, 2], struct.pack(">ff", 1.5, -0.25)))
    put("idx", "f64", idx(0x0E, [1], struct.pack(">d", 2.5)))


if __name__ == "__main__":
    main()
