"""What the trace knows of a functional routine, read from its source: name, file, equation, result names.

    routine = routine_of(code)      # a code object -> Routine, or None if it is not a traced routine

A traced routine is a public function defined in ``minitransformer/functional/``
(never the hook ``twins.py``). Everything else comes from the file as it is on disk,
through ``ast``: the def line and the last line, the docstring, the equation (below)
and the names of the results (from the ``return`` statements), so a student's own
file in a homework copy is read the same way as the reference.

The equation, as rows of segments, comes from the first place that has one:
  1. the docstring's first line, when it is an equation (``y = x @ W + b.``): the part
     before the first top-level ", " / ". " / "; ";
  2. the docstring's first indented block that holds an ``=`` (LayerNorm's backward);
  3. for a backward, the module docstring's block under a line that starts "Backward";
     for a forward, the module docstring's first indented block with an ``=``; for a
     helper (split_heads, causal_mask), the docstring's first line, as words.
A line of such a block splits into segments at runs of three or more spaces (two
equations side by side, or an equation and its shape or note), unless an "=" follows
(the spaces that align the equals signs of a block).
"""
from __future__ import annotations

import ast
import linecache
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1]
FUNCTIONAL = PACKAGE / "functional"
NOT_TRACED = {"twins.py"}             # the speed wing's hook: bookkeeping, not math


@dataclass(frozen=True)
class Routine:
    op: str                 # "linear_forward"
    module: str             # "functional.linear"
    path: str               # the file, relative to the package root: "functional/linear.py"
    line: int               # the def line
    end_line: int           # the last line
    direction: str          # "forward" (a *_forward), "backward" (a *_backward) or "helper"
    doc: str                # the docstring
    equation: tuple         # rows of segments: (("y = x @ W + b",),)
    result_names: tuple     # candidate name tuples, one per return statement: (("y", "cache"),)

    @property
    def pair(self) -> bool:
        return self.direction != "helper"


def routine_of(code) -> Routine | None:
    """The Routine of a code object, or None when it is not a public routine of functional/."""
    path = Path(code.co_filename)
    if path.parent != FUNCTIONAL or path.name in NOT_TRACED or code.co_name.startswith("_"):
        return None
    return _routine(str(path), code.co_firstlineno, code.co_name)


@lru_cache(maxsize=None)
def _routine(filename: str, first_line: int, name: str) -> Routine | None:
    tree = _tree(filename)
    node = next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)
    if node is None:                                  # not a module-level function: a nested def
        return None
    direction = "forward" if name.endswith("_forward") else "backward" if name.endswith("_backward") else "helper"
    doc = ast.get_docstring(node) or ""
    rel = Path(filename).relative_to(PACKAGE)
    return Routine(name, ".".join(rel.with_suffix("").parts), rel.as_posix(), node.lineno, node.end_lineno,
                   direction, doc, _equation(doc, ast.get_docstring(tree) or "", direction),
                   _result_names(node, doc))


def _tree(filename: str) -> ast.Module:
    return ast.parse("".join(linecache.getlines(filename)) or Path(filename).read_text(encoding="utf-8"))


def source_lines(path: str) -> list:
    """The lines of a package file (``functional/linear.py``) as the interpreter read them."""
    filename = str(PACKAGE / path)
    return [line.rstrip("\n") for line in linecache.getlines(filename)] or \
        Path(filename).read_text(encoding="utf-8").splitlines()


# ------------------------------------------------------------------ the equation
def _equation(doc: str, module_doc: str, direction: str) -> tuple:
    first = doc.strip().splitlines()[0] if doc.strip() else ""
    if _is_equation(first):
        return ((_math_part(first),),)
    block = _indented_block(doc)
    if block:
        return block
    if direction == "helper":                    # a helper's own words, not its module's table
        return ((first,),) if first else ()
    if direction == "backward":
        block = _indented_block(module_doc, after=r"^Backward")
        if block:
            return block
    return _indented_block(module_doc) or ((first,) if first else ())


def _is_equation(line: str) -> bool:
    head = line.split("=")[0]
    return "=" in line and not re.match(r"\s*(Inputs|Returns|Gradients)\b", line) and len(head.split()) <= 3


def _math_part(line: str) -> str:
    """``line`` up to its first top-level ", ", ". " or "; " (or its final full stop)."""
    depth = 0
    for i, ch in enumerate(line):
        depth += ch in "([{" and 1 or ch in ")]}" and -1 or 0
        if depth == 0 and line[i:i + 2] in (", ", ". ", "; "):
            return line[:i].strip()
    return line.rstrip(". ").strip()


def _indented_block(doc: str, after: str | None = None) -> tuple:
    """The first run of indented lines holding an '=' (after a line matching ``after``), as segment rows."""
    lines = doc.splitlines()
    if after is not None:
        start = next((i + 1 for i, line in enumerate(lines) if re.match(after, line.strip())), None)
        if start is None:
            return ()
        lines = lines[start:]
    block: list = []
    for line in lines:
        if line.startswith("    ") and line.strip():
            block.append(line.strip())
        elif block and any("=" in b for b in block):
            break
        else:
            block = []
    if not any("=" in b for b in block):
        return ()
    return tuple(tuple(s.strip() for s in re.split(r"\s{3,}(?=[^\s=])", line) if s.strip()) for line in block[:8])


# ------------------------------------------------------------------ result names
def _result_names(node: ast.FunctionDef, doc: str) -> tuple:
    """One name tuple per return statement, in source order; singles are 1-tuples."""
    found = []
    for ret in sorted((n for n in ast.walk(node) if isinstance(n, ast.Return) and n.value is not None),
                      key=lambda n: n.lineno):
        values = [ret.value.body, ret.value.orelse] if isinstance(ret.value, ast.IfExp) else [ret.value]
        for value in values:
            if isinstance(value, ast.Tuple):
                names = [_name(e, i) for i, e in enumerate(value.elts)]
                if names and names[0] == "out0":
                    names[0] = _lhs(doc) or "out"               # relu: return xp.maximum(x, 0), ... -> y
                found.append(tuple(names))
            else:
                found.append((_single_name(value, doc),))
    return tuple(found)


def _name(node, i: int) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id.endswith("Cache"):
        return "cache"
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and isinstance(node.func.value, ast.Name) \
            and node.func.value.id not in ("xp", "np"):
        return node.func.value.id                       # dbeta.reshape(...) -> dbeta
    return f"out{i}"


def _lhs(doc: str) -> str:
    """The name the docstring's first line assigns to ("dlogits = ..." -> "dlogits"), or ""."""
    lhs = re.match(r"\s*([A-Za-z_]\w*)(\[[^\]]*\])?\s*=", doc.strip().splitlines()[0]) if doc.strip() else None
    return lhs.group(1) if lhs else ""


def _single_name(node, doc: str) -> str:
    if _lhs(doc):
        return _lhs(doc)
    return node.id if isinstance(node, ast.Name) else _name(node, 0).replace("out0", "out")


def names_for(routine: Routine, n: int | None) -> tuple:
    """The names of a result of ``n`` items (None: a single value)."""
    want = 1 if n is None else n
    for names in reversed(routine.result_names):
        if len(names) == want and (n is not None or routine.direction != "backward" or names[0].startswith("d")):
            return names
    for names in routine.result_names:
        if len(names) == want:
            return names
    return ("out",) if n is None else tuple(f"out{i}" for i in range(n))
