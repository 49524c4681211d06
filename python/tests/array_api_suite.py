"""The Python array API standard's own test suite (data-apis/array-api-tests)
against anvil.array_api, on one device: ctest's python_array_api_cpu (every
module) and python_array_api_opencl0 (a sample of them).

    array_api_suite.py SUITE_DIR WORK_DIR [pytest arguments...]

SUITE_DIR is the suite's checkout (PROVENANCE.md beside it says which); it may
be read-only, so it is copied afresh to WORK_DIR, where pytest runs and writes.
ANVIL_TEST_DEVICE picks the device, as for python/tests: the suite's arrays
are made on it (anvil.device_scope). Hypothesis is derandomized (each test
draws the same examples every run) and keeps no database, so a run is
repeatable; the example count comes from --max-examples.

Left out, each as a skip with its reason, never a hidden failure:
  - the complex special cases (ids with real(x_i) / imag(x_i)) and complex
    dtypes (ARRAY_API_TESTS_SKIP_DTYPES): anvil has no complex dtype;
  - the extension names of an extension disabled with --disable-extension
    (the suite's test_has_names ignores that option);
  - the linalg functions anvil.array_api.linalg lacks (the factorisations:
    cholesky, det, eigh, inv, qr, solve, svd, ...), and test_matrix_norm,
    whose ord 2, -2 and 'nuc' are singular values (its other ords are held to
    array_api_strict by python/tests/test_array_api.py).
The suite's reshape strategy draws up to 32 dims; anvil's tensors have at most
8 (kMaxDims), so the plugin below caps that draw (anvil.array_api.reshape
raises a ShapeError past 8, as tensordot does for a result past 8).
"""

import os
import shutil
import sys

import pytest

_COMPLEX_CASE_MARKERS = ("real(x_i)", "imag(x_i)", "real(x1_i)", "imag(x1_i)", "real(x2_i)", "imag(x2_i)")
_EXTENSIONS = ("linalg", "fft")


def _device():
    import anvil
    return anvil.device(os.environ.get("ANVIL_TEST_DEVICE", "cpu"))


_scope = None


@pytest.hookimpl(trylast=True)
def pytest_configure(config):
    """After the suite's own pytest_configure (its hypothesis profile from the
    command line): the same profile without a database. The suite's arrays
    are made on ANVIL_TEST_DEVICE: a missing device skips every test, or fails
    the run when ANVIL_REQUIRE_DEVICES names its type (python/tests/conftest.py's
    rule)."""
    global _scope
    from hypothesis import settings
    settings.register_profile("anvil", parent=settings.get_profile("array-api-tests"), database=None)
    settings.load_profile("anvil")
    import anvil
    d = _device()
    if d.type != "cpu" and d not in anvil.all_devices():
        return
    _scope = anvil.device_scope(d)
    _scope.__enter__()
    import anvil.array_api as xp
    made = xp.asarray([1.0]).device
    if made != d:
        raise pytest.UsageError(f"array_api_suite: arrays are made on {made}, not ANVIL_TEST_DEVICE={d}")
    # anvil's kMaxDims: reshape targets of at most 8 dims (the suite draws up to 32).
    from hypothesis import strategies as st
    from array_api_tests import hypothesis_helpers as hh
    draw_shapes = hh.reshape_shapes
    hh.reshape_shapes = lambda arr_shape, ndims=st.integers(1, xp._MAX_DIMS): draw_shapes(arr_shape, ndims)


def pytest_unconfigure(config):
    if _scope is not None:
        _scope.__exit__(None, None, None)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    import anvil
    d = _device()
    if d.type != "cpu" and d not in anvil.all_devices():
        required = os.environ.get("ANVIL_REQUIRE_DEVICES", "")
        if d.type in required.split(","):
            raise pytest.UsageError(f"ANVIL_REQUIRE_DEVICES={required} but {d} is missing")
        for item in items:
            item.add_marker(pytest.mark.skip(reason=f"{d} is not available"))
        return
    import anvil.array_api as xp
    disabled = set(config.getoption("--disable-extension"))
    complex_case = pytest.mark.skip(reason="a complex special case: anvil has no complex dtypes")
    for item in items:
        name = item.nodeid.split("::", 1)[-1]
        if any(m in name for m in _COMPLEX_CASE_MARKERS) or name == "test_vecdot_conj":
            item.add_marker(complex_case)
        elif name.startswith("test_has_names[") and name[len("test_has_names["):].split("-", 1)[0] in disabled:
            item.add_marker(pytest.mark.skip(reason="the extension is disabled (--disable-extension)"))
        elif "linalg" not in disabled and name.startswith("test_matrix_norm"):
            item.add_marker(pytest.mark.skip(reason="matrix_norm's ord 2, -2 and 'nuc' are singular values, and anvil "
                                                    "has no SVD (its other ords: python/tests/test_array_api.py)"))
        elif "linalg" not in disabled and _linalg_missing(xp, item, name):
            item.add_marker(pytest.mark.skip(reason=f"anvil.array_api.linalg has no {_linalg_missing(xp, item, name)}"
                                                    " (a factorisation: anvil has none)"))


def _linalg_missing(xp, item, name):
    """The linalg function a test is about, when anvil.array_api.linalg lacks it."""
    if name.startswith("test_has_names[linalg-"):
        fn = name[len("test_has_names[linalg-"):-1]
    elif name.startswith("test_extension_func_signature[linalg."):
        fn = name[len("test_extension_func_signature[linalg."):-1]
    elif item.get_closest_marker("xp_extension") is not None and item.nodeid.startswith(
            "array_api_tests/test_linalg.py"):
        fn = name.split("[", 1)[0].removeprefix("test_").removeprefix("linalg_")
    else:
        return None
    return None if hasattr(xp.linalg, fn) else fn


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__)
    suite, work = argv[1], argv[2]
    copy = os.path.join(work, "array-api-tests")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(suite, copy, ignore=shutil.ignore_patterns(".hypothesis", ".pytest_cache", "__pycache__", ".git"))
    os.chdir(copy)
    sys.path.insert(0, copy)
    os.environ.setdefault("ARRAY_API_TESTS_MODULE", "anvil.array_api")
    os.environ.setdefault("ARRAY_API_TESTS_SKIP_DTYPES", "complex64,complex128")
    # The test paths first: the suite's --disable-extension takes every word after it.
    paths = [a for a in argv[3:] if a.startswith("array_api_tests")] or ["array_api_tests"]
    options = [a for a in argv[3:] if not a.startswith("array_api_tests")]
    args = paths + ["-p", "no:cacheprovider", "--hypothesis-derandomize", "--hypothesis-disable-deadline"] + options
    try:
        return pytest.main(args, plugins=[sys.modules[__name__]])
    finally:
        _drop_hypothesis_gc_callback()


def _drop_hypothesis_gc_callback():
    """Hypothesis times the garbage collector with a callback it puts in
    gc.callbacks (hypothesis.internal.conjecture.junkdrawer.gc_cumulative_time),
    and CPython (3.11) releases gc.callbacks only after its last collection at
    exit. Through the callback's module globals the whole of hypothesis stays
    reachable then, with its caches and the strategies the suite built at
    import, so their values were never freed: the anvil.device objects of
    test_inspection_functions' sampled_from(__array_namespace_info__().devices()),
    which nanobind then reported as leaked (with their type and its methods).
    The same happens to any object a strategy holds, anvil's or not, and
    without the callback every one of them is freed at exit. The session is
    over here, so the callback has no more use."""
    import gc
    gc.callbacks[:] = [cb for cb in gc.callbacks
                       if getattr(cb, "__module__", None) != "hypothesis.internal.conjecture.junkdrawer"]
    junkdrawer = sys.modules.get("hypothesis.internal.conjecture.junkdrawer")
    if junkdrawer is not None and hasattr(junkdrawer, "_gc_initialized"):
        junkdrawer._gc_initialized = False  # a later hypothesis run would register it again


if __name__ == "__main__":
    sys.exit(main(sys.argv))
