"""No copies between libraries: NumPy views of CPU tensors, tensors over
NumPy arrays, DLPack with PyTorch, and the lifetimes that makes safe."""

import gc
import sys

import numpy as np
import pytest

import anvil

from conftest import DEVICE

torch = pytest.importorskip("torch")


def test_numpy_view_shares_memory():
    x = anvil.zeros(2, 3)
    a = x.numpy()
    assert a.dtype == np.float32 and a.shape == (2, 3)
    a[0, 1] = 5  # a write through NumPy is read through anvil
    assert x[0, 1].item() == 5
    x[1, 2] = 7  # and back
    assert a[1, 2] == 7
    # a strided view keeps its strides
    v = x.t().numpy()
    assert v.shape == (3, 2) and v[1, 0] == 5 and not v.flags["C_CONTIGUOUS"]


def test_numpy_keeps_the_tensor_alive():
    a = anvil.arange(10).numpy()
    gc.collect()
    assert a.tolist() == list(range(10))


def test_from_numpy_shares_and_keeps_the_buffer_alive():
    a = np.arange(12, dtype=np.float64).reshape(3, 4)
    refs = sys.getrefcount(a)
    t = anvil.from_numpy(a)
    assert t.dtype == anvil.float64 and t.shape == (3, 4)
    assert sys.getrefcount(a) > refs  # the tensor holds the array
    a[2, 3] = -1
    assert t[2, 3].item() == -1
    t[0, 0] = 42
    assert a[0, 0] == 42
    del a
    gc.collect()
    assert t[0, 0].item() == 42 and t.sum().item() == 42 + sum(range(1, 11)) - 1
    u = t * 2  # ops on a borrowed buffer work as on any CPU tensor
    assert u[0, 0].item() == 84


def test_from_numpy_releases_the_array_when_the_tensor_dies():
    a = np.ones(100, dtype=np.float32)
    refs = sys.getrefcount(a)
    t = anvil.from_numpy(a)
    v = t[10:20]  # a view keeps the storage, and so the array
    del t
    gc.collect()
    assert sys.getrefcount(a) > refs
    del v
    gc.collect()
    assert sys.getrefcount(a) == refs


def test_array_protocol():
    x = anvil.arange(6).reshape(2, 3)
    np.testing.assert_array_equal(np.asarray(x), np.arange(6).reshape(2, 3))
    assert np.asarray(x, dtype=np.float64).dtype == np.float64


def test_dlpack_with_torch_both_ways():
    x = anvil.arange(6, dtype=anvil.float32).reshape(2, 3)
    assert x.__dlpack_device__() == (1, 0)
    t = torch.from_dlpack(x)
    assert t.shape == (2, 3) and t.dtype == torch.float32
    t[0, 0] = 9
    assert x[0, 0].item() == 9
    back = anvil.from_dlpack(torch.arange(4, dtype=torch.int64))
    assert back.dtype == anvil.int64 and back.tolist() == [0, 1, 2, 3]
    src = torch.zeros(3)
    y = anvil.from_dlpack(src)
    src[1] = 2
    assert y[1].item() == 2
    assert torch.from_dlpack(anvil.ones(2, dtype=anvil.bfloat16)).dtype == torch.bfloat16


def test_numpy_from_dlpack():
    if not hasattr(np, "from_dlpack"):
        pytest.skip("this NumPy has no from_dlpack")
    x = anvil.ones(4)
    a = np.from_dlpack(x)  # read-only in NumPy, but the same memory
    x[0] = 3
    assert a[0] == 3


def test_device_tensors_are_not_shared_with_numpy():
    gpus = [d for d in anvil.try_all_gpus() if d.type == "opencl"]
    if not gpus:
        pytest.skip("no OpenCL device")
    x = anvil.ones(2, device=gpus[0])
    with pytest.raises(TypeError, match="cpu"):
        x.numpy()
    with pytest.raises(anvil.NotSupportedError):
        x.__dlpack__()
    np.testing.assert_array_equal(np.asarray(x), np.ones(2, dtype=np.float32))  # __array__ copies to the host


# The size: 10^5 ops (about 0.3 s on the CPU and 1 s on a PoCL
# device on the 2-core build machine; device ops are queued, not waited for).
LEAK_OPS = 100_000


def test_no_leak_over_many_ops(dev):
    x = anvil.ones(16, device=dev)
    w = anvil.ones(16, device=dev, requires_grad=True)

    def five_ops():  # add, mul, a slice (a view) and sum; the loop adds a backward every 10th time
        y = (x + 1) * w
        s = y[2:10].sum()
        return s

    for _ in range(50):  # the allocator's blocks and the kernels exist after this
        five_ops().backward()
    anvil.synchronize(dev)
    gc.collect()
    before, refs, objects = anvil.memory_stats(dev), (sys.getrefcount(x), sys.getrefcount(w)), len(gc.get_objects())
    anvil.reset_peak_memory_stats(dev)
    for i in range(LEAK_OPS // 5):
        s = five_ops()
        if i % 10 == 0:
            s.backward()
        del s
    anvil.synchronize(dev)
    w.grad = None
    gc.collect()
    after = anvil.memory_stats(dev)
    assert after.allocated <= before.allocated  # the grad it held went too
    assert after.reserved <= before.reserved, (before, after)  # the cache served every op
    assert after.num_allocs - after.num_frees <= before.num_allocs - before.num_frees
    assert after.peak_allocated - before.allocated < 64 * 1024, after  # nothing piled up during the loop
    assert (sys.getrefcount(x), sys.getrefcount(w)) == refs
    assert len(gc.get_objects()) - objects < 100  # no Python objects left behind per op

    a = np.ones(8, dtype=np.float32)  # tensors over a NumPy array release it
    refs = sys.getrefcount(a)
    for _ in range(LEAK_OPS // 10):
        (anvil.from_numpy(a) * 2).sum()
    gc.collect()
    assert sys.getrefcount(a) == refs


def test_dlpack_on_cuda_with_torch():
    if DEVICE.type != "cuda":
        pytest.skip("runs in the cuda entry (python_cuda0)")
    if not torch.cuda.is_available():
        pytest.skip("this PyTorch has no CUDA")
    x = anvil.arange(6, dtype=anvil.float32, device=DEVICE)
    assert x.__dlpack_device__() == (2, DEVICE.index)
    t = torch.from_dlpack(x)  # anvil synchronises its device before handing the memory over
    assert t.is_cuda and t.device.index == DEVICE.index
    t[0] = 9
    torch.cuda.synchronize()
    assert x[0].item() == 9  # one memory
    src = torch.ones(3, device=f"cuda:{DEVICE.index}")
    torch.cuda.synchronize()
    y = anvil.from_dlpack(src)
    assert y.device == DEVICE and y.sum().item() == 3
    src[1] = 5
    torch.cuda.synchronize()
    assert y[1].item() == 5
