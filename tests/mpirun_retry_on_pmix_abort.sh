#!/usr/bin/env bash
# tests/mpirun_retry_on_pmix_abort.sh MPIRUN ARGS... — runs the mpirun
# command and passes its output and status through, except in one case: Open
# MPI's runtime itself ended the job before any rank reported. That happens in
# about one kill-over-TCP run in six under ctest -j, in mpirun, not in anvil,
# in two ways (Open MPI 4.1 with orte_enable_recovery): "PMIX ERROR:
# BAD-PARAM" and the survivor killed by mpirun 0.5 s in, long before its
# watchdog's 5 s; or mpirun itself segfaulting in PMIx's log handler
# (pmix_server_log_fn, seen once in a full ctest -j2 run). The command then
# runs again, at most three times. Any other outcome is the test's own result.
set -u
status=1
for attempt in 1 2 3; do
  out=$("$@" 2>&1)
  status=$?
  printf '%s\n' "$out"
  if [[ ($out != *"PMIX ERROR: BAD-PARAM"* && $out != *"pmix_server_log"*) || $out == *" caught "* ]]; then
    exit $status
  fi
  echo "mpirun_retry_on_pmix_abort: Open MPI ended the job before any rank reported (attempt $attempt)" >&2
done
exit $status
