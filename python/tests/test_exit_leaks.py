"""Modules written in Python, held by C++ modules, are freed: by the garbage
collector when they sit in a reference cycle, and at interpreter exit, where
nanobind would otherwise print "nanobind: leaked N instances!" (Note
[Modules and the garbage collector] in python/src/nn.cpp). A model at a
script's top level is always in such a cycle: its class's methods hold the
script's globals, which hold the model."""

import gc
import os
import subprocess
import sys
import textwrap
import weakref

import pytest

import anvil
from anvil import nn

from conftest import DEVICE

pytestmark = pytest.mark.skipif(DEVICE.type != "cpu", reason="modules on the CPU only; it runs once, in the cpu entry")

NET = """
import anvil
from anvil import nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 2)

    def forward(self, x):
        return self.fc1(x)
"""

# Each builds its model at the top level of a script and leaves it there.
SCRIPTS = {
    # A group of one without mpirun (anvil::dist::init); python/tests/dist_mpi.py
    # is the same under mpirun -np 2.
    "distributed_data_parallel": "anvil.dist.init()\nnet = Net()\nddp = nn.DistributedDataParallel(net)\n"
                                 "ddp(anvil.ones(3, 4)).sum().backward()\n",
    "nested_python_modules": "class Outer(nn.Module):\n"
                             "    def __init__(self):\n"
                             "        super().__init__()\n"
                             "        self.inner = Net()\n"
                             "    def forward(self, x):\n"
                             "        return self.inner(x)\n"
                             "net = Outer()\n",
    "sequential": "seq = nn.Sequential(Net(), nn.ReLU())\n",
    "data_parallel": "dp = nn.DataParallel(Net(), device_ids=['cpu'])\n",
}


def run(code):
    """The script's stderr, run by this Python with this anvil, outside mpirun."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMPI_COMM_WORLD_SIZE", "WORLD_SIZE")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(anvil.__file__)),
                                                    env.get("PYTHONPATH", "")] if p)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return r.stderr


@pytest.mark.parametrize("name", sorted(SCRIPTS))
def test_a_script_level_model_is_freed_at_exit(name):
    err = run(NET + SCRIPTS[name])
    assert "nanobind: leaked" not in err, err


def test_the_exit_check_sees_a_leak():
    # The check above would pass if nanobind said nothing at all: with an
    # object leaked on purpose, it reports.
    err = run(textwrap.dedent("""
        import ctypes
        import anvil
        d = anvil.cpu()
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(d))
    """))
    assert "nanobind: leaked 1 instances!" in err, err


# The scripts' Net, for the in-process tests too.
_net_namespace = {}
exec(NET, _net_namespace)
Net = _net_namespace["Net"]


class Outer(nn.Module):
    def forward(self, x):
        return self.net(x)


def python_parent(net):
    outer = Outer()
    outer.net = net
    return outer


@pytest.mark.parametrize("holder_of", [
    lambda net: nn.Sequential(net),
    lambda net: nn.DataParallel(net, device_ids=["cpu"]),
    python_parent,
], ids=["sequential", "data_parallel", "python_parent"])
def test_a_cycle_through_a_cpp_module_is_collected(holder_of):
    # The Net's attribute -> a dict -> the holder -> (the holder's C++
    # shared_ptr) the Net: nothing else holds any of them.
    gc.collect()
    net = Net()
    net.back = {"holder": holder_of(net)}
    ref = weakref.ref(net)
    del net
    gc.collect()
    assert ref() is None, [type(r).__name__ for r in gc.get_referrers(ref())]


def test_a_module_held_elsewhere_is_not_collected():
    # The same cycle, but a list outside it holds the Net too: a collection
    # leaves the Net, its state and the Sequential as they were.
    gc.collect()
    keep = []
    net = Net()
    seq = nn.Sequential(net)
    keep.append(net)
    net.back = {"holder": seq}
    ref = weakref.ref(net)
    del net, seq
    gc.collect()
    assert ref() is keep[0] and "fc1" in ref().__dict__
    assert ref().back["holder"][0] is ref()
    out = ref().back["holder"](anvil.ones(3, 4))
    assert out.shape == (3, 2)


def test_a_module_twice_in_one_sequential():
    # Two registrations from Python, two references: each is reported once.
    gc.collect()
    net = Net()
    seq = nn.Sequential(net, net)
    net.back = {"holder": seq}
    ref = weakref.ref(net)
    del net, seq
    gc.collect()
    assert ref() is None


def test_children_and_parameters_survive_a_collection():
    # A collection (which runs tp_traverse) leaves a live model as it was.
    outer = nn.Sequential(Net(), nn.ReLU(), Net())
    before = [p.detach().cpu().numpy().copy() for p in outer.parameters()]
    for _ in range(3):
        gc.collect()
    after = [p.detach().cpu().numpy() for p in outer.parameters()]
    assert len(before) == len(after) == 4
    assert all((a == b).all() for a, b in zip(before, after))
    assert outer[0].fc1.weight.shape == (2, 4)
