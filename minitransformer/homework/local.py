"""A student's local check, staged and graded as the grader stages and grades.

The grader lays the bodies of the assignment's functions, and nothing else of a
submission, over its pristine copy (the reference, every assignment stubbed:
homework/submission.py), and answers the functions the graded assignment builds on with
the reference (homework/needs.py). A student's copy holds no reference, so its local check
does the same with what the copy has:

    the pristine copy   the copy's package as it was handed out (``copy.zip``, written by
                        the export: the exported sources, no more than the copy itself
                        holds), every assignment stubbed; the student's bodies are laid
                        over it, so a helper outside a body is missing here as it is there
    what it builds on   run in the walled-in child, as the staged copy holds it: the
                        student's own bodies where the copy assigns it too (attention runs
                        the student's softmax: said in the report, with softmax's score),
                        the copy's code as handed out otherwise (the reference it ships)
    the walls           the grader's, as far as this machine and user can raise them; what
                        stood is said, and where one is missing the check goes on (the
                        student's own machine, and nothing secret is in the copy)

Before grading, homework/outside.py names each piece of code the student changed or added
outside the graded bodies (compared with ``copy.zip``): the grader will not see it.

    write_handed_out(package_dir)   at export: the package's sources as handed out
    handed_out()                    that package, unpacked (None: a copy without copy.zip)
    plan(assignments)               what the staged copy takes from the student, and what from
                                    the copy as handed out
    where_in_copy(staged, ...)      the staged copy's file and line in a message, as the student's
    used_yours(result, done)        "attention used your softmax_forward ..."
    stubbed_needs(result)           what it builds on that the copy holds stubbed, unasked
    walls_line(report)              which walls stood around the student's code
"""
from __future__ import annotations

import ast
import atexit
import hashlib
import json
import re
import shutil
import tempfile
import zipfile
from functools import lru_cache
from pathlib import Path

from .expected import HERE, copy_assignments
from .export import NOT_STAGED

HANDED_OUT = "copy.zip"               # beside the mark, copy.json
DATA = "data-files.json"               # in copy.zip: the sha256 of each file that is not Python
_STAMP = (2020, 1, 1, 0, 0, 0)         # every entry's date: the same export, the same bytes


# ------------------------------------------------------------------ the copy as handed out
def _files(package_dir: Path) -> list:
    """The package's files the pristine copy is made of, relative to ``package_dir`` (posix)."""
    files = []
    for path in sorted(Path(package_dir).rglob("*")):
        rel = path.relative_to(package_dir)
        if path.is_file() and rel.parts[0] not in NOT_STAGED and "__pycache__" not in rel.parts \
                and path.suffix != ".pyc":
            files.append(rel.as_posix())
    return files


def write_handed_out(package_dir: Path) -> None:
    """The student's copy at ``package_dir`` as exported into homework/copy.zip (what the local check
    stages over, and compares the student's files with): its Python files, and the sha256 of every
    other file (data, a trace's numbers: the check takes them from the copy while they are unchanged)."""
    package_dir = Path(package_dir)
    data = {}
    with zipfile.ZipFile(package_dir / "homework" / HANDED_OUT, "w", zipfile.ZIP_DEFLATED) as z:
        for rel in _files(package_dir):
            content = (package_dir / rel).read_bytes()
            if rel.endswith(".py"):
                z.writestr(zipfile.ZipInfo(rel, _STAMP), content, compress_type=zipfile.ZIP_DEFLATED)
            else:
                data[rel] = hashlib.sha256(content).hexdigest()
        z.writestr(zipfile.ZipInfo(DATA, _STAMP), json.dumps(data, indent=0, sort_keys=True),
                   compress_type=zipfile.ZIP_DEFLATED)


def handed_out_sources(folder: Path = HERE) -> dict | None:
    """rel -> the bytes of each Python file as exported; None for a copy without copy.zip."""
    try:
        with zipfile.ZipFile(Path(folder) / HANDED_OUT) as z:
            return {name: z.read(name) for name in z.namelist() if name.endswith(".py") and _safe(name)}
    except (OSError, zipfile.BadZipFile, KeyError):
        return None


def _safe(rel: str) -> bool:
    return not rel.startswith("/") and ".." not in rel.split("/")


@lru_cache(maxsize=1)
def handed_out() -> Path | None:
    """A folder holding minitransformer/ as this copy was handed out (without homework/ and the
    lectures): every Python file as exported (one the student added is not there, one they removed
    is back), the data files that are as exported; None when the copy has no copy.zip. Made once per
    process, removed at its end."""
    sources = handed_out_sources()
    if sources is None:
        return None
    with zipfile.ZipFile(HERE / HANDED_OUT) as z:
        data = json.loads(z.read(DATA)) if DATA in z.namelist() else {}
    root = Path(tempfile.mkdtemp(prefix="mt-handed-out-"))
    atexit.register(shutil.rmtree, root, True)
    package, live = root / "minitransformer", HERE.parent
    for rel, content in sources.items():
        (package / rel).parent.mkdir(parents=True, exist_ok=True)
        (package / rel).write_bytes(content)
    for rel, digest in data.items():
        try:
            content = (live / rel).read_bytes() if _safe(rel) else None
        except OSError:
            continue
        if content is not None and hashlib.sha256(content).hexdigest() == digest:
            (package / rel).parent.mkdir(parents=True, exist_ok=True)
            (package / rel).write_bytes(content)
    return root


# ------------------------------------------------------------------ what is staged from where
def plan(assignments) -> tuple:
    """(the assignments whose bodies the staged copy takes from the student, those it takes from the copy
    as handed out) to grade ``assignments`` locally: the chosen ones and those they build on that the copy
    assigns too come from the student; the rest they build on from the copy (the reference it ships,
    where the grader asks its own)."""
    from .registry import needed
    own = set(copy_assignments())
    chosen = {a.id for a in assignments}
    built_on = {b.id: b for a in assignments for b in needed(a) if b.id not in chosen}
    theirs = list(assignments) + [b for b in built_on.values() if b.id in own]
    return theirs, [b for b in built_on.values() if b.id not in own]


def where_in_copy(staged: Path, submission: Path, assignments):
    """A function that rewrites "at <staged>/minitransformer/x.py:N" in a report's text to the student's
    file and line (the staged copy lacks what the student has outside the bodies, so its lines are not
    theirs); a line outside the bodies they wrote is the copy's as handed out, and said so."""
    from .export import body_span
    from .outside import find, parse
    spans: dict = {}                             # rel -> [(first staged line, last, first of the student's)]
    for a in assignments:
        for t in a.targets:
            rel = Path("minitransformer", *t.module.split(".")).with_suffix(".py").as_posix()
            try:
                mine, theirs = find(parse((staged / rel).read_bytes()), t.qualname), \
                    find(parse((Path(submission) / rel).read_bytes()), t.qualname)
            except (OSError, SyntaxError, ValueError, RecursionError, UnicodeDecodeError, LookupError):
                continue
            if mine is not None and theirs is not None:
                (s0, s1), (u0, _) = body_span(mine), body_span(theirs)
                spans.setdefault(rel, []).append((s0 + 1, s1, u0 + 1))
    roots = "|".join(re.escape(str(r)) for r in {Path(staged), Path(staged).resolve()})   # the child's is resolved
    pattern = re.compile(f"(?:{roots})" + r"/(minitransformer/[\w/]+\.py):(\d+)")

    def line(match) -> str:
        rel, n = match[1], int(match[2])
        for first, last, theirs in spans.get(rel, []):
            if first <= n <= last:
                return f"{rel}:{n - first + theirs}"
        return f"{rel}:{n} of the copy as handed out"
    return lambda text: pattern.sub(line, text)


def used_yours(result, done: dict) -> str:
    """The line saying which of the student's functions the graded assignment ran on (the grader runs
    the reference's), with their scores where this check graded them (``done``: id -> Result); "" when
    it builds on nothing the copy assigns."""
    from .registry import get, needed
    own = set(copy_assignments())
    theirs = [b for b in needed(get(result.id)) if b.id in own]
    if not theirs:
        return ""
    names = [t.qualname for b in theirs for t in b.targets]
    ids = " or ".join(b.id for b in theirs)
    scores = [f"{b.id}: {_score(done[b.id])} here" for b in theirs if b.id in done]
    return (f"{result.id} used your {listed(names)}; the grader uses the reference: a {ids} bug shows here, not "
            f"in your {result.id} grade" + (f" ({', '.join(scores)})" if scores else
                                             f" (check {ids} too: homework check . {' '.join(b.id for b in theirs)})"))


def stubbed_needs(result) -> str:
    """The line saying which functions the graded assignment builds on are stubs in this copy though no
    assignment of it asks for them (they raise here; the grader answers them with the reference); ""
    when there are none."""
    from .registry import get, needed
    sources, own = handed_out_sources(), set(copy_assignments())
    if sources is None:
        return ""
    stubs = [t.qualname for b in needed(get(result.id)) if b.id not in own for t in b.targets
             if _is_stub(sources.get(Path(*t.module.split(".")).with_suffix(".py").as_posix()), t.qualname)]
    if not stubs:
        return ""
    return (f"{result.id} calls {listed(stubs)}, which this copy holds stubbed though no assignment of it asks "
            f"for {'it' if len(stubs) == 1 else 'them'}: {'it raises' if len(stubs) == 1 else 'they raise'} here; "
            "the grader uses the reference")


def _is_stub(source, qualname: str) -> bool:
    """Whether ``qualname``'s body in ``source`` (bytes) is only ``raise NotImplementedError(...)``."""
    from .outside import find, is_docstring, parse
    try:
        func = find(parse(source), qualname) if source is not None else None
    except (SyntaxError, ValueError):
        return False
    body = [n for n in func.body if not is_docstring(n)] if func is not None else []
    return len(body) == 1 and isinstance(body[0], ast.Raise) and "NotImplementedError" in ast.unparse(body[0])


def _score(result) -> str:
    score = "-" if result.score is None else f"{result.score:g}"
    return f"{score}/{result.max_score:g}" + ("" if result.passed else f" {result.status}")


def listed(names: list) -> str:
    """"a", "a and b", "a, b and c"."""
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " and " + names[-1]


def walls_line(report: dict) -> str:
    """Which of the grader's walls stood around the student's code in this check (the child's report)."""
    from .walls import description
    report = dict(report, user="nobody" if report.get("user") == "nobody" else "your own user")
    lacking = [name for key, name in (("landlock", "Landlock"), ("seccomp", "seccomp"),
                                      ("netns", "a network namespace"), ("nofile", "the open-file limit"))
               if not report.get(key)]
    if not lacking:
        return f"your code ran walled in as the grader walls it ({description(report)})"
    return (f"your code ran behind only some of the grader's walls ({description(report)}): without "
            f"{listed(lacking)}, which this machine or user cannot raise. The grader refuses to grade without "
            "Landlock or seccomp; this check goes on, as it is your own machine and nothing secret is in this "
            "copy (no reference, no secret seed)")
