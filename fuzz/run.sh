#!/usr/bin/env bash
# fuzz/run.sh [SECONDS] — build the libFuzzer targets with clang, AddressSanitizer
# and UBSan in build-fuzz/, then run each for SECONDS (default 20) starting from
# the seed corpus in fuzz/corpus/<target>/ (read-only; new inputs go to
# build-fuzz/corpus/). Exits non-zero when a target crashes, leaks or throws
# anything but its documented error; the input is kept in build-fuzz/artifacts/.
#
# Environment: ANVIL_FUZZ_BUILD_DIR (default <repo>/build-fuzz),
# ANVIL_FUZZ_JOBS (build parallelism, default 2), ANVIL_FUZZ_TARGETS
# (default "device safetensors npy idx").
set -euo pipefail

seconds="${1:-20}"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="${ANVIL_FUZZ_BUILD_DIR:-$root/build-fuzz}"
jobs="${ANVIL_FUZZ_JOBS:-2}"
targets="${ANVIL_FUZZ_TARGETS:-device safetensors npy idx}"

find_tool() {
  for t in "$@"; do
    if command -v "$t" >/dev/null 2>&1; then command -v "$t"; return 0; fi
  done
  return 1
}
cxx="$(find_tool clang++ clang++-14)" || { echo "fuzz/run.sh: clang++ not found; apt-get install clang libclang-rt-14-dev" >&2; exit 2; }
cc="$(find_tool clang clang-14)" || { echo "fuzz/run.sh: clang not found; apt-get install clang" >&2; exit 2; }

mkdir -p "$build"
cmake -S "$root" -B "$build" -G Ninja \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DANVIL_BUILD_FUZZERS=ON -DANVIL_BUILD_TESTS=OFF -DANVIL_BUILD_BENCHMARKS=OFF \
  -DANVIL_ENABLE_OPENCL=OFF -DANVIL_ENABLE_CUDA=OFF \
  -DANVIL_NATIVE=OFF -DANVIL_WERROR=OFF \
  -DANVIL_SANITIZE=address,undefined >"$build/configure.log" 2>&1 ||
  { cat "$build/configure.log" >&2; echo "fuzz/run.sh: configuring $build with clang failed (clang needs libomp-dev for OpenMP and libclang-rt-14-dev for libFuzzer)" >&2; exit 2; }
ninja -C "$build" -j "$jobs" $(for t in $targets; do echo "fuzz_$t"; done)

# libFuzzer's own leak checking covers the harnesses; OpenMP's thread pool is
# process-lifetime state, not a leak.
export ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}"
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
export OMP_NUM_THREADS="${OMP_NUM_THREADS:-1}"

failed=()
for t in $targets; do
  work="$build/corpus/$t"
  artifacts="$build/artifacts/$t"
  mkdir -p "$work" "$artifacts"
  dict=()
  [[ -f "$root/fuzz/$t.dict" ]] && dict=(-dict="$root/fuzz/$t.dict")
  log="$build/fuzz_$t.log"
  echo "== fuzz_$t: ${seconds}s"
  if "$build/fuzz/fuzz_$t" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
       -print_final_stats=1 -artifact_prefix="$artifacts/" "${dict[@]}" \
       "$work" "$root/fuzz/corpus/$t" >"$log" 2>&1; then
    grep -E "^stat::number_of_executed_units|^Done [0-9]+ runs" "$log" | tail -2 || true
  else
    echo "fuzz_$t FAILED; the last lines of $log:" >&2
    tail -n 40 "$log" >&2
    failed+=("$t")
  fi
done

if ((${#failed[@]})); then
  echo "fuzz/run.sh: ${#failed[@]} target(s) failed: ${failed[*]} (inputs in $build/artifacts/)" >&2
  exit 1
fi
echo "fuzz/run.sh: all targets ran ${seconds}s without a crash: $targets"
