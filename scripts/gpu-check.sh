#!/usr/bin/env bash
# ./run gpu-check: on a machine with an NVIDIA GPU and driver, check the CUDA
# backend end to end and print a one-screen summary (docs/cuda.md):
#   1. anvil-smi sees the GPUs (and what NVML says about them);
#   2. the whole test suite, every device-generic suite included, with
#      ANVIL_REQUIRE_DEVICES=cuda so a missing GPU fails instead of skipping;
#   3. the chapter walkthrough (examples/use_gpu) on the GPUs;
#   4. anvil-bench matmul sync-log two-devices transfer roofline on the GPUs,
#      and anvil-cuda-bench (the speed targets: bandwidth, cuBLAS, launch);
#   5. Fashion-MNIST training on try_gpu().
# Needs only the repository and the CUDA toolkit (./run installs the rest).
# Exits non-zero when any step fails. Usage: ./run gpu-check [--epochs N]
set -uo pipefail
cd "$(dirname "$0")/.."

epochs=3
[[ "${1:-}" == "--epochs" ]] && epochs="${2:-3}"
bin=build/release
log_dir=build/gpu-check
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
step tests ctest.txt env ANVIL_REQUIRE_DEVICES=cuda ctest --preset release
step use_gpu use_gpu.txt "$bin/examples/use_gpu"
step anvil-bench bench.txt "$bin/tools/anvil-bench" matmul sync-log two-devices transfer roofline
step cuda-bench cuda-bench.txt "$bin/src/backends/cuda/anvil-cuda-bench"
step training train.txt "$bin/examples/train_fashion_mnist" --epochs "$epochs" --out-dir "$log_dir"

echo
echo "gpu-check summary ($gpus CUDA device(s)):"
printf '  %s\n' "${summary[@]}"
grep -E "tests passed|tests failed" "$log_dir/ctest.txt" | sed 's/^/  ctest: /'
grep -E "target" "$log_dir/cuda-bench.txt" | sed 's/^/  /'
exit $failed
