"""Tensors from Python against NumPy: values, dtypes, promotion,
broadcasting, indexing and assignment, on the suite's device."""

import numpy as np
import pytest

import anvil

from conftest import DEVICE


def to_np(t):
    return t.cpu().numpy()


def test_factories(dev):
    assert anvil.zeros(2, 3, device=dev).shape == (2, 3)
    assert anvil.ones((2, 3), device=dev).device == dev
    assert anvil.zeros([4], dtype=anvil.int64, device=dev).dtype == anvil.int64
    assert anvil.full((2, 2), 7, device=dev).tolist() == [[7, 7], [7, 7]]
    assert anvil.full((2,), 1.5, device=dev).dtype == anvil.float32
    assert anvil.arange(5, device=dev).tolist() == [0, 1, 2, 3, 4]
    assert anvil.arange(1, 7, 2, device=dev).tolist() == [1, 3, 5]
    assert anvil.arange(0.0, 1.0, 0.25, device=dev).dtype == anvil.float32
    np.testing.assert_allclose(to_np(anvil.linspace(0, 1, 5, device=dev)), np.linspace(0, 1, 5), rtol=1e-6)
    np.testing.assert_array_equal(to_np(anvil.eye(3, device=dev)), np.eye(3, dtype=np.float32))
    w = anvil.randn(3, 4, device=dev, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    r = anvil.randint(0, 10, (100,), device=dev)
    assert r.dtype == anvil.int64 and 0 <= r.min().item() and r.max().item() < 10


def test_tensor_from_python_data(dev):
    assert anvil.tensor([1, 2, 3]).dtype == anvil.int64
    assert anvil.tensor([1.0, 2, 3]).dtype == anvil.float32
    assert anvil.tensor([True, False]).dtype == anvil.bool
    assert anvil.tensor(2.5).shape == ()
    assert anvil.tensor(2.5).item() == 2.5
    t = anvil.tensor([[1, 2], [3, 4]], dtype=anvil.float64, device=dev)
    assert t.dtype == anvil.float64 and t.device == dev and t.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    t = anvil.tensor(a, device=dev)
    np.testing.assert_array_equal(to_np(t), a)
    a[0, 0] = 100  # anvil.tensor copies, as torch.tensor does
    assert t[0, 0].item() == 0
    with pytest.raises(anvil.ShapeError):
        anvil.tensor([[1, 2], [3]])
    with pytest.raises(TypeError):
        anvil.tensor(["a"])


def test_item_tolist_len_iter(dev):
    t = anvil.tensor([[1, 2, 3], [4, 5, 6]], device=dev)
    assert len(t) == 2
    assert [row.tolist() for row in t] == [[1, 2, 3], [4, 5, 6]]
    assert t.sum().item() == 21 and isinstance(t.sum().item(), int)
    assert isinstance(t.float().mean().item(), float)
    assert isinstance((t > 2).sum().item(), int)
    assert float(anvil.tensor(1.5)) == 1.5 and int(anvil.tensor(3)) == 3
    with pytest.raises(TypeError):
        len(anvil.tensor(1.0))
    with pytest.raises(anvil.ValueError):
        bool(t)


BINARY = [
    ("__add__", np.add), ("__sub__", np.subtract), ("__mul__", np.multiply), ("__truediv__", np.true_divide),
    ("maximum", np.maximum), ("minimum", np.minimum),
]


@pytest.mark.parametrize("name,ref", BINARY)
def test_binary_broadcasting_vs_numpy(dev, name, ref):
    a = np.random.default_rng(0).standard_normal((4, 1, 3)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((2, 1)).astype(np.float32) + 3
    got = getattr(anvil.tensor(a, device=dev), name)(anvil.tensor(b, device=dev))
    assert got.shape == ref(a, b).shape
    np.testing.assert_allclose(to_np(got), ref(a, b), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("expr", ["x + 2", "2 + x", "x - 2", "2 - x", "x * 3", "3 * x", "x / 4", "4 / x",
                                  "x ** 2", "2 ** x", "-x", "abs(x)", "x > 0", "x <= 1", "x == 2", "x != 2"])
def test_operators_with_python_scalars(dev, expr):
    xn = np.array([[1.0, -2.0, 2.0], [0.5, 3.0, -1.0]], dtype=np.float32)
    x = anvil.tensor(xn, device=dev)
    got = eval(expr, {"x": x})
    want = eval(expr, {"x": xn})
    np.testing.assert_allclose(to_np(got), want, rtol=1e-5)
    assert got.device == dev


def test_promotion_follows_pytorch(dev):
    i = anvil.tensor([1, 2], dtype=anvil.int32, device=dev)
    f = anvil.tensor([1.0, 2.0], device=dev)
    assert (i + 1).dtype == anvil.int32  # an int scalar keeps an integer tensor's dtype
    assert (i + 1.5).dtype == anvil.float32  # a float scalar makes it float32
    assert (i + f).dtype == anvil.float32
    assert (i / 2).dtype == anvil.float32  # true division
    assert (anvil.tensor([True], device=dev) + 1).dtype == anvil.int64
    assert (i + anvil.tensor([1], dtype=anvil.int64, device=dev)).dtype == anvil.int64
    assert anvil.promote_types(anvil.float16, anvil.bfloat16) == anvil.float32


def test_inplace_operators_keep_the_object(dev):
    x = anvil.ones(2, 2, device=dev)
    before = x
    x += 1
    x *= 3
    x -= anvil.ones(2, 2, device=dev)
    x /= 5
    assert x is before
    np.testing.assert_allclose(to_np(x), np.full((2, 2), 1.0))
    assert x.add_(1) is x and x.zero_() is x
    assert x.sum().item() == 0


UNARY = ["exp", "log", "sqrt", "abs", "neg", "sin", "cos", "tanh", "floor", "ceil", "square", "reciprocal", "log1p",
         "expm1"]


@pytest.mark.parametrize("name", UNARY)
def test_unary_vs_numpy(dev, name):
    xn = np.array([0.3, 1.7, 2.5, 4.0], dtype=np.float32)
    ref = {"neg": np.negative}.get(name, getattr(np, name, None))
    got = getattr(anvil.tensor(xn, device=dev), name)()
    np.testing.assert_allclose(to_np(got), ref(xn), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(to_np(getattr(anvil, name)(anvil.tensor(xn, device=dev))), ref(xn), rtol=1e-5,
                               atol=1e-6)


def test_reductions_vs_numpy(dev):
    xn = np.random.default_rng(2).standard_normal((3, 4, 5)).astype(np.float32)
    x = anvil.tensor(xn, device=dev)
    np.testing.assert_allclose(x.sum().item(), xn.sum(), rtol=1e-5)
    np.testing.assert_allclose(to_np(x.sum(1)), xn.sum(1), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(to_np(x.mean((0, 2), keepdim=True)), xn.mean((0, 2), keepdims=True), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(to_np(x.amax(-1)), xn.max(-1))
    np.testing.assert_allclose(to_np(x.var(1)), xn.var(1, ddof=1), rtol=1e-4)
    values, indices = x.max(2)
    np.testing.assert_allclose(to_np(values), xn.max(2))
    np.testing.assert_array_equal(to_np(indices), xn.argmax(2))
    assert x.argmax().item() == xn.argmax()
    np.testing.assert_allclose(to_np(x.softmax(-1)), np.exp(xn) / np.exp(xn).sum(-1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(to_np(x.cumsum(1)), xn.cumsum(1), rtol=1e-5, atol=1e-5)


def test_matmul_and_views(dev):
    an = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    bn = np.random.default_rng(4).standard_normal((4, 5)).astype(np.float32)
    a, b = anvil.tensor(an, device=dev), anvil.tensor(bn, device=dev)
    np.testing.assert_allclose(to_np(a @ b), an @ bn, rtol=1e-4, atol=1e-5)
    np.testing.assert_array_equal(to_np(a.reshape(6, 4)), an.reshape(6, 4))
    np.testing.assert_array_equal(to_np(a.reshape((4, -1))), an.reshape((4, -1)))  # a tuple, read under the GIL
    np.testing.assert_array_equal(to_np(a.reshape([24])), an.reshape([24]))
    np.testing.assert_array_equal(to_np(a.permute(2, 0, 1)), an.transpose(2, 0, 1))
    np.testing.assert_array_equal(to_np(a.transpose(0, 2)), an.swapaxes(0, 2))
    np.testing.assert_array_equal(to_np(a.unsqueeze(1)), an[:, None])
    np.testing.assert_array_equal(to_np(anvil.cat([a, a], 1)), np.concatenate([an, an], 1))
    np.testing.assert_array_equal(to_np(anvil.stack([b, b])), np.stack([bn, bn]))
    assert a.view(-1).shape == (24,)


@pytest.mark.parametrize("key", [
    1, -1, (0, 2), (slice(None), 1), slice(1, None), (slice(None, None, 2),), (Ellipsis, 1), (None, 0),
    (1, None, slice(0, 3, 2)), (slice(None), None, Ellipsis), (Ellipsis,), (slice(5, 10),), (slice(-3, -1), -2),
])
def test_getitem_basic_vs_numpy(dev, key):
    xn = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x = anvil.tensor(xn, device=dev)
    got = x[key]
    assert got.shape == xn[key].shape
    np.testing.assert_array_equal(to_np(got), xn[key])


def test_getitem_views_share_storage(dev):
    x = anvil.zeros(3, 4, device=dev)
    row = x[1]
    row += 5
    assert x.sum().item() == 20
    assert x[:, ::2].shares_storage(x)


def test_getitem_advanced_vs_numpy(dev):
    xn = np.arange(24, dtype=np.float32).reshape(4, 6)
    x = anvil.tensor(xn, device=dev)
    idx = np.array([2, 0, 3])
    np.testing.assert_array_equal(to_np(x[anvil.tensor(idx, device=dev)]), xn[idx])
    np.testing.assert_array_equal(to_np(x[[1, 1, 0]]), xn[[1, 1, 0]])
    np.testing.assert_array_equal(to_np(x[:, anvil.tensor([[0, 5], [1, 2]], device=dev)]), xn[:, [[0, 5], [1, 2]]])
    mask = xn > 10
    np.testing.assert_array_equal(to_np(x[anvil.tensor(mask, device=dev)]), xn[mask])
    rows = xn[:, 0] > 5
    np.testing.assert_array_equal(to_np(x[anvil.tensor(rows, device=dev)]), xn[rows])
    np.testing.assert_array_equal(to_np(x[x > 10]), xn[xn > 10])


def test_setitem_vs_numpy(dev):
    xn = np.zeros((4, 5), dtype=np.float32)
    x = anvil.tensor(xn, device=dev)
    for key, value in [((0, 1), 3.0), ((slice(None), 2), 7.0), ((slice(1, 3), slice(None, None, 2)), -1.0),
                       ((Ellipsis, 4), np.arange(4, dtype=np.float32)), (3, np.arange(5, dtype=np.float32))]:
        xn[key] = value
        x[key] = anvil.tensor(value, device=dev) if isinstance(value, np.ndarray) else value
        np.testing.assert_array_equal(to_np(x), xn)
    xn[xn > 2] = 9.0
    x[x > 2] = 9.0
    np.testing.assert_array_equal(to_np(x), xn)
    xn[[0, 3]] = 4.0
    x[[0, 3]] = 4.0
    np.testing.assert_array_equal(to_np(x), xn)
    xn[np.array([1, 2])] = np.array([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], dtype=np.float32)
    x[anvil.tensor([1, 2], device=dev)] = anvil.tensor([[1, 2, 3, 4, 5], [6, 7, 8, 9, 10]], dtype=anvil.float32,
                                                       device=dev)
    np.testing.assert_array_equal(to_np(x), xn)


def test_index_errors(dev):
    x = anvil.zeros(2, 3, device=dev)
    with pytest.raises(IndexError):
        x[5]
    with pytest.raises(IndexError):
        x[0, 0, 0]
    with pytest.raises(ValueError):
        x[::0]
    assert x[::-1].shape == (2, 3)  # negative steps follow NumPy (test_indexing.py)


def test_to_and_copy_to(dev):
    x = anvil.ones(2, 3)
    y = x.to(dev)
    assert y.device == dev
    assert y.to(dev).is_same(y)
    assert not y.copy_to(dev).is_same(y)
    assert x.to(anvil.float64).dtype == anvil.float64
    assert x.to(dev, anvil.float64).dtype == anvil.float64
    assert x.to(device=dev, dtype=anvil.int32).dtype == anvil.int32
    assert x.to(anvil.float32).is_same(x)


def test_noop_conversions_return_the_same_object(dev):
    # PyTorch's `Z.cuda(1) is Z`: a conversion that changes nothing is x itself.
    x = anvil.ones(2, 3).to(dev)
    assert x.to(dev) is x and x.to(device=dev) is x and x.to(str(dev)) is x
    assert x.to(anvil.float32) is x and x.to(dev, anvil.float32) is x and x.to(x) is x
    assert x.contiguous() is x and x.float() is x
    d = anvil.ones(2, dtype=anvil.float64, device=dev)
    assert d.double() is d and d.float() is not d
    i = anvil.ones(2, dtype=anvil.int64, device=dev)
    assert i.long() is i and i.int() is not i
    if dev.type == "cpu":
        assert x.cpu() is x
    else:
        assert x.cpu() is not x and x.cpu().device == anvil.cpu()
    # Anything that makes a new tensor is a new object.
    t = x.t()
    assert t.contiguous() is not t and t.contiguous().is_contiguous()
    assert x.to(dev, copy=True) is not x and x.clone() is not x
    assert x.to(anvil.float64) is not x


def test_data_ptr(dev):
    x = anvil.arange(6, dtype=anvil.float32, device=dev).reshape(2, 3)
    if dev.type == "opencl":
        with pytest.raises(NotImplementedError, match="data_ptr: .*OpenCL buffer object, which has no address"):
            x.data_ptr()
        return
    # The address of the first element: a view's is offset by its storage offset.
    assert x.data_ptr() != 0
    assert x[1].data_ptr() == x.data_ptr() + 3 * 4
    assert x.to(dev).data_ptr() == x.data_ptr()


def test_repr_is_the_cpp_printing(dev):
    x = anvil.ones(2, 2, device=dev)
    suffix = "" if dev.type == "cpu" else f", device='{dev}'"
    assert repr(x) == f"tensor([[1., 1.],\n        [1., 1.]]{suffix})"
    assert repr(anvil.float32) == "anvil.float32"
    assert str(dev) == DEVICE.__str__()


def test_ops_from_several_python_threads(dev):
    import threading
    x = anvil.randn(256, 256, device=dev)
    results = []

    def work():
        results.append((x @ x).sum().item())

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 4 and all(abs(r - results[0]) <= 1e-3 * max(1.0, abs(results[0])) for r in results)


def test_tensor_from_numpy_scalars_and_reversed_views(dev):
    assert anvil.tensor(np.float32(2.5), device=dev).shape == ()
    assert anvil.tensor(np.array(3.0), device=dev).item() == 3.0
    assert anvil.tensor(np.arange(3.0)[::-1], device=dev).tolist() == [2.0, 1.0, 0.0]
    with pytest.raises(anvil.NotSupportedError, match="negative strides"):
        anvil.from_numpy(np.arange(3.0)[::-1])  # a view cannot have negative strides here


def test_as_strided_starts_at_the_views_offset(dev):
    # As torch.as_strided: without storage_offset, the view's own offset.
    x = anvil.arange(10.0, device=dev)
    assert x[5:].as_strided((2, 2), (1, 1)).tolist() == [[5.0, 6.0], [6.0, 7.0]]
    assert anvil.as_strided(x[5:], (2, 2), (1, 1)).tolist() == [[5.0, 6.0], [6.0, 7.0]]
    assert x[5:].as_strided((2,), (1,), 0).tolist() == [0.0, 1.0]


def test_split_with_sizes(dev):
    # torch.split with a list of sizes: views that add up to the dim.
    x = anvil.arange(10.0, device=dev).reshape(5, 2)
    parts = x.split([2, 3])
    assert [p.shape for p in parts] == [(2, 2), (3, 2)]
    assert parts[1].tolist() == [[4.0, 5.0], [6.0, 7.0], [8.0, 9.0]]
    assert [p.shape for p in anvil.split(x, [1, 1], dim=1)] == [(5, 1), (5, 1)]
    assert len(x.split(2)) == 3
    with pytest.raises(anvil.ValueError, match="add up"):
        x.split([2, 2])
