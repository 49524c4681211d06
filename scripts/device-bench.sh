#!/usr/bin/env bash
# ./run device-bench: the book's examples on cuda:0 and on the CPU, anvil beside
# PyTorch (benchmarks/device/), one table (issues 30 and 31; docs/cuda.md,
# benchmarks/README.md). Fits 6 minutes on an H100 with a 16-core host.
#
#   ./run device-bench                       # build/release (built first), all rows
#   ANVIL_GPU_PACK=.gpu-pack ./run device-bench --out "$OUT/bench"   # gpu-pack's build
#   ./run device-bench --quick --cpu-only    # a smoke test on a machine without a GPU
#   ./run device-bench --bin build/mine --gpu-only
#
# Flags: --gpu-only, --cpu-only, --quick (tiny subsets), --out DIR (the table
# as device-bench.md and every figure as device-bench.json; default
# build/device-bench), --bin DIR (anvil's build; default build/release, or
# build/portable with ANVIL_GPU_PACK), --budget SECONDS (default 330),
# --python PY (the python3 with PyTorch; default: python3 on PATH, else
# /usr/bin/python3), --anvil-tf32-off VAR=VALUE.
set -euo pipefail
cd "$(dirname "$0")/.."

bin=build/release
args=()
while (($#)); do
  case $1 in
    --bin)
      [[ $# -ge 2 ]] || { echo "device-bench: --bin needs a folder" >&2; exit 2; }
      bin=$2
      shift 2
      ;;
    *)
      args+=("$1")
      shift
      ;;
  esac
done
# shellcheck source=scripts/gpu-pack-env.sh
source scripts/gpu-pack-env.sh
if [[ -n "${ANVIL_GPU_PACK:-}" ]]; then
  anvil_use_gpu_pack || exit 1
fi
anvil_use_torch_cudnn  # both sides on one cuDNN (docs/cuda.md)
# The GPU is the accelerator here; PoCL's CPU devices are not what is measured.
unset ANVIL_OPENCL_CPU
# The driver needs only Python's standard library; it finds the python3 that
# has PyTorch for PyTorch's side itself.
driver_python=$(command -v python3 || echo /usr/bin/python3)
exec "$driver_python" benchmarks/device/device_bench.py --bin "$bin" ${args[@]+"${args[@]}"}
