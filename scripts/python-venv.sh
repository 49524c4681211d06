#!/usr/bin/env bash
# Makes (or completes) the virtual environment the Python package is built and
# tested in: build/python-venv, with Debian's numpy and torch visible
# (--system-site-packages; the tests compare against them) and the pinned
# build dependencies from PyPI. Debian's python refuses pip outside a venv.
#   scripts/python-venv.sh [DIR]     prints nothing when the venv is complete
set -euo pipefail
cd "$(dirname "$0")/.."
venv="${1:-build/python-venv}"
# The pins, in one place (pyproject.toml's [build-system] repeats the build
# tools). array-api-strict (the standard's reference implementation) and
# hypothesis are for python/tests/test_array_api.py; hypothesis, ndindex and
# pytest-json-report (with its pytest-metadata) for the standard's own suite
# (python/tests/array_api_suite.py, its requirements.txt). nbclient, nbformat
# and ipykernel run the notebooks of examples/notebooks in a kernel of this
# venv (python/tests/notebooks.py, docs/notebooks.md).
pins=(nanobind==2.9.2 scikit-build-core==0.11.6 pytest==8.3.5 array-api-strict==2.6.1 hypothesis==6.170.15
  ndindex==1.10.1 pytest-json-report==1.5.0 pytest-metadata==3.1.1 nbclient==0.11.0 nbformat==5.11.1
  ipykernel==7.4.0)
stamp="$venv/.anvil-pins"
if [[ -x "$venv/bin/python" && -f "$stamp" && "$(cat "$stamp")" == "${pins[*]}" ]]; then exit 0; fi
/usr/bin/python3 -m venv --system-site-packages "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check "${pins[@]}"
"$venv/bin/python" -c "import numpy, nanobind, pytest, array_api_strict, hypothesis, ndindex, pytest_jsonreport, nbclient, nbformat, ipykernel" # numpy comes from Debian (python3-numpy)
echo "${pins[*]}" >"$stamp"
