"""PyTorch's side of a kernel-level comparison (issue 38): the book's
ResNet-18 (d2l_torch.py, as device-bench trains it) for a few training steps
under torch.profiler, and its per-op table by device time, with the kernels
launched per step and the step's median time. anvil's side is the example's
own --profile (device-bench's profile section, scripts/device-run.sh).

    python3 benchmarks/device/torch_profile.py [--amp bf16] [--resize 96] [--steps 10]
"""

import argparse
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch.profiler import ProfilerActivity, profile

import d2l_torch as d2l


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--amp", choices=["bf16"], default=None)
    p.add_argument("--resize", type=int, default=0)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--rows", type=int, default=25)
    args = p.parse_args()
    if not torch.cuda.is_available():
        print("torch_profile: this PyTorch sees no CUDA device", file=sys.stderr)
        return 1
    device = torch.device("cuda:0")
    torch.manual_seed(0)
    size = args.resize or 28
    x = torch.rand(args.batch_size, 1, size, size, device=device)
    y = torch.randint(0, 10, (args.batch_size,), device=device)
    net = d2l.resnet18().to(device)
    opt = torch.optim.SGD(net.parameters(), lr=0.05)
    amp = torch.bfloat16 if args.amp else None

    def step():
        opt.zero_grad()
        with d2l._autocast(device, amp):
            loss = F.cross_entropy(net(x), y)
        loss.backward()
        opt.step()

    for _ in range(5):  # cuDNN's heuristics and the allocator settle
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(args.steps):
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        for _ in range(args.steps):
            step()
        torch.cuda.synchronize()
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    print("ResNet-18 %dx%d, batch %d, %s, torch %s, cuDNN %s: step %.3f ms (median of %d), %.0f kernels per step" %
          (size, size, args.batch_size, "bf16 autocast" if amp else "f32 (TF32 convolutions)", torch.__version__,
           torch.backends.cudnn.version(), 1000 * statistics.median(times), args.steps, len(kernels) / args.steps))
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=args.rows, max_name_column_width=60))
    return 0


if __name__ == "__main__":
    sys.exit(main())
