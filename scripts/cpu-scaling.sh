#!/usr/bin/env bash
# scripts/cpu-scaling.sh: how anvil's CPU training scales with threads (issue
# 31), in under 2 minutes on a 16-core host. Prints one Markdown table:
#   - the build of the CPU kernels that runs (anvil-smi's CPU row; Note [One
#     kernel source, a build per instruction set] in src/backends/cpu/isa.h);
#   - LeNet (20,000 images) and the MLP: the 2nd epoch's time at each thread
#     count (OMP_NUM_THREADS), with anvil's default wait (Note [Bounded
#     OpenMP spinning]: a 200 us spin on a quiet machine), passive waiting
#     and GOMP_SPINCOUNT=100000 (a longer spin before sleeping);
#   - LeNet at the most threads, spinning, with threads bound to cores;
#   - the pool's wake cost as anvil measures it at each thread count, and
#     LeNet and the MLP at the most threads with it fixed (45 us: the 2-core
#     thresholds anvil used before it measured; 2 us);
#   - LeNet on one thread under each build of the kernels (ANVIL_CPU_ISA);
#   - the profiler's top ops for LeNet at the most threads and at one.
# With --predict N it prints only the parallel cost model's prediction
# (docs/threads.md, "Parallel cost report"): LeNet's and the MLP's 2nd epoch
# at N threads from a profiled 1-thread run and the pool's wake cost at N
# threads (anvil-smi; above the cores, extrapolated from the most measured
# and marked so), beside the measured N-thread epoch where N <= the cores.
#
#   scripts/cpu-scaling.sh                                  # build/release
#   ANVIL_GPU_PACK=.gpu-pack scripts/cpu-scaling.sh --out "$OUT/scaling"   # gpu-pack's build
#   scripts/cpu-scaling.sh --bin build/mine --threads 1,2 --quick
#
# Flags: --bin DIR (default build/release, or build/portable with
# ANVIL_GPU_PACK), --threads LIST (default 1,2,4,8,16, capped at nproc),
# --out DIR (the logs and scaling.md; default build/cpu-scaling), --quick
# (5,000 images: a smoke test), --predict N (the prediction only).
set -euo pipefail
cd "$(dirname "$0")/.."

bin=build/release
out=build/cpu-scaling
threads=1,2,4,8,16
images=20000
predict=0
while (($#)); do
  case $1 in
    --bin) bin=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    --quick) images=5000; shift ;;
    --predict) predict=$2; shift 2 ;;
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

# run <log name> <env...> -- <train args...>: the 2nd epoch's seconds, from
# the curves' CSV (6 digits; the log has 2) or else the log.
run() {
  local name=$1 env=() model="" prev="" a
  shift
  while [[ $1 != -- ]]; do env+=("$1"); shift; done
  shift
  for a in "$@"; do [[ $prev == --model ]] && model=$a; prev=$a; done
  rm -f "$out/${model}_curves.csv"
  if ! env "${env[@]}" "$train" --device cpu --epochs 2 --train-samples "$images" --test-samples 1000 --no-plot \
    --out-dir "$out" "$@" >"$out/$name.log" 2>&1; then
    echo "failed (see $out/$name.log)"
    return
  fi
  if [[ -n $model && -f $out/${model}_curves.csv ]]; then
    awk -F, '$1 == 2 { printf "%.3f\n", $5 }' "$out/${model}_curves.csv"
  else
    sed -n 's/^  epoch 2: .*, \([0-9.]*\) s (.*/\1/p' "$out/$name.log"
  fi
}

# wake_at <threads>: anvil's measured wake cost (µs) at that many threads,
# the median of 3 processes; "" when none measured it (a busy machine).
wake_at() {
  local w
  for _ in 1 2 3; do
    OMP_NUM_THREADS=$1 "$bin/tools/anvil-smi" | grep -o 'wake [0-9.]* us[^|]*' | head -1 |
      grep -v 'not measured\|fixed' | sed 's/wake \([0-9.]*\) us.*/\1/' || true
  done | sort -g | sed -n 2p
}

# median3 <log name> <env...> -- <train args...>: run's median of 3 runs.
median3() {
  local name=$1
  shift
  for r in 1 2 3; do run "$name-r$r" "$@"; done | sort -g | sed -n 2p
}

# Note [Parallel cost report] (src/backends/cpu/threads.h): the epoch at
# $predict threads from a 1-thread profile, beside the measurement.
if ((predict > 0)); then
  ((predict >= 2)) || { echo "cpu-scaling: --predict wants 2 threads or more, got $predict" >&2; exit 2; }
  {
    echo "# anvil parallel cost prediction, $predict threads, $(date -u +%Y-%m-%dT%H:%MZ)"
    echo
    echo "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $cores CPUs; load $(cut -d' ' -f1-3 /proc/loadavg)"
    measured_at=$((predict <= cores ? predict : cores))
    wake=$(wake_at "$measured_at")
    if [[ -z $wake ]]; then
      echo "cpu-scaling: no wake cost measured at $measured_at threads (the machine is busy: anvil-smi says" \
        "'not measured'); run it on a quiet machine" >&2
      exit 1
    fi
    from=()
    if ((predict > cores)); then
      from=(--wake-from "$measured_at")
      echo "Wake cost: $wake us measured at $measured_at threads; at $predict threads EXTRAPOLATED along the" \
        "16-core host's passive curve (16.6/16.3/24.6/37.9 us at 2/4/8/16; benchmarks/README.md)"
    else
      echo "Wake cost: $wake us measured at $predict threads (anvil-smi, median of 3)"
    fi
    echo
    echo "2nd epoch, seconds ($images images, batch 256; measured: the median of 3 runs)." \
      "predicted = serial + work / team + regions x wake, serial = 1 thread - work (work: the pieces" \
      "anvil may split, from the profiled run, scaled by the unprofiled 1-thread epoch over the profiled one):"
    echo
    echo "| model | 1 thread | serial | work | work at $predict | regions | mean team | wakes | predicted $predict | measured $predict | error |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    for model in lenet mlp; do
      t1=$(median3 "$model-predict-t1" OMP_NUM_THREADS=1 -- --model "$model")
      [[ $t1 =~ ^[0-9.]+$ ]] || { echo "| $model | $t1 |"; continue; }
      run "$model-predict-profile-t1" OMP_NUM_THREADS=1 -- --model "$model" \
        --profile "$out/$model-predict-t1.trace.json" >/dev/null
      line=$(/usr/bin/python3 scripts/predict_parallel.py --trace "$out/$model-predict-t1.trace.json" \
        --threads "$predict" --wake-us "$wake" "${from[@]}" --epoch-seconds "$t1")
      field() { grep -o "$1=[^ ]*" <<<"$line" | cut -d= -f2; }
      measured=n/a error=n/a
      if ((predict <= cores)); then
        measured=$(median3 "$model-predict-t$predict" OMP_NUM_THREADS="$predict" -- --model "$model")
        error=$(awk -v p="$(field predicted_s)" -v m="$measured" 'BEGIN { printf "%+.0f%%", 100 * (p - m) / m }')
      fi
      echo "| $model | $t1 | $(field serial_s) | $(field work_s) | $(field work_at_n_s) | $(field regions) |" \
        "$(field mean_team) | $(field wakes_s) | $(field predicted_s) | $measured | $error |"
    done
    if ((predict > cores)); then
      echo
      echo "No measurement: $predict threads > $cores CPUs here; the figures are owed."
    fi
  } | tee "$out/predict-$predict.md"
  exit 0
fi

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
    for wait in default passive spin; do
      case $wait in
        default) row="| $model | anvil's default |" ;;
        passive) row="| $model | passive |" ;;
        spin) row="| $model | GOMP_SPINCOUNT=100000 |" ;;
      esac
      for t in "${counts[@]}"; do
        env=(OMP_NUM_THREADS="$t")
        [[ $wait == passive ]] && env+=(OMP_WAIT_POLICY=passive)
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
