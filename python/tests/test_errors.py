"""anvil's errors as Python exceptions under the nearest built-ins, with the
C++ messages; none of them crashes the interpreter."""

import pytest

import anvil

from conftest import DEVICE


def test_hierarchy():
    assert issubclass(anvil.Error, RuntimeError)
    assert issubclass(anvil.DeviceMismatchError, anvil.Error) and issubclass(anvil.DeviceMismatchError, RuntimeError)
    assert issubclass(anvil.IndexError, IndexError)
    assert issubclass(anvil.ShapeError, ValueError)
    assert issubclass(anvil.ValueError, ValueError)
    assert issubclass(anvil.DTypeError, TypeError)
    assert issubclass(anvil.OutOfMemoryError, MemoryError)
    assert issubclass(anvil.NotSupportedError, NotImplementedError)
    assert issubclass(anvil.IOError, OSError)


def test_shape_error_message(dev):
    with pytest.raises(anvil.ShapeError, match=r"add: .*\[2, 3\].*\[4\]"):
        anvil.ones(2, 3, device=dev) + anvil.ones(4, device=dev)


def test_device_mismatch():
    gpus = [d for d in anvil.try_all_gpus() if d.type != "cpu"]
    if not gpus:
        pytest.skip("one device only")
    with pytest.raises(anvil.DeviceMismatchError, match="all tensors must be on one device"):
        anvil.ones(2) + anvil.ones(2, device=gpus[0])


def test_device_errors():
    with pytest.raises(anvil.DeviceError, match="cpu"):
        anvil.device("tpu:0")
    with pytest.raises(anvil.DeviceError):
        anvil.gpu(99)


def test_out_of_memory_is_a_memory_error():
    anvil.set_memory_limit(anvil.cpu(), 1 << 20)
    try:
        with pytest.raises(MemoryError):
            anvil.empty(1 << 22)
    finally:
        anvil.set_memory_limit(anvil.cpu(), 0)
    assert anvil.ones(4).sum().item() == 4  # the library stays usable


def test_io_error():
    with pytest.raises(anvil.IOError):
        anvil.load("/nonexistent/anvil.safetensors")


def test_item_of_many_elements(dev):
    with pytest.raises(anvil.ShapeError, match="item"):
        anvil.ones(3, device=dev).item()


def test_inplace_on_a_leaf_that_requires_grad():
    w = anvil.ones(2, requires_grad=True)
    with pytest.raises(anvil.Error):
        w.add_(1)
    with anvil.no_grad():
        w.add_(1)
    assert w.tolist() == [2.0, 2.0]


def test_ctrl_c_stops_a_loop_of_ops_with_keyboard_interrupt():
    import signal
    import subprocess
    import sys
    import time

    code = ("import anvil, sys\nx = anvil.ones(64, 64)\nprint('ready', flush=True)\n"
            "try:\n    while True:\n        x = (x @ x).tanh()\n"
            "except KeyboardInterrupt:\n    print('interrupted', flush=True)\n    sys.exit(3)\n")
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "ready"
    time.sleep(0.5)
    p.send_signal(signal.SIGINT)
    out, _ = p.communicate(timeout=60)
    assert p.returncode == 3 and "interrupted" in out
