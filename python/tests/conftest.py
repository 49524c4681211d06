"""The device the suite runs on: ANVIL_TEST_DEVICE (cpu, opencl:0, opencl:1,
cuda:0), as ctest's python_cpu / python_opencl0 / python_opencl1 entries set
it. A missing device skips the suite unless ANVIL_REQUIRE_DEVICES names its
type (./run tests requires opencl), and then fails it."""

import os

import pytest

import anvil

DEVICE = anvil.device(os.environ.get("ANVIL_TEST_DEVICE", "cpu"))


def _available(d):
    return d.type == "cpu" or d in anvil.all_devices()


def pytest_collection_modifyitems(config, items):
    if _available(DEVICE):
        return
    required = os.environ.get("ANVIL_REQUIRE_DEVICES", "")
    if DEVICE.type in required.split(","):
        raise pytest.UsageError(f"ANVIL_REQUIRE_DEVICES={required} but {DEVICE} is missing: "
                                f"{anvil.device_unavailable_reason(getattr(anvil.DeviceType, DEVICE.type))}")
    skip = pytest.mark.skip(reason=f"{DEVICE} is not available")
    for item in items:
        item.add_marker(skip)


@pytest.fixture
def dev():
    return DEVICE
