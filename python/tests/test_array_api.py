"""The array API standard (2023.12) namespace, anvil.array_api, against the
standard's reference implementation array_api_strict: every function runs on
anvil (on the suite's device) and on array_api_strict with the same inputs,
and the values, dtypes, shapes and device of the results are compared.
Inputs come from hypothesis where that is cheap (derandomized, few examples:
the file runs in well under a minute per device) and from fixed cases for
special values. The standard's own test suite (array-api-tests) is not on
PyPI; docs/python.md says why this file stands in for it."""

import math
import operator
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st
from hypothesis.extra import numpy as hnp

import array_api_strict as xs

import anvil
import anvil.array_api as xp

from conftest import DEVICE

xs.set_array_api_strict_flags(api_version="2023.12")

FAST = settings(max_examples=6, deadline=None, derandomize=True, database=None)
DTYPES = ["bool", "uint8", "int32", "int64", "float32", "float64"]
FLOATS = ["float32", "float64"]


def has_fp64():
    return "float64" in xp.__array_namespace_info__().dtypes(device=DEVICE)


def on(a):
    """A NumPy array as an anvil tensor on the suite's device and as an
    array_api_strict array."""
    a = np.asarray(a)
    return anvil.tensor(a, device=DEVICE), xs.asarray(a)


def host(r):
    if isinstance(r, anvil.Tensor):
        return r.cpu().numpy()
    return np.asarray(r._array)


def same(got, want, *, rtol=None, atol=0.0):
    """An anvil result against the reference one: shape, dtype, device, values."""
    if isinstance(want, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w, rtol=rtol, atol=atol)
        return
    if isinstance(want, (bool, int, float)):
        assert got == want
        return
    assert isinstance(got, anvil.Tensor), type(got)
    assert got.device == DEVICE, f"result on {got.device}, inputs on {DEVICE}"
    assert tuple(got.shape) == tuple(want.shape)
    assert got.dtype.name == str(want.dtype).split(".")[-1], (got.dtype, want.dtype)
    g, w = host(got), host(want)
    if w.dtype.kind == "f":
        tol = rtol if rtol is not None else (2e-6 if w.dtype == np.float32 else 1e-12)
        np.testing.assert_allclose(g, w, rtol=tol, atol=atol, equal_nan=True)
    else:
        np.testing.assert_array_equal(g, w)


def both(name, *args, **kwargs):
    """name(*args) on anvil and on array_api_strict; NumPy arrays among args
    become arrays of each, everything else passes as it is."""
    def convert(v, make):
        if isinstance(v, np.ndarray):
            return make(v)
        if isinstance(v, list) and v and all(isinstance(e, np.ndarray) for e in v):
            return [make(e) for e in v]
        return v

    a_args = [convert(v, lambda a: anvil.tensor(a, device=DEVICE)) for v in args]
    s_args = [convert(v, xs.asarray) for v in args]
    return getattr(xp, name)(*a_args, **kwargs), getattr(xs, name)(*s_args, **kwargs)


def skip_f64(dtype):
    if dtype == "float64" and not has_fp64():
        pytest.skip(f"{DEVICE} has no float64")


shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4)


def floats(dtype, lo, hi, shape=shapes):
    lo, hi = (float(np.dtype(dtype).type(v)) for v in (lo, hi))  # bounds the dtype holds
    return hnp.arrays(np.dtype(dtype), shape, elements=st.floats(lo, hi, width=np.dtype(dtype).itemsize * 8))


# --- the namespace and the array object ---------------------------------------------------


def test_namespace_version_and_array_attributes(dev):
    x = anvil.ones(2, 3, device=dev)
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2023.12") is xp
    assert xp.__array_api_version__ == "2023.12"
    with pytest.raises(ValueError, match="api_version"):
        x.__array_namespace__(api_version="2030.12")
    assert x.dtype == xp.float32 and x.device == dev and x.ndim == 2 and x.shape == (2, 3)
    assert x.mT.shape == (3, 2) and x.T.shape == (3, 2)
    a3, s3 = on(np.arange(24, dtype=np.int32).reshape(2, 3, 4))
    same(a3.T, xs.permute_dims(s3, (2, 1, 0)))
    same(a3.mT, s3.mT)
    assert x.to_device(dev).is_same(x)
    c = x.to_device("cpu")
    assert c.device == anvil.cpu() and c.tolist() == x.tolist()
    with pytest.raises(anvil.NotSupportedError, match="stream"):
        x.to_device(dev, stream=1)
    assert (xp.e, xp.pi, xp.inf, xp.newaxis) == (math.e, math.pi, math.inf, None) and math.isnan(xp.nan)


def test_import_anvil_alone_gives_the_namespace():
    code = "import anvil, sys; x = anvil.ones(2); assert x.__array_namespace__() is sys.modules['anvil.array_api']"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_inspection(dev):
    info = xp.__array_namespace_info__()
    assert info.capabilities() == {"boolean indexing": True, "data-dependent shapes": True}
    assert dev in info.devices() and anvil.cpu() in info.devices()
    assert info.default_device() == anvil.default_device()
    assert info.default_dtypes(device=dev) == {"real floating": xp.float32, "complex floating": None,
                                               "integral": xp.int64, "indexing": xp.int64}
    table = info.dtypes(device=dev)
    assert set(table) <= set(DTYPES) and set(table) >= set(DTYPES) - {"float64"}
    assert all(getattr(xp, n) == t for n, t in table.items())
    assert set(info.dtypes(device=dev, kind="integral")) == {"uint8", "int32", "int64"}
    assert set(info.dtypes(device=dev, kind="bool")) == {"bool"}


def test_missing_dtypes_and_float_bitwise_raise_typed_errors(dev):
    for name in ["int8", "int16", "uint16", "uint32", "uint64", "complex64", "complex128"]:
        assert not hasattr(xp, name)
        with pytest.raises(AttributeError, match=f"no {name}"):
            getattr(xp, name)
    x = anvil.ones(3, device=dev)
    with pytest.raises(anvil.DTypeError):
        xp.bitwise_and(x, x)
    with pytest.raises(anvil.DTypeError):
        xp.bitwise_left_shift(x, x)
    with pytest.raises(anvil.DTypeError):
        ~x


# --- data types ------------------------------------------------------------------------------


def test_promotion_table_result_type_and_can_cast(dev):
    names = [n for n in DTYPES if n != "float64" or has_fp64()]
    for n1 in names:
        for n2 in names:
            t1, t2 = getattr(xp, n1), getattr(xp, n2)
            s1, s2 = getattr(xs, n1), getattr(xs, n2)
            assert xp.can_cast(t1, t2) == xs.can_cast(s1, s2), (n1, n2)
            try:
                want = xs.result_type(s1, s2)
            except TypeError:
                continue  # mixed kinds: the standard leaves them to the library
            assert xp.result_type(t1, t2).name == str(want).split(".")[-1], (n1, n2)
            a, sa = on(np.ones(2, dtype=n1))
            b, sb = on(np.ones(2, dtype=n2))
            if n1 != "bool":
                same(xp.add(a, b), xs.add(sa, sb))
            same(xp.equal(a, b), xs.equal(sa, sb))


def test_finfo_iinfo_isdtype_astype(dev):
    for n in ["float32", "float64"]:
        f, g = xp.finfo(getattr(xp, n)), xs.finfo(getattr(xs, n))
        assert (f.bits, f.eps, f.max, f.min, f.smallest_normal) == (g.bits, g.eps, g.max, g.min, g.smallest_normal)
    for n in ["uint8", "int32", "int64"]:
        f, g = xp.iinfo(getattr(xp, n)), xs.iinfo(getattr(xs, n))
        assert (f.bits, f.max, f.min) == (g.bits, g.max, g.min)
    kinds = ["bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating",
             "numeric", ("bool", "real floating")]
    for n in DTYPES:
        for k in kinds:
            assert xp.isdtype(getattr(xp, n), k) == xs.isdtype(getattr(xs, n), k), (n, k)
    a, s = on(np.array([[-2.7, 0.0, 3.5]], dtype=np.float32))
    for n in ["int32", "int64", "uint8", "bool", "float32"] + (["float64"] if has_fp64() else []):
        if n == "uint8":
            a, s = on(np.array([[2.7, 0.0, 3.5]], dtype=np.float32))
        same(xp.astype(a, getattr(xp, n)), xs.astype(s, getattr(xs, n)))
    assert not xp.astype(a, xp.float32).is_same(a) and xp.astype(a, xp.float32, copy=False).is_same(a)


# --- creation -------------------------------------------------------------------------------------


def test_creation(dev):
    for args in [(5,), (2, 9, 3), (0, 1, 0.25), (10, 2, -3), (3, 3)]:
        same(xp.arange(*args, device=dev), xs.arange(*args, dtype=xs.float32 if any(
            isinstance(v, float) for v in args) else xs.int64))
    same(xp.arange(4, dtype=xp.float32, device=dev), xs.arange(4, dtype=xs.float32))
    for shape in [(2, 3), 4, (), (0, 2)]:
        for fn in ["zeros", "ones"]:
            same(getattr(xp, fn)(shape, device=dev), getattr(xs, fn)(shape, dtype=xs.float32))
            same(getattr(xp, fn)(shape, dtype=xp.int32, device=dev), getattr(xs, fn)(shape, dtype=xs.int32))
        assert xp.empty(shape, dtype=xp.uint8, device=dev).shape == xs.empty(shape).shape
        same(xp.full(shape, 7, device=dev), xs.full(shape, 7))
        same(xp.full(shape, True, device=dev), xs.full(shape, True))
        same(xp.full(shape, 2.5, dtype=xp.float32, device=dev), xs.full(shape, 2.5, dtype=xs.float32))
    a, s = on(np.arange(6, dtype=np.int32).reshape(2, 3))
    for fn in ["zeros_like", "ones_like"]:
        same(getattr(xp, fn)(a), getattr(xs, fn)(s))
        same(getattr(xp, fn)(a, dtype=xp.float32), getattr(xs, fn)(s, dtype=xs.float32))
    same(xp.full_like(a, 3), xs.full_like(s, 3))
    assert xp.empty_like(a).shape == (2, 3) and xp.empty_like(a).device == dev
    for n, m, k in [(3, None, 0), (3, 5, 1), (4, 2, -1), (2, 3, 5)]:
        same(xp.eye(n, m, k=k, device=dev), xs.eye(n, m, k=k, dtype=xs.float32))
    for k in [2**63, -2**63 - 1]:  # beyond int64, and beyond the corners: no diagonal
        assert xp.eye(2, 3, k=k, device=dev).tolist() == [[0.0] * 3] * 2
    for args, kw in [((0, 1, 5), {}), ((2, -3, 4), {"endpoint": False}), ((1, 1, 1), {}), ((0, 1, 0), {})]:
        same(xp.linspace(*args, device=dev, **kw), xs.linspace(*args, dtype=xs.float32, **kw), rtol=1e-6)
    # The last value is stop itself (start + 3 * step would end at 5.6e-17).
    for dtype in [xp.float32, xp.float64] if has_fp64() else [xp.float32]:
        assert xp.linspace(1.0, 0.0, 4, dtype=dtype, device=dev)[-1].item() == 0.0
    x1, s1 = on(np.array([1, 2, 3]))
    x2, s2 = on(np.array([4, 5]))
    for indexing in ["xy", "ij"]:
        same(xp.meshgrid(x1, x2, indexing=indexing), xs.meshgrid(s1, s2, indexing=indexing))
    m, sm = on(np.arange(12, dtype=np.float32).reshape(3, 4))
    for k in [-1, 0, 2]:
        same(xp.tril(m, k=k), xs.tril(sm, k=k))
        same(xp.triu(m, k=k), xs.triu(sm, k=k))


def test_asarray(dev):
    for obj in [[1, 2, 3], [[1.5, 2.0]], True, 3, 2.5, [[True, False]], []]:
        got = xp.asarray(obj, device=dev)
        want = xs.asarray(obj, dtype=xs.float32 if isinstance(obj, float) or obj == [[1.5, 2.0]] or obj == []
                          else None)
        same(got, want)
    same(xp.asarray([1, 2], dtype=xp.float32, device=dev), xs.asarray([1, 2], dtype=xs.float32))
    x = anvil.ones(3, device=dev)
    assert xp.asarray(x).is_same(x) and not xp.asarray(x, copy=True).is_same(x)
    assert xp.asarray(x, device=anvil.cpu()).device == anvil.cpu()
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray(x, dtype=xp.int32, copy=False)
    with pytest.raises(ValueError, match="copy=False"):
        xp.asarray([1, 2], copy=False)
    if dev == anvil.cpu():
        n = np.arange(3.0)
        t = xp.from_dlpack(n)
        n[0] = 7
        assert t.tolist()[0] == 7.0  # shares memory
    # __dlpack__'s 2023.12 keywords; dl_device (kDLCPU, 0) copies a device tensor to the host.
    y = xp.asarray([1.0, 2.0], device=dev)
    host_kw = [{"dl_device": (1, 0)}, {"dl_device": (1, 0), "copy": True, "max_version": (1, 0)}]
    for kw in host_kw + ([{}, {"max_version": (1, 0)}, {"copy": True}] if dev == anvil.cpu() else []):
        assert np.from_dlpack(_Exporter(y, kw)).tolist() == [1.0, 2.0]
    if dev == anvil.cpu():
        shared = np.from_dlpack(_Exporter(y, {"copy": False}))
        copied = np.from_dlpack(_Exporter(y, {"copy": True}))
        y[0] = 5.0
        assert shared[0] == 5.0 and copied[0] == 1.0
    else:
        with pytest.raises(BufferError, match="copy=False"):
            y.__dlpack__(dl_device=(1, 0), copy=False)
    with pytest.raises(BufferError, match="dl_device"):
        y.__dlpack__(dl_device=(9, 0))
    assert complex(xp.asarray(2.5, device=dev)) == 2.5 + 0j


class _Exporter:
    """Passes fixed __dlpack__ keywords through to an anvil tensor, as a consumer would."""

    def __init__(self, t, kw):
        self.t, self.kw = t, kw

    def __dlpack__(self, **_):
        return self.t.__dlpack__(**self.kw)

    def __dlpack_device__(self):
        return (1, 0)


# --- elementwise --------------------------------------------------------------------------------

# name, the domain the function is real on, and the tolerance for float32.
UNARY = [
    ("abs", -10, 10, None), ("negative", -10, 10, None), ("positive", -10, 10, None), ("exp", -20, 20, 4e-6),
    ("expm1", -5, 5, 4e-6), ("log", 1e-3, 1e3, 4e-6), ("log1p", -0.9, 100, 4e-6), ("log2", 1e-3, 1e3, 4e-6),
    ("log10", 1e-3, 1e3, 4e-6), ("sqrt", 0, 100, None), ("square", -100, 100, None), ("sin", -6, 6, 1e-5),
    ("cos", -6, 6, 1e-5), ("tan", -1.5, 1.5, 1e-5), ("tanh", -5, 5, 1e-5), ("sinh", -20, 20, 1e-5),
    ("cosh", -20, 20, 1e-5), ("asinh", -1e4, 1e4, 1e-5), ("acosh", 1, 1e4, 1e-5), ("atanh", -0.99, 0.99, 1e-5),
    ("ceil", -10, 10, None), ("floor", -10, 10, None), ("round", -10, 10, None), ("trunc", -10, 10, None),
    ("sign", -10, 10, None), ("signbit", -10, 10, None), ("isnan", -10, 10, None), ("isinf", -10, 10, None),
    ("isfinite", -10, 10, None), ("asin", -1, 1, 1e-5), ("acos", -1, 1, 1e-5), ("atan", -1e4, 1e4, 1e-5),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,lo,hi,rtol", UNARY, ids=[u[0] for u in UNARY])
def test_unary_floats(dev, name, lo, hi, rtol, dtype):
    skip_f64(dtype)

    @FAST
    @given(floats(dtype, lo, hi))
    def check(a):
        got, want = both(name, a)
        same(got, want, rtol=rtol if dtype == "float32" else 1e-10, atol=1e-30)

    check()


@pytest.mark.parametrize("name", ["abs", "negative", "square", "sign", "ceil", "floor", "round", "trunc",
                                  "isnan", "isinf", "isfinite", "positive"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_unary_integers(dev, name, dtype):
    a = np.array([[-7, 0, 3], [100, -1, 2]], dtype=dtype)
    same(*both(name, a))


@pytest.mark.filterwarnings("ignore::RuntimeWarning")  # NumPy's, for sqrt(-2.5)
def test_special_values(dev):
    v = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -2.5, 2.5, 0.5, -0.5], dtype=np.float32)
    for name in ["isnan", "isinf", "isfinite", "sign", "signbit", "abs", "round", "floor", "ceil", "trunc", "exp",
                 "sqrt", "tanh", "sinh", "cosh", "asinh", "atan"]:
        got, want = both(name, v)
        same(got, want, rtol=1e-6)
    same(*both("logical_not", np.array([True, False])))
    y, x = np.meshgrid(v[:6], v[:6])  # atan2 over every pair of NaN, +-inf, +-0, 1
    got, want = both("atan2", y, x)
    same(got, want, rtol=1e-6)
    assert (np.signbit(host(got)) == np.signbit(host(want)))[~np.isnan(host(want))].all()


def test_sign_bits_of_nan_and_zero(dev):
    """signbit and copysign read the sign bit itself, of -NaN and -0 too
    (array_api_strict is NumPy's: the same bits)."""
    v = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0], dtype=np.float32)
    assert np.signbit(v[1]) and not np.signbit(v[0])
    same(*both("signbit", v))
    got, want = both("copysign", np.full(8, 2.0, np.float32), v)
    same(got, want)
    assert (np.signbit(host(got)) == np.signbit(host(want))).all()
    got, want = both("copysign", v, v[::-1].copy())
    assert (np.signbit(host(got)) == np.signbit(host(want))).all()
    got = xp.asinh(anvil.tensor(np.array([-0.0, 0.0], np.float32), device=dev))
    assert list(np.signbit(host(got))) == [True, False]


BINARY = [("add", None), ("subtract", None), ("multiply", None), ("divide", 1e-6), ("maximum", None),
          ("minimum", None), ("equal", None), ("not_equal", None), ("less", None), ("less_equal", None),
          ("greater", None), ("greater_equal", None), ("hypot", 1e-6), ("logaddexp", 1e-6), ("copysign", None),
          ("floor_divide", None), ("remainder", 1e-6), ("atan2", 1e-6)]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name,rtol", BINARY, ids=[b[0] for b in BINARY])
def test_binary_floats_broadcast(dev, name, rtol, dtype):
    skip_f64(dtype)

    @FAST
    @given(hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, max_side=4), st.data())
    def check(shapes, data):
        el = st.floats(-50, 50, width=np.dtype(dtype).itemsize * 8).filter(lambda v: abs(v) > 1e-3)
        a = data.draw(hnp.arrays(np.dtype(dtype), shapes.input_shapes[0], elements=el))
        b = data.draw(hnp.arrays(np.dtype(dtype), shapes.input_shapes[1], elements=el))
        got, want = both(name, a, b)
        same(got, want, rtol=rtol if dtype == "float32" else 1e-12, atol=1e-5 if name == "remainder" else 0)

    check()


def test_floor_divide_and_remainder_exact(dev):
    # fl(1 / 0.1) rounds up to 10: the quotient must still be 9, as Python says.
    a, b = np.array([1.0, -1.0, 7.5, -7.5, 5.0, 0.0], np.float32), np.array([0.1, 0.1, 2.0, 2.0, -3.0, 3.0],
                                                                             np.float32)
    same(*both("floor_divide", a, b))
    same(*both("remainder", a, b), rtol=1e-6)
    if has_fp64():
        same(*both("floor_divide", a.astype(np.float64), b.astype(np.float64)))
    for dtype in ["int32", "int64", "uint8"]:
        lo = 0 if dtype == "uint8" else -100
        a = np.arange(lo, 100, 7).astype(dtype)
        b = np.array([3, 7, 10, 1] if dtype == "uint8" else [3, -7, 10, -1], dtype)
        for bb in b:
            same(*both("floor_divide", a, np.full_like(a, bb)))
            same(*both("remainder", a, np.full_like(a, bb)))
    big = np.array([2**62 + 12345, -(2**61) - 7, 2**53 + 1], np.int64)
    same(*both("floor_divide", big, np.array([3, 5, 2], np.int64)))
    same(*both("remainder", big, np.array([3, -5, 2], np.int64)))


@pytest.mark.parametrize("name", ["add", "subtract", "multiply", "maximum", "minimum", "equal", "less",
                                  "floor_divide", "remainder", "pow"])
@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
def test_binary_integers(dev, name, dtype):
    a = np.array([[1, 7, 9], [3, 0, 2]], dtype=dtype)
    b = np.array([2, 2, 1], dtype=dtype)  # no overflow in pow
    same(*both(name, a, b))


def test_python_scalars_take_the_array_dtype(dev):
    # array_api_strict takes Python scalars only in operators at 2023.12.
    ops = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul, "less": operator.lt,
           "equal": operator.eq, "greater_equal": operator.ge}
    for dtype, s in [("int32", 3), ("float32", 2.5), ("uint8", 2), ("float32", 2), ("int64", -4)]:
        a, sa = on(np.array([1, 2, 3], dtype=dtype))
        for name, op in ops.items():
            same(getattr(xp, name)(a, s), op(sa, s))
            same(op(a, s), op(sa, s))
            if name in ("add", "multiply"):
                same(getattr(xp, name)(s, a), op(s, sa))
    same(*both("logical_and", np.array([True, False]), np.array([[True], [False]])))
    for name in ["logical_and", "logical_or", "logical_xor", "bitwise_and", "bitwise_or", "bitwise_xor"]:
        same(*both(name, np.array([True, False, True, False]), np.array([True, True, False, False])))
    same(*both("bitwise_invert", np.array([True, False])))


def test_operators_of_the_array_object(dev):
    i, si = on(np.array([[7, -7, 0], [5, 9, -3]], np.int32))
    j, sj = on(np.array([2, -3, 4], np.int32))
    for op in [operator.floordiv, operator.mod, operator.add, operator.sub, operator.mul, operator.lt, operator.ne]:
        same(op(i, j), op(si, sj))
        same(op(i, 3), op(si, 3))
        same(op(7, j), op(7, sj))
    f, sf = on(np.array([1.0, -1.0, 7.5, -7.5], np.float32))
    same(f // 0.1, sf // 0.1)
    same(f % 2.0, sf % 2.0)
    m, sm = on(np.array([True, False, True, False]))
    n, sn = on(np.array([False, False, True, True]))
    for op in [operator.and_, operator.or_, operator.xor]:
        same(op(m, n), op(sm, sn))
    same(~m, ~sm)
    same(~i, ~si)
    u, su = on(np.array([0, 3, 255], np.uint8))
    same(~u, ~su)
    same(xp.bitwise_invert(i), xs.bitwise_invert(si))
    e, se = on(np.array([-(2**63), 2**63 - 1, 0], np.int64))
    same(~e, ~se)
    view = i[0]  # in place: a view sees the update
    i //= 2
    si //= 2
    same(i, si)
    same(view, si[0, ...])
    i %= 3
    si %= 3
    i **= 2
    si **= 2
    same(i, si)
    m &= n
    sm &= sn
    m |= ~n
    sm |= ~sn
    m ^= n
    sm ^= sn
    same(m, sm)


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64"])
def test_integer_bitwise_and_shifts(dev, dtype):
    info = np.iinfo(dtype)
    rng = np.random.default_rng(3)
    a = rng.integers(info.min, info.max, 12, dtype=dtype, endpoint=True)
    b = rng.integers(info.min, info.max, 12, dtype=dtype, endpoint=True)
    a[:3], b[:3] = [info.min, info.max, 0], [info.max, info.min, 1]
    for name in ["bitwise_and", "bitwise_or", "bitwise_xor"]:
        same(*both(name, a, b))
    shift = (np.arange(12) * info.bits // 12).astype(dtype)
    same(*both("bitwise_left_shift", a, shift))
    same(*both("bitwise_right_shift", a, shift))
    (x, sx), (y, sy) = on(a), on(b)
    same(x & y, sx & sy)
    same(x ^ 5, sx ^ 5)
    same(x << 1, sx << 1)
    same(x >> 2, sx >> 2)


def test_clip(dev):
    a = np.array([[-3.0, 0.5, 7.0], [2.0, -1.0, 9.0]], np.float32)
    same(*both("clip", a, min=-1.0, max=5.0))
    same(*both("clip", a, min=0.0))
    same(*both("clip", a, max=1.0))
    lo, slo = on(np.array([0.0, 1.0, 2.0], np.float32))
    x, sx = on(a)
    same(xp.clip(x, min=lo, max=6.0), xs.clip(sx, min=slo, max=6.0))
    same(*both("clip", np.array([1, 5, 9], np.int32), min=2, max=6))


# --- linear algebra ---------------------------------------------------------------------------


def test_linear_algebra(dev):
    rng = np.random.default_rng(0)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    for sa, sb in [((3, 4), (4, 5)), ((4,), (4, 2)), ((2, 3), (3,)), ((4,), (4,)), ((2, 1, 3, 4), (5, 4, 2))]:
        same(*both("matmul", r(*sa), r(*sb)), rtol=1e-5, atol=1e-5)
    same(*both("matrix_transpose", r(2, 3, 4)))
    same(*both("tensordot", r(2, 3, 4), r(3, 4, 5)), rtol=1e-5, atol=1e-5)
    same(*both("tensordot", r(2, 3, 4), r(4, 3, 5), axes=((1, 2), (1, 0))), rtol=1e-5, atol=1e-5)
    same(*both("tensordot", r(2, 3), r(4, 5), axes=0), rtol=1e-5, atol=1e-5)
    same(*both("vecdot", r(3, 4), r(4)), rtol=1e-5, atol=1e-5)
    same(*both("vecdot", r(3, 4), r(2, 1, 4), axis=-1), rtol=1e-5, atol=1e-5)
    same(*both("vecdot", r(4, 3), r(4, 3), axis=-2), rtol=1e-5, atol=1e-5)
    x, _ = on(r(3))
    with pytest.raises(anvil.ShapeError):
        xp.matrix_transpose(x)


def test_linalg_extension(dev):
    """xp.linalg's matrix-shaped half against array_api_strict's linalg."""
    rng = np.random.default_rng(1)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    la, ls = xp.linalg, xs.linalg

    def pair(name, *args, **kw):
        a_args = [anvil.tensor(a, device=dev) if isinstance(a, np.ndarray) else a for a in args]
        s_args = [xs.asarray(a) if isinstance(a, np.ndarray) else a for a in args]
        return getattr(la, name)(*a_args, **kw), getattr(ls, name)(*s_args, **kw)

    tol = dict(rtol=1e-5, atol=1e-5)
    same(*pair("matmul", r(2, 3, 4), r(4, 2)), **tol)
    same(*pair("matrix_transpose", r(2, 3, 4)))
    same(*pair("tensordot", r(2, 3), r(3, 4), axes=1), **tol)
    same(*pair("vecdot", r(3, 4), r(4)), **tol)
    same(*pair("outer", r(3), r(4)))
    same(*pair("outer", np.arange(3, dtype=np.int32), np.arange(2, dtype=np.int64)))
    m = r(2, 3, 4)
    for offset in [0, 1, -2, 5, -7]:
        same(*pair("diagonal", m, offset=offset))
        same(*pair("trace", m, offset=offset), **tol)
    same(*pair("trace", np.arange(9, dtype=np.int32).reshape(3, 3)))
    t = la.trace(anvil.tensor(np.arange(9, dtype=np.int32).reshape(3, 3), device=dev), dtype=xp.int32)
    assert t.dtype == xp.int32 and t.item() == 12
    for kw in [{}, {"ord": 1}, {"ord": np.inf}, {"ord": -np.inf}, {"ord": 0}, {"ord": 3}, {"ord": -1.5},
               {"axis": 1, "keepdims": True}, {"axis": (0, 2)}, {"keepdims": True}]:
        same(*pair("vector_norm", m, **kw), rtol=1e-5)
    for kw in [{}, {"ord": "fro", "keepdims": True}, {"ord": 1}, {"ord": -1}, {"ord": np.inf}, {"ord": -np.inf}]:
        same(*pair("matrix_norm", m, **kw), rtol=1e-5)
    with pytest.raises(anvil.NotSupportedError, match="SVD"):
        la.matrix_norm(anvil.tensor(m, device=dev), ord=2)
    same(*pair("cross", r(4, 3), r(3)), **tol)
    same(*pair("cross", r(3, 2), r(3, 2), axis=-2), **tol)
    same(*pair("cross", np.arange(6, dtype=np.int32).reshape(2, 3), np.ones(3, dtype=np.int32)))
    with pytest.raises(anvil.ShapeError):
        la.cross(anvil.tensor(r(4), device=dev), anvil.tensor(r(4), device=dev))
    for missing in ["cholesky", "det", "inv", "svd", "qr", "solve", "eigh"]:
        assert not hasattr(la, missing)


# --- manipulation ------------------------------------------------------------------------------


@FAST
@given(hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=3, min_side=0, max_side=4),
                  elements=st.integers(-100, 100)), st.data())
def test_manipulation(a, data):
    nd = a.ndim
    axis = data.draw(st.integers(-nd, nd - 1))
    axes = tuple(data.draw(st.permutations(range(nd))))
    same(*both("flip", a))
    same(*both("flip", a, axis=axis))
    same(*both("permute_dims", a, axes))
    same(*both("moveaxis", a, axis, 0))
    same(*both("expand_dims", a, axis=axis))
    same(*both("roll", a, 3))
    same(*both("roll", a, -2, axis=axis))
    same(*both("reshape", a, (-1,)))
    same(*both("concat", [a, a], axis=axis))
    same(*both("concat", [a, a], axis=None))
    same(*both("stack", [a, a], axis=axis))
    same(*both("unstack", a, axis=axis))
    same(*both("tile", a, (2,) + (1,) * (nd - 1)))
    same(*both("repeat", a, 2, axis=axis))
    same(*both("repeat", a, 2))
    same(*both("broadcast_to", a, (2,) + a.shape))
    same(*both("squeeze", np.expand_dims(a, 1), axis=1))


def test_manipulation_fixed(dev):
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    same(*both("repeat", a, np.array([1, 0, 3]), axis=1))
    same(*both("roll", a, (1, 2), axis=(0, 1)))
    same(*both("flip", a, axis=(0, 1)))
    same(*both("moveaxis", np.zeros((2, 3, 4), np.float32), (0, 1), (2, 0)))
    same(*both("broadcast_arrays", a, np.array([[1], [2]], np.int64)))
    same(*both("tile", a, (2, 1, 2)))
    same(*both("concat", [a.astype(np.int32), a], axis=1))  # promotes to int64
    x, _ = on(a)
    with pytest.raises(ValueError, match="size 3"):
        xp.squeeze(x, axis=1)
    with pytest.raises(anvil.ShapeError):
        xp.broadcast_to(x, (3, 3))
    assert xp.reshape(x, (3, 2), copy=False).shares_storage(x)
    assert not xp.reshape(x, (3, 2), copy=True).shares_storage(x)
    with pytest.raises(ValueError, match="copy=False"):
        xp.reshape(x.mT, (6,), copy=False)


# --- indexing, searching, sorting, sets --------------------------------------------------------


def test_take_and_searching(dev):
    a = np.array([[3.0, 1.0, 4.0, 1.0], [5.0, 9.0, 2.0, 9.0]], np.float32)
    same(*both("take", a, np.array([2, 0, 2]), axis=1))
    same(*both("take", a[0], np.array([3, 0])))
    same(*both("take", a, np.array([-1, 0, -4]), axis=1))  # negative indices count from the end
    # A boolean mask's dim is the array's or 0 (the standard's rule; 0 selects nothing).
    x = xp.asarray(a, device=dev)
    for shape in [(0,), (0, 4), (2, 0)]:
        assert x[xp.zeros(shape, dtype=xp.bool, device=dev)].shape == (0,) + a.shape[len(shape):]
    with pytest.raises(IndexError):
        x[xp.ones((3,), dtype=xp.bool, device=dev)]
    for kw in [{}, {"axis": 0}, {"axis": 1}, {"axis": -1, "keepdims": True}, {"keepdims": True}]:
        same(*both("argmax", a, **kw))
        same(*both("argmin", a, **kw))
    same(*both("nonzero", np.array([[0, 2, 0], [1, 0, 3]], np.int32)))
    same(*both("nonzero", np.array([True, False, True])))
    same(*both("nonzero", np.zeros((2, 0), np.float32)))
    c = np.array([[True, False, True, False], [False, True, True, False]])
    same(*both("where", c, a, np.zeros((1, 4), np.float32)))
    x, sx = on(a)
    same(xp.where(xp.asarray(c, device=dev), x, 0.0), xs.where(xs.asarray(c), sx, xs.asarray(0.0, dtype=xs.float32)))
    s = np.array([1.0, 2.0, 2.0, 3.0, np.nan], np.float32)
    v = np.array([[0.0, 2.0, 2.5], [3.0, 9.0, np.nan]], np.float32)
    for side in ["left", "right"]:
        same(*both("searchsorted", s, v, side=side))
    (x1, s1), (x2, s2), (order, sorder) = on(np.array([3, 1, 2])), on(np.array([2, 0])), on(np.array([1, 2, 0]))
    same(xp.searchsorted(x1, x2, sorter=order), xs.searchsorted(s1, s2, sorter=sorder))


@FAST
@given(hnp.arrays(np.float32, hnp.array_shapes(min_dims=1, max_dims=2, min_side=1, max_side=6),
                  elements=st.sampled_from([0.0, 1.0, -2.0, 3.5, np.inf, np.nan])), st.booleans())
def test_sort_and_argsort(a, descending):
    if descending and np.isnan(a).any():
        a = np.nan_to_num(a, nan=7.0)  # where descending puts NaNs the standard leaves open
    for axis in [-1, 0]:
        same(*both("sort", a, axis=axis, descending=descending))
        same(*both("argsort", a, axis=axis, descending=descending))


@FAST
@given(hnp.arrays(np.int32, hnp.array_shapes(min_dims=1, max_dims=2, min_side=0, max_side=6),
                  elements=st.integers(-3, 3)))
def test_unique(a):
    same(*both("unique_values", a))
    same(*both("unique_counts", a))
    same(*both("unique_inverse", a))
    same(*both("unique_all", a))


def test_unique_nans_are_distinct(dev):
    a = np.array([np.nan, 1.0, np.nan, 1.0], np.float32)
    same(*both("unique_values", a))
    same(*both("unique_counts", a))


# --- statistics, utility -------------------------------------------------------------------------

REDUCE_AXES = [None, 0, -1, (0, 1), ()]


@pytest.mark.parametrize("axis", REDUCE_AXES, ids=str)
def test_statistics(dev, axis):
    rng = np.random.default_rng(1)
    f = rng.standard_normal((3, 4)).astype(np.float32)
    i = rng.integers(-5, 5, (3, 4)).astype(np.int32)
    for keepdims in [False, True]:
        for name in ["max", "min", "mean", "sum", "prod"]:
            same(*both(name, f, axis=axis, keepdims=keepdims), rtol=1e-5)
        for name in ["max", "min", "sum", "prod"]:
            same(*both(name, i, axis=axis, keepdims=keepdims))
        for name in ["std", "var"]:
            for c in [0, 1, 0.5]:
                if axis == ():
                    continue  # a variance over no element: 0/0 on both, not worth a case
                same(*both(name, f, axis=axis, correction=c, keepdims=keepdims), rtol=1e-5)
        for name in ["all", "any"]:
            same(*both(name, i > 0, axis=axis, keepdims=keepdims))
            same(*both(name, f, axis=axis, keepdims=keepdims))


def test_sum_dtype_and_cumulative_sum(dev):
    i = np.arange(6, dtype=np.int32).reshape(2, 3)
    f = np.linspace(0, 1, 6, dtype=np.float32).reshape(2, 3)
    a, s = on(i)
    same(xp.sum(a, dtype=xp.float32), xs.sum(s, dtype=xs.float32))
    same(xp.prod(a, axis=1, dtype=xp.int64), xs.prod(s, axis=1, dtype=xs.int64))
    # A dtype narrower than the i64 accumulator: the result has it, wrapped as its arithmetic wraps.
    same(xp.sum(a, dtype=xp.int32), xs.sum(s, dtype=xs.int32))
    same(xp.prod(a + 1, axis=0, dtype=xp.int32), xs.prod(s + 1, axis=0, dtype=xs.int32))
    big, big_s = on(np.array([200, 100], np.uint8))
    same(xp.sum(big, dtype=xp.uint8), xs.sum(big_s, dtype=xs.uint8))  # 300 wraps to 44
    same(*both("vecdot", np.array([[1, 2], [3, 4]], np.int32), np.array([5, 6], np.int32)))
    for x in [i, f]:
        for kw in [{"axis": 0}, {"axis": 1, "include_initial": True}, {"axis": -1}]:
            same(*both("cumulative_sum", x, **kw), rtol=1e-6)
    same(*both("cumulative_sum", np.array([1, 2, 3], np.int64), include_initial=True))
    same(*both("all", np.zeros((0,), np.float32)))
    same(*both("any", np.zeros((0,), np.float32)))
    with pytest.raises(anvil.DTypeError):
        xp.mean(a)


# --- code written against the standard, as SciPy and scikit-learn write it --------------------


def kmeans_step(x, centroids):
    """One k-means step and a log-sum-exp, only through the namespace."""
    xp_ = x.__array_namespace__()
    d = xp_.sum((x[:, None, :] - centroids[None, :, :]) ** 2, axis=-1)
    labels = xp_.argmin(d, axis=1)
    k = centroids.shape[0]
    onehot = xp_.astype(labels[:, None] == xp_.arange(k, device=x.device)[None, :], x.dtype)
    counts = xp_.sum(onehot, axis=0)
    new = xp_.matmul(xp_.matrix_transpose(onehot), x) / xp_.clip(counts, min=1.0)[:, None]
    m = xp_.max(-d, axis=1, keepdims=True)
    lse = xp_.squeeze(m, axis=1) + xp_.log(xp_.sum(xp_.exp(-d - m), axis=1))
    values, sizes = xp_.unique_counts(labels)
    z = (x - xp_.mean(x, axis=0)) / xp_.std(x, axis=0, correction=1)
    inertia = xp_.sum(xp_.min(d, axis=1))
    far = xp_.nonzero(d[:, 0] > xp_.mean(d[:, 0]))[0]
    return new, lse, values, sizes, z, inertia, far, xp_.where(lse > 0, lse, xp_.zeros_like(lse))


def test_array_api_generic_code_runs_on_the_device(dev):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((20, 3)).astype(np.float32)
    c = x[:4].copy()
    got = kmeans_step(*on(x)[:1], *on(c)[:1])
    want = kmeans_step(xs.asarray(x), xs.asarray(c))
    for g, w in zip(got, want):
        same(g, w, rtol=1e-5, atol=1e-6)
