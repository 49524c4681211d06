#!/usr/bin/env bash
# ./run gpu-pack [DIR]: build here for a GPU machine that cannot install
# packages (no package mirror, no compiler for anvil's dependencies) and pack
# what ./run gpu-check needs there into DIR (default .gpu-pack, which git
# ignores), about 50 MiB:
#   DIR/anvil-build.tar.xz  build/portable (the libraries, tests, examples,
#                           tools and the CTest files), and in it
#                           runtime-libs/: every shared library those link
#                           that is not part of the C and C++ runtime or of
#                           the CUDA toolkit (OpenBLAS, oneDNN, CLBlast, the
#                           OpenCL loader, Open MPI's libraries, ...);
#   DIR/fashion-mnist/      the dataset's four files, for the examples;
#   and in build/portable/python/anvil the Python package, its extension
#   built for the GPU machine's python3 (3.12): --python PY names an
#   interpreter of that version here, else python3.12 on PATH or pyenv's
#   3.12 is used, else the pack has no Python package and says so.
# On the GPU machine, from a copy of this repository with DIR beside it:
#   ANVIL_GPU_PACK=DIR ./run gpu-check
# The build targets x86-64-v3 (AVX2, FMA), not this machine's CPU, so it runs
# on the GPU machine's processor whatever this one is. CTest files name
# absolute paths: gpu-check links this checkout's path to the copy there
# when they differ (the path is kept in build/portable/source-dir).
set -euo pipefail
cd "$(dirname "$0")/.."

out=.gpu-pack
python=
while (($#)); do
  case $1 in
    --python) python=$2; shift 2 ;;
    *) out=$1; shift ;;
  esac
done
build=build/portable
scripts/install-deps.sh

# The extension is built for one Python minor version: the GPU machine's.
if [[ -z $python ]]; then
  python=$(command -v python3.12 || compgen -G "$HOME/.pyenv/versions/3.12*/bin/python3" | tail -n 1 || true)
fi
python_flags=(-DANVIL_BUILD_PYTHON=OFF)
if [[ -n $python ]]; then
  # nanobind at python-venv.sh's pin, in a venv of that interpreter.
  venv=build/gpu-pack-python
  nanobind=$(grep -o 'nanobind==[0-9.]*' scripts/python-venv.sh)
  if ! "$venv/bin/python" -c 'import nanobind' 2>/dev/null; then
    "$python" -m venv "$venv"
    "$venv/bin/python" -m pip install -q --disable-pip-version-check "$nanobind"
  fi
  python_flags=(-DANVIL_BUILD_PYTHON=ON -DPython_EXECUTABLE="$PWD/$venv/bin/python")
else
  echo "gpu-pack: no Python 3.12 here (--python PY): the pack has no Python package" >&2
fi
cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DANVIL_NATIVE=OFF "${python_flags[@]}" \
  -DCMAKE_C_FLAGS=-march=x86-64-v3 -DCMAKE_CXX_FLAGS=-march=x86-64-v3 >/dev/null
cmake --build "$build" -j "$(nproc)"
pwd >"$build/source-dir"

# What the build's programs and libraries load, less what every Linux with a
# C++ runtime has and what the GPU machine's CUDA toolkit provides.
mapfile -t programs < <(find "$build" \( -name runtime-libs -o -name CMakeFiles -o -name python-venv \) -prune \
  -o -type f -perm -u+x -print)
rm -rf "$build/runtime-libs"
mkdir -p "$build/runtime-libs"
for f in "${programs[@]}"; do ldd "$f" 2>/dev/null || true; done |
  awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
  grep -vE '/(libc|libm|libpthread|libdl|librt|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so|/usr/local/cuda|/libcu[a-z]*\.so|/libnvrtc|'"$PWD/$build" |
  while read -r lib; do cp -L "$lib" "$build/runtime-libs/"; done

mkdir -p "$out/fashion-mnist"
cp /usr/share/datasets/fashion-mnist/*.gz "$out/fashion-mnist/"
# Python writes the archive: the GPU machine reads it with Python's tarfile,
# which needs no xz program there.
find "$build" \( -name CMakeFiles -o -name python-venv \) -prune -o \( -type l -o -type f \( -perm -u+x \
  -o -path "$build/runtime-libs/*" -o -path "$build/python/anvil/*" -o -name CTestTestfile.cmake -o -name source-dir \) \) -print |
  /usr/bin/python3 -c '
import sys, tarfile
with tarfile.open(sys.argv[1], "w:xz", preset=6) as tar:
    for path in sys.stdin.read().split():
        tar.add(path, recursive=False)
' "$out/anvil-build.tar.xz"
du -sh "$out"/*
