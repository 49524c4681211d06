#!/usr/bin/env bash
# run_tensorboard.sh VENV ARGS... — runs tensorboard_check.py ARGS with a
# python3 that has TensorBoard's own reader: one that has the `tensorboard`
# package already, else a virtual environment at VENV with the pins below
# from PyPI, created on first use under a lock (several test processes may
# call this at once), as run_interop.sh does. A venv that cannot be made is a
# failure (exit 3), not a skip: then nothing would check the event files.
set -euo pipefail
venv="$1"
shift
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
pins=(tensorboard==2.21.0 pillow==13.0.0)
probe='import tensorboard.backend.event_processing.event_accumulator, PIL.Image'

for py in /usr/bin/python3 python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "$probe" >/dev/null 2>&1; then
    exec "$py" "$here/tensorboard_check.py" "$@"
  fi
done

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
flock 9
stamp="$venv/.anvil-pins"
if [[ ! -f "$stamp" || "$(cat "$stamp")" != "${pins[*]}" ]] || ! "$venv/bin/python" -c "$probe" >/dev/null 2>&1; then
  rm -rf "$venv"
  /usr/bin/python3 -m venv --system-site-packages "$venv" >&2 || {
    echo "run_tensorboard.sh: /usr/bin/python3 -m venv failed; expected Debian's python3 and python3-venv" >&2
    exit 3
  }
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check "${pins[@]}" >&2 || {
    echo "run_tensorboard.sh: pip could not install ${pins[*]} into $venv" >&2
    exit 3
  }
  echo "${pins[*]}" >"$stamp"
fi
flock -u 9
exec "$venv/bin/python" "$here/tensorboard_check.py" "$@"
