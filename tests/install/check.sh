#!/usr/bin/env bash
# Installs the build into a fresh prefix, then runs the installed anvil-smi
# and a consumer project that finds anvil with find_package(anvil), both
# with NO LD_LIBRARY_PATH: the installed programs and libraries find each
# other through their $ORIGIN-relative RUNPATH, and the backend modules are
# found beside the installed libanvil (Note [Backend modules]), so the
# consumer sees the same OpenCL devices as the build tree.
set -euo pipefail
build_dir=$(cd "$1" && pwd)
source_dir=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
cmake --install "$build_dir" --prefix "$prefix" >/dev/null
cmake -S "$source_dir" -B "$work/build" -G Ninja -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$work/build" >/dev/null

fail() { echo "install check: $*" >&2; exit 1; }
# Runs a program as a user would after the install: no LD_LIBRARY_PATH, no
# ANVIL_BACKEND_PATH.
installed() { env -u LD_LIBRARY_PATH -u ANVIL_BACKEND_PATH "$@"; }

installed "$prefix/bin/anvil-smi" >"$work/smi.txt" 2>&1 || { cat "$work/smi.txt"; fail "the installed anvil-smi did not run"; }
installed "$prefix/bin/anvil-bench" --help >/dev/null 2>&1 || fail "the installed anvil-bench did not run"
installed "$work/build/consumer" >"$work/consumer.txt" 2>&1 || { cat "$work/consumer.txt"; fail "the consumer did not run"; }
cat "$work/consumer.txt"

# The same OpenCL devices as the build tree sees.
"$build_dir/tools/anvil-smi" -L | grep '^opencl:' >"$work/build-opencl.txt" || true
grep '^opencl:' "$work/consumer.txt" >"$work/consumer-opencl.txt" || true
installed "$prefix/bin/anvil-smi" -L | grep '^opencl:' >"$work/smi-opencl.txt" || true
diff "$work/build-opencl.txt" "$work/consumer-opencl.txt" || fail "the consumer sees other OpenCL devices than the build tree"
diff "$work/build-opencl.txt" "$work/smi-opencl.txt" || fail "the installed anvil-smi sees other OpenCL devices than the build tree"

# Every anvil library the consumer loads (modules included) comes from the
# prefix, none from the build tree.
LD_DEBUG=libs installed "$work/build/consumer" 2>&1 >/dev/null | grep -o 'calling init: [^ ]*libanvil[^ ]*' |
  sed 's/^calling init: //' | sort -u >"$work/loaded.txt"
grep -q "^$prefix/lib[^ ]*/libanvil.so" "$work/loaded.txt" || { cat "$work/loaded.txt"; fail "libanvil not loaded from $prefix"; }
if [[ -s "$work/build-opencl.txt" ]]; then
  grep -q "^$prefix/lib[^ ]*/libanvil_backend_opencl.so" "$work/loaded.txt" ||
    { cat "$work/loaded.txt"; fail "the OpenCL module was not loaded from $prefix"; }
fi
if grep -v "^$prefix/" "$work/loaded.txt"; then fail "anvil libraries loaded from outside $prefix (above)"; fi
echo "install check: $prefix runs without LD_LIBRARY_PATH; $(wc -l <"$work/consumer-opencl.txt") OpenCL device(s) as in the build tree"
