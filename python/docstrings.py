#!/usr/bin/env python3
"""Docstrings for the Python package from the C++ headers' comments, so the
contract is written once, in include/anvil (STYLE.md: public headers carry it).

    python/docstrings.py OUT.h include/anvil/ops.def include/anvil/ops.h include/anvil/tensor.h ...

writes a header with one entry per public function and class:
anvil::python::docs::kEntries, keyed by the name below `anvil::` ("relu",
"Tensor::sum", "nn::Linear", "nn::Module::to", "optim::SGD"). The bindings
take an entry with doc("relu") (python/src/docs.h), which fails to compile
when the key is missing, so a renamed function cannot lose its docstring
silently. The build runs this whenever a header changes; the stubs
(anvil/_anvil/**.pyi) and help() then show the same text.

What counts as a declaration's comment (the headers' own conventions):
- the `//` lines right above it (no blank line between), which also cover the
  declarations that follow it without a blank line while they are overloads
  of one name or take the same parameters (`floor`, `ceil`, `round` under one
  comment; `clamp` after them is not covered);
- a trailing `// ...` on the declaration's line (joined after the block when
  it is the first declaration below it, alone otherwise);
- section rulers (`// --- reductions ---`) are not comments of anything.
The elementwise ops of one and two operands and the scans are rows of the
op table (anvil/ops.def): each row's doc column documents its free functions
and its Tensor methods.
A Tensor method with no comment of its own takes the free function's (x.sum
is sum(x)). A declaration with no comment at all gets its C++ declaration, so
no bound name is without a docstring; overloads whose comments differ are
listed one by one with their C++ declaration.
"""

import re
import sys
from pathlib import Path

KEYWORDS = {"if", "for", "while", "return", "sizeof", "static_assert", "decltype", "requires", "switch", "alignas",
            "noexcept", "throw", "catch", "operator", "explicit"}


def split_comment(line):
    """(code, trailing comment) of a line, ignoring // inside literals."""
    quote = None
    i = 0
    while i < len(line):
        c = line[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif line.startswith("//", i):
            return line[:i], line[i + 2:].strip()
        i += 1
    return line, ""


def comment_text(stripped):
    """A `// text` line's text, keeping its indentation after the first space."""
    text = stripped[2:]
    return text[1:] if text.startswith(" ") else text


def braces(code):
    code = re.sub(r'"(\\.|[^"\\])*"', '""', code)
    code = re.sub(r"'(\\.|[^'\\])*'", "''", code)
    return code.count("{") - code.count("}")


def params_of(stmt):
    start = stmt.index("(")
    depth = 0
    for i in range(start, len(stmt)):
        if stmt[i] == "(":
            depth += 1
        elif stmt[i] == ")":
            depth -= 1
            if depth == 0:
                return re.sub(r"\s+", " ", stmt[start + 1:i]).strip()
    return stmt[start + 1:]


def signature(stmt):
    """The declaration as written, up to its parameters' end and qualifiers."""
    s = re.sub(r"\s+", " ", stmt).strip()
    s = re.sub(r"\s*(=\s*0|= default|= delete|override|final)?\s*[;{].*$", "", s)
    return s.replace("( ", "(").replace(" )", ")")


class Header:
    def __init__(self, path, entries, order):
        self.path = path
        self.entries = entries  # key -> list of (signature, doc or "")
        self.order = order
        self.scopes = []  # (kind, name, depth of its body, public)
        self.depth = 0
        self.pending = []
        self.group = None  # {"text", "params", "name"}

    def names(self):
        return "::".join(n for _, n, _, _ in self.scopes if n).split("::")

    def scope_key(self):
        return "::".join(self.names()[1:])

    def in_public_scope(self):
        names = self.names()
        if not self.scopes or names[0] != "anvil" or "detail" in names or any(not n for _, n, _, _ in self.scopes):
            return False
        kind, _, body, public = self.scopes[-1]
        return self.depth == body and (kind == "namespace" or public)

    def add(self, key, sig, doc):
        if key not in self.entries:
            self.entries[key] = []
            self.order.append(key)
        self.entries[key].append((sig, doc))

    def statement(self, stmt, trailing):
        s = stmt.strip()
        m = re.match(r"namespace\s*([\w:]*)\s*\{", s)
        if m:
            self.depth += 1
            self.scopes.append(("namespace", m.group(1), self.depth, True))
            self.depth += braces(s) - 1
            self.pending, self.group = [], None
            return
        m = re.match(r"(?:template\s*<[^;{]*>\s*)?(class|struct)\s+(\w+)(\s+final)?\s*(:[^{;]*)?\{", s)
        if m:
            if self.in_public_scope():
                key = "::".join(filter(None, [self.scope_key(), m.group(2)]))
                self.add(key, f"{m.group(1)} anvil::{key}", "\n".join(self.pending).strip("\n"))
            self.depth += 1
            self.scopes.append((m.group(1), m.group(2), self.depth, m.group(1) == "struct"))
            self.depth += braces(s) - 1
            self.pending, self.group = [], None
            return
        m = re.match(r"(public|private|protected)\s*:", s)
        if m and self.scopes and self.scopes[-1][0] in ("class", "struct"):
            kind, name, body, _ = self.scopes[-1]
            self.scopes[-1] = (kind, name, body, m.group(1) == "public")
            self.pending, self.group = [], None
            return
        if self.in_public_scope() and "(" in s and not re.match(r"(using|typedef|friend|static_assert|return|enum)\b",
                                                                  s):
            prefix = s[:s.index("(")]
            name = re.search(r"(~?\w+)\s*$", prefix)
            if name and "operator" not in prefix and "=" not in prefix and name.group(1) not in KEYWORDS \
                    and not name.group(1).startswith("~") and not name.group(1).isupper():
                self.declaration(name.group(1), s, trailing)
                self.depth += braces(s)
                return
        self.depth += braces(s)
        self.pending, self.group = [], None

    def declaration(self, name, stmt, trailing):
        params = params_of(stmt)
        first = bool(self.pending)
        if first:
            self.group = {"text": "\n".join(self.pending).strip("\n"), "params": params, "name": name}
            self.pending = []
        elif self.group and not (name == self.group["name"] or params == self.group["params"]):
            self.group = None
        if self.group:
            self.group["name"] = name
        # A later declaration with its own trailing comment says what it is
        # (`mm(a, b);  // 2-D only` under matmul's comment).
        parts = [self.group["text"]] if self.group and (first or not trailing) else []
        if trailing:
            parts.append(trailing)
        scope = self.scope_key()
        self.add("::".join(filter(None, [scope, name])), signature(stmt), "\n".join(parts))

    def parse(self):
        stmt, trailing, parens = "", "", 0
        directive = False  # inside a #define continued with backslashes
        for raw in self.path.read_text(encoding="utf-8").splitlines():
            s = raw.strip()
            if directive or (not stmt and s.startswith("#")):
                directive = s.endswith("\\")
                self.pending, self.group = [], None
                continue
            if not stmt:
                if s.startswith("//"):
                    if re.match(r"//\s*---", s):
                        self.pending, self.group = [], None
                    else:
                        if self.group:
                            self.group = None
                        self.pending.append(comment_text(s))
                    continue
                if not s or s.startswith("#"):
                    self.pending, self.group = [], None
                    continue
                if re.match(r"template\s*<.*>\s*$", s) or re.match(r"requires\b", s) and s.endswith(")"):
                    continue  # the declaration follows on the next line
            code, comment = split_comment(raw)
            stmt += " " + code
            if not comment.startswith("NOLINT"):
                trailing = trailing or comment
            parens += code.count("(") - code.count(")")
            done = parens <= 0 and re.search(r"[;{}]\s*$", code.strip() or ";")
            if done:
                self.statement(stmt, trailing)
                stmt, trailing, parens = "", "", 0
            # Scopes closed by this line.
            while self.scopes and self.depth < self.scopes[-1][2]:
                self.scopes.pop()


def document(entries, order):
    """key -> the docstring: see the module's docstring for the rules."""
    out = {}
    for key in order:
        decls = entries[key]
        docs = [d for _, d in decls if d]
        unique = list(dict.fromkeys(docs))
        if len(unique) == 1 and len(docs) == len(decls):
            out[key] = unique[0]
        elif unique:  # overloads that differ: each C++ declaration, then its comment
            out[key] = "\n".join(sig + "".join("\n    " + line for line in d.splitlines())
                                 for sig, d in dict.fromkeys(decls))
        else:
            out[key] = None
    for key in order:
        if out[key] is None and key.startswith("Tensor::") and out.get(key[len("Tensor::"):]):
            out[key] = out[key[len("Tensor::"):]]
    for key in order:
        if out[key] is None:
            out[key] = "C++: " + "\n".join(dict.fromkeys(sig for sig, _ in entries[key]))
        if out[key].endswith('"'):  # stubgen writes a one-line """text""" unescaped: end it otherwise
            out[key] += "\n\nC++: " + "\n".join(dict.fromkeys(sig for sig, _ in entries[key]))
    return out


# A row of anvil/ops.def with a uniform signature: its Op, name, and the
# string literals of its last column (the doc), which may be split in pieces.
OP_ROW = re.compile(r'^ANVIL_UNARY_OP\(\s*(\w+)\s*,\s*(\w+)\s*,((?:[^()"]|"(?:\\.|[^"\\])*")*)\)', re.M)


def op_table(path, entries, order):
    """The free function and Tensor method of each uniform row of the op
    table (include/anvil/ops.def), documented by the row's doc column."""
    for m in OP_ROW.finditer(path.read_text(encoding="utf-8")):
        name = m.group(2)
        doc = "".join(re.findall(r'"((?:\\.|[^"\\])*)"', m.group(3)))
        for key, sig in ((name, f"Tensor {name}(const Tensor& x)"), (f"Tensor::{name}", f"Tensor {name}() const")):
            if key not in entries:
                entries[key] = []
                order.append(key)
            entries[key].append((sig, doc))


# A binary row of anvil/ops.def: its Op, name, forms and doc (see op_table).
BINARY_ROW = re.compile(r'^ANVIL_BINARY_OP\(\s*(\w+)\s*,\s*(\w+)\s*,(?:\s*\w+\s*,){4}\s*(\w+)\s*,'
                        r'((?:[^()"]|"(?:\\.|[^"\\])*")*)\)', re.M)
# The public functions each form adds (ANVIL_BINARY_TENSOR, …: anvil/ops.def).
BINARY_FORMS = {"Internal": [], "Tensor": ["Tensor"], "Scalar": ["Tensor", "Scalar"],
                "ScalarFirst": ["Tensor", "Scalar", "ScalarFirst"]}


def binary_table(path, entries, order):
    """The free functions and Tensor methods of each public binary row of the
    op table, in its forms, documented by the row's doc column."""
    for m in BINARY_ROW.finditer(path.read_text(encoding="utf-8")):
        name, forms = m.group(2), m.group(3)
        doc = "".join(re.findall(r'"((?:\\.|[^"\\])*)"', m.group(4)))
        sigs = {"Tensor": [(name, f"Tensor {name}(const Tensor& a, const Tensor& b)"),
                           (f"Tensor::{name}", f"Tensor {name}(const Tensor& other) const")],
                "Scalar": [(name, f"Tensor {name}(const Tensor& a, const Scalar& b)"),
                           (f"Tensor::{name}", f"Tensor {name}(const Scalar& other) const")],
                "ScalarFirst": [(name, f"Tensor {name}(const Scalar& a, const Tensor& b)")]}
        for form in BINARY_FORMS[forms]:
            for key, sig in sigs[form]:
                if key not in entries:
                    entries[key] = []
                    order.append(key)
                entries[key].append((sig, doc))


# A scan row of anvil/ops.def: its Op, name and doc.
SCAN_ROW = re.compile(r'^ANVIL_SCAN_OP\(\s*(\w+)\s*,\s*(\w+)\s*,(?:\s*\w+\s*,){2}((?:[^()"]|"(?:\\.|[^"\\])*")*)\)',
                      re.M)


def scan_table(path, entries, order):
    """The free function and Tensor method of each scan row of the op table."""
    for m in SCAN_ROW.finditer(path.read_text(encoding="utf-8")):
        name = m.group(2)
        doc = "".join(re.findall(r'"((?:\\.|[^"\\])*)"', m.group(3)))
        for key, sig in ((name, f"Tensor {name}(const Tensor& x, int dim)"),
                         (f"Tensor::{name}", f"Tensor {name}(int dim) const")):
            if key not in entries:
                entries[key] = []
                order.append(key)
            entries[key].append((sig, doc))


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: docstrings.py OUT.h HEADER.h...")
    entries, order = {}, []
    for path in argv[2:]:
        if path.endswith(".def"):
            op_table(Path(path), entries, order)
            binary_table(Path(path), entries, order)
            scan_table(Path(path), entries, order)
        else:
            Header(Path(path), entries, order).parse()
    docs = document(entries, order)
    lines = [
        "// Generated by python/docstrings.py from the comments of include/anvil; do not edit.",
        "#pragma once",
        "",
        "#include <string_view>",
        "",
        "namespace anvil::python::docs {",
        "",
        "struct Entry {",
        "  std::string_view key;",
        "  const char* text;",
        "};",
        "",
        "inline constexpr Entry kEntries[] = {",
    ]
    for key in order:
        text = docs[key]
        assert ")anvil\"" not in text, key
        lines.append(f'    {{"{key}", R"anvil({text})anvil"}},')
    lines += ["};", "", "}  // namespace anvil::python::docs", ""]
    out = Path(argv[1])
    out.parent.mkdir(parents=True, exist_ok=True)
    text = "\n".join(lines)
    if not out.exists() or out.read_text(encoding="utf-8") != text:
        out.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main(sys.argv)
