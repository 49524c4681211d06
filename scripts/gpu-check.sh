#!/usr/bin/env bash
# ./run gpu-check: on a machine with an NVIDIA GPU and driver, check the CUDA
# backend end to end and print a one-screen summary (docs/cuda.md):
#   1. anvil-smi sees the GPUs (and what NVML says about them);
#   2. the whole test suite, every device-generic suite and the examples'
#      cuda:0 tests included, with ANVIL_REQUIRE_DEVICES=cuda so a missing
#      GPU fails instead of skipping;
#   3. the chapter walkthrough (examples/use_gpu) on the GPUs;
#   4. anvil-bench matmul sync-log two-devices transfer roofline on the GPUs,
#      and anvil-cuda-bench (the speed targets: bandwidth, cuBLAS, launch);
#   5. Fashion-MNIST training on try_gpu().
# Needs only the repository and the CUDA toolkit (./run installs the rest).
# On a GPU machine that cannot install packages, ANVIL_GPU_PACK=DIR runs the
# build ./run gpu-pack made elsewhere (scripts/gpu-pack.sh) instead; the
# tests labelled with what that machine lacks (mpi without mpirun, install
# always) are left out and the summary says so.
# Exits non-zero when any step fails. Usage: ./run gpu-check [--epochs N]
set -uo pipefail
cd "$(dirname "$0")/.."

epochs=3
[[ "${1:-}" == "--epochs" ]] && epochs="${2:-3}"
bin=build/release
log_dir=build/gpu-check
# ctest's parallel jobs: ANVIL_CHECK_JOBS, else 2 as in ./run tests (half the
# cores with a packed build: the machines lent for that have many).
jobs=${ANVIL_CHECK_JOBS:-2}
ctest_filter=()
# ANVIL_CHECK_TEST_MINUTES=N: N minutes after gpu-check starts, ctest starts
# no more tests and stops the running ones (on a machine lent for minutes,
# one hang must not take the whole lease).
stop_time=()
if [[ -n "${ANVIL_CHECK_TEST_MINUTES:-}" ]]; then
  stop_time=(--stop-time "$(date -d "+${ANVIL_CHECK_TEST_MINUTES} min" +%H:%M:%S)")
fi
left_out=()
# shellcheck source=scripts/gpu-pack-env.sh
source scripts/gpu-pack-env.sh
anvil_find_cudnn  # PyTorch's cuDNN where the loader finds none (test_cudnn needs one)
if [[ -n "${ANVIL_GPU_PACK:-}" ]]; then
  # Unpacks into build/portable and sets bin, pack, LD_LIBRARY_PATH and
  # ANVIL_FASHION_MNIST_DIR (the CTest files name the packing checkout's
  # absolute paths: it links that path to this checkout).
  # shellcheck source=scripts/gpu-pack-env.sh
  source scripts/gpu-pack-env.sh
  anvil_use_gpu_pack || exit 1
  # The tools test's PoCL-only vendors folder holds the packing machine's
  # pocl.icd, which names its PoCL's file; this machine's names its own.
  if compgen -G '/etc/OpenCL/vendors/pocl*.icd' >/dev/null; then
    mkdir -p "$bin/tests/pocl-only-vendors"
    cp /etc/OpenCL/vendors/pocl*.icd "$bin/tests/pocl-only-vendors/"
  fi
  jobs=${ANVIL_CHECK_JOBS:-$(($(nproc) / 2))}
  exclude=install
  left_out+=("install_find_package (label install: needs the compiler and the -dev packages)")
  if ! command -v mpirun >/dev/null; then
    exclude+="|mpi"
    left_out+=("the mpirun tests (label mpi: no mpirun here)")
  fi
  # TensorBoard's reader comes from PyPI, which such a machine cannot reach,
  # unless a python3 there has it (tests/python/run_tensorboard.sh).
  if ! /usr/bin/python3 -c 'import tensorboard, PIL' 2>/dev/null && ! python3 -c 'import tensorboard, PIL' 2>/dev/null; then
    exclude+="|tensorboard"
    left_out+=("TensorBoard's reader on anvil's event files (label tensorboard: no python3 with tensorboard and Pillow)")
  fi
  # The pack's Python tests name the packing machine's interpreter: the
  # python step below runs the suite with this machine's python3 instead.
  exclude+="|python"
  ctest_filter=(-LE "^($exclude)\$")
  # The Python references need numpy and torch under /usr/bin/python3;
  # borrow the site-packages of a python3 on PATH of the same version.
  if ! /usr/bin/python3 -c 'import numpy, torch' 2>/dev/null &&
     python3 -c 'import numpy, torch' 2>/dev/null &&
     [[ "$(python3 -V)" == "$(/usr/bin/python3 -V)" ]]; then
    PYTHONPATH=$(python3 -c 'import site; print(":".join(site.getsitepackages()))')
    export PYTHONPATH
  fi
fi
mkdir -p "$log_dir"
# The GPUs are the accelerators here: PoCL's CPU devices stay opencl:N but
# are not what try_gpu() picks.
unset ANVIL_OPENCL_CPU

summary=()
failed=0
step() {  # step <name> <log> <command...>
  local name=$1 log=$2
  shift 2
  local start=$SECONDS
  echo "== $name (log: $log_dir/$log)"
  if "$@" >"$log_dir/$log" 2>&1; then
    summary+=("$(printf '%-12s ok      %4ds' "$name" $((SECONDS - start)))")
  else
    summary+=("$(printf '%-12s FAILED  %4ds  (see %s)' "$name" $((SECONDS - start)) "$log_dir/$log")")
    failed=1
  fi
  tail -n "${TAIL_LINES:-15}" "$log_dir/$log"
}

gpus=$("$bin/tools/anvil-smi" --list | grep -c '^cuda:')
step anvil-smi smi.txt "$bin/tools/anvil-smi"
if [[ "$gpus" == 0 ]]; then
  echo "gpu-check: anvil sees no CUDA device:"
  "$bin/tools/anvil-smi" | grep -i cuda
  exit 1
fi
step tests ctest.txt env ANVIL_REQUIRE_DEVICES=cuda ctest --test-dir "$bin" --output-on-failure -j "$jobs" \
  "${ctest_filter[@]}" "${stop_time[@]}"
step use_gpu use_gpu.txt "$bin/examples/use_gpu"
if [[ -n "${ANVIL_GPU_PACK:-}" ]]; then
  if [[ -d "$bin/python/anvil" ]]; then
    # The pytest suite on cuda:0 with this machine's python3 and its PyTorch
    # (DLPack both ways with torch's CUDA tensors: test_interop.py).
    step python python.txt env PYTHONPATH="$PWD/$bin/python${PYTHONPATH:+:$PYTHONPATH}" ANVIL_TEST_DEVICE=cuda:0 \
      ANVIL_REQUIRE_DEVICES=cuda ANVIL_SOURCE_DIR="$PWD" ANVIL_BUILD_DIR="$PWD/$bin" \
      python3 -m pytest -q -p no:cacheprovider python/tests
  else
    left_out+=("the Python suite (the pack has no Python package: ./run gpu-pack found no Python 3.12)")
  fi
fi
step anvil-bench bench.txt "$bin/tools/anvil-bench" matmul sync-log two-devices transfer roofline
step cuda-bench cuda-bench.txt "$bin/benchmarks/micro/anvil-cuda-bench"
step training train.txt "$bin/examples/train_fashion_mnist" --epochs "$epochs" --out-dir "$log_dir"

echo
echo "gpu-check summary ($gpus CUDA device(s)):"
printf '  %s\n' "${summary[@]}"
grep -E "tests passed|tests failed" "$log_dir/ctest.txt" | sed 's/^/  ctest: /'
for what in "${left_out[@]}"; do echo "  not run: $what"; done
grep -E "target" "$log_dir/cuda-bench.txt" | sed 's/^/  /'
exit $failed
