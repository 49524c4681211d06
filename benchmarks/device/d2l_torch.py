"""The book's examples of examples/ written in PyTorch, for ./run device-bench.

Each model, dataset and training loop here mirrors one anvil example, so that
the two sides of a row in device-bench's table do the same work:

  MLP, LeNet     examples/train_fashion_mnist.cpp   (d2l_train.h's fit)
  ResNet-18      examples/resnet.cpp, d2l_resnet.h  (fit, host-side resize)
  ViT            examples/vit.cpp, d2l_vit.h        (its own loop)
  GRU/LSTM LM    examples/rnn_language_model.cpp, d2l_rnn.h

Same layers, the same initialisation (PyTorch's defaults, which anvil's
layers follow; D2L's N(0, 0.01) for the MLP's weights; the ViT's class token
0 and positional embedding N(0, 0.02)), the same data (Fashion-MNIST from
the same IDX .gz files, pixel / 255; The Time Machine cleaned as
d2l::load_corpus does), batch sizes, learning rates, plain SGD, evaluation
batch sizes and host syncs per epoch. Batches are gathered on the host by
one index op per batch and copied to the device, as anvil's DataLoader does
(no per-sample Dataset). Only torch, numpy and the standard library: no
torchvision.
"""

import gzip
import math
import os
import random
import time

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

# --- data -------------------------------------------------------------------------------


def _idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(ndim)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim).reshape(dims)


def fashion_mnist(data_dir, split):
    """(images f32 [N, 1, 28, 28] in [0, 1], labels i64 [N]) on the CPU."""
    prefix = "train" if split == "train" else "t10k"
    images = _idx(os.path.join(data_dir, prefix + "-images-idx3-ubyte.gz"))
    labels = _idx(os.path.join(data_dir, prefix + "-labels-idx1-ubyte.gz"))
    x = torch.from_numpy(images.astype(np.float32) / 255.0).reshape(-1, 1, 28, 28)
    return x.contiguous(), torch.from_numpy(labels.astype(np.int64))


def first(t, n):
    """The first n samples (all for 0 or n past the end), as d2l::first."""
    return t[:n] if 0 < n < t.shape[0] else t


def load_corpus(path, max_tokens):
    """d2l::load_corpus: each line's runs of non-letters become one space, the
    line is trimmed and lowercased, and the lines are joined with nothing
    between them; the vocabulary is '<unk>' then the characters by falling
    frequency, ties in character order. Returns (tokens, vocab size)."""
    text = []
    with open(path, "rb") as f:
        for raw in f.read().split(b"\n"):
            clean = []
            for c in raw.decode("latin-1"):
                if ("a" <= c <= "z") or ("A" <= c <= "Z"):
                    clean.append(c.lower())
                elif not clean or clean[-1] != " ":
                    clean.append(" ")
            text.append("".join(clean).strip(" "))
    text = "".join(text)
    freq = {}
    for c in text:
        freq[c] = freq.get(c, 0) + 1
    chars = sorted(freq, key=lambda c: (-freq[c], c))
    index = {c: i + 1 for i, c in enumerate(chars)}
    tokens = [index[c] for c in text]
    if max_tokens > 0:
        tokens = tokens[:max_tokens]
    return np.array(tokens, dtype=np.int64), len(chars) + 1


def sequential_batches(tokens, batch_size, steps, rng):
    """d2l::batches with random = false: neighbouring minibatches continue each
    other row by row, from a random offset in [0, steps)."""
    offset = rng.randint(0, steps - 1)
    per_row = (len(tokens) - offset - 1) // batch_size
    xs = tokens[offset:offset + batch_size * per_row].reshape(batch_size, per_row)
    ys = tokens[offset + 1:offset + 1 + batch_size * per_row].reshape(batch_size, per_row)
    out = []
    for t0 in range(0, per_row - steps + 1, steps):
        out.append((torch.from_numpy(np.ascontiguousarray(xs[:, t0:t0 + steps])),
                    torch.from_numpy(np.ascontiguousarray(ys[:, t0:t0 + steps]))))
    return out


def resize_bilinear(x, size):
    """The book's resize, on the host as its transforms.Resize: half-pixel centres (align_corners=False)."""
    return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)


# --- models -----------------------------------------------------------------------------


def mlp():
    net = nn.Sequential(nn.Flatten(), nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 10))
    for i in (1, 3):
        nn.init.normal_(net[i].weight, 0.0, 0.01)  # D2L's init; biases PyTorch's default
    return net


def lenet():
    return nn.Sequential(nn.Conv2d(1, 6, 5, 1, 2), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(6, 16, 5), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(),
                         nn.Linear(84, 10))


class Residual(nn.Module):
    """d2l_resnet.h's Residual."""

    def __init__(self, in_channels, num_channels, use_1x1conv=False, strides=1):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, num_channels, 3, strides, 1)
        self.conv2 = nn.Conv2d(num_channels, num_channels, 3, 1, 1)
        self.conv3 = nn.Conv2d(in_channels, num_channels, 1, strides) if use_1x1conv else None
        self.bn1 = nn.BatchNorm2d(num_channels)
        self.bn2 = nn.BatchNorm2d(num_channels)

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return F.relu(y + (self.conv3(x) if self.conv3 is not None else x))


def _resnet_block(in_channels, out_channels, num_residuals, first_block=False):
    blk = []
    for i in range(num_residuals):
        if i == 0 and not first_block:
            blk.append(Residual(in_channels, out_channels, True, 2))
        else:
            blk.append(Residual(out_channels, out_channels))
    return nn.Sequential(*blk)


def resnet18(num_classes=10, in_channels=1):
    """d2l::resnet18: 3x3 stem (no max-pooling), four stages, pooling, Linear."""
    return nn.Sequential(nn.Conv2d(in_channels, 64, 3, 1, 1), nn.BatchNorm2d(64), nn.ReLU(),
                         _resnet_block(64, 64, 2, True), _resnet_block(64, 128, 2), _resnet_block(128, 256, 2),
                         _resnet_block(256, 512, 2), nn.AdaptiveAvgPool2d((1, 1)),
                         nn.Sequential(nn.Flatten(), nn.Linear(512, num_classes)))


class ViT(nn.Module):
    """d2l::ViT at vit.cpp's sizes (ViTConfig): conv patch embedding, class
    token, positional embedding, pre-norm GELU encoder blocks, LayerNorm +
    Linear head on the class token."""

    def __init__(self, img_size=28, patch_size=7, num_hiddens=64, mlp_hiddens=128, num_heads=4, num_blks=2,
                 dropout=0.1, in_channels=1, num_classes=10):
        super().__init__()
        self.patch_embedding = nn.Conv2d(in_channels, num_hiddens, patch_size, patch_size)
        self.dropout = nn.Dropout(dropout)
        self.blks = nn.Sequential(*[
            nn.TransformerEncoderLayer(num_hiddens, num_heads, mlp_hiddens, dropout, "gelu", 1e-5, batch_first=True,
                                       norm_first=True) for _ in range(num_blks)
        ])
        self.head = nn.Sequential(nn.LayerNorm(num_hiddens), nn.Linear(num_hiddens, num_classes))
        patches = (img_size // patch_size)**2
        self.cls_token = nn.Parameter(torch.zeros(1, 1, num_hiddens))
        self.pos_embedding = nn.Parameter(torch.randn(1, patches + 1, num_hiddens) * 0.02)

    def forward(self, x):
        p = self.patch_embedding(x).flatten(2).transpose(1, 2)
        p = torch.cat((self.cls_token.expand(p.shape[0], -1, -1), p), 1)
        p = self.dropout(p + self.pos_embedding)
        return self.head(self.blks(p)[:, 0])


class RNNModel(nn.Module):
    """d2l::RNNModel: one-hot characters through a GRU (or LSTM), then a Linear
    from every step's hidden state to the vocabulary."""

    def __init__(self, vocab_size, num_hiddens, cell="gru"):
        super().__init__()
        self.vocab = vocab_size
        self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(vocab_size, num_hiddens)
        self.linear = nn.Linear(num_hiddens, vocab_size)

    def forward(self, tokens, state):
        x = F.one_hot(tokens.t(), self.vocab).to(torch.float32)
        out, state = self.rnn(x, state)
        return self.linear(out.reshape(-1, out.shape[-1])), state


# --- training loops ---------------------------------------------------------------------


def sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _autocast(device, amp):
    if amp is None:
        return torch.autocast(device.type, enabled=False)
    return torch.autocast(device.type, dtype=amp)


def evaluate(net, x_all, y_all, batch_size, device, prepare, amp=None):
    """d2l::evaluate: test accuracy, the correct count kept on the device."""
    net.eval()
    correct = torch.zeros((), dtype=torch.int64, device=device)
    with torch.no_grad(), _autocast(device, amp):
        for b in range(0, x_all.shape[0], batch_size):
            x = prepare(x_all[b:b + batch_size])
            y = y_all[b:b + batch_size].to(device, non_blocking=True)
            correct += (net(x).argmax(1) == y).sum()
    net.train()
    return correct.item() / x_all.shape[0]


def fit(net, opt, train, test, device, epochs, batch_size, test_batch_size, prepare, amp=None, on_epoch=None):
    """d2l::fit: cross-entropy, the loss and correct counts on the device, read
    every 20 batches and at the last (the progress bar's syncs); the epoch's
    time ends after the last read, before the test accuracy."""
    xs, ys = train
    n = xs.shape[0]
    nbatches = (n + batch_size - 1) // batch_size
    for epoch in range(1, epochs + 1):
        sync(device)
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        correct = torch.zeros((), dtype=torch.int64, device=device)
        order = torch.randperm(n)
        for b in range(nbatches):
            idx = order[b * batch_size:(b + 1) * batch_size]
            x = prepare(xs[idx])
            y = ys[idx].to(device, non_blocking=True)
            opt.zero_grad()
            with _autocast(device, amp):
                logits = net(x)
                loss = F.cross_entropy(logits, y)
            loss.backward()
            opt.step()
            with torch.no_grad():
                loss_sum += loss.detach().float() * y.shape[0]
                correct += (logits.detach().argmax(1) == y).sum()
            if (b + 1) % 20 == 0 or b + 1 == nbatches:
                loss_sum.item()
                correct.item()
        secs = time.perf_counter() - t0
        acc = evaluate(net, test[0], test[1], test_batch_size, device, prepare, amp)
        on_epoch(epoch, secs, {"test_acc": acc, "train_loss": loss_sum.item() / n})


def fit_vit(net, opt, train, test, device, epochs, batch_size, prepare, amp=None, on_epoch=None):
    """vit.cpp's loop: the loss summed on the device and read once per epoch."""
    xs, ys = train
    n = xs.shape[0]
    for epoch in range(1, epochs + 1):
        sync(device)
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        order = torch.randperm(n)
        for b in range(0, n, batch_size):
            idx = order[b:b + batch_size]
            y = ys[idx].to(device, non_blocking=True)
            opt.zero_grad()
            with _autocast(device, amp):
                loss = F.cross_entropy(net(prepare(xs[idx])), y)
            loss.backward()
            opt.step()
            with torch.no_grad():
                loss_sum += loss.detach().float() * y.shape[0]
        loss = loss_sum.item() / n
        secs = time.perf_counter() - t0
        acc = evaluate(net, test[0], test[1], batch_size, device, prepare, amp)
        on_epoch(epoch, secs, {"test_acc": acc, "train_loss": loss})


def grad_clipping(params, theta):
    """d2l::grad_clipping, on the device (no host sync)."""
    with torch.no_grad():
        sq = sum((p.grad * p.grad).sum() for p in params)
        scale = torch.clamp(theta / (torch.sqrt(sq) + 1e-12), max=1.0)
        for p in params:
            p.grad.mul_(scale)


def fit_lm(net, opt, tokens, device, epochs, batch_size, steps, seed, on_epoch=None):
    """rnn_language_model.cpp's loop: sequential minibatches with the state
    carried over (detached), gradients clipped to norm 1, the loss read once
    per epoch; reports perplexity and tokens/s."""
    rng = random.Random(seed)
    params = list(net.parameters())
    for epoch in range(1, epochs + 1):
        sync(device)
        t0 = time.perf_counter()
        loss_sum = torch.zeros((), device=device)
        state = None
        seen = 0
        for xs, ys in sequential_batches(tokens, batch_size, steps, rng):
            x = xs.to(device, non_blocking=True)
            y = ys.to(device, non_blocking=True)
            if state is not None:
                state = tuple(s.detach() for s in state) if isinstance(state, tuple) else state.detach()
            opt.zero_grad()
            out, state = net(x, state)
            loss = F.cross_entropy(out, y.t().reshape(-1))
            loss.backward()
            grad_clipping(params, 1.0)
            opt.step()
            with torch.no_grad():
                loss_sum += loss.detach() * y.numel()
            seen += y.numel()
        ppl = math.exp(loss_sum.item() / seen)
        secs = time.perf_counter() - t0
        on_epoch(epoch, secs, {"perplexity": ppl, "tokens": seen, "tokens_per_s": seen / secs})
