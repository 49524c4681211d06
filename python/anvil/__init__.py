"""anvil for Python: the C++ library anvil (tensors on CPU, CUDA and OpenCL
devices, autograd, nn, optim, data) bound by nanobind, with PyTorch's names
where they exist. docs/python.md lists where anvil differs.

    import anvil
    x = anvil.ones(2, 3, device=anvil.try_gpu())
    y = (x + 2).exp() * x
"""

import contextlib as _contextlib

from . import _anvil
from ._anvil import (  # noqa: F401  (re-exported)
    Error, ShapeError, DTypeError, DeviceMismatchError, DeviceError, IndexError, ValueError,
    NotSupportedError, NotCompiledError, OutOfMemoryError, BackendError, IOError, CompileError, ImplicitSyncError,
    SyncGuard, SyncDebugMode, sync_debug_mode, set_sync_debug_mode,
    DeviceType, device, DeviceProperties, device_scope, dtype, memory_format, contiguous_format, channels_last,
    preserve_format, Tensor, ValuesIndices, MemoryStats,
    cpu, gpu, try_gpu, try_gpu_reason, try_all_gpus, gpu_count, device_count, device_unavailable_reason,
    all_devices, default_device, synchronize, promote_types, set_num_threads, get_num_threads,
    memory_stats, reset_peak_memory_stats, empty_cache, set_memory_limit,
    empty, zeros, ones, rand, randn, full, arange, linspace, eye, randint, manual_seed, tensor, from_dlpack,
    from_numpy, empty_like, zeros_like, ones_like, full_like, rand_like, randn_like, randint_like, scalar_tensor,
    t, contiguous, clone,
    matmul, mm, bmm, dot, outer, addmm, baddbmm, clamp, where, masked_fill, tril, triu,
    sum, mean, prod, amax, amin, max, min, argmax, argmin, cumsum, sort, topk, searchsorted, unique, var, std, norm,
    logsumexp,
    softmax, log_softmax, reshape, transpose, permute, narrow, select, squeeze, unsqueeze, flatten,
    index_select, gather, index_add, scatter_add, index_copy, flip, cat, stack, split, chunk, broadcast_shapes, as_strided,
    allclose, equal, set_printoptions, is_grad_enabled, set_grad_enabled,
    save, load, save_npy, load_npy, ledger, LedgerReport, ledger_totals,
)

# The elementwise ops of one tensor, one per row of the op table (anvil/ops.def):
# anvil.neg, abs, exp, log, …, sinh, cosh, asinh, acosh, atanh.
globals().update({_name: getattr(_anvil, _name) for _name in _anvil._table_ops if _name})
# And those of two operands: anvil.add, sub, …, atan2, hypot, floor_divide, bitwise_and, ….
globals().update({_name: getattr(_anvil, _name) for _name in _anvil._binary_ops if _name})

__version__ = "0.1.0"

# dtypes by PyTorch's names.
bool = dtype.bool  # noqa: A001  (torch.bool)
uint8 = dtype.uint8
int32 = dtype.int32
int64 = dtype.int64
float32 = dtype.float32
float64 = dtype.float64
float16 = dtype.float16
bfloat16 = dtype.bfloat16
int = int32  # noqa: A001  (torch.int)
long = int64
float = float32  # noqa: A001  (torch.float)
double = float64
half = float16

class no_grad(_contextlib.ContextDecorator):
    """Disables gradient recording in its scope: `with anvil.no_grad():` or
    `@anvil.no_grad()` on a function (torch.no_grad)."""

    def __enter__(self):
        self._prev = _anvil.is_grad_enabled()
        _anvil.set_grad_enabled(False)
        return self

    def __exit__(self, *exc):
        _anvil.set_grad_enabled(self._prev)
        return False


class enable_grad(_contextlib.ContextDecorator):
    """Enables gradient recording in its scope (torch.enable_grad)."""

    def __enter__(self):
        self._prev = _anvil.is_grad_enabled()
        _anvil.set_grad_enabled(True)
        return self

    def __exit__(self, *exc):
        _anvil.set_grad_enabled(self._prev)
        return False


def inference_mode():
    """torch.inference_mode: here the same as no_grad()."""
    return no_grad()


from . import nn as nn  # noqa: E402,F811  (the Python layer over _anvil.nn)
from . import optim as optim  # noqa: E402,F811
from . import data as data  # noqa: E402,F811
from . import amp as amp  # noqa: E402,F811
from . import autograd as autograd  # noqa: E402,F811
from . import dist as dist  # noqa: E402,F811
from . import profiler as profiler  # noqa: E402,F811
from . import array_api as array_api  # noqa: E402,F811  (x.__array_namespace__(): the array API standard)
