"""The chapter in Python: examples/python/use_gpu.py prints what the C++
walkthrough prints, and the LeNet example trains."""

import os
import subprocess
import sys

import pytest

import anvil

from conftest import DEVICE

SOURCE = os.environ.get("ANVIL_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.environ.get("ANVIL_BUILD_DIR")

pytestmark = pytest.mark.skipif(DEVICE.type != "cpu", reason="the examples pick their devices themselves; "
                                "they run once, in the cpu entry")


def run(args):
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [os.path.dirname(os.path.dirname(anvil.__file__)),
                                                    env.get("PYTHONPATH", "")] if p)
    return subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)


def test_use_gpu_prints_what_the_cpp_walkthrough_prints():
    py = run([sys.executable, os.path.join(SOURCE, "examples", "python", "use_gpu.py")])
    assert py.returncode == 0, py.stderr
    assert "## Neural networks and GPUs" in py.stdout and "restored(X) equals net(X)\n  -> true" in py.stdout
    if BUILD is None:
        pytest.skip("ANVIL_BUILD_DIR unset: no C++ walkthrough to compare with")
    cpp_path = os.path.join(BUILD, "examples", "use_gpu")
    assert os.path.exists(cpp_path), f"{cpp_path} is not built"
    cpp = run([cpp_path])
    assert cpp.returncode == 0, cpp.stderr
    assert py.stdout.splitlines() == cpp.stdout.splitlines()


def test_lenet_example_trains():
    if not os.path.isdir(anvil.data.FashionMNIST.default_root()):
        pytest.skip("Fashion-MNIST is not installed")
    r = run([sys.executable, os.path.join(SOURCE, "examples", "python", "train_fashion_mnist.py"), "--epochs", "1",
             "--train-subset", "4096", "--batch-size", "32", "--device", "cpu"])
    assert r.returncode == 0, r.stderr
    assert "LeNet(\n  (conv1): Conv2d" in r.stdout
    accuracy = float(r.stdout.split("test accuracy ")[1].split(",")[0])
    assert accuracy > 0.4, r.stdout  # 0.48 after one epoch of 4096 images (chance: 0.1)


def test_multi_gpu_concise_trains_as_the_book_writes_it():
    if not os.path.isdir(anvil.data.FashionMNIST.default_root()):
        pytest.skip("Fashion-MNIST is not installed")
    r = run([sys.executable, os.path.join(SOURCE, "examples", "python", "multi_gpu_concise.py"), "--devices", "1",
             "--subset", "16", "--batch", "8"])
    assert r.returncode == 0, r.stderr
    assert "== ResNet-18 on [" in r.stdout and "test acc: " in r.stdout and "sec/epoch on" in r.stdout, r.stdout
    loss = float(r.stdout.split("train loss ")[1].split(",")[0])
    assert 0 < loss < 10, r.stdout  # finite: the replicas' gradients reached the optimiser's parameters
