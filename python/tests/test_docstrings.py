"""Docstrings come from the C++ headers' comments and the op table's doc
column (python/docstrings.py at build time, python/src/docs.h in the
bindings): for a sample of free ops,
Tensor methods, nn layers and optimisers, the docstring is the comment above
the declaration in include/anvil, read here independently; help() and the
generated stubs show it."""

import os
import pydoc
import re

import pytest

import anvil
from anvil import nn

INCLUDE = os.path.join(os.path.dirname(__file__), os.pardir, os.pardir, "include", "anvil")


def header_comment(header, declaration):
    """The `//` lines right above the first line matching `declaration`, up to
    a section ruler (`// --- reductions ---`), which belongs to no declaration."""
    with open(os.path.join(INCLUDE, header), encoding="utf-8") as f:
        lines = f.read().splitlines()
    at = next(i for i, line in enumerate(lines) if re.match(declaration, line.strip()))
    comment = []
    for line in reversed(lines[:at]):
        s = line.strip()
        if not s.startswith("//") or s.startswith("// ---"):
            break
        comment.insert(0, s[3:] if s.startswith("// ") else s[2:])
    assert comment, f"{header}: no comment above {declaration}"
    return "\n".join(comment).strip("\n")


def table_doc(name):
    """The doc column of op `name`'s row in the op table (anvil/ops.def), its
    string literals joined, read here independently of python/docstrings.py."""
    with open(os.path.join(INCLUDE, "ops.def"), encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"^ANVIL_(?:UNARY|BINARY|SCAN)_OP\(\w+, " + name + r",[^\n]*\n?((?:\s*\"[^\n]*\"\)?\n)*)", text,
                  re.M)
    assert m, f"ops.def: no row for {name}"
    row = text[m.start():m.end()]
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', row))


def doc_of(fn):
    """A bound function's own docstring (nanobind's __doc__ puts the signature first)."""
    docs = {d for _, d, _ in fn.__nb_signature__ if d}
    assert len(docs) == 1, docs
    return docs.pop()


def bound(path):
    """The object at a dotted path from `anvil` or `nn`. The parameters name
    them rather than hold them: pytest keeps its parameters to the end of the
    process, and nanobind reports any of its functions still alive then as a
    leak (seen when PyTorch was imported in the same session)."""
    head, *rest = path.split(".")
    obj = {"anvil": anvil, "nn": nn}[head]
    for name in rest:
        obj = getattr(obj, name)
    return obj


FUNCTIONS = [
    ("nn.cross_entropy", "ops.h", r"Tensor cross_entropy\("),
    ("nn.functional.cross_entropy", "ops.h", r"Tensor cross_entropy\("),
    ("anvil.matmul", "ops.h", r"Tensor matmul\("),
    ("anvil.gelu", "ops.def", "gelu"),  # a row of the op table: its doc column
    ("anvil.Tensor.gelu", "ops.def", "gelu"),
    ("anvil.sort", "ops.h", r"ValuesIndices sort\("),
    ("anvil.masked_fill", "ops.h", r"Tensor masked_fill\("),
    ("anvil.floor", "ops.def", "floor"),
    ("anvil.Tensor.ceil", "ops.def", "ceil"),
    ("anvil.sum", "ops.h", r"Tensor sum\("),
    ("nn.functional.scaled_dot_product_attention", "ops.h", r"Tensor scaled_dot_product_attention\("),
    ("anvil.Tensor.backward", "tensor.h", r"void backward\("),
    ("anvil.Tensor.detach", "tensor.h", r"Tensor detach\("),
    ("anvil.Tensor.copy_", "tensor.h", r"Tensor& copy_\("),
    ("anvil.Tensor.cumsum", "ops.def", "cumsum"),  # a scan's row
    ("anvil.cumsum", "ops.def", "cumsum"),
    ("anvil.atan2", "ops.def", "atan2"),  # a binary row: every form
    ("anvil.Tensor.hypot", "ops.def", "hypot"),
    ("anvil.remainder", "ops.def", "remainder"),
    ("anvil.Tensor.pow", "ops.def", "pow"),
    ("anvil.Tensor.sort", "ops.h", r"ValuesIndices sort\("),  # no comment of its own: the free function's
    ("nn.Module.state_dict", "nn.h", r"StateDict state_dict\("),
    ("anvil.optim.Optimizer.zero_grad", "optim.h", r"void zero_grad\("),
    ("anvil.optim.Optimizer.state_dict", "optim.h", r"virtual std::map<std::string, Tensor> state_dict\("),
]


@pytest.mark.parametrize("path,header,declaration", FUNCTIONS, ids=[f[0] for f in FUNCTIONS])
def test_function_docstring_is_the_header_comment(path, header, declaration):
    fn = bound(path)
    expected = table_doc(declaration) if header == "ops.def" else header_comment(header, declaration)
    assert doc_of(fn) == expected
    assert fn.__doc__.endswith(expected)


def test_overloads_that_differ_show_each_declaration_and_its_comment():
    def block(signature, declaration):
        return signature + "".join("\n    " + line for line in header_comment("nn.h", declaration).splitlines())

    assert doc_of(nn.Module.to) == "\n".join([block("Module& to(Device d)", r"Module& to\(Device"),
                                              block("Module& to(MemoryFormat format)", r"Module& to\(MemoryFormat")])


@pytest.mark.parametrize("name", ["Linear", "Dropout", "Conv2d", "AdaptiveAvgPool2d", "LSTM", "MaxPool2d"])
def test_layer_docstring_is_the_class_comment(name):
    cls = getattr(nn, name)
    header = "nn/sequence.h" if name == "LSTM" else "nn.h"
    expected = header_comment(header, rf"class {name}\b")
    assert cls.__doc__ == expected


def test_every_bound_op_has_a_docstring():
    """No free op, Tensor method, layer or optimiser is left without one:
    those whose declaration has no comment show the C++ declaration."""
    undocumented = []
    for owner, names in [(anvil, ["neg", "relu", "add", "where", "max", "reshape", "cat", "zeros", "arange",
                                  "randn", "allclose"]),
                         (anvil.Tensor, ["relu", "add", "add_", "sum", "max", "reshape", "to", "view", "matmul"]),
                         (nn.functional, ["relu", "linear", "conv2d", "layer_norm", "dropout"]),
                         (nn.init, ["normal_", "kaiming_uniform_"]),
                         (anvil.optim.Optimizer, ["step", "zero_grad"])]:
        for name in names:
            fn = getattr(owner, name)
            if not any(d for _, d, _ in fn.__nb_signature__):
                undocumented.append(f"{getattr(owner, '__name__', owner)}.{name}")
    for cls in [nn.Sequential, nn.ReLU, nn.BatchNorm2d, nn.GRU, anvil._anvil.optim.SGD, anvil._anvil.optim.Adam]:
        if not cls.__doc__:
            undocumented.append(cls.__name__)
    assert not undocumented
    # no comment in ops.h: the declaration
    assert doc_of(anvil.transpose) == "C++: Tensor transpose(const Tensor& x, int dim0, int dim1)"


def test_help_and_stubs_show_them():
    expected = header_comment("ops.h", r"Tensor cross_entropy\(")
    shown = pydoc.render_doc(nn.cross_entropy, renderer=pydoc.plaintext)
    assert expected in "\n".join(line.strip() for line in shown.splitlines())
    stub = os.path.join(os.path.dirname(anvil.__file__), "_anvil", "nn", "__init__.pyi")
    with open(stub, encoding="utf-8") as f:
        text = f.read()
    body = text[text.index("def cross_entropy("):]
    body = body[body.index('"""') + 3:]
    assert [line.strip() for line in body[:body.index('"""')].strip().splitlines()] == expected.splitlines()
