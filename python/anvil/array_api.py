"""anvil.array_api: the Python array API standard, version 2023.12, over anvil
tensors on every device (cpu, opencl:N, cuda:N). `x.__array_namespace__()`
returns this module, so code written against the standard (SciPy's and
scikit-learn's array-API paths) takes anvil tensors:

    xp = x.__array_namespace__()
    y = xp.sum(xp.exp(x), axis=-1)          # runs where x lives

Every function here is a composition of anvil's bound C++ ops (no op is
computed on the host); results stay on the inputs' device. What anvil lacks
(int8, int16, uint16/32/64, complex dtypes; bitwise ops on integers; asin,
acos, atan, atan2) raises a typed error naming the function, never a wrong
result. docs/python.md, "The array API standard", lists what is covered.
"""

import builtins as _builtins
import math as _math

from . import _anvil as _a
from ._anvil import Tensor as _Tensor

__array_api_version__ = "2023.12"
# Older versions ask for a subset of 2023.12's behaviour.
_VERSIONS = ("2021.12", "2022.12", "2023.12")

# --- data types and constants -------------------------------------------------
bool = _a.dtype.bool  # noqa: A001  (the standard's name)
uint8 = _a.dtype.uint8
int32 = _a.dtype.int32
int64 = _a.dtype.int64
float32 = _a.dtype.float32
float64 = _a.dtype.float64

e = _math.e
inf = _math.inf
nan = _math.nan
pi = _math.pi
newaxis = None

_MAX_DIMS = 8  # anvil's kMaxDims (include/anvil/shape.h)
_MISSING_DTYPES = ("int8", "int16", "uint16", "uint32", "uint64", "complex64", "complex128")
_ANVIL_DTYPES = "bool, uint8, int32, int64, float32, float64 (and float16, bfloat16 outside the standard)"


def __getattr__(name):
    if name in _MISSING_DTYPES:
        raise AttributeError(f"anvil.array_api: anvil has no {name}; its dtypes are {_ANVIL_DTYPES}; "
                             "__array_namespace_info__().dtypes() lists them")
    raise AttributeError(f"module 'anvil.array_api' has no attribute {name!r}")


_BOOL = (_a.dtype.bool,)
_UNSIGNED = (_a.dtype.uint8,)
_SIGNED = (_a.dtype.int32, _a.dtype.int64)
_INTEGRAL = _UNSIGNED + _SIGNED
_REAL_FLOATING = (_a.dtype.float32, _a.dtype.float64, _a.dtype.float16, _a.dtype.bfloat16)
# Bits of the significand (with the implicit one), for the exact splits below.


def _is_float(t):
    return t in _REAL_FLOATING


def _is_int(t):
    return t in _INTEGRAL


def _not_supported(fn, what):
    raise _a.NotSupportedError(f"{fn}: {what}")


# --- helpers: Python scalars, axes, devices -------------------------------------
def _check(x, fn):
    if not isinstance(x, _Tensor):
        raise TypeError(f"{fn}: expected an anvil tensor, got {type(x).__name__}")
    return x


def _scalar_like(s, like):
    """A 0-d tensor for a Python scalar operand, on `like`'s device: the
    standard's rule (a scalar takes the array's dtype when kinds agree)."""
    if isinstance(s, _builtins.bool):
        dtype = _a.dtype.bool if like.dtype == _a.dtype.bool else like.dtype
    elif isinstance(s, int):
        dtype = like.dtype if like.dtype != _a.dtype.bool else _a.dtype.int64
    elif isinstance(s, float):
        dtype = like.dtype if _is_float(like.dtype) else _a.dtype.float32
    else:
        raise TypeError(f"expected an anvil tensor or a Python bool, int or float, got {type(s).__name__}")
    return _a.full((), s, dtype=dtype, device=like.device)


def _pair(x1, x2, fn):
    t1, t2 = isinstance(x1, _Tensor), isinstance(x2, _Tensor)
    if t1 and t2:
        return x1, x2
    if t1:
        return x1, _scalar_like(x2, x1)
    if t2:
        return _scalar_like(x1, x2), x2
    raise TypeError(f"{fn}: at least one argument must be an anvil tensor, got {type(x1).__name__} and "
                    f"{type(x2).__name__}")


def _axes(axis, ndim, fn):
    """axis (None, an int or a tuple) as a sorted tuple of non-negative dims."""
    if axis is None:
        return tuple(range(ndim))
    items = axis if isinstance(axis, tuple) else (axis,)
    out = []
    for a in items:
        if not isinstance(a, int) or isinstance(a, _builtins.bool):
            raise TypeError(f"{fn}: axis must be an int or a tuple of ints, got {axis!r}")
        if not -ndim <= a < _builtins.max(ndim, 1) or (ndim == 0 and a not in (0, -1)):
            raise _a.IndexError(f"{fn}: axis {a} is out of range for a {ndim}-d array; expected -{ndim} <= axis < {ndim}")
        out.append(a % ndim if ndim else 0)
    if len(set(out)) != len(out):
        raise ValueError(f"{fn}: repeated axis in {axis!r}")
    return tuple(sorted(out))


def _reshape(x, shape):
    # The free function: Tensor.reshape(tuple) reads its argument without the GIL.
    return _a.reshape(x, tuple(shape))


def _shape(shape):
    return (shape,) if isinstance(shape, int) else tuple(shape)


def _float_of(x):
    """x itself if it is floating, else x as the default float (float32)."""
    return x if _is_float(x.dtype) else x.to(_a.dtype.float32)


def _where(c, a, b):
    return _a.where(c, a, b)


def _and(a, b):
    return _a.where(a, b, False)


def _or(a, b):
    return _a.where(a, True, b)


# --- the array object ---------------------------------------------------------------
# x.__array_namespace__(), x.to_device(), the operators //, %, &, |, ^, <<, >>,
# ~ and x.T are bound in python/src/array_api.cpp and call the functions here.
def _namespace(api_version):
    if api_version is not None and api_version not in _VERSIONS:
        raise ValueError(f"__array_namespace__: api_version {api_version!r} is not supported; expected one of "
                         f"{', '.join(_VERSIONS)} or None")
    import sys
    return sys.modules[__name__]


# --- inspection -------------------------------------------------------------------
class _Info:
    """__array_namespace_info__(): what this namespace supports, per device."""

    def capabilities(self):
        return {"boolean indexing": True, "data-dependent shapes": True}

    def default_device(self):
        return _a.default_device()

    def devices(self):
        return [_a.cpu()] + [d for d in _a.all_devices() if d.type != "cpu"]

    def default_dtypes(self, *, device=None):
        # anvil has no complex dtype: the key is there, its value None.
        return {"real floating": float32, "complex floating": None, "integral": int64, "indexing": int64}

    def dtypes(self, *, device=None, kind=None):
        d = _a.default_device() if device is None else _a.device(str(device))
        names = ["bool", "uint8", "int32", "int64", "float32", "float64"]
        if d.type != "cpu" and not d.properties().fp64:
            names.remove("float64")
        table = {n: getattr(_a.dtype, n) for n in names}
        if kind is None:
            return table
        return {n: t for n, t in table.items() if isdtype(t, kind)}


def __array_namespace_info__():
    return _Info()


# --- creation ------------------------------------------------------------------------
def _empty_nested(obj):
    while isinstance(obj, (list, tuple)):
        if len(obj) == 0:
            return True
        obj = obj[0]
    return False


def asarray(obj, /, *, dtype=None, device=None, copy=None):
    if isinstance(obj, _Tensor):
        out = obj
        if dtype is not None and out.dtype != dtype:
            if copy is False:
                raise ValueError(f"asarray: copy=False but {out.dtype} -> {dtype} needs a copy")
            out = out.to(dtype)
        if device is not None and out.device != device:
            if copy is False:
                raise ValueError(f"asarray: copy=False but {out.device} -> {device} needs a copy")
            out = out.to(device)
        if copy and out.is_same(obj):
            out = out.clone()
        return out
    if copy is False:
        if not hasattr(obj, "__dlpack__"):
            raise ValueError(f"asarray: copy=False but a {type(obj).__name__} must be copied into a tensor")
        return asarray(_a.from_dlpack(obj), dtype=dtype, device=device, copy=False)
    if dtype is None and isinstance(obj, (list, tuple)) and _empty_nested(obj):
        dtype = float32
    return _a.tensor(obj, dtype=dtype, device=device)


def empty(shape, *, dtype=None, device=None):
    return _a.empty(_shape(shape), dtype=dtype or float32, device=device)


def zeros(shape, *, dtype=None, device=None):
    return _a.zeros(_shape(shape), dtype=dtype or float32, device=device)


def ones(shape, *, dtype=None, device=None):
    return _a.ones(_shape(shape), dtype=dtype or float32, device=device)


def full(shape, fill_value, *, dtype=None, device=None):
    return _a.full(_shape(shape), fill_value, dtype=dtype, device=device)


def empty_like(x, /, *, dtype=None, device=None):
    return empty(x.shape, dtype=dtype or x.dtype, device=device or x.device)


def zeros_like(x, /, *, dtype=None, device=None):
    return zeros(x.shape, dtype=dtype or x.dtype, device=device or x.device)


def ones_like(x, /, *, dtype=None, device=None):
    return ones(x.shape, dtype=dtype or x.dtype, device=device or x.device)


def full_like(x, /, fill_value, *, dtype=None, device=None):
    return full(x.shape, fill_value, dtype=dtype or x.dtype, device=device or x.device)


def arange(start, /, stop=None, step=1, *, dtype=None, device=None):
    if stop is None:
        start, stop = 0, start
    if step == 0:
        raise ValueError("arange: step must not be 0")
    n = _builtins.max(0, _math.ceil((stop - start) / step))
    if n == 0:
        kind = float32 if _builtins.any(isinstance(v, float) for v in (start, stop, step)) else int64
        return _a.empty((0,), dtype=dtype or kind, device=device)
    return _a.arange(start, stop, step, dtype=dtype, device=device)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    n_cols = n_rows if n_cols is None else n_cols
    k = _builtins.max(-n_rows, _builtins.min(k, n_cols))  # past the corners: no diagonal (and no int64 overflow)
    rows = _reshape(_a.arange(n_rows, dtype=int64, device=device), (n_rows, 1))
    cols = _reshape(_a.arange(n_cols, dtype=int64, device=device), (1, n_cols))
    return _a.eq(rows + k, cols).to(dtype or float32)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    dtype = dtype or float32
    if num == 0:
        return _a.empty((0,), dtype=dtype, device=device)
    if not endpoint:
        return _a.linspace(start, stop, num + 1, dtype=dtype, device=device)[:num]
    return _a.linspace(start, stop, num, dtype=dtype, device=device)


def meshgrid(*arrays, indexing="xy"):
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    sizes = [a.numel() for a in arrays]
    if indexing == "xy" and len(arrays) > 1:
        sizes[0], sizes[1] = sizes[1], sizes[0]
    out = []
    for i, a in enumerate(arrays):
        axis = i
        if indexing == "xy" and len(arrays) > 1 and i < 2:
            axis = 1 - i
        view = [1] * len(arrays)
        view[axis] = a.numel()
        out.append(_reshape(a, view).expand(tuple(sizes)).contiguous())
    return out


def tril(x, /, *, k=0):
    return _a.tril(x, diagonal=k)


def triu(x, /, *, k=0):
    return _a.triu(x, diagonal=k)


def from_dlpack(x, /, *, device=None, copy=None):
    out = _a.from_dlpack(x)
    return asarray(out, device=device, copy=copy)


# --- data type functions -----------------------------------------------------------
def astype(x, dtype, /, *, copy=True, device=None):
    out = x if x.dtype == dtype else x.to(dtype)
    if device is not None:
        out = out.to(device)
    if copy and out.is_same(x):
        out = out.clone()
    return out


def _kind(t):
    return "b" if t in _BOOL else "i" if t in _INTEGRAL else "f"


def _dtype_of(v, fn):
    if isinstance(v, _Tensor):
        return v.dtype
    if isinstance(v, _a.dtype):
        return v
    raise TypeError(f"{fn}: expected an anvil tensor or dtype, got {type(v).__name__}")


def can_cast(from_, to, /):
    f = _dtype_of(from_, "can_cast")
    if _kind(f) != _kind(to):
        return False
    return _a.promote_types(f, to) == to


def result_type(*arrays_and_dtypes):
    if not arrays_and_dtypes:
        raise ValueError("result_type: at least one array or dtype is required")
    out = _dtype_of(arrays_and_dtypes[0], "result_type")
    for v in arrays_and_dtypes[1:]:
        out = _a.promote_types(out, _dtype_of(v, "result_type"))
    return out


class finfo_object:
    def __init__(self, bits, eps, max, min, smallest_normal, dtype):  # noqa: A002
        self.bits, self.eps, self.max, self.min = bits, eps, max, min
        self.smallest_normal, self.dtype = smallest_normal, dtype

    def __repr__(self):
        return f"finfo(dtype={self.dtype}, bits={self.bits}, eps={self.eps}, max={self.max})"


class iinfo_object:
    def __init__(self, bits, max, min, dtype):  # noqa: A002
        self.bits, self.max, self.min, self.dtype = bits, max, min, dtype

    def __repr__(self):
        return f"iinfo(dtype={self.dtype}, bits={self.bits}, min={self.min}, max={self.max})"


_F32_MAX = (2 - 2**-23) * 2.0**127
_BF16_MAX = (2 - 2**-7) * 2.0**127
_FINFO = {
    _a.dtype.float64: (64, 2.0**-52, 1.7976931348623157e308, 2.0**-1022),
    _a.dtype.float32: (32, 2.0**-23, _F32_MAX, 2.0**-126),
    _a.dtype.float16: (16, 2.0**-10, 65504.0, 2.0**-14),
    _a.dtype.bfloat16: (16, 2.0**-7, _BF16_MAX, 2.0**-126),
}
_IINFO = {_a.dtype.uint8: (8, 0, 255), _a.dtype.int32: (32, -(2**31), 2**31 - 1),
          _a.dtype.int64: (64, -(2**63), 2**63 - 1)}


def finfo(type, /):  # noqa: A002
    t = _dtype_of(type, "finfo")
    if t not in _FINFO:
        raise _a.DTypeError(f"finfo: expected a floating dtype, got {t}")
    bits, eps, mx, tiny = _FINFO[t]
    return finfo_object(bits, eps, mx, -mx, tiny, t)


def iinfo(type, /):  # noqa: A002
    t = _dtype_of(type, "iinfo")
    if t not in _IINFO:
        raise _a.DTypeError(f"iinfo: expected an integer dtype, got {t}")
    bits, lo, hi = _IINFO[t]
    return iinfo_object(bits, hi, lo, t)


_KINDS = {
    "bool": _BOOL,
    "signed integer": _SIGNED,
    "unsigned integer": _UNSIGNED,
    "integral": _INTEGRAL,
    "real floating": _REAL_FLOATING,
    "complex floating": (),
    "numeric": _INTEGRAL + _REAL_FLOATING,
}


def isdtype(dtype, kind):
    if not isinstance(dtype, _a.dtype):
        raise TypeError(f"isdtype: expected a dtype, got {type(dtype).__name__}")
    if isinstance(kind, tuple):
        return _builtins.any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, _a.dtype):
        return dtype == kind
    if kind not in _KINDS:
        raise ValueError(f"isdtype: unknown kind {kind!r}; expected a dtype or one of {', '.join(_KINDS)}")
    return dtype in _KINDS[kind]


# --- elementwise -----------------------------------------------------------------------
def abs(x, /):  # noqa: A001
    return _a.abs(x)


def negative(x, /):
    return _a.neg(x)


def positive(x, /):
    return _a.clone(x)


def exp(x, /):
    return _a.exp(x)


def expm1(x, /):
    return _a.expm1(x)


def log(x, /):
    return _a.log(x)


def log1p(x, /):
    return _a.log1p(x)


def log2(x, /):
    return _a.div(_a.log(x), _math.log(2.0))


def log10(x, /):
    return _a.div(_a.log(x), _math.log(10.0))


def sqrt(x, /):
    return _a.sqrt(x)


def square(x, /):
    return _a.square(x)


def sin(x, /):
    return _a.sin(x)


def cos(x, /):
    return _a.cos(x)


def tan(x, /):
    x = _float_of(x)
    return _a.div(_a.sin(x), _a.cos(x))


def tanh(x, /):
    return _a.tanh(x)


def cosh(x, /):
    return _a.cosh(_float_of(x))


def sinh(x, /):
    return _a.sinh(_float_of(x))


def asinh(x, /):
    return _a.asinh(_float_of(x))


def acosh(x, /):
    return _a.acosh(_float_of(x))


def atanh(x, /):
    return _a.atanh(_float_of(x))


def atan(x, /):
    return _a.atan(_float_of(x))


def asin(x, /):
    return _a.asin(_float_of(x))


def acos(x, /):
    return _a.acos(_float_of(x))


def atan2(x1, x2, /):
    y, x = _pair(x1, x2, "atan2")
    return _a.atan2(_float_of(y), _float_of(x))


def add(x1, x2, /):
    return _a.add(*_pair(x1, x2, "add"))


def subtract(x1, x2, /):
    return _a.sub(*_pair(x1, x2, "subtract"))


def multiply(x1, x2, /):
    return _a.mul(*_pair(x1, x2, "multiply"))


def divide(x1, x2, /):
    return _a.div(*_pair(x1, x2, "divide"))


def pow(x1, x2, /):  # noqa: A001
    return _a.pow(*_pair(x1, x2, "pow"))


def maximum(x1, x2, /):
    return _a.maximum(*_pair(x1, x2, "maximum"))


def minimum(x1, x2, /):
    return _a.minimum(*_pair(x1, x2, "minimum"))


def equal(x1, x2, /):
    return _a.eq(*_pair(x1, x2, "equal"))


def not_equal(x1, x2, /):
    return _a.ne(*_pair(x1, x2, "not_equal"))


def less(x1, x2, /):
    return _a.lt(*_pair(x1, x2, "less"))


def less_equal(x1, x2, /):
    return _a.le(*_pair(x1, x2, "less_equal"))


def greater(x1, x2, /):
    return _a.gt(*_pair(x1, x2, "greater"))


def greater_equal(x1, x2, /):
    return _a.ge(*_pair(x1, x2, "greater_equal"))


def _rounding(name, op):
    def f(x, /):
        return _a.clone(x) if not _is_float(x.dtype) else op(x)
    f.__name__ = name
    return f


ceil = _rounding("ceil", _a.ceil)
floor = _rounding("floor", _a.floor)
round = _rounding("round", _a.round)  # noqa: A001  (half to even)
trunc = _rounding("trunc", lambda x: _a.where(_a.lt(x, 0), _a.ceil(x), _a.floor(x)))


def isnan(x, /):
    return _a.isnan(x)


def isinf(x, /):
    return _a.isinf(x)


def isfinite(x, /):
    return _a.isfinite(x)


def sign(x, /):
    s = _a.sign(x)
    return _a.where(isnan(x), x, s) if _is_float(x.dtype) else s


def signbit(x, /):
    """The sign bit, of -0.0 and -NaN too (anvil's copysign carries it)."""
    if not _is_float(x.dtype):
        return _a.lt(x, 0)
    return _a.lt(_a.copysign(_a.ones((), dtype=x.dtype, device=x.device), x), 0)


def copysign(x1, x2, /):
    x1, x2 = _pair(x1, x2, "copysign")
    t = result_type(x1, x2)
    return _a.copysign(x1.to(t), x2.to(t))


def hypot(x1, x2, /):
    x1, x2 = _pair(x1, x2, "hypot")
    return _a.hypot(_float_of(x1), _float_of(x2))


def logaddexp(x1, x2, /):
    x1, x2 = _pair(x1, x2, "logaddexp")
    return _a.logaddexp(_float_of(x1), _float_of(x2))


def _divmod(x1, x2, fn):
    x1, x2 = _pair(x1, x2, fn)
    t = result_type(x1, x2)
    if t in _BOOL:
        raise _a.DTypeError(f"{fn}: expected numeric arrays, got {x1.dtype} and {x2.dtype}")
    return getattr(_a, fn)(x1.to(t), x2.to(t))


def floor_divide(x1, x2, /):
    return _divmod(x1, x2, "floor_divide")


def remainder(x1, x2, /):
    return _divmod(x1, x2, "remainder")


def _as_bool(x):
    return x if x.dtype == bool else x.to(bool)


def logical_not(x, /):
    return _a.logical_not(_as_bool(x))


def logical_and(x1, x2, /):
    x1, x2 = _pair(x1, x2, "logical_and")
    return _and(_as_bool(x1), _as_bool(x2))


def logical_or(x1, x2, /):
    x1, x2 = _pair(x1, x2, "logical_or")
    return _or(_as_bool(x1), _as_bool(x2))


def logical_xor(x1, x2, /):
    x1, x2 = _pair(x1, x2, "logical_xor")
    return _a.ne(_as_bool(x1), _as_bool(x2))


def _bitwise(fn):
    """anvil's bitwise op: bool and integer arrays (a float one is a DTypeError)."""
    op = getattr(_a, fn)

    def f(x1, x2, /):
        return op(*_pair(x1, x2, fn))

    f.__name__ = fn
    return f


bitwise_and = _bitwise("bitwise_and")
bitwise_or = _bitwise("bitwise_or")
bitwise_xor = _bitwise("bitwise_xor")
bitwise_left_shift = _bitwise("bitwise_left_shift")
bitwise_right_shift = _bitwise("bitwise_right_shift")


def bitwise_invert(x, /):
    if x.dtype == bool:
        return _a.logical_not(x)
    if x.dtype == uint8:
        return 255 - x
    if x.dtype in _SIGNED:
        return -x - 1  # two's complement; integer arithmetic wraps (~INT_MIN is INT_MAX)
    raise _a.DTypeError(f"bitwise_invert: expected a bool or integer array, got {x.dtype}")


def clip(x, /, min=None, max=None):  # noqa: A002
    out = x
    if min is not None:
        out = _a.maximum(out, min) if isinstance(min, _Tensor) else _a.clamp(out, min=min)
    if max is not None:
        out = _a.minimum(out, max) if isinstance(max, _Tensor) else _a.clamp(out, max=max)
    if out.is_same(x):
        out = _a.clone(x)
    return out if out.dtype == x.dtype else out.to(x.dtype)


# Real dtypes only: the real part is x, the imaginary part 0, the conjugate x.
def real(x, /):
    return _a.clone(x)


def imag(x, /):
    return _a.zeros(x.shape, dtype=x.dtype, device=x.device)


def conj(x, /):
    return _a.clone(x)


# --- linear algebra ------------------------------------------------------------------------
def matmul(x1, x2, /):
    if x1.ndim == 0 or x2.ndim == 0:
        raise _a.ShapeError(f"matmul: expected arrays of at least one dim, got shapes {list(x1.shape)} and "
                            f"{list(x2.shape)}")
    t = result_type(x1, x2)
    return _a.matmul(x1.to(t), x2.to(t))


def matrix_transpose(x, /):
    if x.ndim < 2:
        raise _a.ShapeError(f"matrix_transpose: expected at least 2 dims, got shape {list(x.shape)}")
    return x.mT


def tensordot(x1, x2, /, *, axes=2):
    if isinstance(axes, int):
        if axes < 0 or axes > _builtins.min(x1.ndim, x2.ndim):
            raise ValueError(f"tensordot: axes={axes} is out of range for shapes {list(x1.shape)}, {list(x2.shape)}")
        a1, a2 = list(range(x1.ndim - axes, x1.ndim)), list(range(axes))
    else:
        a1, a2 = [a % x1.ndim for a in axes[0]], [a % x2.ndim for a in axes[1]]
    free1 = [d for d in range(x1.ndim) if d not in a1]
    free2 = [d for d in range(x2.ndim) if d not in a2]
    k = 1
    for d1, d2 in zip(a1, a2):
        if x1.shape[d1] != x2.shape[d2]:
            raise _a.ShapeError(f"tensordot: contracted dims differ; x1 dim {d1} is {x1.shape[d1]}, x2 dim {d2} is "
                                f"{x2.shape[d2]}")
        k *= x1.shape[d1]
    if len(free1) + len(free2) > _MAX_DIMS:
        raise _a.ShapeError(f"tensordot: the result would have {len(free1) + len(free2)} dims; anvil's tensors have "
                            f"at most {_MAX_DIMS}")
    t = result_type(x1, x2)
    m = _math.prod(x1.shape[d] for d in free1)
    n = _math.prod(x2.shape[d] for d in free2)
    left = _reshape(_a.permute(x1.to(t), tuple(free1 + a1)), (m, k))
    right = _reshape(_a.permute(x2.to(t), tuple(a2 + free2)), (k, n))
    return _reshape(_a.matmul(left, right), tuple(x1.shape[d] for d in free1) + tuple(x2.shape[d] for d in free2))


def vecdot(x1, x2, /, *, axis=-1):
    if x1.shape[axis] != x2.shape[axis]:
        raise _a.ShapeError(f"vecdot: the dims along axis {axis} differ; x1 has {x1.shape[axis]}, x2 has "
                            f"{x2.shape[axis]}")
    x1, x2 = broadcast_arrays(x1, x2)
    return _a.sum(_a.mul(x1, x2), dim=axis, dtype=result_type(x1, x2))


# --- manipulation --------------------------------------------------------------------------
def broadcast_arrays(*arrays):
    shape = ()
    for a in arrays:
        shape = _a.broadcast_shapes(shape, a.shape)
    return [a if a.shape == shape else a.expand(shape) for a in arrays]


def broadcast_to(x, /, shape):
    shape = _shape(shape)
    if _a.broadcast_shapes(x.shape, shape) != shape:
        raise _a.ShapeError(f"broadcast_to: shape {list(x.shape)} cannot be broadcast to {list(shape)}")
    return x.expand(shape)


def _promoted(arrays, fn):
    if len(arrays) == 0:
        raise ValueError(f"{fn}: expected at least one array")
    t = result_type(*arrays)
    return [a if a.dtype == t else a.to(t) for a in arrays]


def concat(arrays, /, *, axis=0):
    arrays = _promoted(list(arrays), "concat")
    if axis is None:
        arrays, axis = [_reshape(a, (-1,)) for a in arrays], 0
    return _a.cat(arrays, axis)


def stack(arrays, /, *, axis=0):
    return _a.stack(_promoted(list(arrays), "stack"), axis)


def expand_dims(x, /, axis=0):
    if not -x.ndim - 1 <= axis <= x.ndim:
        raise _a.IndexError(f"expand_dims: axis {axis} is out of range for a {x.ndim}-d array")
    return _a.unsqueeze(x, axis)


def flip(x, /, *, axis=None):
    out = x
    for d in _axes(axis, x.ndim, "flip"):
        n = x.shape[d]
        out = _a.index_select(out, d, _a.arange(n - 1, -1, -1, dtype=int64, device=x.device)) if n > 1 else out
    return out if not out.is_same(x) else _a.clone(x)


def moveaxis(x, source, destination, /):
    src = _axes(source, x.ndim, "moveaxis") if isinstance(source, int) else tuple(a % x.ndim for a in source)
    dst = _axes(destination, x.ndim, "moveaxis") if isinstance(destination, int) else tuple(
        a % x.ndim for a in destination)
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of axes")
    order = [d for d in range(x.ndim) if d not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _a.permute(x, tuple(order))


def permute_dims(x, /, axes):
    return _a.permute(x, tuple(axes))


def reshape(x, /, shape, *, copy=None):
    shape = _shape(shape)
    if len(shape) > _MAX_DIMS:
        raise _a.ShapeError(f"reshape: anvil's tensors have at most {_MAX_DIMS} dims; expected a shape of at most "
                            f"{_MAX_DIMS} sizes, got {len(shape)}")
    out = _a.reshape(x, shape)
    if copy is False and x.numel() > 0 and not out.shares_storage(x):
        raise ValueError(f"reshape: copy=False but shape {list(x.shape)} -> {list(shape)} needs a copy")
    if copy and out.shares_storage(x):
        out = _a.clone(out)
    return out


def roll(x, /, shift, *, axis=None):
    if axis is None:
        return _reshape(roll(_reshape(x, (-1,)), shift, axis=0), x.shape)
    shifts = shift if isinstance(shift, tuple) else (shift,)
    axes = axis if isinstance(axis, tuple) else (axis,)
    if len(shifts) != len(axes):
        raise ValueError(f"roll: shift and axis must have the same length, got {shift!r} and {axis!r}")
    out = x
    for s, d in zip(shifts, axes):
        n = x.shape[d]
        if n == 0 or s % n == 0:
            continue
        k = s % n
        out = _a.cat([_a.narrow(out, d, n - k, k), _a.narrow(out, d, 0, n - k)], d)
    return out if not out.is_same(x) else _a.clone(x)


def squeeze(x, /, axis):
    dims = _axes(axis, x.ndim, "squeeze")
    for d in dims:
        if x.shape[d] != 1:
            raise ValueError(f"squeeze: axis {d} has size {x.shape[d]}; expected 1")
    return _a.squeeze(x, dims) if dims else x


def tile(x, repetitions, /):
    reps = tuple(repetitions)
    if len(reps) < x.ndim:
        reps = (1,) * (x.ndim - len(reps)) + reps
    if len(reps) > x.ndim:
        x = _reshape(x, (1,) * (len(reps) - x.ndim) + tuple(x.shape))
    return x.repeat(reps)


def unstack(x, /, *, axis=0):
    d = _axes(axis, x.ndim, "unstack")[0]
    return tuple(_a.select(x, d, i) for i in range(x.shape[d]))


def repeat(x, repeats, /, *, axis=None):
    if axis is None:
        x, axis = _reshape(x, (-1,)), 0
    n = x.shape[axis]
    if isinstance(repeats, int):
        if repeats < 0:
            raise ValueError(f"repeat: repeats must be non-negative, got {repeats}")
        index = _reshape(_reshape(_a.arange(n, dtype=int64, device=x.device), (n, 1)).expand((n, repeats)), (-1,))
    else:
        if repeats.ndim != 1 or repeats.shape[0] not in (1, n):
            raise _a.ShapeError(f"repeat: repeats must have shape [1] or [{n}], got {list(repeats.shape)}")
        if repeats.shape[0] == 1:
            return repeat(x, int(repeats.item()), axis=axis)
        ends = _a.cumsum(repeats.to(int64), 0)
        total = int(ends[-1].item()) if n else 0
        positions = _a.arange(total, dtype=int64, device=x.device)
        index = searchsorted(ends, positions, side="right")
    return _a.index_select(x, axis, index)


# --- indexing ------------------------------------------------------------------------------------
def take(x, indices, /, *, axis=None):
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"take: axis=None needs a 1-d array, got shape {list(x.shape)}")
        axis = 0
    n = x.shape[axis]
    indices = _a.where(_a.lt(indices, 0), indices + n, indices)  # -n <= i < 0 counts from the end
    return _a.index_select(x, axis, indices)


# --- searching -----------------------------------------------------------------------------------
def _arg(fn, op, x, axis, keepdims):
    if axis is None:
        out = op(_reshape(x, (-1,)), dim=0)
        return _reshape(out, (1,) * x.ndim) if keepdims else out
    return op(x, dim=axis, keepdim=keepdims)


def argmax(x, /, *, axis=None, keepdims=False):
    return _arg("argmax", _a.argmax, x, axis, keepdims)


def argmin(x, /, *, axis=None, keepdims=False):
    return _arg("argmin", _a.argmin, x, axis, keepdims)


def nonzero(x, /):
    if x.ndim == 0:
        raise ValueError("nonzero: a 0-d array has no positions; use reshape(x, (1,)) first")
    grids = [_reshape(_a.arange(n, dtype=int64, device=x.device), tuple(n if j == i else 1 for j in range(x.ndim)))
             .expand(tuple(x.shape)) for i, n in enumerate(x.shape)]
    coords = _a.stack(grids, -1)[_as_bool(x)]  # one read of the mask on the host
    return tuple(coords[:, i].contiguous() for i in range(x.ndim))


def where(condition, x1, x2, /):
    x1, x2 = _pair(x1, x2, "where")
    return _a.where(_as_bool(condition), x1, x2)


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    if x1.ndim != 1:
        raise _a.ShapeError(f"searchsorted: x1 must be 1-d, got shape {list(x1.shape)}")
    # anvil.searchsorted (C++): NaN sorts last, as in sort; the standard's sorter is any integer dtype.
    return _a.searchsorted(x1, x2, side=side, sorter=None if sorter is None else sorter.to(int64))


# --- sorting ------------------------------------------------------------------------------------
def sort(x, /, *, axis=-1, descending=False, stable=True):
    return _a.sort(x, axis, descending).values


def argsort(x, /, *, axis=-1, descending=False, stable=True):
    return _a.sort(x, axis, descending).indices


# --- sets ---------------------------------------------------------------------------------------
def _unique(x):
    """Sorted values, the first position of each, the inverse and the counts
    (anvil.unique: every NaN is a value of its own, as the standard says)."""
    values, inverse, counts = _a.unique(x, return_inverse=True, return_counts=True)
    # The first occurrence of each value: index_copy's last write wins, so
    # write the positions from the last to the first.
    flat = _reshape(inverse, (-1,)).flip(0)
    positions = _a.arange(flat.shape[0], dtype=int64, device=x.device).flip(0)
    first = _a.zeros((values.shape[0],), dtype=int64, device=x.device).index_copy(0, flat, positions)
    return values, first, inverse, counts


class UniqueAllResult(tuple):
    values = property(lambda s: s[0])
    indices = property(lambda s: s[1])
    inverse_indices = property(lambda s: s[2])
    counts = property(lambda s: s[3])


class UniqueCountsResult(tuple):
    values = property(lambda s: s[0])
    counts = property(lambda s: s[1])


class UniqueInverseResult(tuple):
    values = property(lambda s: s[0])
    inverse_indices = property(lambda s: s[1])


def unique_all(x, /):
    return UniqueAllResult(_unique(x))


def unique_counts(x, /):
    v, _, _, c = _unique(x)
    return UniqueCountsResult((v, c))


def unique_inverse(x, /):
    v, _, inv, _ = _unique(x)
    return UniqueInverseResult((v, inv))


def unique_values(x, /):
    return _unique(x)[0]


# --- statistics -------------------------------------------------------------------------------
def _reduce(fn, op, x, axis, keepdims, **kw):
    dims = _axes(axis, x.ndim, fn)
    if x.ndim > 0 and len(dims) == 0:  # axis=(): nothing to reduce
        return op(x.unsqueeze(0), dim=0, keepdim=False, **kw)
    if x.ndim == 0:
        return op(_reshape(x, (1,)), dim=0, keepdim=False, **kw)
    return op(x, dim=dims, keepdim=keepdims, **kw)


def _check_float(x, fn):
    if not _is_float(x.dtype):
        raise _a.DTypeError(f"{fn}: expected a floating-point array, got {x.dtype}")


def sum(x, /, *, axis=None, dtype=None, keepdims=False):  # noqa: A001
    return _reduce("sum", _a.sum, x, axis, keepdims, dtype=dtype)


def prod(x, /, *, axis=None, dtype=None, keepdims=False):
    return _reduce("prod", _a.prod, x, axis, keepdims, dtype=dtype)


def max(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _reduce("max", _a.amax, x, axis, keepdims)


def min(x, /, *, axis=None, keepdims=False):  # noqa: A001
    return _reduce("min", _a.amin, x, axis, keepdims)


def mean(x, /, *, axis=None, keepdims=False):
    _check_float(x, "mean")
    return _reduce("mean", _a.mean, x, axis, keepdims)


def var(x, /, *, axis=None, correction=0.0, keepdims=False):
    _check_float(x, "var")
    dims = _axes(axis, x.ndim, "var")
    n = _math.prod(x.shape[d] for d in dims)
    if float(correction) == int(correction):
        return _reduce("var", lambda t, dim, keepdim: _a.var(t, dim, keepdim, correction=int(correction)), x,
                       axis, keepdims)
    v0 = _reduce("var", lambda t, dim, keepdim: _a.var(t, dim, keepdim, correction=0), x, axis, keepdims)
    return v0 * (n / (n - correction) if n != correction else inf)


def std(x, /, *, axis=None, correction=0.0, keepdims=False):
    return _a.sqrt(var(x, axis=axis, correction=correction, keepdims=keepdims))


def cumulative_sum(x, /, *, axis=None, dtype=None, include_initial=False):
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"cumulative_sum: axis=None needs a 1-d array, got shape {list(x.shape)}")
        axis = 0
    d = _axes(axis, x.ndim, "cumulative_sum")[0]
    if dtype is not None and x.dtype != dtype:
        x = x.to(dtype)
    out = _a.cumsum(x, d)
    if dtype is not None and out.dtype != dtype:
        out = out.to(dtype)
    if include_initial:
        shape = list(out.shape)
        shape[d] = 1
        out = _a.cat([_a.zeros(tuple(shape), dtype=out.dtype, device=out.device), out], d)
    return out


# --- utility ------------------------------------------------------------------------------------
def all(x, /, *, axis=None, keepdims=False):  # noqa: A001
    falses = _a.logical_not(_as_bool(x)).to(int64)
    return _a.eq(_reduce("all", _a.sum, falses, axis, keepdims), 0)


def any(x, /, *, axis=None, keepdims=False):  # noqa: A001
    trues = _as_bool(x).to(int64)
    return _a.gt(_reduce("any", _a.sum, trues, axis, keepdims), 0)



# --- the linalg extension: its matrix-shaped half ------------------------------------------------
# What needs a factorisation (cholesky, det, eigh, inv, qr, solve, svd, ...,
# and matrix_norm's ord 2, -2 and 'nuc', which are singular values) is left
# out: anvil has no decomposition op, and the names are absent rather than
# wrong. Each function here composes anvil's ops on the input's device.
def _linalg_outer(x1, x2, /):
    if x1.ndim != 1 or x2.ndim != 1:
        raise _a.ShapeError(f"outer: expected two 1-d arrays, got shapes {list(x1.shape)} and {list(x2.shape)}")
    t = result_type(x1, x2)
    return _a.mul(_reshape(x1.to(t), (x1.shape[0], 1)), _reshape(x2.to(t), (1, x2.shape[0])))


def _linalg_diagonal(x, /, *, offset=0):
    if x.ndim < 2:
        raise _a.ShapeError(f"diagonal: expected at least 2 dims, got shape {list(x.shape)}")
    n, m = x.shape[-2], x.shape[-1]
    k = _builtins.max(0, _builtins.min(n + _builtins.min(offset, 0), m - _builtins.max(offset, 0)))
    i = _a.arange(k, dtype=int64, device=x.device)
    rows, cols = (i, i + offset) if offset >= 0 else (i - offset, i)
    return x[..., rows, cols] if k > 0 else _a.empty(tuple(x.shape[:-2]) + (0,), dtype=x.dtype, device=x.device)


def _linalg_trace(x, /, *, offset=0, dtype=None):
    return sum(_linalg_diagonal(x, offset=offset), axis=-1, dtype=dtype)


def _linalg_vector_norm(x, /, *, axis=None, keepdims=False, ord=2):  # noqa: A002
    _check_float(x, "vector_norm")
    if axis is None and x.ndim > 1:  # the flattened array; keepdims keeps every dim as 1
        out = _linalg_vector_norm(_reshape(x, (-1,)), axis=0, keepdims=False, ord=ord)
        return _reshape(out, (1,) * x.ndim) if keepdims else out
    a = _a.abs(x)
    if ord == inf:
        return max(a, axis=axis, keepdims=keepdims)
    if ord == -inf:
        return min(a, axis=axis, keepdims=keepdims)
    if ord == 0:
        return sum(_a.ne(x, 0).to(x.dtype), axis=axis, keepdims=keepdims)
    if ord == 1:
        return sum(a, axis=axis, keepdims=keepdims)
    if ord == 2:
        return _a.sqrt(sum(_a.square(a), axis=axis, keepdims=keepdims))
    return _a.pow(sum(_a.pow(a, float(ord)), axis=axis, keepdims=keepdims), 1.0 / ord)


def _linalg_matrix_norm(x, /, *, keepdims=False, ord="fro"):  # noqa: A002
    _check_float(x, "matrix_norm")
    if x.ndim < 2:
        raise _a.ShapeError(f"matrix_norm: expected at least 2 dims, got shape {list(x.shape)}")
    a = _a.abs(x)
    if ord == "fro":
        return _a.sqrt(sum(_a.square(a), axis=(-2, -1), keepdims=keepdims))
    if ord in (1, -1, inf, -inf):
        # 1: the largest column sum; inf: the largest row sum; negative: the smallest.
        sums = sum(a, axis=-2 if ord in (1, -1) else -1, keepdims=True)
        pick = max if ord > 0 else min
        out = pick(sums, axis=-1 if ord in (1, -1) else -2, keepdims=True)
        return out if keepdims else _reshape(out, x.shape[:-2])
    if ord in (2, -2, "nuc"):
        _not_supported("matrix_norm", f"ord={ord!r} needs the singular values, and anvil has no SVD; "
                                      "ord='fro', 1, -1, inf and -inf are supported")
    raise ValueError(f"matrix_norm: ord must be 'fro', 'nuc', 1, -1, 2, -2, inf or -inf, got {ord!r}")


def _linalg_cross(x1, x2, /, *, axis=-1):
    if x1.shape[axis] != 3 or x2.shape[axis] != 3:
        raise _a.ShapeError(f"cross: expected size 3 along axis {axis}, got shapes {list(x1.shape)} and "
                            f"{list(x2.shape)}")
    if axis >= 0:
        raise ValueError(f"cross: axis must be negative (counted from the end of the broadcast shape), got {axis}")
    x1, x2 = broadcast_arrays(*_promoted([x1, x2], "cross"))
    d = x1.ndim + axis

    def part(v, i):
        return _a.select(v, d, i)

    a0, a1, a2 = part(x1, 0), part(x1, 1), part(x1, 2)
    b0, b1, b2 = part(x2, 0), part(x2, 1), part(x2, 2)
    return _a.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], d)


def _linalg_namespace():
    import types
    ns = types.ModuleType(__name__ + ".linalg", "The linalg extension's matrix-shaped half (see above).")
    for name, f in [("matmul", matmul), ("matrix_transpose", matrix_transpose), ("tensordot", tensordot),
                    ("vecdot", vecdot), ("outer", _linalg_outer), ("diagonal", _linalg_diagonal),
                    ("trace", _linalg_trace), ("vector_norm", _linalg_vector_norm),
                    ("matrix_norm", _linalg_matrix_norm), ("cross", _linalg_cross)]:
        setattr(ns, name, f)
    return ns


linalg = _linalg_namespace()
