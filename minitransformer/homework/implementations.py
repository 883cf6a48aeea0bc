"""In a student's copy: which implementation of each assigned function runs, and where it is.

    assigned(ids)   the functions an export of ``ids`` stubs: the assignments' targets, then the
                    code that computes them all the same (export's list: each assignment's ``equivalents``)
    report()        in this copy, one line per such function, as `train` prints it before step 1:
                        layernorm_backward: yours, minitransformer/functional/norm.py:120
                    (", still the stub" while its body only raises NotImplementedError); a
                    function that comes from outside the copy, or a speed-wing twin standing in
                    for it, is said so, never called "yours"

A copy has no speed wing, but an import system can still find one elsewhere (an editable
install's finder resolves ``minitransformer.fast`` from the repository): the line says
what actually runs, read from the function objects the models call.
"""
from __future__ import annotations

import ast
import importlib
import inspect
import textwrap
from pathlib import Path

from ..functional.twins import TWINS
from .registry import select
from .expected import copy_assignments
from .graded import resolve
from .outside import is_docstring

PACKAGE = __name__.split(".")[0]


def assigned(ids) -> list:
    """The Targets an export of the assignments ``ids`` stubs (export's own list), the targets first."""
    from .export import _stubbed
    return list(_stubbed(select(ids)))


def function_of(target):
    """The function object ``target`` names in this package (a Module's method: the class's)."""
    return inspect.unwrap(resolve(PACKAGE, str(target)))


def is_stub(func) -> bool:
    """Whether ``func``'s body (after its docstring) is only the export's ``raise NotImplementedError``."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(func)))
    except (OSError, TypeError, SyntaxError):
        return False
    body = [n for n in tree.body[0].body if not is_docstring(n)]
    return len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])


def line(target, package_dir: Path) -> str:
    """What runs for ``target``: yours (a file of this copy, and its line), a twin, or code from elsewhere."""
    name = target.qualname
    try:
        func = function_of(target)
    except (ImportError, AttributeError) as e:
        return f"{name}: not found in this copy ({type(e).__name__}: {e})"
    twin = TWINS.get(func)
    if twin is not None:
        return f"{name}: NOT yours: the speed wing's twin {twin.__module__}.{twin.__qualname__} stands in for it"
    code = getattr(func, "__code__", None)
    if code is None:
        return f"{name}: NOT yours: {func!r} (not a Python function)"
    file = Path(code.co_filename).resolve()
    if not file.is_relative_to(package_dir):
        return f"{name}: NOT yours: {file}:{code.co_firstlineno}, outside this copy"
    shown = f"{PACKAGE}/{file.relative_to(package_dir).as_posix()}:{code.co_firstlineno}"
    return f"{name}: yours, {shown}" + (", still the stub (it raises NotImplementedError)" if is_stub(func) else "")


def report() -> list:
    """One line per function this copy stubbed (its mark's assignments), saying which implementation runs."""
    ids = copy_assignments()
    if not ids:                          # no mark, or one listing nothing: nothing was stubbed
        return []
    package_dir = Path(importlib.import_module(PACKAGE).__file__).resolve().parent
    return [line(t, package_dir) for t in assigned(ids)]
