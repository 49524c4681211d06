"""Per-op cost from Python, anvil beside PyTorch in one run (issue 33): `a + b`
on 2x3 float32 tensors and `x.sum()`, on the CPU, each timed as the median of
several rounds of many calls.

    PYTHONPATH=build/release/python build/python-venv/bin/python benchmarks/python/per_op.py
"""

import statistics
import sys
import time

import anvil


def per_call_us(fn, calls=20000, rounds=7):
    for _ in range(1000):
        fn()
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(times)


def main():
    rows = []
    a, b = anvil.rand(2, 3), anvil.rand(2, 3)
    x = anvil.rand(2, 3)
    rows.append(("a + b (2x3)", per_call_us(lambda: a + b)))
    rows.append(("x.sum() (2x3)", per_call_us(lambda: x.sum())))
    try:
        import torch
        torch.set_num_threads(1)
        ta, tb, tx = torch.rand(2, 3), torch.rand(2, 3), torch.rand(2, 3)
        peer = [per_call_us(lambda: ta + tb), per_call_us(lambda: tx.sum())]
        version = torch.__version__
    except ImportError:
        peer, version = [float("nan")] * 2, "absent"
    print(f"per-op cost from Python, microseconds per call (median of 7 rounds); torch {version}")
    print(f"{'op':<16}{'anvil':>10}{'torch':>10}{'anvil/torch':>14}")
    for (name, ours), theirs in zip(rows, peer):
        print(f"{name:<16}{ours:>10.2f}{theirs:>10.2f}{ours / theirs:>14.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
