"""anvil.atan, asin, acos, the hyperbolic functions, atan2, logaddexp2, the integer bitwise ops
and the binary ops' bindings from the op table
against NumPy, on the suite's device: values, special values, dtypes, errors."""

import numpy as np
import pytest

import anvil

NAN, INF = float("nan"), float("inf")


def values(t):
    return np.asarray(t.cpu().tolist())


def same_zero_signs(got, want):
    """The sign of every number (zeros included); a NaN's sign bit means nothing."""
    keep = ~np.isnan(want)
    return np.array_equal(np.signbit(got[keep]), np.signbit(want[keep]))


@pytest.mark.parametrize("name", ["atan", "asin", "acos"])
def test_inverse_trig_vs_numpy(dev, name):
    x = np.array([-1.0, -0.5, -0.0, 0.0, 0.25, 1.0, 1.5, -INF, INF, NAN])
    ref = getattr(np, "arc" + name[1:])
    with np.errstate(invalid="ignore"):
        want = ref(x)
    t = anvil.tensor(x.tolist(), dtype=anvil.float64, device=dev)
    for got in (getattr(anvil, name)(t), getattr(t, name)()):
        assert got.dtype == anvil.float64 and got.device == dev
        np.testing.assert_allclose(values(got), want, rtol=1e-15, atol=0)
        assert same_zero_signs(values(got), want)
    # integers compute in the default float dtype
    i = anvil.tensor([-1, 0, 1], dtype=anvil.int32, device=dev)
    assert getattr(anvil, name)(i).dtype == anvil.float32


@pytest.mark.parametrize("name", ["sinh", "cosh", "asinh", "acosh", "atanh"])
def test_hyperbolic_vs_numpy(dev, name):
    """Bound from the op table (anvil/ops.def), like every op of one tensor."""
    x = np.array([-1.0, -0.5, -0.0, 0.0, 0.25, 1.0, 1.5, 800.0, -INF, INF, NAN])
    ref = getattr(np, "arc" + name[1:] if name.startswith("a") else name)
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        want = ref(x)
    t = anvil.tensor(x.tolist(), dtype=anvil.float64, device=dev)
    for got in (getattr(anvil, name)(t), getattr(t, name)()):
        assert got.dtype == anvil.float64 and got.device == dev
        np.testing.assert_allclose(values(got), want, rtol=1e-14, atol=0)
        assert same_zero_signs(values(got), want)
    assert name in getattr(anvil, name).__doc__  # the row's doc column: "(torch.sinh)"
    i = anvil.tensor([1, 2, 3], dtype=anvil.int32, device=dev)
    assert getattr(anvil, name)(i).dtype == anvil.float32


def test_atan2_quadrants_and_broadcast(dev):
    zs = [0.0, -0.0, 1.0, -1.0, INF, -INF, NAN]
    a = np.array(zs)[:, None]
    b = np.array(zs)[None, :]
    want = np.arctan2(a, b)
    ta = anvil.tensor(a.tolist(), dtype=anvil.float64, device=dev)
    tb = anvil.tensor(b.tolist(), dtype=anvil.float64, device=dev)
    for got in (anvil.atan2(ta, tb), ta.atan2(tb)):
        assert got.shape == (7, 7)
        np.testing.assert_allclose(values(got), want, rtol=1e-15, atol=0)
        assert same_zero_signs(values(got), want)
    ints = anvil.tensor([1, -1], dtype=anvil.int64, device=dev)
    assert anvil.atan2(ints, ints).dtype == anvil.float32


def test_atan2_gradient(dev):
    a = anvil.tensor([0.5, -2.0, 3.0], dtype=anvil.float64, device=dev, requires_grad=True)
    b = anvil.tensor([1.5, 0.25, -1.0], dtype=anvil.float64, device=dev, requires_grad=True)
    anvil.atan2(a, b).sum().backward()
    x, y = np.array([0.5, -2.0, 3.0]), np.array([1.5, 0.25, -1.0])
    np.testing.assert_allclose(values(a.grad), y / (x * x + y * y), rtol=1e-12)
    np.testing.assert_allclose(values(b.grad), -x / (x * x + y * y), rtol=1e-12)


INT_CASES = [
    (anvil.int32, np.int32, [-2**31, -2**31 + 1, -100, -1, 0, 1, 7, 2**31 - 1]),
    (anvil.int64, np.int64, [-2**63, -3037000500, -1, 0, 1, 63, 3037000500, 2**63 - 1]),
    (anvil.uint8, np.uint8, [0, 1, 7, 127, 128, 255]),
]


@pytest.mark.parametrize("name", ["bitwise_and", "bitwise_or", "bitwise_xor"])
@pytest.mark.parametrize("dt,npdt,vals", INT_CASES)
def test_bitwise_vs_numpy(dev, name, dt, npdt, vals):
    a = np.array(vals, dtype=npdt)[:, None].repeat(len(vals), 1)
    b = a.T.copy()
    ta = anvil.tensor(a.tolist(), dtype=dt, device=dev)
    tb = anvil.tensor(b.tolist(), dtype=dt, device=dev)
    want = getattr(np, name)(a, b)
    for got in (getattr(anvil, name)(ta, tb), getattr(ta, name)(tb)):
        assert got.dtype == dt
        assert np.array_equal(values(got), want)
    assert np.array_equal(values(getattr(anvil, name)(ta, 5)), getattr(np, name)(a, npdt(5)))


def test_bitwise_bool_and_floats(dev):
    t = anvil.tensor([True, True, False, False], device=dev)
    f = anvil.tensor([True, False, True, False], device=dev)
    assert anvil.bitwise_and(t, f).tolist() == [True, False, False, False]
    assert anvil.bitwise_or(t, f).dtype == anvil.bool
    assert anvil.bitwise_xor(t, f).tolist() == [False, True, True, False]
    x = anvil.tensor([1.0, 2.0], device=dev)
    for name in ["bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_left_shift", "bitwise_right_shift"]:
        with pytest.raises(anvil.DTypeError, match=name):
            getattr(anvil, name)(x, x)
    with pytest.raises(anvil.DTypeError, match="bitwise_left_shift"):
        anvil.bitwise_left_shift(t, f)


@pytest.mark.parametrize("name", ["bitwise_left_shift", "bitwise_right_shift"])
@pytest.mark.parametrize("dt,npdt,vals", INT_CASES)
def test_shifts_vs_numpy_for_every_count(dev, name, dt, npdt, vals):
    bits = np.dtype(npdt).itemsize * 8
    counts = [0, 1, 3, bits - 1, bits, bits + 1, 200] + ([-1, -bits] if npdt != np.uint8 else [])
    counts = [c for c in counts if np.iinfo(npdt).min <= c <= np.iinfo(npdt).max]
    a = np.array(vals, dtype=npdt)[:, None].repeat(len(counts), 1)
    b = np.array(counts, dtype=npdt)[None, :].repeat(len(vals), 0)
    want = getattr(np, name.replace("bitwise_", ""))(a, b)
    ta = anvil.tensor(a.tolist(), dtype=dt, device=dev)
    tb = anvil.tensor(b.tolist(), dtype=dt, device=dev)
    for got in (getattr(anvil, name)(ta, tb), getattr(ta, name)(tb)):
        assert got.dtype == dt
        assert np.array_equal(values(got), want), (values(got), want)
    assert np.array_equal(values(getattr(anvil, name)(ta, 3)), getattr(np, name.replace("bitwise_", ""))(a, 3))
    # a scalar shifted by a tensor
    s = getattr(anvil, name)(5, tb[:1])
    assert np.array_equal(values(s), getattr(np, name.replace("bitwise_", ""))(npdt(5), b[:1]))


def test_binary_ops_are_bound_from_the_table_in_their_forms(dev):
    """Every public row of anvil/ops.def's binary ops: anvil.name and Tensor.name,
    documented by the row, with a number where the row's forms say."""
    names = [n for n in anvil._anvil._binary_ops if n]
    assert {"add", "sub", "pow", "atan2", "bitwise_and", "remainder", "logaddexp2"} <= set(names)
    assert "relu_backward" not in names  # Internal rows have no public function
    for name in names:
        assert getattr(anvil, name) is getattr(anvil._anvil, name)
        assert f"torch.{name}" in getattr(anvil, name).__doc__, name
        assert f"torch.{name}" in getattr(anvil.Tensor, name).__doc__, name
    x = anvil.tensor([1.0, 2.0, 4.0], device=dev)
    np.testing.assert_array_equal(values(anvil.sub(10, x)), [9.0, 8.0, 6.0])  # ScalarFirst
    np.testing.assert_array_equal(values(anvil.pow(2, x)), [2.0, 4.0, 16.0])
    np.testing.assert_array_equal(values(x.pow(exponent=2)), [1.0, 4.0, 16.0])  # PyTorch's keyword
    np.testing.assert_array_equal(values(anvil.maximum(x, 3)), [3.0, 3.0, 4.0])  # Scalar
    np.testing.assert_array_equal(values(x.remainder(3)), [1.0, 2.0, 1.0])
    with pytest.raises(TypeError):
        anvil.atan2(x, 2.0)  # Tensor only, as torch.atan2


def test_logaddexp2_vs_numpy(dev):
    """A binary op added as docs/adding-an-op.md says: the row, scalar.h, the rule."""
    zs = [0.0, 1.0, -1.0, 30.0, -200.0, INF, -INF, NAN]
    a = np.array(zs)[:, None]
    b = np.array(zs)[None, :]
    with np.errstate(invalid="ignore"):
        want = np.logaddexp2(a, b)
    ta = anvil.tensor(a.tolist(), dtype=anvil.float64, device=dev)
    tb = anvil.tensor(b.tolist(), dtype=anvil.float64, device=dev)
    for got in (anvil.logaddexp2(ta, tb), ta.logaddexp2(tb)):
        assert got.shape == (8, 8)
        np.testing.assert_allclose(values(got), want, rtol=1e-15, atol=0)
    ints = anvil.tensor([1, -1], dtype=anvil.int64, device=dev)
    assert anvil.logaddexp2(ints, ints).dtype == anvil.float32
    x = anvil.tensor([0.5, -2.0], dtype=anvil.float64, device=dev, requires_grad=True)
    y = anvil.tensor([1.5, 0.25], dtype=anvil.float64, device=dev, requires_grad=True)
    anvil.logaddexp2(x, y).sum().backward()
    xv, yv = np.array([0.5, -2.0]), np.array([1.5, 0.25])
    np.testing.assert_allclose(values(x.grad), 1 / (1 + 2.0 ** (yv - xv)), rtol=1e-12)
    np.testing.assert_allclose(values(y.grad), 1 / (1 + 2.0 ** (xv - yv)), rtol=1e-12)
