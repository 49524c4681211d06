#!/usr/bin/env bash
# run_on_device.sh <anvil-smi> <device> <command...>: an example test on a
# device the machine may lack (cuda:N without a GPU, opencl:N without an
# OpenCL driver). With the device there, it runs the command. Without it,
# the test is skipped (exit 77, the tests' SKIP_RETURN_CODE), unless
# ANVIL_REQUIRE_DEVICES names the device's type (./run tests sets opencl,
# ./run gpu-check cuda): then it fails, as the device-generic suites do.
set -euo pipefail
smi=$1 device=$2
shift 2
if "$smi" --list | grep -q "^$device:"; then
  exec "$@"
fi
type=${device%%:*}
if [[ ",${ANVIL_REQUIRE_DEVICES:-}," == *",$type,"* ]]; then
  echo "ANVIL_REQUIRE_DEVICES names $type, but $device is not there; anvil-smi says:" >&2
  "$smi" >&2 || true
  exit 1
fi
echo "SKIPPED: $device is not there ($(basename "$1") needs it)"
exit 77
