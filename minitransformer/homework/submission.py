"""A submission as students hand it in, laid over a pristine student copy.

A submission is a folder of the student's files: the whole copy, a few edited
files with their paths, or the files alone (Gradescope puts an upload in
``/autograder/submission``). Nothing in it is executed here, only parsed: for every
assignment target, the first file that defines it (preferring the file at the
target's own path) gives the target's BODY, which replaces the stub in a fresh
copy of the pristine export. Everything else (other functions, module-level code,
imports, a sitecustomize.py, other files) is ignored, and each ignored piece is
named in the notes the report shows.

``stage(submission)`` -> (the staged folder holding minitransformer/, notes). The
staged copy is readable by everyone and writable by its owner only, so the
unprivileged child can import it and change nothing.
"""
from __future__ import annotations

import ast
import atexit
import os
import shutil
import tempfile
from pathlib import Path

from .assignments import ASSIGNMENTS
from .export import MANIFEST, _find, body_span, export

MAX_FILES, MAX_BYTES = 500, 1 << 20
_PRISTINE: dict = {}


def pristine_copy() -> Path:
    """The student's copy of every assignment, exported once per process."""
    if "dir" not in _PRISTINE:
        root = Path(tempfile.mkdtemp(prefix="mt-pristine-"))
        atexit.register(shutil.rmtree, root, True)
        export(["all"], root / "copy", expectations=False)
        _PRISTINE["dir"] = root / "copy"
    return _PRISTINE["dir"]


def _python_files(submission: Path) -> list:
    files = []
    for path in sorted(submission.rglob("*")):
        if len(files) >= MAX_FILES:
            break
        if path.is_file() and not path.is_symlink():
            files.append(path)
    return files


def _parse(path: Path):
    if path.suffix != ".py" or path.stat().st_size > MAX_BYTES:
        return None, None
    try:
        source = path.read_text(encoding="utf-8")
        return source, ast.parse(source)
    except (SyntaxError, UnicodeDecodeError, ValueError) as e:
        return source if "source" in locals() else None, e


def _candidates(target, parsed: dict) -> list:
    """The parsed files defining ``target``, the one at the target's own path first."""
    own = Path(*target.module.split(".")).with_suffix(".py").as_posix()
    found = []
    for rel, (source, tree) in parsed.items():
        if isinstance(tree, ast.Module):
            try:
                found.append((not rel.endswith(own), rel, source, _find(tree, target.qualname)))
            except LookupError:
                pass
    return [f[1:] for f in sorted(found, key=lambda f: (f[0], f[1]))]


def _body_lines(source: str, func, indent_to: int) -> list:
    """The body of ``func`` after its docstring, re-indented from its column to ``indent_to``."""
    start, end = body_span(func)
    lines = source.splitlines(keepends=True)[start:end]
    shift = indent_to - func.col_offset
    if shift > 0:
        return [(" " * shift + ln) if ln.strip() else ln for ln in lines]
    return [ln[-shift:] if ln[:-shift].strip() == "" else ln.lstrip() for ln in lines] if shift else lines


def take_body(copy_source: str, qualname: str, source: str, func) -> str:
    """``copy_source`` with the body of ``qualname`` replaced by ``func``'s body from ``source``."""
    target = _find(ast.parse(copy_source), qualname)
    start, end = body_span(target)
    lines = copy_source.splitlines(keepends=True)
    body = _body_lines(source, func, target.col_offset)
    if not body or not "".join(body).strip():
        return copy_source
    if not body[-1].endswith("\n"):
        body[-1] += "\n"
    return "".join(lines[:start] + body + lines[end:])


def _outside(tree, pristine, qualnames) -> list:
    """The top-level statements of ``tree`` that neither hold a target nor stand as they are in
    ``pristine``: what the student changed outside the graded bodies."""
    tops = {q.split(".")[0] for q in qualnames}
    kept = {ast.dump(n) for n in pristine.body}
    return [n for n in tree.body if getattr(n, "name", None) not in tops and ast.dump(n) not in kept]


def _describe(node) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return f"{'class' if isinstance(node, ast.ClassDef) else 'def'} {node.name}"
    return f"line {node.lineno}: {ast.unparse(node).splitlines()[0][:40]}"


def stage(submission, assignments=ASSIGNMENTS) -> tuple:
    """(staged folder, notes): a fresh pristine copy with the submission's target bodies."""
    submission = Path(submission)
    root = Path(tempfile.mkdtemp(prefix="mt-staged-"))
    shutil.copytree(pristine_copy() / "minitransformer", root / "minitransformer")
    files = [p for p in _python_files(submission)          # a file as handed out holds no body: not parsed
             if not _as_handed_out(p, p.relative_to(submission).as_posix())]
    parsed = {p.relative_to(submission).as_posix(): _parse(p) for p in files}
    notes, used = [], {}
    for a in assignments:
        for t in a.targets:
            for rel, source, func in _candidates(t, parsed):
                path = (root / "minitransformer" / Path(*t.module.split("."))).with_suffix(".py")
                new = take_body(path.read_text(encoding="utf-8"), t.qualname, source, func)
                try:
                    ast.parse(new)
                except SyntaxError:
                    notes.append(f"{rel}: the body of {t.qualname} does not fit its place; not taken")
                    continue
                path.write_text(new, encoding="utf-8")
                used.setdefault(rel, []).append(t)
                break
    for rel, (source, tree) in parsed.items():
        if rel != MANIFEST:
            notes += _ignored(rel, source, tree, used.get(rel, []))
    for path in root.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chmod(root, 0o755)
    return root, notes


def _as_handed_out(path: Path, rel: str) -> bool:
    """Whether the file is one of the student's copy, unchanged (no note for those)."""
    for candidate in (pristine_copy() / rel, pristine_copy() / "minitransformer" / rel):
        if candidate.is_file():
            try:
                return candidate.read_bytes() == path.read_bytes()
            except OSError:
                return False
    return False


def _ignored(rel: str, source, tree, targets: list) -> list:
    if isinstance(tree, SyntaxError):
        return [f"{rel}: not valid Python ({tree.msg}, line {tree.lineno}); ignored"]
    if tree is None:
        return [f"{rel}: not a Python file; ignored"]
    if not targets:
        return [f"{rel}: holds none of the assignments' functions; ignored"]
    pristine = (pristine_copy() / "minitransformer" / Path(*targets[0].module.split("."))).with_suffix(".py")
    qualnames = [t.qualname for t in targets]
    changed = _outside(tree, ast.parse(pristine.read_text(encoding="utf-8")), qualnames)
    if changed:
        shown = ", ".join(_describe(n) for n in changed[:4]) + (" ..." if len(changed) > 4 else "")
        return [f"{rel}: only the bodies of {', '.join(qualnames)} are graded; ignored: {shown}"]
    return []
