"""anvil.searchsorted and anvil.unique (C++ ops, torch's Python signatures) against
NumPy on the suite's device: values, dtypes, the tuple torch.unique returns, errors."""

import numpy as np
import pytest

import anvil

NAN = float("nan")


def values(t):
    return np.asarray(t.cpu().tolist())


@pytest.mark.parametrize("dt", [anvil.float32, anvil.int64, anvil.int32])
def test_searchsorted_vs_numpy(dev, dt):
    rng = np.random.default_rng(3)
    seq = np.sort(rng.integers(0, 9, 20))
    v = rng.integers(-1, 11, (3, 4))
    s = anvil.tensor(seq.tolist(), dtype=dt, device=dev)
    x = anvil.tensor(v.tolist(), dtype=dt, device=dev)
    for side in ("left", "right"):
        got = anvil.searchsorted(s, x, side=side)
        assert got.dtype == anvil.int64 and got.device == dev and tuple(got.shape) == (3, 4)
        np.testing.assert_array_equal(values(got), np.searchsorted(seq, v, side=side))
    np.testing.assert_array_equal(values(anvil.searchsorted(s, x, right=True)), np.searchsorted(seq, v, "right"))
    assert anvil.searchsorted(s, x, out_int32=True).dtype == anvil.int32
    # A Python number: a 0-dim result, as torch.searchsorted(seq, 4).
    assert anvil.searchsorted(s, 4).item() == np.searchsorted(seq, 4)


def test_searchsorted_batched_and_sorter(dev):
    # PyTorch 1.13's answers.
    b = anvil.tensor([[1.0, 3, 5], [2, 4, 6]], device=dev)
    bv = anvil.tensor([[3.0, 6], [0, 7]], device=dev)
    assert anvil.searchsorted(b, bv).tolist() == [[1, 3], [0, 3]]
    assert anvil.searchsorted(b, bv, side="right").tolist() == [[2, 3], [0, 3]]
    u = anvil.tensor([5.0, 1, 7, 2, 2, 2], device=dev)
    order = anvil.tensor([1, 3, 4, 5, 0, 2], device=dev)
    v = anvil.tensor([0.0, 2, 3, 8], device=dev)
    assert anvil.searchsorted(u, v, sorter=order).tolist() == [0, 1, 4, 6]
    assert anvil.searchsorted(u, v, sorter=order, right=True).tolist() == [0, 4, 4, 6]


def test_searchsorted_nan_sorts_last(dev):
    s = anvil.tensor([1.0, 2, NAN, NAN], device=dev)
    v = anvil.tensor([NAN, 2.0, 3.0], device=dev)
    assert anvil.searchsorted(s, v).tolist() == [2, 1, 2]
    assert anvil.searchsorted(s, v, side="right").tolist() == [4, 2, 2]


def test_searchsorted_errors(dev):
    s = anvil.tensor([1.0, 2, 3], device=dev)
    v = anvil.tensor([2.0], device=dev)
    with pytest.raises(ValueError, match="searchsorted: side must be"):
        anvil.searchsorted(s, v, side="middle")
    with pytest.raises(ValueError, match="opposites"):
        anvil.searchsorted(s, v, right=True, side="left")
    with pytest.raises(anvil.ShapeError, match="searchsorted"):
        anvil.searchsorted(anvil.zeros((2, 3), device=dev), anvil.zeros((3, 1), device=dev))
    with pytest.raises(anvil.DTypeError, match="searchsorted: sorter must be i64"):
        anvil.searchsorted(s, v, sorter=anvil.tensor([0, 1, 2], dtype=anvil.int32, device=dev))


def test_unique_returns_as_torch(dev):
    x = anvil.tensor([[3, 1, 2], [1, 3, 3]], device=dev)
    only = anvil.unique(x)
    assert isinstance(only, anvil.Tensor) and only.tolist() == [1, 2, 3]
    values_, inverse = anvil.unique(x, return_inverse=True)
    assert inverse.tolist() == [[2, 0, 1], [0, 2, 2]]
    values_, counts = anvil.unique(x, return_counts=True)
    assert counts.tolist() == [2, 1, 3]
    values_, inverse, counts = x.unique(sorted=True, return_inverse=True, return_counts=True)
    assert values_.device == dev and values_.tolist() == [1, 2, 3]
    rows = anvil.tensor([[1, 3], [0, 9], [1, 2], [0, 9]], device=dev)
    v, i, c = anvil.unique(rows, dim=0, return_inverse=True, return_counts=True)
    assert v.tolist() == [[0, 9], [1, 2], [1, 3]] and i.tolist() == [2, 0, 1, 0] and c.tolist() == [2, 1, 1]


def test_unique_vs_numpy_and_nans(dev):
    rng = np.random.default_rng(4)
    a = rng.integers(0, 6, 50).astype(np.float32)
    v, i, c = anvil.unique(anvil.tensor(a.tolist(), device=dev), return_inverse=True, return_counts=True)
    wv, wi, wc = np.unique(a, return_inverse=True, return_counts=True)
    np.testing.assert_array_equal(values(v), wv)
    np.testing.assert_array_equal(values(i), wi.reshape(-1))
    np.testing.assert_array_equal(values(c), wc)
    # Every NaN is its own value (the array API; np.unique(equal_nan=False)).
    v, c = anvil.unique(anvil.tensor([NAN, 1.0, NAN], device=dev), return_counts=True)
    np.testing.assert_array_equal(values(v), [1.0, NAN, NAN])
    assert c.tolist() == [1, 1, 1]


def test_unique_errors(dev):
    with pytest.raises(IndexError, match="unique"):
        anvil.unique(anvil.zeros((2, 2), device=dev), dim=2)
    with pytest.raises(ValueError, match="unique: the slices along dim 0 are empty"):
        anvil.unique(anvil.zeros((2, 0), device=dev), dim=0)
