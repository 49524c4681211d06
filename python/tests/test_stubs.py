"""The type stubs nanobind's stubgen writes from the built extension: present
beside the package, valid Python, and naming what the extension exports."""

import ast
import os

import pytest

import anvil
from anvil import _anvil

STUBS = os.path.join(os.path.dirname(anvil.__file__), "_anvil")


def test_stubs_parse_and_cover_the_extension():
    top = os.path.join(STUBS, "__init__.pyi")
    if not os.path.exists(top):
        pytest.fail(f"no stubs at {STUBS}: the build's anvil_python_stubs target makes them")
    for root, _, files in os.walk(STUBS):
        for f in files:
            with open(os.path.join(root, f)) as fh:
                ast.parse(fh.read(), filename=f)
    with open(top) as fh:
        tree = ast.parse(fh.read())
    declared = {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    declared |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    for name in ["Tensor", "device", "dtype", "zeros", "tensor", "from_dlpack", "matmul", "save", "ledger"]:
        assert name in declared, name
    tensor = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    methods = {n.name for n in tensor.body if isinstance(n, ast.FunctionDef)}
    assert {"__add__", "__getitem__", "numpy", "backward", "__dlpack__"} <= methods
    assert os.path.exists(os.path.join(os.path.dirname(anvil.__file__), "py.typed"))
    assert _anvil.Tensor.__name__ == "Tensor"
