#!/usr/bin/env bash
# scripts/cpu-scaling.sh: how anvil's CPU training scales with threads (issue
# 31), in under 2 minutes on a 16-core host. Prints one Markdown table:
#   - the build of the CPU kernels that runs (anvil-smi's CPU row; Note [One
#     kernel source, a build per instruction set] in src/backends/cpu/isa.h);
#   - LeNet (20,000 images) and the MLP: the 2nd epoch's time at each thread
#     count (OMP_NUM_THREADS), with anvil's passive waiting and with
#     GOMP_SPINCOUNT=100000 (a bounded spin before sleeping);
#   - LeNet at the most threads, spinning, with threads bound to cores;
#   - the pool's wake cost as anvil measures it at each thread count, and
#     LeNet and the MLP at the most threads with it fixed (45 us: the 2-core
#     thresholds anvil used before it measured; 2 us);
#   - LeNet on one thread under each build of the kernels (ANVIL_CPU_ISA);
#   - the profiler's top ops for LeNet at the most threads and at one.
#
#   scripts/cpu-scaling.sh                                  # build/release
#   ANVIL_GPU_PACK=.gpu-pack scripts/cpu-scaling.sh --out "$OUT/scaling"   # gpu-pack's build
#   scripts/cpu-scaling.sh --bin build/mine --threads 1,2 --quick
#
# Flags: --bin DIR (default build/release, or build/portable with
# ANVIL_GPU_PACK), --threads LIST (default 1,2,4,8,16, capped at nproc),
# --out DIR (the logs and scaling.md; default build/cpu-scaling), --quick
# (5,000 images: a smoke test).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=build/release
out=build/cpu-scaling
threads=1,2,4,8,16
images=20000
while (($#)); do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --quick) images=5000; shift ;;
    *) echo "cpu-scaling: unknown flag $1" >&2; exit 2 ;;
  esac
done
if [[ -n "${ANVIL_GPU_PACK:-}" ]]; then
  # shellcheck source=scripts/gpu-pack-env.sh
  source scripts/gpu-pack-env.sh
  anvil_use_gpu_pack || exit 1
  [[ $bin == build/release ]] && bin=build/portable
fi
train=$bin/examples/train_fashion_mnist
[[ -x $train ]] || { echo "cpu-scaling: no $train (build it, or set ANVIL_GPU_PACK)" >&2; exit 1; }
mkdir -p "$out"
unset ANVIL_OPENCL_CPU OMP_WAIT_POLICY GOMP_SPINCOUNT ANVIL_CPU_ISA ANVIL_PARALLEL_WAKE_US
cores=$(nproc)
counts=()
IFS=, read -ra wanted <<<"$threads"
for t in "${wanted[@]}"; do ((t <= cores)) && counts+=("$t"); done

# run <log name> <env...> -- <train args...>: the 2nd epoch's seconds.
run() {
  local name=$1 env=()
  shift
  while [[ $1 != -- ]]; do env+=("$1"); shift; done
  shift
  if ! env "${env[@]}" "$train" --device cpu --epochs 2 --train-samples "$images" --test-samples 1000 --no-plot \
    --out-dir "$out" "$@" >"$out/$name.log" 2>&1; then
    echo "failed (see $out/$name.log)"
    return
  fi
  sed -n 's/^  epoch 2: .*, \([0-9.]*\) s (.*/\1/p' "$out/$name.log"
}

{
  echo "# anvil CPU scaling, $(date -u +%Y-%m-%dT%H:%MZ)"
  echo
  echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $cores CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
  lscpu | grep -E '^(Thread|Core|Socket|NUMA node\(s\))' | tr -s ' ' | paste -sd ';' -
  kernels=$("$bin/tools/anvil-smi" | grep -o 'anvil cpu, [a-z0-9]* kernels' | head -1 || true)
  echo "CPU kernels: ${kernels:-unknown (a build from before the dispatch)}" \
    "(AVX-512 in /proc/cpuinfo: $(grep -qw avx512f /proc/cpuinfo && echo yes || echo no))"
  echo
  echo "2nd epoch, seconds ($images images, batch 256; OMP_NUM_THREADS = threads):"
  echo
  header="| model | waiting |"
  rule="|---|---|"
  for t in "${counts[@]}"; do header+=" $t |"; rule+="---|"; done
  echo "$header"
  echo "$rule"
  for model in lenet mlp; do
    for wait in passive spin; do
      row="| $model | $([[ $wait == spin ]] && echo 'GOMP_SPINCOUNT=100000' || echo passive) |"
      for t in "${counts[@]}"; do
        env=(OMP_NUM_THREADS="$t")
        [[ $wait == spin ]] && env+=(GOMP_SPINCOUNT=100000)
        row+=" $(run "$model-$wait-t$t" "${env[@]}" -- --model "$model") |"
      done
      echo "$row"
    done
  done
  most=${counts[-1]}
  echo
  echo "LeNet at $most threads, GOMP_SPINCOUNT=100000, threads bound to cores (OMP_PROC_BIND=close OMP_PLACES=cores):" \
    "$(run lenet-spin-bound OMP_NUM_THREADS="$most" GOMP_SPINCOUNT=100000 OMP_PROC_BIND=close OMP_PLACES=cores -- \
      --model lenet) s"
  # Note [Threads from the measured wake cost] (src/backends/cpu/threads.h):
  # the wake cost each process measured, and the 2-core thresholds it
  # replaced (ANVIL_PARALLEL_WAKE_US=45) on the same host.
  wakes=""
  for t in "${counts[@]}"; do
    ((t > 1)) || continue
    w=$(OMP_NUM_THREADS=$t "$bin/tools/anvil-smi" | grep -o 'wake [0-9.]* us[^|]*' | head -1 | sed 's/ *$//' || true)
    ws=$(OMP_NUM_THREADS=$t GOMP_SPINCOUNT=100000 "$bin/tools/anvil-smi" | grep -o 'wake [0-9.]* us' | head -1 || true)
    wakes+=" $t: ${w:-n/a} (spin: ${ws:-n/a});"
  done
  echo
  echo "Pool wake measured by anvil-smi at each thread count:${wakes:- none (one thread)}"
  if ((most > 1)); then
    for model in lenet mlp; do
      echo
      echo "$model at $most threads with the wake cost fixed (ANVIL_PARALLEL_WAKE_US; 45 = the 2-core thresholds):" \
        "45 us $(run "$model-wake45-t$most" OMP_NUM_THREADS="$most" ANVIL_PARALLEL_WAKE_US=45 -- --model "$model") s," \
        "45 us spin $(run "$model-wake45-spin-t$most" OMP_NUM_THREADS="$most" ANVIL_PARALLEL_WAKE_US=45 \
          GOMP_SPINCOUNT=100000 -- --model "$model") s," \
        "2 us $(run "$model-wake2-t$most" OMP_NUM_THREADS="$most" ANVIL_PARALLEL_WAKE_US=2 -- --model "$model") s"
    done
  fi
  echo
  echo "LeNet on one thread by build of the CPU kernels (ANVIL_CPU_ISA), 2nd epoch s:"
  echo
  for isa in default avx2 avx512; do
    echo "- $isa: $(run "lenet-isa-$isa" OMP_NUM_THREADS=1 ANVIL_CPU_ISA="$isa" -- --model lenet)" \
      "$(grep -m1 '^anvil: ANVIL_CPU_ISA' "$out/lenet-isa-$isa.log" || true)"
  done
  for t in "$most" 1; do
    echo
    echo "LeNet at $t threads (passive), the profiler's top ops over both epochs:"
    echo
    echo '```'
    run "lenet-profile-t$t" OMP_NUM_THREADS="$t" -- --model lenet --profile "$out/lenet-t$t.trace.json" >/dev/null
    # The table the example prints at exit: from its header to the end.
    sed -n '/^profile: the top/,$p' "$out/lenet-profile-t$t.log" | head -22
    echo '```'
  done
} | tee "$out/scaling.md"
