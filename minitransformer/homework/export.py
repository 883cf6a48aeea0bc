"""Export a student's copy: the real package with the chosen function bodies replaced by a stub.

The stub keeps the signature and the docstring (the equation, the shapes) and
raises ``NotImplementedError("<name>: implement me")``. ``ast`` locates each body
(from the line after the docstring to the function's ``end_lineno``) and only those
lines of the source text are rewritten: everything else stays byte-identical.

No solution stays in the copy: besides the targets, the code that computes them all
the same (each assignment's ``equivalents``) is stubbed, and the speed wing (``fast/``)
is left out. Nothing secret stays either: the trusted side of homework/ (``TRUSTED``:
the assignments' files, whose drawers draw the graded inputs and whose catalogue's
variants re-implement the reference; the reference's own grading code; the instructor's
commands) is left out; the copy checks itself with stored numbers (homework/expected.py)
and carries a mark (homework/copy.json: its assignments, and every assignment's record
without code) by which the grader refuses to run from it. Also written:
HOMEWORK.md (the handout), starter_<id>.py per assignment (jupytext percent
format), and a manifest of every file written.

``pristine(dest)`` is the grader's own copy, over which a submission's bodies are
laid (homework/submission.py): every assignment stubbed, and nothing but the math
and the layers the student's code may call (no homework/, no lectures, no speed wing).

An export never deletes what it did not write: a non-empty ``out`` is refused
(``ExportError``) unless ``force``, and then only files of the previous export's
manifest are removed. The copy holds the lectures as a wheel does
(minitransformer/lectures/), so ``python -m minitransformer lectures --out lectures``
run in it puts them where the handout points.
"""
from __future__ import annotations

import ast
import io
import re
import shutil
from pathlib import Path

from .expected import in_student_copy, write_marker
from .registry import assignments as every_assignment
from .registry import select

PACKAGE_DIR = Path(__file__).resolve().parents[1]
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
MANIFEST = ".minitransformer-export"
SPEED_WING = "fast"
# The trusted side of homework/: what draws graded inputs or re-implements the reference (the
# assignments' files: their drawers and their catalogue's variants), computes expected results
# (reference) or grades a class (classroom, autograder). Never in a student's copy, never where
# the student's code runs.
TRUSTED = ("assignments", "reference.py", "classroom.py", "autograder.py",
           "derivations.py")       # and the table of every backward's derivation (what --without-derivations cuts)
# What the grader's pristine copy leaves out besides: the student's code never needs them.
NOT_STAGED = ("homework", "lectures", SPEED_WING)


class ExportError(Exception):
    """The export would overwrite or delete something it did not write."""


def _find(tree: ast.Module, qualname: str):
    node, parts = tree, qualname.split(".")
    for part in parts:
        node = next((n for n in node.body if isinstance(n, _DEFS) and n.name == part), None)
        if node is None:
            raise LookupError(f"{qualname}: not found")
    return node


def body_span(func) -> tuple:
    """(first line index of the body after the docstring, end line) of a def node, 0-based start."""
    body = func.body
    has_doc = isinstance(body[0], ast.Expr) and isinstance(getattr(body[0], "value", None), ast.Constant) \
        and isinstance(body[0].value.value, str)
    start = body[0].end_lineno if has_doc else body[0].lineno - 1
    return start, func.end_lineno


def stub_source(source: str, qualname: str, message: str = "implement me") -> str:
    """``source`` with the body of ``qualname`` replaced by a NotImplementedError stub."""
    func = _find(ast.parse(source), qualname)
    start, end = body_span(func)
    lines = source_lines(source)
    indent = re.match(r"[ \t]*", lines[func.body[0].lineno - 1]).group(0)
    stub = f'{indent}raise NotImplementedError("{qualname}: {message}")\n'
    return "".join(lines[:start]) + stub + "".join(lines[end:])


def source_lines(source: str) -> list:
    """``source`` split into lines as Python's tokenizer counts them (the line numbers of ``ast``):
    at \\n, \\r\\n and \\r only, never at U+2028, a form feed or the other breaks
    ``str.splitlines`` knows; each line keeps its end."""
    return io.StringIO(source, newline="").readlines()


def _stub_all(dest: Path, targets: dict) -> None:
    """targets: Target -> message; each file rewritten once."""
    by_file: dict = {}
    for t, message in targets.items():
        by_file.setdefault(t.module, []).append((t.qualname, message))
    for module, items in by_file.items():
        path = (dest / Path(*module.split("."))).with_suffix(".py")
        if not path.exists():
            continue
        source = path.read_text(encoding="utf-8")
        for qualname, message in items:
            try:
                source = stub_source(source, qualname, message)
            except LookupError:
                continue                      # an equivalent this version of the package lacks
        path.write_text(source, encoding="utf-8")


def strip_speed_code(dest: Path) -> None:
    """Leave out the speed wing (minitransformer/fast/): its kernel twins compute assigned functions.

    The core never imports it, and without it functional/twins.py finds no twin: the
    Modules call the student's plain functions.
    """
    shutil.rmtree(dest / SPEED_WING, ignore_errors=True)


def strip_derivations(dest: Path, assignments, stubbed) -> None:
    """Cut the backward's formula of every ``stubbed`` function from the copy (its docstrings, its
    cache's comments, the derivations that quote it) and leave out the lectures deriving them."""
    from .derivations import lectures, strip         # the instructor's table: it holds every formula
    strip(dest, stubbed)
    for name in lectures(a.id for a in assignments):
        (dest / "lectures" / name).unlink(missing_ok=True)


def strip_trusted(dest: Path) -> None:
    """Leave out the trusted side of homework/ (``TRUSTED``: files, and the assignments' folder whole)."""
    for name in TRUSTED:
        path = dest / "homework" / name
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)


def _stubbed(assignments) -> dict:
    """Target -> the stub's message: the assignments' targets and the code that computes them all
    the same (their ``equivalents``, stubbed with the assignment they compute: an equivalent that
    shipped working would hand out that assignment's answer, even where another assignment needs it)."""
    targets = {t: "implement me" for a in assignments for t in a.targets}
    for t, a in stubbed_with(assignments).items():
        targets[t] = (f"stubbed with the {a.id} assignment, as it computes {a.id}'s functions all the same: "
                      f"implement it too (HOMEWORK.md, {a.id})")
    return targets


def stubbed_with(assignments) -> dict:
    """Target -> the assignment it is stubbed with: each equivalent of the ``assignments`` that is not
    one of their own targets (the handout lists it under that assignment)."""
    own = {t for a in assignments for t in a.targets}
    found: dict = {}
    for a in assignments:
        for t in a.equivalents:
            if t not in own:
                found.setdefault(t, a)
    return found


def pristine(dest: Path, package_dir: Path = PACKAGE_DIR) -> Path:
    """The grader's copy of the package in ``dest``: every assignment stubbed (a submission's bodies
    are laid over it), without homework/, the lectures and the speed wing. Returns ``dest``."""
    def ignored(folder, names):
        top = Path(folder) == Path(package_dir)
        return [n for n in names if n == "__pycache__" or n.endswith(".pyc") or (top and n in NOT_STAGED)]
    shutil.copytree(package_dir, dest, ignore=ignored)
    _stub_all(dest, _stubbed(every_assignment()))
    return dest


def _check_out(out: Path, force: bool) -> set:
    """The files a previous export wrote (to remove if not rewritten); ExportError on foreign content."""
    if not out.exists() or not any(out.iterdir()):
        return set()
    if not force:
        raise ExportError(f"{out}: not empty; choose an empty folder, or --force to overwrite "
                          "(files it did not write are kept)")
    manifest = out / MANIFEST
    return set(manifest.read_text(encoding="utf-8").split("\n")) - {""} if manifest.exists() else set()


def export(ids, out, *, with_solutions: bool = False, package_dir: Path = PACKAGE_DIR,
           force: bool = False, expectations: bool = True, derivations: bool = True) -> list:
    """Copy the package into ``out``/minitransformer, stub the chosen assignments, write the handout.

    A student's copy also gets the public seed's expected results (homework/expected.py), for
    its local check, and the mark of a copy; ``expectations=False`` leaves the numbers out.
    ``derivations=False`` cuts each stubbed backward's formula from the docstrings and comments and
    leaves out the lectures that derive them (homework/derivations.py); the handout says which."""
    assignments = select(ids)
    if with_solutions and not derivations:
        raise ExportError("--without-derivations: goes with a student's copy; a copy --with-solutions "
                          "keeps every body, and so every answer")
    out = Path(out)
    previous = _check_out(out, force)
    dest = out / "minitransformer"
    shutil.copytree(package_dir, dest, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    _copy_lectures(package_dir, dest)
    if not with_solutions:
        strip_speed_code(dest)
        strip_trusted(dest)
        stubbed = _stubbed(assignments)
        _stub_all(dest, stubbed)
        if not derivations:
            strip_derivations(dest, assignments, stubbed)       # after the stubs: a body's comments are gone
        if expectations and not in_student_copy(package_dir):
            from .reference import write_expected            # the trusted side computes the numbers
            write_expected(dest, [a.id for a in assignments])
            from ..trace.compare import write_reference        # the reference trace's numbers (docs/trace.md)
            write_reference(dest, assignments)
        records = [a.record() for a in every_assignment()]
        if not derivations:                                  # the catalogue's messages state the right backward
            from .derivations import without_formulas
            owners = {a.id for a in every_assignment() if set(a.targets) & set(stubbed)}
            records = without_formulas(records, owners)
        write_marker(dest, [a.id for a in assignments], records)
        from .local import write_handed_out                  # what the local check stages over
        write_handed_out(dest)
    (out / "HOMEWORK.md").write_text(handout(assignments, package_dir, derivations), encoding="utf-8")
    for a in assignments:
        (out / f"starter_{a.id}.py").write_text(starter(a, package_dir), encoding="utf-8")
    written = {p.relative_to(out).as_posix() for p in out.rglob("*")
               if p.is_file() and (p.parent == out and p.name in _top_files(assignments) or
                                   p.is_relative_to(dest) and _from_package(p, dest, package_dir)
                                   or p.parent == dest / "homework" and p.stem in ("expected", "copy")
                                   and not with_solutions)}
    for stale in previous - written:
        path = out / stale
        if path.is_file() and ".." not in stale:
            path.unlink()
    (out / MANIFEST).write_text("\n".join(sorted(written)) + "\n", encoding="utf-8")
    return assignments


def _top_files(assignments) -> set:
    return {"HOMEWORK.md"} | {f"starter_{a.id}.py" for a in assignments}


def _from_package(path: Path, dest: Path, package_dir: Path) -> bool:
    """Whether ``path`` in the copy is one of the package's files (so this export wrote it)."""
    return (package_dir / path.relative_to(dest)).is_file()


def _copy_lectures(package_dir: Path, dest: Path) -> None:
    """The lectures inside the copy, where a wheel holds them (minitransformer/lectures/); a source
    checkout keeps them beside the package. The handout's `lectures --out` then finds them."""
    source = package_dir.parent / "lectures"
    if not (dest / "lectures").exists() and (source / "_lecture.py").is_file():
        shutil.copytree(source, dest / "lectures",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "_out", "*.ipynb"))


def handout(assignments, package_dir: Path, derivations: bool = True) -> str:
    """HOMEWORK.md: the setup, how to work, check and hand in, then each assignment's page
    (homework/handout.py, told what this export set and stubbed); ``derivations=False``: said so at
    the top, and no formula the copy's stubs lost."""
    from .handout import Copy, page, setup_line
    copy = Copy.of(assignments, derivations)
    ids = ", ".join(f"`{a.id}`" for a in assignments)
    parts = ["# Homework\n",
             f"Assigned in this copy: {ids} ({sum(a.points for a in assignments)} points). Implement the "
             "functions each page below names, in this copy of minitransformer. Each one keeps its signature and "
             "its docstring (the equation, the shapes, the conventions); replace the `raise NotImplementedError` "
             "line with the body. Every other function of the package ships working, except those a page lists "
             "as stubbed with its assignment.\n",
             "## Setup\n",
             setup_line() + "\n",
             "## Working, checking, handing in\n",
             "- Check: `python -m minitransformer homework check . ID` (or run `starter_ID.py`, also as a notebook) "
             "is your local check, not your grade: it checks your code as the grader does (the same cases, "
             "tolerance, diagnoses and rubric) on the public seed 0's numbers stored in this copy; your "
             "instructor grades other inputs, drawn from a secret seed. Without an ID it checks every assignment "
             "of this copy.",
             "- Hand in this folder's `minitransformer/` (`python -m zipfile -c handin.zip minitransformer`), or "
             "the files you edited (each page names them) with their paths inside the package. Only the bodies "
             "of the assigned functions are graded.",
             "- Train with your code: `python -m minitransformer train --steps 300` (each page says what it proves).",
             "- The lectures named below: `python -m minitransformer lectures --out lectures` copies them here.",
             _derivations_said(assignments, derivations) + "\n"]
    for a in assignments:
        parts.append(page(a.id, copy) + "\n")
    text = "\n".join(parts) + "\n"
    if derivations:
        return text
    from .derivations import lectures, strip_text
    for name in lectures(a.id for a in assignments):
        text = text.replace(f"Lecture: `lectures/{name}`.", f"Lecture: `lectures/{name}` (left out of this copy: "
                            "it derives the backward).")
    return strip_text(text, _stubbed(assignments))


def _derivations_said(assignments, derivations: bool) -> str:
    """The handout's line on what the copy says of each backward."""
    if derivations:
        return ("- Handed out with the derivations: the docstrings and the lectures show how each backward "
                "follows from its forward.")
    from .derivations import lectures
    gone = lectures(a.id for a in assignments)
    return ("- Handed out without the derivations: each function's docstring keeps the forward's equation, the "
            "shapes and what the cache holds, not the backward's formula: derive it. " +
            (f"Left out, as they derive these backwards: {', '.join(f'`{n}`' for n in gone)}." if gone else
             "No lecture derives these backwards; all are here."))


def starter(a, package_dir: Path) -> str:
    modules = sorted({t.module for t in a.targets})
    imports = "\n".join(f"import minitransformer.{m} as {m.split('.')[-1]}" for m in modules)
    reloads = "\n".join(f"importlib.reload({m.split('.')[-1]})" for m in modules)
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
# The equations are in their docstrings; HOMEWORK.md says what is graded and how.

# %% [markdown]
# Try your functions here. The reload re-reads your file each time this cell runs, so a
# notebook never keeps the code you have since fixed.

# %%
import importlib

import numpy as np

{imports}
{reloads}

# %% [markdown]
# The grader's table for your code: the graded cases, the tolerance, each tensor's
# error and, when it recognises your mistake, a diagnosis; then the rubric. It runs
# `python -m minitransformer homework check . {a.id}` in a fresh process (your files as
# they are now, the public seed 0).

# %%
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent if "__file__" in globals() else Path.cwd()
done = subprocess.run([sys.executable, "-m", "minitransformer", "homework", "check", ".", "{a.id}"],
                      cwd=HERE, capture_output=True, text=True)
print(done.stdout + done.stderr)
'''
