"""The book's LeNet on Fashion-MNIST, written as a Python nn.Module subclass
the PyTorch way, trained on anvil.try_gpu() (examples/train_fashion_mnist.cpp
is the C++ twin: batch 256, SGD lr 0.1, reshuffled every epoch, the modern
LeNet with ReLU and max-pooling).

    python examples/python/train_fashion_mnist.py --epochs 2 [--device cpu] [--train-subset N] [--out-dir DIR]

--out-dir DIR writes DIR/lenet_curves.csv (epoch, seconds, train_loss,
test_acc), the columns of the C++ example's curves, which device-bench reads.
"""

import argparse
import csv
import os
import sys
import time

import anvil
from anvil import nn


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, padding=2)
        self.pool1 = nn.MaxPool2d(2)
        self.conv2 = nn.Conv2d(6, 16, 5)
        self.pool2 = nn.MaxPool2d(2)
        self.fc1 = nn.Linear(16 * 5 * 5, 120)
        self.fc2 = nn.Linear(120, 84)
        self.fc3 = nn.Linear(84, 10)

    def forward(self, x):
        x = self.pool1(self.conv1(x).relu())
        x = self.pool2(self.conv2(x).relu())
        x = x.flatten(1)
        return self.fc3(self.fc2(self.fc1(x).relu()).relu())


def accuracy(net, loader):
    net.eval()
    correct = total = 0
    with anvil.no_grad():
        for x, y in loader:
            correct += (net(x).argmax(1) == y).sum().item()
            total += y.shape[0]
    net.train()
    return correct / total


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=256)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--device", default=None, help="cpu, opencl:0, cuda:0 (default: anvil.try_gpu())")
    p.add_argument("--train-subset", type=int, default=0, help="train on the first N images (0: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out-dir", default=None, help="write lenet_curves.csv there")
    args = p.parse_args()

    device = anvil.device(args.device) if args.device else anvil.try_gpu()
    anvil.manual_seed(args.seed)
    train, test = anvil.data.FashionMNIST(train=True), anvil.data.FashionMNIST(train=False)
    images, labels = train.images, train.labels
    if args.train_subset:
        images, labels = images[:args.train_subset], labels[:args.train_subset]
    train_loader = anvil.data.DataLoader(images, labels, batch_size=args.batch_size, shuffle=True, seed=args.seed,
                                         device=device)
    test_loader = anvil.data.DataLoader(test.images, test.labels, batch_size=1024, device=device)

    net = LeNet().to(device)
    print(net)
    print(f"training on {device}: {len(train_loader)} batches of {args.batch_size} per epoch")
    opt = anvil.optim.SGD(net.parameters(), lr=args.lr)
    curves = []
    for epoch in range(args.epochs):
        start = time.perf_counter()
        loss_sum, batches = None, 0
        for x, y in train_loader:
            opt.zero_grad()
            loss = nn.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            # Summed on the device and read once an epoch: a read per batch
            # would wait for the device every step.
            loss_sum = loss.detach() if loss_sum is None else loss_sum + loss.detach()
            batches += 1
        loss_sum = loss_sum.item()
        seconds = time.perf_counter() - start
        test_acc = accuracy(net, test_loader)
        print(f"epoch {epoch + 1}: loss {loss_sum / batches:.4f}, test accuracy {test_acc:.3f}, "
              f"{seconds:.1f} s ({len(images) / seconds:.0f} images/s)")
        curves.append({"epoch": epoch + 1, "seconds": seconds, "train_loss": loss_sum / batches, "test_acc": test_acc})
    if args.out_dir:
        os.makedirs(args.out_dir, exist_ok=True)
        with open(os.path.join(args.out_dir, "lenet_curves.csv"), "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=list(curves[0]))
            writer.writeheader()
            writer.writerows(curves)
    return 0


if __name__ == "__main__":
    sys.exit(main())
