"""Autograd and nn from Python against Debian's python3-torch, and a model
written as a Python nn.Module subclass: registration, to(device), state_dict,
training, saving and loading."""

import os

import numpy as np
import pytest

import anvil
from anvil import nn

torch = pytest.importorskip("torch")


def A(t, dev):
    return anvil.tensor(t.detach().numpy(), device=dev)


def N(t):
    return t.cpu().numpy()


def test_backward_matches_torch(dev):
    rng = np.random.default_rng(0)
    xn, wn = rng.standard_normal((4, 3)).astype(np.float32), rng.standard_normal((3, 2)).astype(np.float32)
    x, w = anvil.tensor(xn, device=dev), anvil.tensor(wn, device=dev, requires_grad=True)
    tx, tw = torch.tensor(xn), torch.tensor(wn, requires_grad=True)
    loss = ((x @ w).relu() * 2 + (x @ w).sigmoid()).sum()
    tloss = ((tx @ tw).relu() * 2 + (tx @ tw).sigmoid()).sum()
    loss.backward()
    tloss.backward()
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=1e-5)
    np.testing.assert_allclose(N(w.grad), tw.grad.numpy(), rtol=1e-5, atol=1e-6)
    assert w.grad.device == dev
    assert (x @ w).grad_fn == "MmBackward" or (x @ w).grad_fn.endswith("Backward")
    w.grad = None
    assert w.grad is None


def test_no_grad_context_and_decorator(dev):
    w = anvil.ones(3, device=dev, requires_grad=True)
    with anvil.no_grad():
        y = w * 2
    assert not y.requires_grad

    @anvil.no_grad()
    def f(t):
        return t * 2

    assert not f(w).requires_grad
    assert (w * 2).requires_grad
    assert anvil.is_grad_enabled()


def test_autograd_grad(dev):
    x = anvil.tensor([1.0, 2.0, 3.0], device=dev, requires_grad=True)
    (g,) = anvil.autograd.grad((x * x).sum(), [x])
    assert g.tolist() == [2.0, 4.0, 6.0]
    assert x.grad is None  # returned, not accumulated


@pytest.mark.parametrize("make", [
    lambda: (nn.Linear(5, 3), torch.nn.Linear(5, 3), (4, 5)),
    lambda: (nn.Conv2d(2, 3, 3, padding=1), torch.nn.Conv2d(2, 3, 3, padding=1), (2, 2, 6, 6)),
    lambda: (nn.LayerNorm(5), torch.nn.LayerNorm(5), (4, 5)),
    lambda: (nn.BatchNorm2d(2), torch.nn.BatchNorm2d(2), (3, 2, 4, 4)),
])
def test_layers_match_torch(dev, make):
    layer, tlayer, shape = make()
    with torch.no_grad():
        for name, p in tlayer.named_parameters():
            p.copy_(torch.from_numpy(N(layer.state_dict()[name])))
    layer.to(dev)
    xn = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    x = anvil.tensor(xn, device=dev, requires_grad=True)
    tx = torch.tensor(xn, requires_grad=True)
    y, ty = layer(x), tlayer(tx)
    np.testing.assert_allclose(N(y), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(N(x.grad), tx.grad.numpy(), rtol=1e-3, atol=1e-4)
    for name, p in tlayer.named_parameters():
        got = dict(layer.named_parameters())[name].grad
        np.testing.assert_allclose(N(got), p.grad.numpy(), rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("residual", [True, False])
def test_fused_batch_norm_matches_torch_composition(dev, residual):
    # anvil's BatchNorm2d(activation="relu") and forward(x, residual): torch's
    # relu(bn(x) + r), its values, running statistics and gradients.
    layer, tlayer = nn.BatchNorm2d(3, activation="relu"), torch.nn.BatchNorm2d(3)
    assert "activation=relu" in repr(layer)
    layer.to(dev)
    rng = np.random.default_rng(3)
    xn, rn = rng.standard_normal((4, 3, 5, 5)).astype(np.float32), rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    x, tx = anvil.tensor(xn, device=dev, requires_grad=True), torch.tensor(xn, requires_grad=True)
    r, tr = anvil.tensor(rn, device=dev, requires_grad=True), torch.tensor(rn, requires_grad=True)
    y = layer(x, r) if residual else layer(x)
    ty = torch.relu(tlayer(tx) + tr) if residual else torch.relu(tlayer(tx))
    np.testing.assert_allclose(N(y), ty.detach().numpy(), rtol=1e-4, atol=1e-5)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    np.testing.assert_allclose(N(x.grad), tx.grad.numpy(), rtol=1e-3, atol=1e-4)
    if residual:
        np.testing.assert_allclose(N(r.grad), tr.grad.numpy(), rtol=1e-3, atol=1e-4)
    for name, p in tlayer.named_parameters():
        got = dict(layer.named_parameters())[name].grad
        np.testing.assert_allclose(N(got), p.grad.numpy(), rtol=1e-3, atol=1e-4)
    for name in ("running_mean", "running_var"):
        np.testing.assert_allclose(N(layer.state_dict()[name]), getattr(tlayer, name).numpy(), rtol=1e-5, atol=1e-6)
    # The functional form, in evaluation, and the errors.
    F, rm, rv = nn.functional, anvil.tensor([0.1, -0.2, 0.3], device=dev), anvil.tensor([0.5, 1.5, 2.0], device=dev)
    got = F.batch_norm(x.detach(), rm, rv, residual=r.detach(), activation="relu")
    want = (F.batch_norm(x.detach(), rm, rv) + r.detach()).relu()
    np.testing.assert_allclose(N(got), N(want), rtol=1e-5, atol=1e-6)
    with pytest.raises(ValueError, match="BatchNorm2d: unknown activation"):
        nn.BatchNorm2d(3, activation="gelu")
    with pytest.raises(ValueError, match="batch_norm: residual must have the input's shape"):
        F.batch_norm(x.detach(), rm, rv, residual=r.detach()[:2])


def test_losses_match_torch(dev):
    logits = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)
    target = np.array([0, 3, 1, 1, 2])
    got = nn.cross_entropy(anvil.tensor(logits, device=dev), anvil.tensor(target, device=dev))
    want = torch.nn.functional.cross_entropy(torch.tensor(logits), torch.tensor(target))
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    got = nn.mse_loss(anvil.tensor(logits, device=dev), anvil.zeros(5, 4, device=dev))
    np.testing.assert_allclose(got.item(), (logits ** 2).mean(), rtol=1e-5)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 8)
        self.out = nn.Linear(8, 3)
        self.scale = nn.Parameter(anvil.ones(3))
        self.register_buffer("calls", anvil.zeros(1))
        self.note = "not registered"

    def forward(self, x):
        return self.out(self.hidden(x).relu()) * self.scale


def test_python_module_registers_like_pytorch(dev):
    net = MLP()
    names = [n for n, _ in net.named_parameters()]
    # A module's own parameters, then its children's, as PyTorch orders them.
    assert names == ["scale", "hidden.weight", "hidden.bias", "out.weight", "out.bias"]
    assert len(net.parameters()) == 5
    assert sorted(net.state_dict()) == sorted(names + ["calls"])
    assert net.to(dev) is net
    assert net.hidden.weight.data.device == dev
    assert net.scale.device == dev  # the attribute is the registered parameter itself
    assert net.calls.device == dev
    assert repr(net).startswith("MLP(\n  (hidden): Linear(in_features=4, out_features=8")
    assert net.train() is net and net.training
    net.eval()
    assert not net.training and not net.hidden.training


def test_python_module_inside_sequential(dev):
    seq = nn.Sequential(MLP(), nn.ReLU())
    seq.to(dev)
    y = seq(anvil.ones(2, 4, device=dev))
    assert y.shape == (2, 3)
    assert isinstance(seq[0], MLP) and seq[0].note == "not registered"
    assert seq[0].hidden.weight.device == dev


def test_python_module_trains_and_round_trips_its_state_dict(dev, tmp_path):
    anvil.manual_seed(0)
    net = MLP().to(dev)
    x = anvil.randn(64, 4, device=dev)
    y = (x[:, 0] > 0).long() + (x[:, 1] > 0).long()
    opt = anvil.optim.SGD(net.parameters(), lr=0.5)
    first = None
    for _ in range(60):
        opt.zero_grad()
        loss = nn.cross_entropy(net(x), y)
        loss.backward()
        opt.step()
        first = first if first is not None else loss.item()
    assert loss.item() < 0.5 * first
    path = str(tmp_path / "mlp.safetensors")
    anvil.save(net.state_dict(), path)
    other = MLP()
    other.load_state_dict(anvil.load(path))
    other.to(dev)
    assert anvil.equal(other(x), net(x))
    with pytest.raises(anvil.ValueError):
        other.load_state_dict({"nope": anvil.ones(1)})


def test_adam_matches_torch(dev):
    wn = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    w = anvil.tensor(wn, device=dev, requires_grad=True)
    tw = torch.tensor(wn, requires_grad=True)
    opt, topt = anvil.optim.Adam([w], lr=0.1), torch.optim.Adam([tw], lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        topt.zero_grad()
        (w * w).sum().backward()
        (tw * tw).sum().backward()
        opt.step()
        topt.step()
    np.testing.assert_allclose(N(w.detach()), tw.detach().numpy(), rtol=1e-5, atol=1e-6)


def test_amp_autocast_and_ledger(dev):
    a = anvil.randn(8, 8, device=dev)
    with anvil.amp.autocast(dev.type, dtype=anvil.bfloat16):
        assert anvil.amp.is_autocast_enabled(dev.type)
        c = a @ a
    assert c.dtype == anvil.bfloat16
    assert not anvil.amp.is_autocast_enabled(dev.type)
    with anvil.ledger() as l:
        a.sum().item()
    if dev.type != "cpu":
        assert l.report().copies(dev, anvil.cpu()) == 1


def test_dataloader_iterates_batches(dev):
    x = anvil.arange(10, dtype=anvil.float32).reshape(10, 1)
    y = anvil.arange(10)
    loader = anvil.data.DataLoader(x, y, batch_size=4, device=dev)
    batches = list(loader)
    assert len(loader) == 3 and len(batches) == 3
    assert batches[0][0].device == dev and batches[2][1].tolist() == [8, 9]


def test_fashion_mnist_if_installed():
    root = anvil.data.FashionMNIST.default_root()
    if not os.path.isdir(root):
        pytest.skip("Fashion-MNIST is not installed")
    test = anvil.data.FashionMNIST(train=False)
    assert len(test) == 10000 and test.images.shape[1:] == (1, 28, 28)


def test_assigning_before_init_is_an_attribute_error():
    class NoInit(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    with pytest.raises(AttributeError, match="before Module.__init__"):
        NoInit()
