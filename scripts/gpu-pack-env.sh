# shellcheck shell=bash
# Sourced by scripts/gpu-check.sh and scripts/device-bench.sh: runs the build
# that ./run gpu-pack made elsewhere (scripts/gpu-pack.sh) from
# ANVIL_GPU_PACK=DIR, on a GPU machine that cannot install packages.
#
#   source scripts/gpu-pack-env.sh && anvil_use_gpu_pack || exit 1
#
# Unpacks DIR/anvil-build.tar.xz into build/portable (again only when the
# archive changed since the last unpack), links the packing checkout's path
# to this one when they differ (the CTest files and the examples name it),
# and sets:
#   bin=build/portable, pack=DIR's absolute path;
#   LD_LIBRARY_PATH: the pack's runtime-libs, then the CUDA toolkit's, then
#     PyTorch's cuDNN where the loader finds none (anvil_find_cudnn);
#   ANVIL_FASHION_MNIST_DIR=DIR/fashion-mnist.
# Run from the repository root.
anvil_use_gpu_pack() {
  pack=$(realpath "$ANVIL_GPU_PACK") || return 1
  bin=build/portable
  local archive="$pack/anvil-build.tar.xz" stamp="build/portable/.unpacked-from" id
  id="$archive $(stat -c '%s %Y' "$archive")" || return 1
  if [[ ! -f "$stamp" || "$(cat "$stamp")" != "$id" ]]; then
    # Python reads the archive: the GPU machine may have no xz program.
    /usr/bin/env python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(".")' "$archive" || return 1
    echo "$id" >"$stamp"
  fi
  local built_in
  built_in=$(cat "$bin/source-dir") || return 1
  if [[ ! "$built_in" -ef "$PWD" ]]; then
    if [[ -e "$built_in" ]]; then
      echo "gpu pack: $built_in exists and is not this checkout" >&2
      return 1
    fi
    mkdir -p "$(dirname "$built_in")" && ln -s "$PWD" "$built_in" || return 1
  fi
  export LD_LIBRARY_PATH="$PWD/$bin/runtime-libs:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export ANVIL_FASHION_MNIST_DIR="$pack/fashion-mnist"
  anvil_find_cudnn
}

# The folder of PyTorch's cuDNN wheel (<site-packages>/nvidia/cudnn/lib)
# under python3, when it holds libcudnn.so.9; fails otherwise.
torch_cudnn_dir() {
  local dir
  dir=$(python3 -c 'import nvidia.cudnn, os; print(os.path.join(list(nvidia.cudnn.__path__)[0], "lib"))' 2>/dev/null) &&
    [[ -e "$dir/libcudnn.so.9" ]] && echo "$dir"
}

# cuDNN for the CUDA backend (docs/cuda.md, Note [Finding cuDNN]): where the
# dynamic loader finds no libcudnn.so.9 (the GPU machines' toolkit has none),
# the one in PyTorch's wheel (<site-packages>/nvidia/cudnn/lib) goes on
# LD_LIBRARY_PATH, after everything else.
anvil_find_cudnn() {
  local dir
  if [[ -z "${ANVIL_CUDNN_LIBRARY:-}" ]] && ! ldconfig -p 2>/dev/null | grep -q 'libcudnn\.so\.9 ' &&
     dir=$(torch_cudnn_dir); then
    export LD_LIBRARY_PATH="${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$dir"
  fi
  return 0
}

# cuDNN on equal terms (issue 38): device-bench runs anvil on PyTorch's own
# cuDNN (the wheel's nvidia/cudnn/lib, first on LD_LIBRARY_PATH so that
# cuDNN's sub-libraries come from it too), since the machine's differs (9.14
# beside the wheel's 9.19); the table names the version each side loaded.
anvil_use_torch_cudnn() {
  local dir
  if dir=$(torch_cudnn_dir); then
    export LD_LIBRARY_PATH="$dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export ANVIL_CUDNN_LIBRARY="$dir/libcudnn.so.9"
  fi
  return 0
}
