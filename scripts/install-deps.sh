#!/usr/bin/env bash
# Installs the Debian packages anvil needs, only those missing.
#   scripts/install-deps.sh            build + test dependencies
#   scripts/install-deps.sh bench      also LibTorch, the benchmarks' peer
# Runs apt-get as root, or through sudo when not root.
set -euo pipefail

packages=(
  g++ cmake ninja-build pkg-config ccache
  libopenblas-openmp-dev          # BLAS sharing anvil's OpenMP pool (Note [One thread pool])
  libdnnl-dev                     # oneDNN: CPU convolution, on the same pool (src/backends/cpu/cpu_conv.cpp)
  libxsmm-dev                     # JIT kernels for small GEMMs (Note [libxsmm for small GEMMs])
  zlib1g-dev libcli11-dev libfmt-dev nlohmann-json3-dev
  ocl-icd-opencl-dev opencl-headers pocl-opencl-icd libclblast-dev clinfo
  libgtest-dev libbenchmark-dev
  clang libclang-rt-14-dev libomp-dev   # libFuzzer targets (clang build)
  clang-format                         # scripts/check-format.sh, run by ./run tests
  libopenmpi-dev openmpi-bin           # anvil::dist's engine between processes
  dataset-fashion-mnist gnuplot-nox
  python3 python3-dev python3-numpy python3-venv python3-pip   # python3-dev: the Python package (python/)
  python3-torch                        # test-side PyTorch references (tests/python/torch_layers_reference.py)
)
# bench: LibTorch, the benchmarks' peer.
if [[ "${1:-}" == "bench" ]]; then packages+=(libtorch-dev); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

as_root=()
if [[ $(id -u) -ne 0 ]]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  as_root=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
"${as_root[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
