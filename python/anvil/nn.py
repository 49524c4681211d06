"""anvil.nn: the C++ layers and losses, and Module for models written in
Python (Note [Python modules are C++ modules] in python/src/nn.cpp)."""

from ._anvil import Tensor as _Tensor
from ._anvil import device as _device
from ._anvil import gpu as _gpu
from ._anvil import try_all_gpus as _try_all_gpus
from ._anvil import nn as _nn
from ._anvil.nn import (  # noqa: F401  (re-exported)
    Sequential, Linear, ReLU, Sigmoid, Tanh, Softmax, Flatten, Dropout, Conv2d, Conv1d, MaxPool2d, AvgPool2d,
    AdaptiveAvgPool2d, AdaptiveMaxPool2d, BatchNorm1d, BatchNorm2d, Embedding, LayerNorm, RNN, GRU, LSTM,
    MultiheadAttention, TransformerEncoderLayer, DistributedDataParallel, DataParallelStep, mse_loss, cross_entropy,
    functional, init,
)


def Parameter(data, requires_grad=True):  # noqa: N802  (torch.nn.Parameter)
    """A leaf sharing `data`'s storage that requires grad: assigned to a
    Module attribute, it registers as a parameter."""
    return data.detach().requires_grad_(requires_grad)


class Module(_nn.Module):
    """Base class of a model written in Python, the PyTorch way:

        class Net(anvil.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = anvil.nn.Linear(4, 2)          # registers a child
                self.scale = anvil.nn.Parameter(anvil.ones(2))  # a parameter
            def forward(self, x):
                return self.fc(x) * self.scale

    To the C++ side it is an ordinary nn::Module: it can sit in a
    Sequential, and parameters(), to(device), state_dict() and train()/eval()
    are the C++ ones. A tensor attribute registers as a parameter when it
    requires grad (anvil.nn.Parameter); other tensors are plain attributes
    unless given to register_buffer."""

    def __init__(self):
        super().__init__()
        self.__dict__["_anvil_module_ready"] = True

    def __setattr__(self, name, value):
        if isinstance(value, (_nn.Module, _Tensor)) and not self.__dict__.get("_anvil_module_ready"):
            raise AttributeError(f"cannot assign {name} before Module.__init__() call: "
                                 f"call super().__init__() first in {type(self).__name__}.__init__")
        if isinstance(value, _nn.Module):
            self._add_module(name, value)
            self.__dict__[name] = value
        elif isinstance(value, _Tensor) and value.requires_grad and value.is_leaf:
            self._add_parameter(name, value)
            self.__dict__[name] = value
        else:
            object.__setattr__(self, name, value)

    def __call__(self, *args, **kwargs):
        return self.forward(*args, **kwargs)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(type(self).__name__ + " has no forward()")

    def name(self):
        # The C++ printer adds the children: "Net(\n  (fc): Linear(...)\n)".
        return type(self).__name__ + ("" if self.named_children() else "()")

    def register_buffer(self, name, tensor):
        self._add_buffer(name, tensor)
        self.__dict__[name] = tensor

    def register_parameter(self, name, tensor):
        self._add_parameter(name, tensor)
        self.__dict__[name] = tensor

    def add_module(self, name, module):
        self._add_module(name, module)
        self.__dict__[name] = module

    def _clone(self, device):
        """The twin Module.clone(device) returns (the C++ clone calls it):
        a new instance of this class, without running __init__, whose
        children are the children's clones, whose parameters and buffers are
        copies (on `device` when given) registered in the same order, and
        whose other attributes are deep copies, as copy.deepcopy would make
        them (an attribute naming a child or a parameter names the twin's)."""
        import copy

        cls = type(self)
        twin = cls.__new__(cls)
        _nn.Module.__init__(twin)
        twin.__dict__["_anvil_module_ready"] = True
        mine = self.__dict__
        memo = {id(self): twin}

        def keep(name, new):
            twin.__dict__[name] = new
            if name in mine:
                memo[id(mine[name])] = new

        for name, child in self.named_children():
            c = child.clone(device)
            twin._add_module(name, c)
            keep(name, c)
        for name, p in self.named_parameters(recurse=False):
            q = p.detach().copy_to(device if device is not None else p.device).requires_grad_(p.requires_grad)
            keep(name, twin._add_parameter(name, q))
        for name, b in self.named_buffers(recurse=False):
            keep(name, twin._add_buffer(name, b.detach().copy_to(device if device is not None else b.device)))
        for name, value in mine.items():
            if name not in twin.__dict__:
                twin.__dict__[name] = copy.deepcopy(value, memo)
        return twin

    def modules(self):
        yield self
        for _, child in self.named_children():
            if isinstance(child, Module):
                yield from child.modules()
            else:
                yield child


class DataParallel(_nn._DataParallel):
    """One model on several devices of one process (anvil::nn::DataParallel,
    torch.nn.DataParallel): one replica per device, one host thread each,
    the batch split along dim 0 and the outputs gathered on the first device.

        net = anvil.nn.DataParallel(Net(), device_ids=["opencl:0", "opencl:1"])
        trainer = anvil.optim.SGD(net.parameters(), lr=0.1)
        trainer.zero_grad()
        l = anvil.nn.cross_entropy(net(X), y)   # X anywhere, y on the first device
        l.backward()                            # every replica's gradient summed onto net.module's
        trainer.step()

    `module` is the master (`.module`), moved to the first device; the other
    replicas are its clones (Module.clone), which take the master's
    parameters and buffers before every forward. With replicate=<a function
    that builds the same model>, that function builds them instead; or
    `module` is that function itself. device_ids: devices or their strings
    (an int i is anvil.gpu(i)); None means anvil.try_all_gpus().
    train_step(x, y, loss) is the faster path for the same step (forward,
    loss and backward on every device at once)."""

    def __init__(self, module, device_ids=None, *, replicate=None):
        if device_ids is None:
            devices = _try_all_gpus()
        else:
            devices = [_gpu(d) if isinstance(d, int) else d if isinstance(d, _device) else _device(d) for d in device_ids]
        if isinstance(module, _nn.Module) and replicate is None:
            super().__init__(module, devices)
            return
        if isinstance(module, _nn.Module):
            made = []

            def factory():
                if not made:
                    made.append(module)
                    return module
                return replicate()
        elif callable(module):
            factory = module
        else:
            raise TypeError(f"DataParallel: expected an anvil.nn.Module or a function that builds one, "
                            f"got {type(module).__name__}")
        super().__init__(factory, devices)
