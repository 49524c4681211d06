#!/usr/bin/python3
"""PyTorch's side of the DDP benchmark (benchmarks/train/ddp_compare.sh).

Two processes (torch.multiprocessing), Gloo, on the CPU: the same models,
data, global batch (256), SGD lr 0.1 and threads per rank as ddp_anvil.cpp,
with DistributedDataParallel and a DistributedSampler. Rank 0 prints the same
`key value` lines (see ddp_anvil.cpp for their meaning).
"""
import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "device"))
import d2l_torch  # noqa: E402  the models and the IDX reader, shared with device-bench

ROOT = os.environ.get("ANVIL_FASHION_MNIST_DIR", "/usr/share/datasets/fashion-mnist")


def load(split, subset):
    x, y = d2l_torch.fashion_mnist(ROOT, split)
    if subset:
        x, y = x[:subset], y[:subset]
    return x, y


def make_model(name):
    return d2l_torch.mlp() if name == "mlp" else d2l_torch.lenet()


def worker(rank, args):
    torch.set_num_threads(args.threads)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(args.port))
    dist.init_process_group("gloo", rank=rank, world_size=args.ranks)
    torch.manual_seed(0)
    x, y = load("train", args.train_subset)
    tx, ty = load("test", 0)
    ddp = nn.parallel.DistributedDataParallel(make_model(args.model))
    opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
    sampler = torch.utils.data.distributed.DistributedSampler(range(len(x)), args.ranks, rank, shuffle=True, seed=0)
    per_rank = args.batch_size // args.ranks
    loss_fn = nn.CrossEntropyLoss()

    def step(bx, by):
        opt.zero_grad()
        loss_fn(ddp(bx), by).backward()
        opt.step()

    epoch_s = []
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        order = torch.tensor(list(iter(sampler)))
        dist.barrier()
        t0 = time.perf_counter()
        for start in range(0, len(order), per_rank):
            idx = order[start:start + per_rank]
            step(x.index_select(0, idx), y.index_select(0, idx))
        dist.barrier()
        epoch_s.append(time.perf_counter() - t0)
    epoch_s = epoch_s[1:] or epoch_s

    with torch.no_grad():
        correct = sum(int((ddp.module(tx[i:i + 1000]).argmax(1) == ty[i:i + 1000]).sum()) for i in range(0, len(tx), 1000))
    acc = correct / len(tx)

    idx = torch.tensor(list(iter(sampler)))[:per_rank]
    bx, by = x.index_select(0, idx), y.index_select(0, idx)
    full, compute, comm = [], [], []
    for _ in range(args.overlap_steps):
        dist.barrier()
        t0 = time.perf_counter()
        step(bx, by)
        full.append(time.perf_counter() - t0)
        dist.barrier()
        t0 = time.perf_counter()
        with ddp.no_sync():
            step(bx, by)
        compute.append(time.perf_counter() - t0)
    # PyTorch's buckets: 25 MiB, the first 1 MiB, in reverse parameter order.
    sizes, cur, first = [], 0, True
    for p in reversed(list(ddp.parameters())):
        cap = (1 << 20) if first else (25 << 20)
        if cur and cur * 4 + p.numel() * 4 > cap:
            sizes.append(cur)
            cur, first = 0, False
        cur += p.numel()
    sizes.append(cur)
    buckets = [torch.zeros(n) for n in sizes]
    for _ in range(args.overlap_steps):
        dist.barrier()
        t0 = time.perf_counter()
        works = [dist.all_reduce(b, async_op=True) for b in buckets]
        for w in works:
            w.wait()
        comm.append(time.perf_counter() - t0)
    if rank == 0:
        s, c, m = statistics.median(full), statistics.median(compute), statistics.median(comm)
        print(f"model {args.model}\nranks {args.ranks}\nthreads {args.threads}\ndevice cpu\nbuckets {len(sizes)}")
        print(f"epoch_s {statistics.median(epoch_s):.4f}\nacc {acc:.4f}\nstep_s {s:.6f}\ncompute_s {c:.6f}")
        print(f"comm_s {m:.6f}\nhidden {(c + m - s) / m if m > 0 else 0:.3f}", flush=True)
    dist.barrier()
    # destroy_process_group() can hang at exit with Gloo in torch 1.13: leave at once.
    os._exit(0)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="mlp")
    p.add_argument("--epochs", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--train-subset", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--overlap-steps", type=int, default=30)
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--port", type=int, default=29533)
    args = p.parse_args()
    mp.spawn(worker, args=(args,), nprocs=args.ranks, join=True)


if __name__ == "__main__":
    main()
