"""Export a student's copy: the real package with the chosen function bodies replaced by a stub.

The stub keeps the signature and the docstring (the equation, the shapes) and
raises ``NotImplementedError("<name>: implement me")``. ``ast`` locates each body
(from the line after the docstring to the function's ``end_lineno``) and only those
lines of the source text are rewritten: everything else stays byte-identical.

Also written: HOMEWORK.md (the handout) and starter_<id>.py per assignment
(jupytext percent format). The copy holds the lectures as a wheel does
(minitransformer/lectures/), so `python -m minitransformer lectures --out lectures`
run in it puts them where the handout points. The speed wing (minitransformer/fast/) is left out: its
twins compute assigned functions, and without it the models call the student's
plain functions.
"""
from __future__ import annotations

import ast
import re
import shutil
from pathlib import Path

from .assignments import select

PACKAGE_DIR = Path(__file__).resolve().parents[1]
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


def _find(tree: ast.Module, qualname: str):
    node, parts = tree, qualname.split(".")
    for part in parts:
        node = next((n for n in node.body if isinstance(n, _DEFS) and n.name == part), None)
        if node is None:
            raise LookupError(f"{qualname}: not found")
    return node


def stub_source(source: str, qualname: str) -> str:
    """``source`` with the body of ``qualname`` replaced by a NotImplementedError stub."""
    func = _find(ast.parse(source), qualname)
    body = func.body
    has_doc = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
        and isinstance(body[0].value.value, str)
    if has_doc and len(body) == 1:
        start = body[0].end_lineno                 # only a docstring: the stub goes after it
    else:
        start = body[0].end_lineno if has_doc else body[0].lineno - 1
    lines = source.splitlines(keepends=True)
    indent = re.match(r"[ \t]*", lines[body[0].lineno - 1]).group(0)
    name = qualname.split(".")[-1] if "." not in qualname else qualname
    stub = f'{indent}raise NotImplementedError("{name}: implement me")\n'
    return "".join(lines[:start]) + stub + "".join(lines[func.end_lineno:])


def docstring_of(package_dir: Path, target) -> str:
    path = (package_dir / Path(*target.module.split("."))).with_suffix(".py")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return ast.get_docstring(_find(tree, target.qualname)) or ""


def module_doc(package_dir: Path, module: str) -> str:
    path = (package_dir / Path(*module.split("."))).with_suffix(".py")
    return ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""


def _copy_lectures(package_dir: Path, dest: Path) -> None:
    """The lectures inside the copy, where a wheel holds them (minitransformer/lectures/); a source
    checkout keeps them beside the package. The handout's `lectures --out` then finds them."""
    source = package_dir.parent / "lectures"
    if not (dest / "lectures").exists() and (source / "_lecture.py").is_file():
        shutil.copytree(source, dest / "lectures",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_out", "*.ipynb"))


def export(ids, out, *, with_solutions: bool = False, package_dir: Path = PACKAGE_DIR) -> list:
    """Copy the package into ``out``/minitransformer, stub the chosen assignments, write the handout."""
    assignments = select(ids)
    out = Path(out)
    dest = out / "minitransformer"
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(package_dir, dest, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "fast"))  # no speed wing: its twins are solutions
    _copy_lectures(package_dir, dest)
    if not with_solutions:
        by_file: dict = {}
        for a in assignments:
            for t in a.targets:
                by_file.setdefault(t.module, []).append(t.qualname)
        for module, qualnames in by_file.items():
            path = (dest / Path(*module.split("."))).with_suffix(".py")
            source = path.read_text(encoding="utf-8")
            for q in qualnames:
                source = stub_source(source, q)
            path.write_text(source, encoding="utf-8")
    (out / "HOMEWORK.md").write_text(handout(assignments, package_dir), encoding="utf-8")
    for a in assignments:
        (out / f"starter_{a.id}.py").write_text(starter(a, package_dir), encoding="utf-8")
    return assignments


def handout(assignments, package_dir: Path) -> str:
    parts = ["# Homework\n",
             "Implement the functions below in this copy of minitransformer. Each one keeps its",
             "signature and docstring; replace the `raise NotImplementedError` line with the body.",
             "Check yourself with `python starter_<id>.py` (the numerical gradient check) and",
             "`python -m minitransformer gradcheck FILE.py:FORWARD:BACKWARD` for your own drafts.",
             "Your instructor grades with `python -m minitransformer homework check DIR`.",
             "The lectures named below: `python -m minitransformer lectures --out lectures` copies them here.\n"]
    for a in assignments:
        parts.append(f"## {a.id}: {a.title} ({a.points} points, {a.lecture})\n")
        modules = dict.fromkeys(t.module for t in a.targets)
        for m in modules:
            parts.append(f"The math (`minitransformer/{m.replace('.', '/')}.py`):\n")
            parts.append("```\n" + module_doc(package_dir, m).strip() + "\n```\n")
        parts.append("Implement:\n")
        for t in a.targets:
            doc = docstring_of(package_dir, t).strip()
            block = "\n\n  ```\n  " + doc.replace("\n", "\n  ") + "\n  ```" if doc else ""
            parts.append(f"- `{t}`{block}")
        parts.append(f"\nCheck: `python starter_{a.id}.py`, then ask for `homework check DIR {a.id}`.\n")
    return "\n".join(parts) + "\n"


def starter(a, package_dir: Path) -> str:
    imports = "\n".join(f"from minitransformer.{t.module} import {t.qualname.split('.')[0]}"
                        for t in a.targets)
    return f'''# ---
# jupyter:
#   jupytext:
#     formats: py:percent
# ---

# %% [markdown]
# # {a.title}
#
# Assignment `{a.id}` ({a.points} points), lecture `{a.lecture}`.
# Write the bodies of: {", ".join(f"`{t}`" for t in a.targets)}.
# The equations are in their docstrings and in HOMEWORK.md.

# %%
import numpy as np

{imports}

# %% [markdown]
# The numerical gradient check of your functions (central differences, float64,
# random shapes): every row should say OK. Forward-only assignments have nothing
# to check numerically; the grader compares them with the reference.

# %%
from minitransformer.homework.checks import numerical_check

print(numerical_check("{a.id}"))
'''
