"""anvil.nn.DataParallel from Python on PoCL's two devices (POCL_DEVICES="pthread
pthread" gives opencl:0 and opencl:1): one step on both devices gives the
parameters one step on one device gives, for a model written in Python."""

import numpy as np
import pytest

import anvil
from anvil import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc2(self.fc1(x).relu())


class Unclonable(nn.Module):
    def __init__(self):
        super().__init__()
        import threading
        self.fc = nn.Linear(2, 2)
        self.lock = threading.Lock()

    def forward(self, x):
        return self.fc(x)


def two_devices(dev):
    if dev.type != "opencl":
        pytest.skip("runs in the opencl entries (python_opencl0, python_opencl1), on both PoCL devices")
    devices = [d for d in anvil.all_devices() if d.type == "opencl"]
    if len(devices) < 2:
        pytest.skip("needs two OpenCL devices (POCL_DEVICES='pthread pthread')")
    other = next(d for d in devices if d != dev)
    return [dev, other]


def test_one_step_on_two_devices_equals_one_device(dev):
    devices = two_devices(dev)
    anvil.manual_seed(3)
    single = Net().to(devices[0])
    dp = nn.DataParallel(Net(), device_ids=[str(d) for d in devices], replicate=Net)
    dp.load_state_dict({"module." + k: v for k, v in single.state_dict().items()})  # the same start
    assert dp.device_ids == devices and len(dp) == 2
    assert dp.module.fc1.weight.device == devices[0] and dp.replica(1).fc1.weight.device == devices[1]

    x = anvil.randn(10, 6, device=anvil.cpu())  # split 5 + 5, moved to each device by train_step
    y = anvil.tensor([0, 1, 2, 0, 1, 2, 0, 1, 2, 0])
    opt_dp = anvil.optim.SGD(dp.parameters(), lr=0.5)
    opt_single = anvil.optim.SGD(single.parameters(), lr=0.5)

    opt_dp.zero_grad()
    step = dp.train_step(x, y, nn.cross_entropy)
    loss, output = step
    opt_dp.step()
    opt_single.zero_grad()
    out_single = single(x.to(devices[0]))
    loss_single = nn.cross_entropy(out_single, y.to(devices[0]))
    loss_single.backward()
    opt_single.step()

    assert loss.device == devices[0] and output.shape == (10, 3)
    np.testing.assert_allclose(loss.item(), loss_single.item(), rtol=1e-5)
    np.testing.assert_allclose(output.cpu().numpy(), out_single.detach().cpu().numpy(), rtol=1e-5, atol=1e-6)
    for (name, p), (_, q) in zip(dp.module.named_parameters(), single.named_parameters()):
        np.testing.assert_allclose(p.cpu().numpy(), q.cpu().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        assert p.grad.device == devices[0]
    # The replica takes the master's new parameters before the next step,
    # and dp(x) (evaluation) gathers the outputs onto the first device.
    with anvil.no_grad():
        expected = single(x.to(devices[0]))
    np.testing.assert_allclose(dp(x.to(devices[0])).cpu().numpy(), expected.cpu().numpy(), rtol=1e-5, atol=1e-6)
    dp.sync_replicas()
    np.testing.assert_array_equal(dp.replica(1).fc2.bias.cpu().numpy(), dp.module.fc2.bias.cpu().numpy())


def test_a_python_loss_and_a_factory(dev):
    devices = two_devices(dev)
    dp = nn.DataParallel(lambda: nn.Sequential(nn.Linear(4, 2)), device_ids=devices)
    x, y = anvil.randn(6, 4), anvil.randn(6, 2)
    calls = []

    def loss(out, target):
        calls.append(out.device)
        return ((out - target) * (out - target)).mean()

    step = dp.train_step(x, y, loss)
    assert sorted(map(str, calls)) == sorted(map(str, devices))  # one call per device, each in its thread
    with anvil.no_grad():
        full = loss(dp.module(x.to(devices[0])), y.to(devices[0]))
    np.testing.assert_allclose(step.loss.item(), full.item(), rtol=1e-5)


def test_errors_name_the_fix(dev):
    devices = two_devices(dev)
    with pytest.raises(TypeError, match="deepcopy|pickle"):
        nn.DataParallel(Unclonable(), device_ids=devices)  # its lock cannot be copied
    with pytest.raises(anvil.ValueError, match="each device may appear once"):
        nn.DataParallel(Net, device_ids=[devices[0], devices[0]])
    with pytest.raises(TypeError, match="DataParallel"):
        nn.DataParallel(3, device_ids=devices)
    dp = nn.DataParallel(Net, device_ids=devices)
    with pytest.raises(anvil.ShapeError, match="same first"):
        dp.train_step(anvil.randn(4, 6), anvil.tensor([0, 1, 2]), nn.cross_entropy)


class Tagged(nn.Module):
    """A child, a parameter and a buffer by attribute, a list naming the child,
    a setting and a plain tensor."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(6, 4)
        self.bn = nn.BatchNorm1d(4)
        self.scale = nn.Parameter(anvil.randn(4))
        self.register_buffer("shift", anvil.randn(4))
        self.layers = [self.fc, self.bn]
        self.factor = 0.5
        self.table = anvil.arange(4, dtype=anvil.float32)

    def forward(self, x):
        for layer in self.layers:
            x = layer(x)
        return (x * self.scale + self.shift) * self.factor


def test_clone_of_a_python_module_and_of_layers(dev):
    anvil.manual_seed(0)
    net = Tagged()
    net.bn.eval()
    twin = net.clone(dev)
    assert type(twin) is Tagged and twin is not net
    assert [n for n, _ in twin.named_parameters()] == [n for n, _ in net.named_parameters()]
    assert [n for n, _ in twin.named_buffers()] == [n for n, _ in net.named_buffers()]
    for (n, p), (_, q) in zip(list(net.named_parameters()) + list(net.named_buffers()),
                              list(twin.named_parameters()) + list(twin.named_buffers())):
        assert q.device == dev and not q.shares_storage(p) and q.requires_grad == p.requires_grad, n
        np.testing.assert_array_equal(q.cpu().numpy(), p.cpu().numpy(), err_msg=n)
    # The twin's attributes are its own registered children and tensors.
    assert twin.layers[0] is twin.fc and twin.layers[1] is twin.bn and twin.fc is not net.fc
    assert twin.scale.is_same(dict(twin.named_parameters())["scale"])
    assert twin.factor == 0.5 and not twin.table.is_same(net.table)
    assert twin.training and not twin.bn.training
    x = anvil.randn(3, 6)
    np.testing.assert_allclose(twin(x.to(dev)).detach().cpu().numpy(), net(x).detach().cpu().numpy(), rtol=1e-5,
                               atol=1e-6)
    with anvil.no_grad():
        twin.scale.zero_()
    assert net.scale.abs().sum().item() > 0  # independent
    conv = nn.Conv2d(2, 3, 3, stride=2, padding=1)
    c = conv.clone(dev)
    assert repr(c) == repr(conv) and c.weight.device == dev
    np.testing.assert_array_equal(c.weight.cpu().numpy(), conv.weight.numpy())


def test_the_books_loop_through_autograd(dev):
    """net = nn.DataParallel(net, device_ids=devices); l = loss(net(X), y);
    l.backward(); trainer.step(): what one device and train_step give."""
    devices = two_devices(dev)
    anvil.manual_seed(3)
    net = Net()
    single = net.clone(devices[0])
    fast = nn.DataParallel(net.clone(), device_ids=devices)
    dp = nn.DataParallel(net, device_ids=devices)
    assert dp.module.fc1.weight.device == devices[0] and dp.replica(1).fc1.weight.device == devices[1]
    trainer = anvil.optim.SGD(dp.parameters(), lr=0.5)
    opt_fast = anvil.optim.SGD(fast.parameters(), lr=0.5)
    opt_single = anvil.optim.SGD(single.parameters(), lr=0.5)
    for _ in range(3):
        x = anvil.randn(9, 6)  # 5 + 4: an uneven last chunk
        y = anvil.randint(0, 3, (9,))
        trainer.zero_grad()
        out = dp(x)
        assert out.device == devices[0] and out.grad_fn == "CatBackward"
        l = nn.cross_entropy(out, y.to(devices[0]))
        l.backward()
        trainer.step()
        opt_fast.zero_grad()
        fast.train_step(x, y, nn.cross_entropy)
        opt_fast.step()
        opt_single.zero_grad()
        nn.cross_entropy(single(x.to(devices[0])), y.to(devices[0])).backward()
        opt_single.step()
    for (name, p), (_, q), (_, r) in zip(dp.module.named_parameters(), single.named_parameters(),
                                         fast.module.named_parameters()):
        np.testing.assert_allclose(p.cpu().numpy(), q.cpu().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
        np.testing.assert_allclose(p.cpu().numpy(), r.cpu().numpy(), rtol=1e-5, atol=1e-6, err_msg=name)
