"""Code of a student's copy that the grader will not see, named before the local check grades.

The grader takes the bodies of the assigned functions and nothing else of a submission
(homework/submission.py). What the student changed or added outside those bodies (a
helper, an import, a constant, a method of a Module, a new file, a changed signature, a
function defined twice) works while they train and is gone when they are graded. The
local check compares the copy with itself as handed out (homework/local.py, copy.zip)
and names each such piece, one line, where it is and what to do:

    _my_helper at minitransformer/functional/norm.py:12 is outside layernorm_backward: the
    grader ignores it; move it inside

An untouched file, a training output, a figure, a lecture copied out: nothing, as they
are as handed out or no code of the package. A file that does not parse is the staging's
to report (no body is taken from it).

    outside(submission, copy_package)   the lines
"""
from __future__ import annotations

import ast
import copy
import io
import tokenize
from pathlib import Path

from .expected import HERE, copy_assignments
from .export import NOT_STAGED, _find
from .local import handed_out_sources, listed


def outside(submission, copy_package: Path = HERE.parent) -> list:
    """One line for each piece of code of ``submission`` (a student's copy) that the student changed or
    added outside the bodies the grader takes: compared with the copy as handed out (``copy_package``'s
    copy.zip, by default this copy's), so an untouched file, a training output or a figure says
    nothing. [] without copy.zip."""
    package = Path(submission) / "minitransformer"
    sources = handed_out_sources(Path(copy_package) / "homework")
    if sources is None or not package.is_dir():
        return []
    graded = _graded_targets(copy_package)
    lines = []
    for path in sorted(package.rglob("*.py")):
        rel = path.relative_to(package).as_posix()
        if rel.split("/")[0] in NOT_STAGED or "__pycache__" in rel or any(p.startswith(".") for p in rel.split("/")):
            continue
        shown = f"minitransformer/{rel}"
        if rel not in sources:
            lines.append(f"{shown} is not in the copy as handed out: the grader ignores it; move what your "
                         "functions use of it inside them")
            continue
        try:
            data = path.read_bytes()
        except OSError:
            continue
        if data != sources[rel]:
            lines += _changes(shown, data, sources[rel], graded.get(rel, []))
    return lines


def _graded_targets(copy_package: Path) -> dict:
    """rel path -> the qualnames of the copy's assigned functions in that file (the bodies it hands in)."""
    from .registry import select
    found: dict = {}
    ids = copy_assignments(copy_package)
    for a in select(ids) if ids else []:
        for t in a.targets:
            found.setdefault(Path(*t.module.split(".")).with_suffix(".py").as_posix(), []).append(t.qualname)
    return found


def _changes(shown: str, data: bytes, was: bytes, qualnames: list) -> list:
    """The warnings of one changed file: its statements outside the graded bodies that are not as handed
    out (a file that does not parse is the staging's to report: no body is taken from it)."""
    try:
        tree, before = parse(data), parse(was)
    except (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeDecodeError, LookupError):
        return []
    bodies = {q: find(tree, q) for q in qualnames}
    bodies = {q: node for q, node in bodies.items() if node is not None}
    lines = []
    for node, where in _outside(tree.body, before.body, qualnames, ""):
        lines.append(_warning(node, where, shown, bodies, before))
    for q in qualnames:
        lines_of = [n.lineno for n in (_class_body(tree, q.split(".")[0]) if "." in q else tree.body)
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == q.split(".")[-1]]
        if len(lines_of) > 1:
            where = listed([str(n) for n in lines_of])
            lines.append(f"{q} is defined {len(lines_of)} times in {shown} (lines {where}): the grader takes the "
                         "first one's body; Python, and so your training, runs the last")
    for q, node in bodies.items():
        old = find(before, q)
        if old is not None and _shell(node) != _shell(old):
            lines.append(f"the signature of {q} at {shown}:{node.lineno} differs from the copy as handed out: "
                         "the grader keeps its own (it takes the body only)")
    return lines


def parse(data: bytes) -> ast.Module:
    """The module ``data`` holds, decoded as Python decodes source."""
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return ast.parse(data.decode(encoding))


def _outside(statements, before, qualnames, prefix) -> list:
    """(node, its dotted name prefix) of each statement that neither holds a graded body nor stands as
    handed out; a class holding a graded method is looked into."""
    kept = {ast.dump(n) for n in before}
    holders = {q.split(".")[0] for q in qualnames if "." in q}
    found = []
    for n in statements:
        name = getattr(n, "name", None)
        if is_docstring(n) or name in qualnames:
            continue
        if isinstance(n, ast.ClassDef) and name in holders and not prefix:
            old = next((b for b in before if isinstance(b, ast.ClassDef) and b.name == name), None)
            methods = [q.split(".", 1)[1] for q in qualnames if q.startswith(name + ".")]
            found += _outside(n.body, old.body if old else [], methods, name + ".")
            continue
        if ast.dump(n) not in kept:
            found.append((n, prefix))
    return found


def is_docstring(node) -> bool:
    return isinstance(node, ast.Expr) and isinstance(getattr(node, "value", None), ast.Constant) and \
        isinstance(node.value.value, str)


def _warning(node, prefix: str, shown: str, bodies: dict, before: ast.Module) -> str:
    name = prefix + _name(node)
    where = f"{name} at {shown}:{node.lineno}"
    if not bodies:
        return f"{where} is not in a body you hand in: the grader ignores it (it uses the copy's own)"
    users = [q for q, body in bodies.items() if _uses(body, _bound(node))]
    inside = listed(users or list(bodies))
    existed = _bound(node) & _bound_in(before.body if not prefix else _class_body(before, prefix[:-1]))
    if existed:
        return f"{where} differs from the copy as handed out: the grader uses its own; make the change inside {inside}"
    return f"{where} is outside {inside}: the grader ignores it; move it inside"


def _name(node) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return node.name
    if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and _bound(node):
        return ", ".join(sorted(_bound(node)))
    return ast.unparse(node).splitlines()[0][:40]


def _bound(node) -> set:
    """The names a top-level statement binds."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return {node.name}
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return {(a.asname or a.name).split(".")[0] for a in node.names}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {n.id for t in targets if t is not None for n in ast.walk(t) if isinstance(n, ast.Name)}


def _bound_in(statements) -> set:
    return {name for n in statements for name in _bound(n)} if statements else set()


def _class_body(tree, name: str) -> list:
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    return node.body if node else []


def _uses(body, names: set) -> bool:
    """Whether a graded function reads any of ``names`` (a name, or an attribute: self.helper)."""
    return any((isinstance(n, ast.Name) and n.id in names) or (isinstance(n, ast.Attribute) and n.attr in names)
               for n in ast.walk(body))


def find(tree, qualname: str):
    """The def or class at ``qualname`` in ``tree``; None where there is none."""
    try:
        return _find(tree, qualname)
    except LookupError:
        return None


def _shell(func) -> str:
    """A def without its body (its name, arguments, decorators, annotations): what the grader keeps."""
    shell = copy.copy(func)
    shell.body = []
    return ast.dump(shell)
