"""An op's cost in a notebook kernel beside plain Python (docs/notebooks.md).

Runs one snippet -- a small `x + y` (launch-bound: the per-op host cost) and a
256x256 matmul, 2000 times per sample, 15 samples, the median -- first in a
plain `python` process and then in an ipykernel executed by nbclient, twice
each, alternating, on the CPU and on try_gpu(). Prints microseconds per op.
Run it on a quiet machine:

    PYTHONPATH=build/release/python /work/shared/tools/quiet -- \\
        build/python-venv/bin/python scripts/notebook-op-cost.py
"""

import json
import subprocess
import sys

import nbclient
import nbformat
from nbformat import v4

SNIPPET = r"""
import json, time
import anvil

def per_op(op, x, y, n=2000, samples=15):
    d = x.device
    for _ in range(n):
        op(x, y)
    anvil.synchronize(d)
    times = []
    for _ in range(samples):
        start = time.perf_counter()
        for _ in range(n):
            op(x, y)
        anvil.synchronize(d)
        times.append((time.perf_counter() - start) / n)
    return sorted(times)[samples // 2] * 1e6

costs = {}
for d in [anvil.cpu(), anvil.try_gpu()]:
    small = anvil.ones(4, device=d), anvil.ones(4, device=d)
    big = anvil.rand(256, 256, device=d), anvil.rand(256, 256, device=d)
    costs[f"add 4 on {d}"] = per_op(lambda a, b: a + b, *small)
    costs[f"matmul 256 on {d}"] = per_op(lambda a, b: a @ b, *big, n=200)
print(json.dumps(costs))
"""


def plain():
    out = subprocess.run([sys.executable, "-c", SNIPPET], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def kernel():
    nb = v4.new_notebook(cells=[v4.new_code_cell(SNIPPET)])
    nbclient.NotebookClient(nb, kernel_name="python3", timeout=600).execute()
    text = "".join(o.text for o in nb.cells[0].outputs if o.output_type == "stream" and o.name == "stdout")
    return json.loads(text.strip().splitlines()[-1])


def main():
    runs = {"python": [], "kernel": []}
    for _ in range(2):
        runs["python"].append(plain())
        runs["kernel"].append(kernel())
    print(f"{'op':<28}{'python (us)':>24}{'kernel (us)':>24}")
    for op in runs["python"][0]:
        py = " / ".join(f"{r[op]:.2f}" for r in runs["python"])
        kn = " / ".join(f"{r[op]:.2f}" for r in runs["kernel"])
        print(f"{op:<28}{py:>24}{kn:>24}")


if __name__ == "__main__":
    main()
