"""The book's "Concise Implementation for Multiple GPUs" in Python, as its
page writes it (examples/multi_gpu_concise.cpp is the C++ twin): ResNet-18
written as nn.Module subclasses, wrapped in nn.DataParallel(net,
device_ids=devices) and trained with l = loss(net(X), y); l.backward();
trainer.step(), first on one device and then on two of anvil.try_all_gpus(),
batch and learning rate scaled with the device count.

    python examples/python/multi_gpu_concise.py [--devices N] [--subset N] [--epochs N] [--batch B] [--lr LR]

The default trains one epoch on 128 images (a CPU without a GPU takes
minutes); the book's run is --subset 0 --epochs 10 --batch 256 --lr 0.1.
Two devices on a machine without a GPU: POCL_DEVICES="pthread pthread"
ANVIL_OPENCL_CPU=1.
"""

import argparse
import sys
import time

import anvil
from anvil import nn


class Residual(nn.Module):
    def __init__(self, input_channels, num_channels, use_1x1conv=False, strides=1):
        super().__init__()
        self.conv1 = nn.Conv2d(input_channels, num_channels, 3, padding=1, stride=strides)
        self.conv2 = nn.Conv2d(num_channels, num_channels, 3, padding=1)
        self.conv3 = nn.Conv2d(input_channels, num_channels, 1, stride=strides) if use_1x1conv else None
        self.bn1 = nn.BatchNorm2d(num_channels)
        self.bn2 = nn.BatchNorm2d(num_channels)

    def forward(self, X):
        Y = self.bn1(self.conv1(X)).relu()
        Y = self.bn2(self.conv2(Y))
        if self.conv3 is not None:
            X = self.conv3(X)
        return (Y + X).relu()


def resnet18(num_classes, in_channels=1):
    def resnet_block(in_channels, out_channels, num_residuals, first_block=False):
        blk = []
        for i in range(num_residuals):
            if i == 0 and not first_block:
                blk.append(Residual(in_channels, out_channels, use_1x1conv=True, strides=2))
            else:
                blk.append(Residual(out_channels, out_channels))
        return nn.Sequential(*blk)

    net = nn.Sequential(nn.Conv2d(in_channels, 64, 3, stride=1, padding=1), nn.BatchNorm2d(64), nn.ReLU())
    net.add_module("resnet_block1", resnet_block(64, 64, 2, first_block=True))
    net.add_module("resnet_block2", resnet_block(64, 128, 2))
    net.add_module("resnet_block3", resnet_block(128, 256, 2))
    net.add_module("resnet_block4", resnet_block(256, 512, 2))
    net.add_module("global_avg_pool", nn.AdaptiveAvgPool2d((1, 1)))
    net.add_module("fc", nn.Sequential(nn.Flatten(), nn.Linear(512, num_classes)))
    return net


def evaluate_accuracy_gpu(net, loader, device):
    net.eval()
    correct = total = 0
    with anvil.no_grad():
        for X, y in loader:
            correct += (net(X).argmax(1) == y.to(device)).sum().item()
            total += y.shape[0]
    net.train()
    return correct / total


def train(net, num_gpus, batch_size, lr, epochs, data, seed):
    devices = anvil.try_all_gpus()[:num_gpus]

    def init_weights(m):
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.normal_(m.weight, std=0.01)

    net.apply(init_weights)
    # Set the model on multiple GPUs
    net = nn.DataParallel(net, device_ids=devices)
    trainer = anvil.optim.SGD(net.parameters(), lr)
    loss = nn.cross_entropy
    (train_x, train_y), (test_x, test_y) = data
    train_iter = anvil.data.DataLoader(train_x, train_y, batch_size=batch_size, shuffle=True, seed=seed)
    test_iter = anvil.data.DataLoader(test_x, test_y, batch_size=batch_size)
    print(f"\n== ResNet-18 on {[str(d) for d in devices]}: batch {batch_size}, lr {lr}, "
          f"{train_x.shape[0]} training images ==")
    total = 0.0
    for epoch in range(epochs):
        start = time.perf_counter()
        loss_sum = 0.0
        for X, y in train_iter:
            trainer.zero_grad()
            X, y = X.to(devices[0]), y.to(devices[0])
            l = loss(net(X), y)
            l.backward()
            trainer.step()
            loss_sum += l.item() * y.shape[0]
        anvil.synchronize(devices[0])
        seconds = time.perf_counter() - start
        total += seconds
        acc = evaluate_accuracy_gpu(net, test_iter, devices[0])
        print(f"  epoch {epoch + 1}: train loss {loss_sum / train_x.shape[0]:.4f}, test acc {acc:.4f}, "
              f"{seconds:.1f} s ({train_x.shape[0] / seconds:.1f} images/s)")
    print(f"test acc: {acc:.2f}, {total / epochs:.1f} sec/epoch on {[str(d) for d in devices]}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", type=int, default=0, help="the first N of try_all_gpus() (default: 1, then 2)")
    p.add_argument("--subset", type=int, default=128, help="train and test images (0: all)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--batch", type=int, default=32, help="per device")
    p.add_argument("--lr", type=float, default=0.05, help="per device")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()

    every = anvil.try_all_gpus()
    print(f"try_all_gpus(): {[str(d) for d in every]}")
    runs = [args.devices] if args.devices else ([1, 2] if len(every) >= 2 else [1])
    if max(runs) > len(every):
        sys.exit(f"multi_gpu_concise: --devices {max(runs)} is more than there are ({len(every)})")
    train_set, test_set = anvil.data.FashionMNIST(train=True), anvil.data.FashionMNIST(train=False)
    n = args.subset or None
    data = ((train_set.images[:n], train_set.labels[:n]), (test_set.images[:n], test_set.labels[:n]))
    for num_gpus in runs:
        anvil.manual_seed(args.seed)
        train(resnet18(10), num_gpus, args.batch * num_gpus, args.lr * num_gpus, args.epochs, data, args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
