#!/bin/sh
# DDP benchmark: anvil (mpirun -np 2, ddp_anvil.cpp) against PyTorch DDP
# (Gloo, 2 processes, ddp_torch.py) on the CPU, same model, global batch 256
# and threads per rank; prints both sides' figures and anvil ÷ PyTorch, then
# anvil's scaling: 2 ranks against 1 rank on the same global batch, with
# two context rows that say what this machine allows:
#   ceiling  2 ranks stepping with no communication at all (--local-only:
#            the same per-rank half batch, no allreduce) against 1 rank; on
#            a 2-core machine this is the most any DDP can reach here, and
#            the scaling row divided by it is what anvil's DDP costs;
#   bound    the ceiling plus, each step, the allreduces alone (comm_s):
#            what DDP reaches when nothing hides its communication (the
#            MLP's largest gradient, the first layer's, is computed last)
#            and the ranks never wait for each other;
#   half     1 rank at the per-rank batch against 1 rank at the global
#            batch, samples/s: how much of the ceiling's shortfall is the
#            smaller per-rank GEMMs and the per-step costs that do not
#            shrink with the batch (the optimizer step, the loss, the loader).
#   benchmarks/train/ddp_compare.sh BUILD_DIR [--model mlp|lenet] [--epochs 3] [--threads 1] [--train-subset N] [--batch-size 256]
set -eu
build=$1; shift
batch=256
prev=""
for arg in "$@"; do
  if [ "$prev" = "--batch-size" ]; then batch=$arg; fi
  prev=$arg
done
here=$(cd "$(dirname "$0")" && pwd)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
a=$(ANVIL_DIST_DEVICE=cpu mpirun -np 2 --bind-to none "$build/benchmarks/train/bench_ddp_anvil" "$@")
t=$(OMP_NUM_THREADS=1 /usr/bin/python3 "$here/ddp_torch.py" "$@")
# Scaling: the same global batch and threads per rank on one rank.
one=$(ANVIL_DIST_DEVICE=cpu mpirun -np 1 --bind-to none "$build/benchmarks/train/bench_ddp_anvil" "$@")
# The ceiling and the half-batch context (see the top of this file); later
# flags win, so these override a --batch-size in "$@".
free=$(ANVIL_DIST_DEVICE=cpu mpirun -np 2 --bind-to none "$build/benchmarks/train/bench_ddp_anvil" "$@" --local-only 1)
half=$(ANVIL_DIST_DEVICE=cpu mpirun -np 1 --bind-to none "$build/benchmarks/train/bench_ddp_anvil" "$@" --batch-size $((batch / 2)))
printf '%s\n' "$a" > /tmp/ddp_anvil.$$; printf '%s\n' "$t" > /tmp/ddp_torch.$$
printf '%-10s %12s %12s %8s\n' figure anvil pytorch ratio
for k in epoch_s step_s compute_s comm_s hidden acc buckets; do
  av=$(awk -v k=$k '$1==k{print $2}' /tmp/ddp_anvil.$$); tv=$(awk -v k=$k '$1==k{print $2}' /tmp/ddp_torch.$$)
  r=$(awk -v a="$av" -v b="$tv" 'BEGIN{ if (b+0 != 0) printf "%.2f", a/b; else print "-" }')
  printf '%-10s %12s %12s %8s\n' "$k" "$av" "$tv" "$r"
done
e1=$(printf '%s\n' "$one" | awk '$1=="epoch_s"{print $2}')
e2=$(awk '$1=="epoch_s"{print $2}' /tmp/ddp_anvil.$$)
awk -v a="$e1" -v b="$e2" 'BEGIN{ printf "scaling    anvil 2 ranks vs 1 rank (same global batch, threads per rank): epoch %s s vs %s s, samples/s %.2fx (target >= 1.7x)\n", b, a, a/b }'
ef=$(printf '%s\n' "$free" | awk '$1=="epoch_s"{print $2}')
eh=$(printf '%s\n' "$half" | awk '$1=="epoch_s"{print $2}')
awk -v a="$e1" -v b="$e2" -v f="$ef" 'BEGIN{ printf "ceiling    2 ranks with no communication (--local-only) vs 1 rank: epoch %s s, samples/s %.2fx; anvil DDP reaches %.0f%% of it\n", f, a/f, 100*(a/b)/(a/f) }'
sf=$(printf '%s\n' "$free" | awk '$1=="steps"{print $2}')
cm=$(awk '$1=="comm_s"{print $2}' /tmp/ddp_anvil.$$)
awk -v a="$e1" -v b="$e2" -v f="$ef" -v n="$sf" -v c="$cm" 'BEGIN{ t = f + n * c; printf "bound      the ceiling plus the allreduces alone each step (%d x %s s): epoch %.4f s, samples/s %.2fx; anvil DDP reaches %.0f%% of it\n", n, c, t, a/t, 100*(a/b)/(a/t) }'
awk -v a="$e1" -v h="$eh" -v n="$((batch / 2))" 'BEGIN{ printf "half       1 rank at batch %d (the per-rank batch) vs 1 rank: epoch %s s, samples/s %.2fx\n", n, h, a/h }'
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
rm -f /tmp/ddp_anvil.$$ /tmp/ddp_torch.$$
