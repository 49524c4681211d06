"""x[key] and x[key] = value against NumPy (values, shapes, dtypes) on the
suite's device: basic and advanced indexing, negative steps, several index
arrays in one subscript, repeated indices in assignment, errors, and
gradients through every read form (against numpy.add.at)."""

import numpy as np
import pytest

import anvil

XN = np.arange(2 * 3 * 4 * 5, dtype=np.float32).reshape(2, 3, 4, 5)
I = np.array


def to_np(t):
    return t.cpu().numpy()


def on(dev, key, form):
    """The NumPy key with its arrays as anvil tensors on dev ("tensor"),
    as they are ("numpy") or as lists ("list")."""
    def one(k):
        if isinstance(k, np.ndarray):
            if form == "tensor":
                return anvil.tensor(k, device=dev)
            if form == "list":
                return k.tolist()
        return k
    return tuple(one(k) for k in key) if isinstance(key, tuple) else one(key)


S = slice
# Each key applied to XN (shape [2, 3, 4, 5]).
GET_KEYS = [
    0, -1, (1, 2), (S(None), 1, S(1, 3)), (S(None, None, 2),), (Ellipsis, 1), (None, 0), (0, None, S(0, 4, 3)),
    (Ellipsis, None), (), Ellipsis, (S(10, 20),), (S(-3, -1), -2),
    # negative steps
    S(None, None, -1), (S(None), S(None, None, -1)), (Ellipsis, S(4, 0, -2)), (1, S(3, None, -2), S(None, None, -3)),
    (S(None), S(None), S(2, 2, -1)), (Ellipsis, S(-1, -6, -1)), (S(None), S(None, None, -5)),
    # one index array
    I([1, 0, 1]), (S(None), I([2, 0, 2, 1])), (S(None), S(None), I([[0, 3], [1, 1]])), (Ellipsis, I([-1, -5, 0])),
    (S(None), I([], dtype=np.int64)), (0, I([2, 1])),
    # several: broadcast together; adjacent ones stay in place, separated ones go first
    (I([0, 1]), I([2, 0])), (I([[0], [1]]), I([0, 2, 1])), (S(None), I([0, 2]), I([3, 1])),
    (I([1, 0]), S(None), I([2, 3])), (I([1, 0]), S(None), S(None), I([[4], [0]])), (0, S(None), I([1, 2])),
    (S(None), 0, I([1, 2])), (I([1, 0]), 1, S(None), 3), (I([1]), None, I([2])), (S(None), I([1, 0]), None, I([0, 3])),
    (I([0, 1, 1]), I([2, 2, 0]), I([1, 3, 0]), I([4, 0, 2])), (I([1]), Ellipsis, I([0, 4])),
    # bool masks
    XN > 60, (XN[:, :, 0, 0] > 3), (S(None), XN[0, :, :, 0] % 3 == 0), (XN[:, 0, 0, 0] > 0, 0), True, False,
    (Ellipsis, True), (0, False), (XN[:, 0, 0, 0] > -1, S(None), I([1, 2])), np.zeros((2, 3), dtype=bool),
    # with negative steps
    (I([1, 0]), S(None, None, -1)), (S(None, None, -1), I([0, 2]), S(None), I([1, 4])),
    (S(None, None, -1), XN[0, :, 0, 0] > 10),
]
FORMS = ["tensor", "numpy", "list"]


@pytest.mark.parametrize("key", GET_KEYS, ids=[repr(k)[:60] for k in GET_KEYS])
@pytest.mark.parametrize("form", FORMS)
def test_getitem_vs_numpy(dev, key, form):
    x = anvil.tensor(XN, device=dev)
    want = XN[key]
    got = x[on(dev, key, form)]
    assert got.shape == want.shape
    assert got.dtype == anvil.float32 and got.device == dev
    np.testing.assert_array_equal(to_np(got), want)


@pytest.mark.parametrize("dtype", ["int64", "int32", "float64", "bool", "uint8", "float16"])
def test_getitem_dtypes(dev, dtype):
    xn = (XN % 7).astype(dtype)
    x = anvil.tensor(xn, device=dev)
    for key in [S(None, None, -1), (I([1, 0]), S(None), I([2, 3])), xn[:, :, 0, 0] > 0, (0, S(2, None, -1), S(None), I([4]))]:
        got = x[on(dev, key, "tensor")]
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(to_np(got), xn[key])


def test_views_and_copies(dev):
    x = anvil.zeros(3, 4, device=dev)
    assert x[1:, ::2].shares_storage(x)  # basic: a view
    assert x[None, ..., 0].shares_storage(x)
    assert not x[::-1].shares_storage(x)  # a negative step: a copy (NumPy: a view)
    assert not x[[0, 1]].shares_storage(x)


def test_zero_dim(dev):
    x = anvil.tensor(3.5, device=dev)
    assert x[()].item() == 3.5 and x[...].shape == ()
    assert x[None].shape == (1,) and x[True].shape == (1,) and x[False].shape == (0,)


# (key, value maker): the value from the region's shape, as NumPy takes it.
SET_CASES = [
    ((0, 1), lambda s: 3.0),
    ((S(None), 2), lambda s: 7),
    ((S(1, None), S(None, None, 2)), lambda s: np.arange(np.prod(s), dtype=np.float32).reshape(s)),
    (S(None, None, -1), lambda s: np.arange(np.prod(s), dtype=np.float32).reshape(s)),
    ((Ellipsis, S(4, 0, -2)), lambda s: np.arange(s[-1], dtype=np.float32)),  # broadcast over the leading dims
    ((S(None), S(None, None, -1), 0), lambda s: np.arange(np.prod(s), dtype=np.float32).reshape(s)),
    (I([1, 0]), lambda s: np.arange(np.prod(s), dtype=np.float32).reshape(s)),
    ((I([0, 1]), I([2, 0])), lambda s: np.arange(np.prod(s), dtype=np.float32).reshape(s)),
    ((I([[0], [1]]), I([0, 2, 1])), lambda s: -1.5),
    ((I([1, 0]), S(None), I([2, 3])), lambda s: np.arange(s[-1], dtype=np.float32)),
    ((0, S(None), I([1, 2])), lambda s: np.arange(np.prod(s), dtype=np.float32).reshape(s)),
    ((S(None), 0, I([1, 2])), lambda s: np.arange(np.prod(s), dtype=np.float32).reshape(s)),
    ((S(None, None, -1), I([0, 2]), S(None), I([1, 4])),
     lambda s: np.arange(np.prod(s), dtype=np.float32).reshape(s)),
    (XN > 60, lambda s: 0.0),
    (XN > 60, lambda s: np.arange(np.prod(s), dtype=np.float32)),
    ((XN[:, 0, 0, 0] > 0, 1), lambda s: np.arange(s[-1], dtype=np.float32)[None]),
    ((0, 1), lambda s: np.arange(np.prod(s), dtype=np.float32).reshape((1, 1) + s)),  # extra leading 1 dims
    ((S(None), XN[0, :, :, 0] % 3 == 0), lambda s: np.arange(s[-1], dtype=np.float32)),
    (True, lambda s: 2.0),
    ((Ellipsis, I([-1, -5])), lambda s: np.arange(s[-1], dtype=np.float32)),
    # separated advanced indices whose dims flatten only around a size-1 dim: written in place
    ((S(None, None, -1), 1, True, S(None), 2), lambda s: np.arange(np.prod(s), dtype=np.float32).reshape(s)),
]


@pytest.mark.parametrize("case", range(len(SET_CASES)))
@pytest.mark.parametrize("form", ["tensor", "list"])
def test_setitem_vs_numpy(dev, case, form):
    key, make = SET_CASES[case]
    xn = XN.copy()
    x = anvil.tensor(xn, device=dev)
    value = make(xn[key].shape)
    xn[key] = value
    if isinstance(value, np.ndarray):
        value = anvil.tensor(value, device=dev) if form == "tensor" else value.tolist()
    x[on(dev, key, form)] = value
    np.testing.assert_array_equal(to_np(x), xn)


def test_setitem_repeated_indices_last_write_wins(dev):
    x = anvil.zeros(3, device=dev)
    x[[0, 0]] = anvil.tensor([1.0, 2.0], device=dev)
    assert x.tolist() == [2.0, 0.0, 0.0]
    y = anvil.zeros(2, 3, device=dev)
    y[anvil.tensor([1, 0, 1, 1], device=dev), anvil.tensor([2, 0, 2, 2], device=dev)] = [1.0, 2.0, 3.0, 4.0]
    assert y.tolist() == [[2.0, 0.0, 0.0], [0.0, 0.0, 4.0]]
    big = anvil.zeros(4, 3, device=dev)
    rows = np.arange(3000) % 4
    big[rows] = anvil.tensor(np.arange(3000 * 3, dtype=np.float32).reshape(3000, 3), device=dev)
    np.testing.assert_array_equal(to_np(big), np.arange(3000 * 3, dtype=np.float32).reshape(3000, 3)[-4:])


def test_augmented_assignment_does_not_accumulate(dev):
    xn = np.arange(5, dtype=np.float32)
    x = anvil.tensor(xn, device=dev)
    xn[[0, 0, 1]] += 1
    x[[0, 0, 1]] += 1
    np.testing.assert_array_equal(to_np(x), xn)  # [1, 2, 2, 3, 4], as NumPy
    x[1:3] *= 10
    x[::-1] -= anvil.arange(5, device=dev).float()
    xn[1:3] *= 10
    xn[::-1] -= np.arange(5, dtype=np.float32)
    np.testing.assert_array_equal(to_np(x), xn)
    m = anvil.tensor(xn > 3, device=dev)
    x[m] += 0.5
    xn[xn > 3] += 0.5
    np.testing.assert_array_equal(to_np(x), xn)


def test_setitem_through_non_contiguous(dev):
    base_n = np.arange(20, dtype=np.float32).reshape(4, 5)
    base = anvil.tensor(base_n, device=dev)
    xt, xtn = base.t(), base_n.T  # [5, 4], not contiguous: the indexed dims do not flatten as a view
    xtn[I([0, 4, 0]), I([1, 3, 1])] = [7.0, 8.0, 9.0]
    xt[I([0, 4, 0]), I([1, 3, 1])] = [7.0, 8.0, 9.0]
    np.testing.assert_array_equal(to_np(base), base_n)
    xtn[1:, I([3, 0])] = -1
    xt[1:, [3, 0]] = -1
    np.testing.assert_array_equal(to_np(base), base_n)


def test_setitem_overlapping_value(dev):
    xn = np.arange(6, dtype=np.float32)
    x = anvil.tensor(xn, device=dev)
    xn[1:] = xn[:-1].copy()
    x[1:] = x[:-1]
    np.testing.assert_array_equal(to_np(x), xn)
    xn[[4, 5]] = xn[3:5].copy()
    x[[4, 5]] = x[3:5]
    np.testing.assert_array_equal(to_np(x), xn)


def test_setitem_dtype_conversion(dev):
    xn = np.zeros((2, 3), dtype=np.int64)
    x = anvil.tensor(xn, device=dev)
    x[[1, 0], [2, 2]] = anvil.tensor([3.0, 4.0], device=dev)
    xn[[1, 0], [2, 2]] = [3, 4]
    assert x.dtype == anvil.int64
    np.testing.assert_array_equal(to_np(x), xn)
    b = anvil.zeros(4, dtype=anvil.bool, device=dev)
    b[[3, 1]] = True
    assert b.tolist() == [False, True, False, True]


def expect_error(kind, fn, *words):
    with pytest.raises(kind) as info:
        fn()
    assert isinstance(info.value, anvil.Error)
    for w in words:
        assert w in str(info.value), str(info.value)


def test_index_errors(dev):
    x = anvil.zeros(2, 3, device=dev)
    expect_error(IndexError, lambda: x[5], "index", "expected an index in [-2, 2), got 5")
    expect_error(IndexError, lambda: x[0, -4], "expected an index in [-3, 3), got -4")
    expect_error(IndexError, lambda: x[[0, 2]], "got 2")
    expect_error(IndexError, lambda: x[:, I([0, -4])], "got -4")
    expect_error(IndexError, lambda: x[0, 0, 0], "too many indices", "expected at most 2, got 3")
    expect_error(IndexError, lambda: x[..., 0, ...], "single ellipsis")
    expect_error(IndexError, lambda: x[1.5], "valid indices", "got float")
    expect_error(IndexError, lambda: x["a"], "got str")
    expect_error(IndexError, lambda: x[anvil.tensor([0.5], device=dev)], "integer or bool", "got f32")
    expect_error(IndexError, lambda: x[anvil.tensor([True, False, True], device=dev)], "mask", "expected 2 or 0, got 3")
    expect_error(IndexError, lambda: x[[0, 1], [0, 1, 2]], "broadcast", "[2], [3]")
    expect_error(ValueError, lambda: x[::0], "step", "got 0")
    with pytest.raises(ValueError) as info:
        x[0] = anvil.ones(2, device=dev)
    assert "expected a shape broadcastable to [3], got [2]" in str(info.value)
    with pytest.raises(TypeError):
        x[0] = "a"
    x[0] = 1.0  # nothing above changed x
    assert x.tolist() == [[1.0, 1.0, 1.0], [0.0, 0.0, 0.0]]


def test_device_index_out_of_range_is_reported(dev):
    # Index tensors already on a device are not read back: the kernel finds
    # the bad entry and it is reported at the next sync, as an IndexError.
    x = anvil.zeros(2, 3, device=dev)
    for key in [anvil.tensor([0, 7], device=dev), (anvil.tensor([1, 0], device=dev), anvil.tensor([5, 0], device=dev))]:
        with pytest.raises(IndexError):
            x[key].tolist()
        with pytest.raises(IndexError):
            x[key] = 1.0
            x.tolist()


# Read forms and their gradient: numpy.add.at scatters the output gradient
# back, duplicates added, with NumPy's meaning of the key.
X3 = XN[0] / 10  # [3, 4, 5]
GRAD_KEYS = [
    S(None, None, -1), (S(None), S(3, 0, -2)), I([2, 0, 2]), (I([0, 2, 2]), I([1, 1, 1])),
    (I([1, 0]), S(None, None, -1), I([2, 2])), (0, S(None), I([1, 1, 3])), (S(None), X3[0] > 0.8),
    (X3[:, 0, 0] > 1, S(None, None, -2)), (I([[2], [0]]), I([0, 3, 3])),
]


@pytest.mark.parametrize("key", GRAD_KEYS, ids=[repr(k)[:60] for k in GRAD_KEYS])
def test_gradient_through_getitem(dev, key):
    x = anvil.tensor(X3, device=dev, requires_grad=True)
    y = x[on(dev, key, "tensor")]
    wn = np.random.default_rng(0).standard_normal(X3[key].shape).astype(np.float32)
    (y * anvil.tensor(wn, device=dev)).sum().backward()
    want = np.zeros_like(X3)
    np.add.at(want, key, wn)
    np.testing.assert_allclose(to_np(x.grad), want, rtol=1e-6)


def test_gradient_finite_differences(dev):
    # Float64 central differences of sum(w * x[key]) for two multi-array keys.
    if dev.type != "cpu":
        pytest.skip("float64 on the CPU only")
    rng = np.random.default_rng(1)
    xn = rng.standard_normal((3, 4))
    for key in [(I([2, 0, 2]), I([3, 1, 3])), (S(None, None, -1), I([1, 1]))]:
        wn = rng.standard_normal(xn[key].shape)
        x = anvil.tensor(xn, dtype=anvil.float64, requires_grad=True)
        (x[key] * anvil.tensor(wn)).sum().backward()
        num = np.zeros_like(xn)
        for i in np.ndindex(xn.shape):
            e = np.zeros_like(xn)
            e[i] = 1e-6
            num[i] = ((wn * (xn + e)[key]).sum() - (wn * (xn - e)[key]).sum()) / 2e-6
        np.testing.assert_allclose(to_np(x.grad), num, atol=1e-6)


def test_mask_fill_and_device_indices_need_no_host_sync(dev):
    # x[mask] = number is masked_fill (as PyTorch), and index tensors already
    # on the device are not read back: neither waits for the device.
    xn = XN.copy()
    x = anvil.tensor(xn, device=dev)
    m = x > 50
    lead = anvil.tensor(XN[:, 0, 0, 0] > 50, device=dev)
    idx = anvil.tensor([1, 0, 1], device=dev)
    anvil.synchronize(dev)
    with anvil.ledger() as ledger:
        x[m] = -1.0
        x[lead] = -2.0  # a mask over the leading dim
        y = x[idx, :, idx]
        x[idx, 1] = 7.0
    assert ledger.report().host_syncs(dev) == 0
    xn[XN > 50] = -1.0
    xn[XN[:, 0, 0, 0] > 50] = -2.0
    yn = xn[[1, 0, 1], :, [1, 0, 1]]
    xn[[1, 0, 1], 1] = 7.0
    np.testing.assert_array_equal(to_np(y), yn)
    np.testing.assert_array_equal(to_np(x), xn)


def test_index_on_another_device_is_an_error(dev):
    if dev.type != "opencl":
        pytest.skip("needs two devices")
    other = anvil.device("opencl:1" if dev.index == 0 else "opencl:0")
    x = anvil.zeros(3, device=dev)
    with pytest.raises(anvil.DeviceMismatchError) as info:
        x[anvil.tensor([0, 1], device=other)]
    assert f"expected {dev} or cpu, got {other}" in str(info.value)
    x[anvil.tensor([0, 1])] = 1.0  # CPU index tensors are fine
    assert x.tolist() == [1.0, 1.0, 0.0]


def random_key(rng, shape):
    """A subscript mixing every kind of item, valid or not for shape."""
    items, d = [], 0
    for _ in range(rng.integers(0, len(shape) + 2)):
        r = rng.random()
        n = shape[d] if d < len(shape) else 0
        if r < 0.1:
            items.append(None)
        elif r < 0.15 and not any(k is Ellipsis for k in items):
            items.append(Ellipsis)
        elif d >= len(shape):
            break
        elif r < 0.35 and n > 0:
            items.append(int(rng.integers(-n, n)))
            d += 1
        elif r < 0.65:
            start, stop = (int(v) if rng.random() < 0.7 else None for v in rng.integers(-n - 2, n + 3, 2))
            items.append(S(start, stop, [None, 1, 2, -1, -2, -3][rng.integers(0, 6)]))
            d += 1
        elif r < 0.85 and n > 0:
            items.append(rng.integers(-n, n, [(2,), (3,), (1,), (2, 1), (1, 3), (0,)][rng.integers(0, 6)]))
            d += 1
        elif r < 0.9:
            items.append(bool(rng.random() < 0.5))
        else:
            k = int(rng.integers(1, min(2, len(shape) - d) + 1))
            items.append(rng.random(shape[d:d + k]) < 0.5)
            d += k
    return tuple(items)


def test_random_keys_vs_numpy(dev):
    # Seeded random subscripts over small shapes (size-0 and size-1 dims
    # included); get and set against NumPy. Keys NumPy rejects or only
    # warns about are skipped, as are sets that write one element twice.
    import warnings
    rng = np.random.default_rng(33)
    checked = 0
    for _ in range(300):
        shape = tuple(int(n) for n in rng.integers(0, 4, rng.integers(0, 5)))
        xn = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
        key = random_key(rng, shape)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                want = xn[key]
                positions = np.arange(xn.size).reshape(shape)[key]
            except (IndexError, ValueError, DeprecationWarning):
                continue
        x = anvil.tensor(xn, device=dev)
        # An empty nested list loses its shape ([[]] is not [0, 1]): lists only when not empty.
        as_list = rng.random() < 0.5 and all(k.size for k in key if isinstance(k, np.ndarray))
        akey = on(dev, key, "list" if as_list else "tensor")
        got = x[akey]
        assert got.shape == want.shape, key
        np.testing.assert_array_equal(to_np(got), want, err_msg=repr(key))
        if len(np.unique(positions)) == positions.size:
            vn = np.arange(want.size, dtype=np.float32).reshape(want.shape) + 100
            xn[key] = vn
            x[akey] = anvil.tensor(vn, device=dev)
            np.testing.assert_array_equal(to_np(x), xn, err_msg=repr(key))
        checked += 1
    assert checked > 150


def test_flip_and_index_copy(dev):
    xn = XN[0]  # [3, 4, 5]
    x = anvil.tensor(xn, device=dev)
    np.testing.assert_array_equal(to_np(x.flip(0)), np.flip(xn, 0))
    np.testing.assert_array_equal(to_np(anvil.flip(x, (0, -1))), np.flip(xn, (0, 2)))
    np.testing.assert_array_equal(to_np(x.flip()), np.flip(xn))
    src_n = np.arange(2 * 4 * 5, dtype=np.float32).reshape(2, 4, 5)
    src, idx = anvil.tensor(src_n, device=dev), anvil.tensor([2, 2], device=dev)
    want = xn.copy()
    want[2] = src_n[1]  # the last write wins
    np.testing.assert_array_equal(to_np(x.index_copy(0, idx, src)), want)
    np.testing.assert_array_equal(to_np(anvil.index_copy(x, 0, idx, src)), want)
    np.testing.assert_array_equal(to_np(x), xn)
    assert x.index_copy_(0, idx, src) is x
    np.testing.assert_array_equal(to_np(x), want)
