#!/usr/bin/env bash
# Builds anvil's speed benchmarks (release, build-bench/) and runs them: anvil
# side by side with LibTorch and OpenBLAS in one run, printing a table of
# ratios against the targets. Arguments go to bench_compare, e.g.
#
#   scripts/bench.sh                      # everything (about 4 minutes on 2 cores)
#   scripts/bench.sh --filter matmul --repeats 9
#   scripts/bench.sh --markdown           # the table as Markdown
#   BENCH_OPS=1 scripts/bench.sh          # also anvil's per-op Google Benchmark
#   scripts/bench.sh --train              # training: MLP and LeNet on Fashion-MNIST, at both libraries'
#                                         # defaults, 1 thread and 2 threads (~15-30 min)
#   scripts/bench.sh --train --models resnet18,gru,vit --epochs 6   # s/training step (~5 min)
#   scripts/bench.sh --train --models mlp --epochs 10 --markdown
#   scripts/bench.sh --busy               # issue 12's busy machine: each library's training alone and
#                                         # beside 2 spinning processes (one per core), slowdown =
#                                         # busy / alone, target anvil's <= LibTorch's; MLP and LeNet at
#                                         # defaults, 1 and 2 threads (~3 min); same as --train --busy, and
#                                         # takes bench_train's flags (--models mlp,lenet,resnet18,
#                                         # --spinners N, --epochs N busy phases, --phase-seconds S,
#                                         # --markdown)
#   scripts/bench.sh --conv [reps] [threads..]  # conv2d: anvil's im2col + OpenBLAS against
#                                         # oneDNN's layouts, LeNet and ResNet-18 shapes (~3 min)
#   scripts/bench.sh --dist               # issue 10's figures: allreduce vs raw MPI, DDP vs
#                                         # PyTorch DDP (MLP, LeNet) with 2-rank scaling,
#                                         # DataParallel on two one-core sub-devices (~6 min)
#
# With --train or --busy as the first argument the rest go to bench_train
# (benchmarks/train/) instead of bench_compare; with --conv, to bench_conv_dnnl.
# Installs missing Debian packages first (libtorch-dev is needed only here),
# with apt-get as root, or through sudo when not root. Set JOBS to limit the
# build's parallelism (default: all cores).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
train=""
dist=""
conv=""
if [[ "${1:-}" == "--train" ]]; then
  train=1
  shift
elif [[ "${1:-}" == "--busy" ]]; then
  train=1  # bench_train --busy (the flag stays)
elif [[ "${1:-}" == "--dist" ]]; then
  dist=1
  shift
elif [[ "${1:-}" == "--conv" ]]; then
  conv=1
  shift
fi
build="${root}/build-bench"
jobs="${JOBS:-$(nproc)}"

packages=(cmake ninja-build g++ libopenblas-openmp-dev libdnnl-dev zlib1g-dev libtorch-dev libbenchmark-dev)
if [[ -n "${train}" || -n "${dist}" ]]; then packages+=(dataset-fashion-mnist); fi
if [[ -n "${dist}" ]]; then packages+=(libopenmpi-dev openmpi-bin python3-torch pocl-opencl-icd); fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bench.sh: installing ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    echo "bench.sh: not root, using sudo"
    sudo=(sudo)
  fi
  "${sudo[@]}" apt-get update
  DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends "${missing[@]}"
fi
# anvil's own build dependencies, when the project lists more than the above.
if [[ -x "${root}/scripts/install-deps.sh" ]]; then
  "${root}/scripts/install-deps.sh"
fi

cmake -S "${root}" -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DANVIL_BUILD_BENCHMARKS=ON -DANVIL_BUILD_TESTS=OFF >/dev/null
if [[ -n "${conv}" ]]; then
  cmake --build "${build}" -j "${jobs}" --target bench_conv_dnnl
elif [[ -n "${dist}" ]]; then
  cmake --build "${build}" -j "${jobs}" --target bench_ddp_anvil allreduce_bench bench_data_parallel
elif [[ -n "${train}" ]]; then
  cmake --build "${build}" -j "${jobs}" --target bench_train bench_train_anvil \
    $(grep -q '^build bench_train_torch:' "${build}/build.ninja" && echo bench_train_torch)
else
  cmake --build "${build}" -j "${jobs}" --target bench_compare bench_worker_anvil bench_worker_openblas \
    $(grep -q '^build bench_worker_torch:' "${build}/build.ninja" && echo bench_worker_torch) \
    $([[ -n "${BENCH_OPS:-}" ]] && grep -q '^build bench_ops:' "${build}/build.ninja" && echo bench_ops)
fi

load="$(cut -d' ' -f1 /proc/loadavg)"
if awk -v l="${load}" -v n="$(nproc)" 'BEGIN { exit !(l > n / 2) }'; then
  echo "bench.sh: load average is ${load} on $(nproc) cores; figures will be noisy (ratios stay within one run)" >&2
fi

if [[ -n "${train}" ]]; then
  exec "${build}/benchmarks/train/bench_train" "$@"
fi
if [[ -n "${conv}" ]]; then
  exec "${build}/benchmarks/bench_conv_dnnl" "$@"
fi
if [[ -n "${dist}" ]]; then
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
  echo "== allreduce: anvil's ProcessGroup against raw MPI_Allreduce, 2 ranks (target >= 0.9x from 1 MiB)"
  mpirun -np 2 --bind-to none "${build}/benchmarks/dist/allreduce_bench"
  for model in mlp lenet; do
    echo "== DDP ${model}: anvil against PyTorch DDP (Gloo), 2 ranks x 1 thread (target: anvil epoch <= 0.8x)"
    "${root}/benchmarks/train/ddp_compare.sh" "${build}" --model "${model}" --epochs 2 --threads 1 "$@"
  done
  echo "== DataParallel on two one-core PoCL sub-devices against one (target >= 1.6x)"
  exec "${build}/benchmarks/bench_data_parallel"
fi
"${build}/benchmarks/bench_compare" "$@"
if [[ -n "${BENCH_OPS:-}" && -x "${build}/benchmarks/bench_ops" ]]; then
  "${build}/benchmarks/bench_ops"
fi
