"""Channels-last from Python, as PyTorch spells it: memory_format keywords,
the strides torch gives the same shape, and a module laid out channels-last
computing what the NCHW one computes, on the suite's device."""

import numpy as np
import pytest

import anvil
from anvil import nn

from conftest import DEVICE

torch = pytest.importorskip("torch")


def test_strides_and_predicates_match_torch():
    x = anvil.randn(2, 3, 4, 5, device=DEVICE)
    y = x.contiguous(memory_format=anvil.channels_last)
    t = torch.empty(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    assert y.stride() == t.stride()
    assert y.is_contiguous(memory_format=anvil.channels_last) and not y.is_contiguous()
    assert x.is_contiguous(memory_format=anvil.contiguous_format)
    assert y.contiguous(memory_format=anvil.channels_last) is y  # already laid out so: the very object
    np.testing.assert_array_equal(y.cpu().numpy(), x.cpu().numpy())
    assert repr(anvil.channels_last) == "anvil.channels_last"


def test_bad_format_is_a_typed_error():
    x = anvil.randn(2, 3, device=DEVICE)
    with pytest.raises(anvil.ShapeError, match="4-d"):
        x.contiguous(memory_format=anvil.channels_last)
    with pytest.raises(anvil.ValueError, match="Preserve"):
        x.contiguous(memory_format=anvil.preserve_format)


def test_module_to_channels_last_computes_the_same():
    anvil.manual_seed(0)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Conv2d(8, 4, 3)).to(DEVICE)
    x = anvil.randn(2, 3, 10, 10, device=DEVICE)
    want = net(x).cpu().numpy()
    assert net.to(memory_format=anvil.channels_last) is net
    assert net[0].weight.is_contiguous(memory_format=anvil.channels_last)
    y = net(x.contiguous(memory_format=anvil.channels_last))
    assert y.is_contiguous(memory_format=anvil.channels_last)
    np.testing.assert_allclose(y.cpu().numpy(), want, rtol=1e-4, atol=1e-5)
    net.to(DEVICE, memory_format=anvil.contiguous_format)
    assert net[0].weight.is_contiguous()


def test_clone_and_cpu_keep_channels_last_as_torch():
    x = anvil.randn(2, 3, 4, 5, device=DEVICE).contiguous(memory_format=anvil.channels_last)
    t = torch.empty(2, 3, 4, 5).contiguous(memory_format=torch.channels_last)
    assert x.clone().stride() == t.clone().stride()
    assert anvil.clone(x).is_contiguous(memory_format=anvil.channels_last)
    assert x.clone(memory_format=anvil.contiguous_format).is_contiguous()
    assert x.cpu().stride() == t.cpu().stride()
    np.testing.assert_array_equal(x.cpu().numpy(), x.contiguous().cpu().numpy())
