#!/usr/bin/env bash
# tests/report_exit_status.sh COMMAND ARGS... — runs the command (one rank of
# an mpirun job, the wrapper being what mpirun launched) and prints how it
# ended as its parent saw it: "rank R exited with status S after T s", R from
# Open MPI's environment. dist_failure_ignore matches that line, so the
# status it checks is the process's real one, not a message the library
# printed before it meant to exit.
set -u
start=$SECONDS
"$@"
status=$?
echo "rank ${OMPI_COMM_WORLD_RANK:-?} exited with status $status after $((SECONDS - start)) s"
exit $status
