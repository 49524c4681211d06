#!/usr/bin/env bash
# run_interop.sh VENV ARGS... — runs interop.py ARGS with a python3 that has
# numpy and the reference `safetensors` package (PyPI): one that has both
# already, else a virtual environment at VENV, created on first use. Debian's
# python3 (with python3-numpy and python3-venv) is preferred; its numpy is
# reused through --system-site-packages. Several test processes may call this
# at once: the venv is created under a lock.
set -euo pipefail
venv="$1"
shift
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"

pick_python() {
  for py in /usr/bin/python3 python3; do
    if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import venv, ensurepip' >/dev/null 2>&1; then
      echo "$py"
      return 0
    fi
  done
  echo "run_interop.sh: no python3 with the venv module; expected Debian's python3 and python3-venv" \
       "(apt-get install python3 python3-venv python3-numpy)" >&2
  return 1
}

# A python3 that has both already (a machine with no package index, say)
# needs no venv.
for py in /usr/bin/python3 python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c 'import numpy, safetensors.numpy' >/dev/null 2>&1; then
    exec "$py" "$here/interop.py" "$@"
  fi
done

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
if ! "$venv/bin/python" -c 'import numpy, safetensors.numpy' >/dev/null 2>&1; then
  py="$(pick_python)"
  rm -rf "$venv"
  "$py" -m venv --system-site-packages "$venv" >&2
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check safetensors numpy >&2 || {
    echo "run_interop.sh: pip could not install safetensors and numpy into $venv" >&2
    exit 3
  }
fi
flock -u 9
exec "$venv/bin/python" "$here/interop.py" "$@"
