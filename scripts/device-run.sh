#!/usr/bin/env bash
# scripts/device-run.sh: one prepared call on a GPU machine lent for minutes
# (an H100 or H200 with a 16-core host, no package mirror), from a copy of
# this repository with ./run gpu-pack's .gpu-pack in it. Every phase runs
# under its own cap and under one deadline, so that a hang costs that phase
# and not the loan; the most wanted figures come first. The results go to
# --out DIR (default $OUT, else build/device-run), with every log packed into
# DIR/results.tar.gz (the device tool brings back a few files only) and a
# summary in DIR/summary.md; commit them under benchmarks/results/.
#
#   OUT=... scripts/device-run.sh [--deadline SECONDS] [--pack DIR] [--only PHASE,...]
#
# Phases, in this order:
#   bench-gpu  ./run device-bench --gpu-only (both sides on PyTorch's cuDNN)
#   check      the cuda:0 tests of what changed since the last GPU run
#   profile    the ResNet-18 step, both sides: torch.profiler's per-op table
#              (benchmarks/device/torch_profile.py) and anvil's --profile,
#              f32 and bf16 autocast, 28x28; profile96 the same at 96x96
#   python     the pytest suite on cuda:0 (the pack's Python package)
#   bench-cpu  ./run device-bench --cpu-only
#   wait-sweep issue 39 on 16 cores: LeNet and the MLP at 16 threads under
#              anvil's wait policy and others (passive, shorter spins, the
#              wake cost fixed, bound to cores), with the cost of one pause
#   resnet-bn  ResNet-18 rows on cuda:0 with batch norm through cuDNN and
#              through norm.kern, bf16 and f32
#   predict    cpu-scaling.sh --predict 16 beside the measurement
set -uo pipefail
cd "$(dirname "$0")/.." || exit

deadline=585
resize=0
pack=.gpu-pack
only=
out=${OUT:-build/device-run}
while (($#)); do
  case $1 in
    --deadline) deadline=$2; shift 2 ;;
    --pack) pack=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "device-run: unknown flag $1" >&2; exit 2 ;;
  esac
done
out=$(realpath -m "$out")
logs=$out/logs
mkdir -p "$logs"
start=$SECONDS
summary=$out/summary.md
echo "# device-run $(date -u +%Y-%m-%dT%H:%MZ), anvil $(git rev-parse --short HEAD 2>/dev/null || echo '?')" >"$summary"

export ANVIL_GPU_PACK=$pack
# shellcheck source=scripts/gpu-pack-env.sh
source scripts/gpu-pack-env.sh
anvil_use_gpu_pack || { echo "device-run: cannot unpack $pack" | tee -a "$summary"; exit 1; }
# The GPU machine's PoCL asserts when loaded: no OpenCL platform there.
mkdir -p "$out/no-opencl-vendors"
export OCL_ICD_VENDORS=$out/no-opencl-vendors
unset ANVIL_OPENCL_CPU
export PYTHONUNBUFFERED=1
export bin out resize

{
  echo
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | sed 's/^/GPU: /'
  echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs"
  echo "python3: $(python3 -c 'import sys, torch; print(sys.version.split()[0], "torch", torch.__version__, "cuDNN", torch.backends.cudnn.version())' 2>&1)"
} >>"$summary"
"$bin/tools/anvil-smi" >"$logs/anvil-smi.txt" 2>&1

# phase <name> <cap seconds> <command...>: runs it under min(cap, what the
# deadline leaves), its output in logs/<name>.log; one summary line.
phase() {
  local name=$1 cap=$2 left rc t0=$SECONDS
  shift 2
  if [[ -n $only && ",$only," != *",$name,"* ]]; then return; fi
  left=$((deadline - (SECONDS - start) - 15))  # 15 s kept for packing
  ((cap > left)) && cap=$left
  if ((cap < 10)); then
    echo "- $name: not run (the deadline is spent)" >>"$summary"
    return
  fi
  echo "== $name (cap ${cap}s)"
  # timeout runs programs, not functions: a function runs in a bash of its own.
  declare -F "$1" >/dev/null && export -f "${1?}"
  timeout -k 5 "$cap" bash -c '"$@"' _ "$@" >"$logs/$name.log" 2>&1
  rc=$?
  echo "- $name: rc $rc in $((SECONDS - t0)) s$([[ $rc == 124 ]] && echo ' (stopped at its cap)')" >>"$summary"
  tail -n 4 "$logs/$name.log"
}

bench() {  # bench <section flag> <folder>
  scripts/device-bench.sh --bin "$bin" "$1" --out "$out/$2" --budget "$3"
}
phase bench-gpu 200 bench --gpu-only bench-gpu 190

# CHECK_REGEX: other suites than these.
check() {
  ANVIL_REQUIRE_DEVICES=cuda ctest --test-dir "$bin" --output-on-failure -j 8 --timeout 90 -LE '^(install|mpi|tensorboard|python)$' \
    -R "${CHECK_REGEX:-cuda|cudnn|test_nn_|test_amp|test_autograd|test_core_elementwise|test_core_matmul|test_conformance|test_core_search|test_core_indexing|test_core_memory_format|test_softmax|test_interpolate}"
}
phase check 80 check

profile() {
  local amp
  for amp in "" bf16; do
    echo "### PyTorch ${amp:-f32}, ${resize}x${resize}"
    (cd benchmarks/device && python3 torch_profile.py --resize "$resize" ${amp:+--amp "$amp"})
    echo "### anvil ${amp:-f32}, ${resize}x${resize}"
    "$bin/examples/resnet" --device cuda:0 --epochs 2 --resize "$resize" --train-subset 2560 --test-subset 512 \
      --out-dir "$out/profile" --profile "$out/profile/resnet-${resize}-${amp:-f32}.trace.json" \
      ${amp:+--amp "$amp"} | sed -n '/^profile: the top /,$p'
  done
}
mkdir -p "$out/profile"
phase profile 50 profile
resize=96
phase profile96 50 profile

python_suite() {
  # DLPack with torch's CUDA tensors and the examples first: the cap may cut the rest.
  local first=(test_interop.py test_examples.py test_tensor.py) files=() f
  for f in "${first[@]}"; do files+=("python/tests/$f"); done
  for f in python/tests/test_*.py; do
    [[ " ${first[*]} " == *" ${f##*/} "* ]] || files+=("$f")
  done
  # array-api-strict (test_array_api.py's reference) travels as a wheel in
  # .whl (the device tool's carry): the machine cannot fetch it.
  local site=$out/site
  if compgen -G '.whl/*.whl' >/dev/null; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$site" .whl/*.whl
  fi
  PYTHONPATH="$PWD/$bin/python:$site" ANVIL_TEST_DEVICE=cuda:0 ANVIL_REQUIRE_DEVICES=cuda ANVIL_SOURCE_DIR="$PWD" \
    ANVIL_BUILD_DIR="$PWD/$bin" python3 -m pytest -q -rfE -p no:cacheprovider "${files[@]}"
}
if [[ -d $bin/python/anvil ]]; then
  phase python 45 python_suite
else
  echo "- python: not run (the pack has no Python package)" >>"$summary"
fi

phase bench-cpu 120 bench --cpu-only bench-cpu 110

wait_sweep() {
  local n
  n=$(nproc)
  # One spin iteration of libgomp's wait (a pause instruction), in ns: turns
  # GOMP_SPINCOUNT into time on this processor.
  if command -v g++ >/dev/null; then
    printf '%s\n' '#include <immintrin.h>' '#include <chrono>' '#include <cstdio>' \
      'int main() { auto t = std::chrono::steady_clock::now(); for (int i = 0; i < 2000000; ++i) _mm_pause();' \
      '  double ns = std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - t).count();' \
      '  std::printf("pause: %.1f ns\n", ns / 2000000); }' >"$out/pause.cpp"
    g++ -O2 "$out/pause.cpp" -o "$out/pause" && "$out/pause"
  fi
  # Spin counts for about 20 and 50 us at 16 ns a pause (the H200 host's).
  local train=$bin/examples/train_fashion_mnist policy model dir policies
  # SWEEP="name:VAR=VALUE ...;name:...": other variants than these.
  IFS=';' read -ra policies <<<"${SWEEP:-default:;passive:OMP_WAIT_POLICY=passive;default-wake38:ANVIL_PARALLEL_WAKE_US=38;passive-wake4:OMP_WAIT_POLICY=passive ANVIL_PARALLEL_WAKE_US=4;spin20us:GOMP_SPINCOUNT=1240;spin50us:GOMP_SPINCOUNT=3100;default-bound:OMP_PROC_BIND=close OMP_PLACES=cores}"
  for model in mlp lenet; do
    for policy in "${policies[@]}"; do
      dir=$out/threads-$model-${policy%%:*}
      mkdir -p "$dir"
      # shellcheck disable=SC2086
      env OMP_NUM_THREADS="$n" ${policy#*:} "$train" --device cpu --model "$model" --epochs 3 \
        --train-samples 20000 --test-samples 1000 --no-plot --out-dir "$dir" >"$dir/log" 2>&1
      echo "$model $n threads ${policy%%:*} (${policy#*:}): epochs 2-3 $(awk -F, 'NR > 2 { printf "%.3f ", $5 }' \
        "$dir/${model}_curves.csv" 2>/dev/null)s"
    done
  done
}
phase wait-sweep 90 wait_sweep

# ResNet-18's batch norm on cuda:0 (issue 38): bf16 through cuDNN and
# through norm.kern (ANVIL_CUDNN_BATCH_NORM=0, its split pass on large
# maps), f32 through norm.kern at 96x96; device-bench's sizes, 3 epochs,
# the mean of epochs 2-3.
resnet_bn() {
  local resize amp bn dir args
  for resize in 0 96; do
    args=(--train-subset 10240 --test-subset 2048)
    [[ $resize == 96 ]] && args=(--train-subset 2048 --test-subset 1024)
    for amp in bf16 f32; do
      for bn in cudnn kern; do
        [[ $amp == f32 && ($bn == cudnn || $resize == 0) ]] && continue
        dir=$out/resnet-$resize-$amp-$bn
        mkdir -p "$dir"
        # shellcheck disable=SC2046
        env $([[ $bn == kern ]] && echo ANVIL_CUDNN_BATCH_NORM=0) "$bin/examples/resnet" --device cuda:0 --epochs 3 \
          --resize "$resize" "${args[@]}" --out-dir "$dir" $([[ $amp == bf16 ]] && echo --amp bf16) >"$dir/log" 2>&1
        echo "resnet ${resize:-28} $amp batch norm $bn: epochs 2-3 $(awk -F, 'NR > 2 { printf "%.3f ", $5 }' \
          "$dir"/resnet18*_curves.csv 2>/dev/null)s; test acc $(awk -F, 'END { print $4 }' "$dir"/resnet18*_curves.csv 2>/dev/null)"
      done
    done
  done
}
phase resnet-bn 90 resnet_bn

predict() {
  scripts/cpu-scaling.sh --bin "$bin" --predict "$(nproc)" --out "$out/scaling"
}
phase predict 100 predict

# What comes back: the summary, the two tables and one archive of the rest.
for f in bench-gpu bench-cpu; do
  [[ -f $out/$f/device-bench.md ]] && cp "$out/$f/device-bench.md" "$out/$f.md"
done
echo >>"$summary"
echo "Total: $((SECONDS - start)) s" >>"$summary"
# shellcheck disable=SC2046
tar -czf "$out/results.tar.gz" -C "$out" --exclude=results.tar.gz --exclude='*.trace.json' --exclude=pause \
  logs summary.md bench-gpu bench-cpu profile scaling $(cd "$out" && compgen -G 'threads-*'; compgen -G 'resnet-*') 2>/dev/null
# The bf16 96x96 trace, the slowest row's, for a look at each kernel.
[[ -f $out/profile/resnet-96-bf16.trace.json ]] && gzip -c "$out/profile/resnet-96-bf16.trace.json" >"$out/resnet-96-bf16.trace.json.gz"
cat "$summary"
