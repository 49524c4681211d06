"""The book's LeNet on Fashion-MNIST written in Python, anvil beside PyTorch
and beside anvil's C++ example, in one run (issue 33): the time of an epoch
after the first, on the CPU, each at its defaults.

    PYTHONPATH=build/release/python build/python-venv/bin/python benchmarks/python/lenet.py \\
        [--images 10240] [--epochs 2] [--bin build/release] [--device cpu]

The three train the same network (examples/python/train_fashion_mnist.py's
LeNet; PyTorch's twin, benchmarks/device/d2l_torch.py's lenet(); the C++ example's d2l_models.h) with the same
loop as d2l::fit: batch 256, SGD at lr 0.1, the loss and the count of correct
predictions summed on the device and read back every 20 batches (fit's
progress line), images reshuffled per epoch.
PyTorch is whatever `import torch` finds (Debian's python3-torch through the
venv's system site-packages); it is left out, and said so, when absent.
"""

import argparse
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "examples", "python"))

import anvil  # noqa: E402
from train_fashion_mnist import LeNet  # noqa: E402

BATCH, LR, SYNC_EVERY = 256, 0.1, 20


def timed_epochs(net, loader, opt, cross_entropy, zeros, epochs):
    """d2l::fit's loop, written once for both libraries (their tensors take the
    same methods): the seconds of each epoch. zeros(dtype_name) makes a 0-d
    accumulator on the batches' device."""
    times = []
    for _ in range(epochs):
        start = time.perf_counter()
        loss_sum, correct = zeros("float32"), zeros("int64")
        for i, (x, y) in enumerate(loader):
            out = net(x)
            loss = cross_entropy(out, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
            loss_sum += loss.detach() * y.shape[0]
            correct += (out.detach().argmax(1) == y).sum()
            if i % SYNC_EVERY == SYNC_EVERY - 1:
                loss_sum.item(), correct.item()
        loss_sum.item(), correct.item()
        times.append(time.perf_counter() - start)
    return times


def anvil_epochs(images, labels, epochs, device):
    anvil.manual_seed(0)
    dev = anvil.device(device)
    loader = anvil.data.DataLoader(images, labels, batch_size=BATCH, shuffle=True, seed=0, device=dev)
    net = LeNet().to(dev)
    opt = anvil.optim.SGD(net.parameters(), lr=LR)
    zeros = lambda dtype: anvil.zeros(device=dev, dtype=getattr(anvil, dtype))  # noqa: E731
    return timed_epochs(net, loader, opt, anvil.nn.cross_entropy, zeros, epochs)


def torch_epochs(images, labels, epochs):
    import torch
    from torch import nn

    sys.path.insert(0, os.path.join(REPO, "benchmarks", "device"))
    import d2l_torch  # the PyTorch twins of the book's models, one place for every benchmark

    torch.manual_seed(0)
    net = d2l_torch.lenet()
    x_all, y_all = torch.from_numpy(images), torch.from_numpy(labels).long()
    data = torch.utils.data.TensorDataset(x_all, y_all)
    loader = torch.utils.data.DataLoader(data, batch_size=BATCH, shuffle=True)
    opt = torch.optim.SGD(net.parameters(), lr=LR)
    zeros = lambda dtype: torch.zeros((), dtype=getattr(torch, dtype))  # noqa: E731
    times = timed_epochs(net, loader, opt, nn.functional.cross_entropy, zeros, epochs)
    return times, torch.__version__, torch.get_num_threads()


def cpp_epochs(binary, images, epochs, device):
    cmd = [binary, "--model", "lenet", "--device", device, "--epochs", str(epochs), "--train-samples", str(images),
           "--test-samples", "1000", "--batch-size", str(BATCH), "--lr", str(LR), "--no-plot", "--out-dir",
           os.path.join(REPO, "build", "python-lenet-bench")]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return [float(s) for s in re.findall(r"^  epoch \d+: .*, ([0-9.]+) s \(", out, re.M)]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=10240)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--device", default="cpu")
    p.add_argument("--bin", default=os.path.join(REPO, "build", "release"))
    args = p.parse_args()
    if args.epochs < 2:
        p.error("--epochs must be at least 2: the first epoch is not timed")

    train = anvil.data.FashionMNIST(train=True)
    images, labels = train.images[:args.images], train.labels[:args.images]
    rows = [("anvil, Python", anvil_epochs(images, labels, args.epochs, args.device))]
    binary = os.path.join(args.bin, "examples", "train_fashion_mnist")
    rows.append(("anvil, C++ example", cpp_epochs(binary, args.images, args.epochs, args.device)))
    torch_note = ""
    if args.device == "cpu":
        try:
            times, version, threads = torch_epochs(images.numpy(), labels.numpy(), args.epochs)
            rows.append(("PyTorch %s, Python" % version, times))
            torch_note = ", PyTorch at its defaults (%d intra-op threads)" % threads
        except ImportError as e:
            torch_note = ", PyTorch left out (%s)" % e
    print("LeNet, %d images, batch %d, on %s%s; load %s" %
          (args.images, BATCH, args.device, torch_note, " ".join(open("/proc/loadavg").read().split()[:3])))
    print("| run | epochs after the first, s | mean | against anvil from Python |")
    print("|---|---|---|---|")
    base = sum(rows[0][1][1:]) / len(rows[0][1][1:])
    for name, times in rows:
        later = times[1:]
        mean = sum(later) / len(later)
        print("| %s | %s | %.3f | %.2f× |" % (name, " ".join("%.3f" % t for t in later), mean, mean / base))
    return 0


if __name__ == "__main__":
    sys.exit(main())
