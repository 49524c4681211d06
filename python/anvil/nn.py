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

    def modules(self):
        yield self
        for _, child in self.named_children():
            if isinstance(child, Module):
                yield from child.modules()
            else:
                yield child


class DataParallel(_nn._DataParallel):
    """One model on several devices of one process (anvil::nn::DataParallel):
    one replica per device, one host thread each, the batch split along dim 0
    and the gradients summed onto the first device's replica (the master,
    `.module`), whose parameters() an optimiser steps.

        dp = anvil.nn.DataParallel(Net(), device_ids=["opencl:0", "opencl:1"], replicate=Net)
        opt = anvil.optim.SGD(dp.parameters(), lr=0.1)
        opt.zero_grad()
        loss, output = dp.train_step(x, y, anvil.nn.cross_entropy)
        opt.step()

    `module` is the master, moved to the first device, and `replicate()`
    builds each other replica (C++ cannot copy a module; they take the
    master's parameters before every step); or `module` is that function
    itself. device_ids: devices or their strings (an int i is anvil.gpu(i));
    None means anvil.try_all_gpus(). Training goes through train_step(x, y,
    loss) (forward, loss and backward on every device at once); dp(x) is the
    gathered output without recording gradients, for evaluation."""

    def __init__(self, module, device_ids=None, *, replicate=None):
        if device_ids is None:
            devices = _try_all_gpus()
        else:
            devices = [_gpu(d) if isinstance(d, int) else d if isinstance(d, _device) else _device(d) for d in device_ids]
        if isinstance(module, _nn.Module):
            made = []

            def factory():
                if not made:
                    made.append(module)
                    return module
                if replicate is None:
                    raise ValueError("DataParallel: a replica for each device beyond the first is needed; pass "
                                     "replicate=<a function that builds the same model>, e.g. "
                                     "DataParallel(Net(), device_ids, replicate=Net)")
                return replicate()
        elif callable(module):
            factory = module
        else:
            raise TypeError(f"DataParallel: expected an anvil.nn.Module or a function that builds one, "
                            f"got {type(module).__name__}")
        super().__init__(factory, devices)
