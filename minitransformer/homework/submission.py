"""A submission as students hand it in, laid over the grader's pristine copy.

A submission is a folder of the student's files: the whole copy, a few edited files
with their paths, or the files alone (Gradescope puts an upload in
``/autograder/submission``). Nothing in it is executed here, and only the files at
the package's paths are read: for every assignment target, its module's file is
looked up where a student puts it (``minitransformer/functional/norm.py``,
``functional/norm.py`` or ``norm.py``, in the submission or in one folder of it),
opened one folder at a time without following a link (a folder of the submission
that is a link to the grader's own reference, or to a classmate's folder, is not the
student's work), its size bounded before it is read, its text decoded as Python
decodes source (a BOM, a coding cookie), parsed with ``ast``; the first file that defines the target
(its own path first) gives the target's BODY, which replaces the stub in a fresh copy
of the pristine package (export.pristine). A ``.venv``, 100,000 other files or a
huge file elsewhere are never read, so they cannot push the real file out. Everything
else (other functions, module-level code, imports, a sitecustomize.py, other files)
is ignored, and each ignored piece is named in the notes the report shows, from a
listing bounded in entries and depth.

``stage(submission)`` -> (the staged folder holding minitransformer/, notes). The
staged copy is readable by everyone and writable by its owner only, so the
unprivileged child can import it and change nothing.

A file handed in without its folder is taken by its name alone, so a name two graded
files share (``functional/attention.py`` and ``layers/attention.py`` are both
``attention.py``) does not say which one it is: such a hand-in is refused, one line
naming the files (``Ambiguous``), never staged and never scored 0.
"""
from __future__ import annotations

import ast
import atexit
import errno
import io
import os
import shutil
import stat
import tempfile
import tokenize
from pathlib import Path

from .expected import in_student_copy
from .export import MANIFEST, NOT_STAGED, PACKAGE_DIR, _find, body_span, pristine, source_lines
from ..trace.compare import NAME as TRACE_NAME
from .local import handed_out

MAX_BYTES = 1 << 20          # a source file larger than this is not read
MAX_LISTED = 2000            # entries of the submission looked at for the notes
MAX_DEPTH = 8                # folders deep the listing goes
MAX_FOLDERS = 16             # folders of the submission looked into for a nested copy
SKIPPED = ("__pycache__", "site-packages", "node_modules", "venv", "env")
PARSE_ERRORS = (SyntaxError, ValueError, RecursionError, MemoryError, UnicodeDecodeError, LookupError)
_PRISTINE: dict = {}


def pristine_copy() -> Path:
    """The folder holding the grader's pristine minitransformer/ (every assignment of the course
    stubbed), made once per process and course (registry.FOLDERS) and removed when the process ends
    (a check-class worker ends without atexit: multiprocessing's finalizer then). In a student's
    copy (its local check), made of the copy as it was handed out (homework/local.py), never of the
    student's files: a helper they added outside a body is missing there as in the grader's."""
    from .registry import FOLDERS
    course = tuple(str(f) for f in FOLDERS)
    if course not in _PRISTINE:
        import multiprocessing.util
        root = Path(tempfile.mkdtemp(prefix="mt-pristine-"))
        atexit.register(shutil.rmtree, root, True)
        multiprocessing.util.Finalize(None, shutil.rmtree, args=(root, True), exitpriority=0)
        source = handed_out() if in_student_copy() else None
        if source is None:
            pristine(root / "copy" / "minitransformer")
        else:
            pristine(root / "copy" / "minitransformer", package_dir=source / "minitransformer")
        _PRISTINE[course] = root / "copy"
    return _PRISTINE[course]


# ------------------------------------------------------------------ reading as Python reads
class Unreadable(ValueError):
    """A file at a package path that is not read or not parsed; the message says why."""


LINKED = "a link, or in a folder that is one (links in a submission are not followed); not read"


def _open_below(root: Path, path: Path) -> int:
    """A read-only descriptor of ``path``, a file under the submission folder ``root``, opened one
    folder at a time without following a link (``openat`` with O_NOFOLLOW: a link swapped in
    between a check and the open is refused too) and without waiting on a FIFO. FileNotFoundError
    when it is not there, Unreadable when a link is on the way."""
    parts = path.relative_to(root).parts
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    nofollow = getattr(os, "O_NOFOLLOW", 0)
    if not (nofollow and os.open in os.supports_dir_fd):       # no openat (Windows): lstat each step
        for i in range(1, len(parts) + 1):
            if os.path.islink(root.joinpath(*parts[:i])):
                raise Unreadable(LINKED)
        return os.open(path, flags)
    fd, part = os.open(root, flags | os.O_DIRECTORY), ""
    try:
        for part in parts[:-1]:
            below = os.open(part, flags | nofollow | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = below
        part = parts[-1]
        return os.open(part, flags | nofollow | os.O_NONBLOCK, dir_fd=fd)
    except OSError as e:
        if e.errno == errno.ELOOP or _is_link(part, fd):         # a link to a folder: ENOTDIR on Linux
            raise Unreadable(LINKED) from None
        if e.errno in (errno.ENOENT, errno.ENOTDIR):
            raise FileNotFoundError(e.errno, e.strerror, str(path)) from None
        raise
    finally:
        os.close(fd)


def _is_link(name: str, dir_fd: int) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_bytes(root: Path, path: Path) -> bytes:
    """The bytes of ``path`` under ``root`` (_open_below): a regular file of at most MAX_BYTES,
    checked on the descriptor before reading."""
    with os.fdopen(_open_below(root, path), "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise Unreadable("not a regular file (a folder, a FIFO or a device); not read")
        if info.st_size > MAX_BYTES:
            raise Unreadable(f"{info.st_size:,} bytes, more than {MAX_BYTES:,}; not read")
        data = f.read(MAX_BYTES + 1)
    if len(data) > MAX_BYTES:
        raise Unreadable(f"more than {MAX_BYTES:,} bytes; not read")
    return data


def read_source(root: Path, path: Path) -> str:
    """The text of ``path``, a source file under the submission folder ``root``, as Python reads it:
    read_bytes, decoded with its BOM or coding cookie (PEP 263), else UTF-8."""
    data = read_bytes(root, path)
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
        return data.decode(encoding)
    except PARSE_ERRORS as e:
        raise Unreadable(f"not readable as Python source ({type(e).__name__}: {_first_line(e)})") from None


def parse_source(source: str) -> ast.Module:
    """``ast.parse``, its failures (too deep, too large, invalid) as one Unreadable."""
    try:
        return ast.parse(source)
    except SyntaxError as e:
        raise Unreadable(f"not valid Python ({e.msg}, line {e.lineno})") from None
    except PARSE_ERRORS as e:
        raise Unreadable(f"cannot be parsed ({type(e).__name__}: {_first_line(e) or 'nested too deeply'})") from None


def _first_line(e: BaseException) -> str:
    return str(e).splitlines()[0][:120] if str(e) else ""


# ------------------------------------------------------------------ where a student puts a file
def _folders(submission: Path) -> list:
    """The submission and the folders directly in it that may hold a copy (a zipped folder), the
    ones holding minitransformer/ first; at most MAX_FOLDERS, hidden and environment folders skipped."""
    found = []
    try:
        with os.scandir(submission) as entries:
            for n, entry in enumerate(entries):
                if n >= MAX_LISTED:
                    break
                if entry.is_dir(follow_symlinks=False) and not entry.name.startswith(".") \
                        and entry.name not in SKIPPED + ("minitransformer",):
                    found.append(Path(entry.path))
    except OSError:
        pass
    found.sort(key=lambda p: (not (p / "minitransformer").is_dir(), p.name))
    return [submission] + found[:MAX_FOLDERS]


def _places(submission: Path, target) -> list:
    """The paths where the file of ``target``'s module may be, its own path first."""
    module = Path(*target.module.split(".")).with_suffix(".py")
    places = []
    for folder in _folders(submission):
        places += [folder / "minitransformer" / module, folder / module]
    return places + [folder / module.name for folder in _folders(submission)]


class Parsed:
    """The files of the submission ``root`` read so far: path -> (source, tree) or an Unreadable."""

    def __init__(self, root: Path):
        self.root, self.files = root, {}

    def get(self, path: Path):
        if path not in self.files:
            try:
                source = read_source(self.root, path)
                self.files[path] = (source, parse_source(source))
            except FileNotFoundError:
                self.files[path] = None
            except (Unreadable, OSError) as e:
                self.files[path] = e if isinstance(e, Unreadable) else Unreadable(f"not readable ({e.strerror})")
        return self.files[path]


def _candidates(target, submission: Path, parsed: Parsed) -> list:
    """(path, source, def node) of each file that defines ``target``, in the order of _places."""
    found = []
    for path in dict.fromkeys(_places(submission, target)):
        entry = parsed.get(path)
        if isinstance(entry, tuple):
            try:
                found.append((path, entry[0], _find(entry[1], target.qualname)))
            except LookupError:
                pass
    return found


class Ambiguous(ValueError):
    """A hand-in whose file names alone do not say which of the package's files each one is."""


def ambiguous(submission: Path, assignments) -> str | None:
    """The one line refusing ``submission``, or None: a file handed in by its name alone (not at a
    package path) whose name two graded files share, while one of them is not handed in at its path."""
    shared: dict = {}
    for module in dict.fromkeys(t.module for a in assignments for t in a.targets):
        rel = Path(*module.split(".")).with_suffix(".py")
        shared.setdefault(rel.name, []).append(rel)
    folders = _folders(submission)
    for name, rels in shared.items():
        if len(rels) < 2:
            continue
        at_path = {r: [f / r for f in folders] + [f / "minitransformer" / r for f in folders] for r in rels}
        placed = {path for paths in at_path.values() for path in paths}
        flat = [f / name for f in folders if f / name not in placed and (f / name).is_file()]
        if flat and not all(any(path.is_file() for path in paths) for paths in at_path.values()):
            where = " or ".join(f"minitransformer/{r.as_posix()}" for r in rels)
            return (f"{_rel(flat[0], submission)}: is it {where}? Both are named {name} and both are graded: "
                    "hand in the folder, or each file with its path inside the package (a zip keeps the "
                    "paths); nothing was graded")
    return None


# ------------------------------------------------------------------ a body laid over the stub
def _body_lines(source: str, func, indent_to: int) -> list:
    """The body of ``func`` after its docstring, re-indented from its column to ``indent_to``."""
    start, end = body_span(func)
    lines = source_lines(source)[start:end]
    shift = indent_to - func.col_offset
    if shift > 0:
        return [(" " * shift + ln) if ln.strip() else ln for ln in lines]
    return [ln[-shift:] if ln[:-shift].strip() == "" else ln.lstrip() for ln in lines] if shift else lines


def take_body(copy_source: str, qualname: str, source: str, func) -> str:
    """``copy_source`` with the body of ``qualname`` replaced by ``func``'s body from ``source``."""
    target = _find(ast.parse(copy_source), qualname)
    start, end = body_span(target)
    lines = source_lines(copy_source)
    body = _body_lines(source, func, target.col_offset)
    if not body or not "".join(body).strip():
        return copy_source
    if not body[-1].endswith(("\n", "\r")):
        body[-1] += "\n"
    return "".join(lines[:start] + body + lines[end:])


def _stage_target(root: Path, t, rel: str, source: str, func) -> str | None:
    """Lay one body into the staged copy; a note when it cannot be."""
    path = (root / "minitransformer" / Path(*t.module.split("."))).with_suffix(".py")
    try:
        new = take_body(path.read_text(encoding="utf-8"), t.qualname, source, func)
        ast.parse(new)
    except SyntaxError:
        return f"{rel}: the body of {t.qualname} does not fit its place; not taken"
    except PARSE_ERRORS as e:
        return f"{rel}: the body of {t.qualname} cannot be parsed ({type(e).__name__}); not taken"
    path.write_text(new, encoding="utf-8")
    return None


def stage(submission, assignments=None, places=None, *, listed: bool = True, handed_out_bodies=()) -> tuple:
    """(staged folder, notes): a fresh pristine copy with the submission's target bodies (of every
    assignment when ``assignments`` is None); Ambiguous (nothing staged) for file names that do not
    say which file they are. ``places`` (a places.Places) receives where each staged body is in the
    student's file, so a report names the student's lines, never the staging folder's. The local
    check (homework/local.py) lists nothing of the submission (``listed=False``: the notes are the
    bodies not taken) and lays the bodies of ``handed_out_bodies`` (assignments) as the copy was
    handed out."""
    from .registry import assignments as every_assignment
    assignments = every_assignment() if assignments is None else assignments
    submission = Path(submission)
    refused = ambiguous(submission, assignments)
    if refused:
        raise Ambiguous(refused)
    root = Path(tempfile.mkdtemp(prefix="mt-staged-"))
    try:
        shutil.copytree(pristine_copy() / "minitransformer", root / "minitransformer")
        parsed = Parsed(submission)
        notes, used, taken = _lay(root, submission, assignments, parsed)
        if listed:
            notes += _notes(submission, parsed, used)
        else:
            notes += [f"{_rel(path, submission)}: {entry}; ignored" for path, entry in parsed.files.items()
                      if isinstance(entry, Unreadable)]
        if handed_out_bodies:
            _lay(root, handed_out(), handed_out_bodies, Parsed(handed_out()))
        if places is not None:
            _record_places(places, root, submission, taken)
        for path in root.rglob("*"):
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        os.chmod(root, 0o755)
    except BaseException:
        shutil.rmtree(root, ignore_errors=True)
        raise
    return root, notes


def _lay(root: Path, submission: Path, assignments, parsed: Parsed) -> tuple:
    """(notes, path -> the targets taken from it, (target, path, source, def) of each body taken):
    each target's body from the first file of ``submission`` that defines it and whose body fits,
    laid into the staged copy at ``root``."""
    notes, used, taken = [], {}, []
    for a in assignments:
        for t in a.targets:
            candidates = _candidates(t, submission, parsed)
            for i, (path, source, func) in enumerate(candidates):
                note = _stage_target(root, t, _rel(path, submission), source, func)
                if note:
                    notes.append(note)
                    continue
                used.setdefault(path, []).append(t)
                taken.append((t, path, source, func))
                notes += _other_versions(t, submission, path, func, candidates[i + 1:])
                break
    return notes, used, taken


TWO_VERSIONS = "two versions"        # a note the gradebook shows too: the student meant one of them


def _other_versions(t, submission: Path, path: Path, func, others: list) -> list:
    """A note for each other file of the hand-in that defines ``t`` with another body (a file handed
    in twice, at its path and by its name): the first one, in the order of _places, is graded."""
    mine = ast.dump(ast.Module(body=func.body, type_ignores=[]))
    return [f"{TWO_VERSIONS} of {t.qualname}: graded {_rel(path, submission)}'s, ignored {_rel(other, submission)}'s"
            for other, _, f in others if ast.dump(ast.Module(body=f.body, type_ignores=[])) != mine]


def _record_places(places, root: Path, submission: Path, taken: list) -> None:
    """Each staged body's lines in the staged file (read once every body is in: a body laid in
    above another moves it) and in the student's file."""
    staged: dict = {}
    for t, path, source, func in taken:
        rel = (Path("minitransformer") / Path(*t.module.split("."))).with_suffix(".py").as_posix()
        if rel not in staged:
            staged[rel] = ast.parse((root / rel).read_text(encoding="utf-8"))
        span = body_span(_find(staged[rel], t.qualname))
        start, end = body_span(func)
        places.add(str(t), rel, span, _rel(path, submission), (start, end), func.lineno,
                   source_lines(source)[start:end])


def _rel(path: Path, submission: Path) -> str:
    return path.relative_to(submission).as_posix()


# ------------------------------------------------------------------ what was ignored
def listing(submission: Path) -> tuple:
    """(the files of the submission, whether the listing stopped early): at most MAX_LISTED
    entries, MAX_DEPTH folders deep, links listed and not followed."""
    files, seen, stack = [], 0, [(submission, 0)]
    while stack:
        folder, depth = stack.pop()
        try:
            entries = os.scandir(folder)
        except OSError:
            continue
        with entries:
            for entry in entries:
                seen += 1
                if seen > MAX_LISTED:
                    return sorted(files), True
                if entry.is_symlink():
                    files.append(Path(entry.path))               # noted as a link, never followed
                elif entry.is_dir() and entry.name != "__pycache__":
                    if depth + 1 < MAX_DEPTH:
                        stack.append((Path(entry.path), depth + 1))
                    else:
                        files.append(Path(entry.path))           # noted as a folder too deep
                elif entry.is_file():
                    files.append(Path(entry.path))
    return sorted(files), False


def _notes(submission: Path, parsed: Parsed, used: dict) -> list:
    """A note for each file of the submission the grader did not take whole: the files it read
    (at a package path) say what of them was ignored; the others are named, never read."""
    files, cut = listing(submission)
    notes = []
    for path in files:
        rel = _rel(path, submission)
        if path.is_symlink():
            notes.append(f"{rel}: {LINKED.replace('; not read', '')}; ignored")
            continue
        if rel == MANIFEST or _the_exports_own(rel) or (path not in used and _as_handed_out(submission, path, rel)):
            continue
        if path.is_dir():
            notes.append(f"{rel}: more than {MAX_DEPTH} folders deep; not read")
            continue
        if path.suffix != ".py":
            notes.append(f"{rel}: not a Python file; ignored")
            continue
        if path not in parsed.files:
            notes.append(f"{rel}: not a file of an assignment at its path; ignored (not read)")
            continue
        notes += _ignored(rel, parsed.get(path), used.get(path, []))
    listed = set(files)
    notes += [f"{_rel(path, submission)}: {entry}; ignored" for path, entry in parsed.files.items()
              if isinstance(entry, Unreadable) and path not in listed]       # under a link, a FIFO
    if cut:
        notes.append(f"... and more: the listing of the submission stops at {MAX_LISTED} entries (none read)")
    return notes


def _the_exports_own(rel: str) -> bool:
    """What an export writes beside the package (the handout, the starters), the copy's folders the
    grader never stages (NOT_STAGED) and Python's caches: no note for those in a whole copy handed in."""
    name, parts = rel.rsplit("/", 1)[-1], rel.split("/")
    if len(parts) > 2 and parts[0] == "minitransformer" and parts[1] in NOT_STAGED:
        return True                      # the copy's own homework/, lectures: never graded, never read
    if rel in (f"minitransformer/trace/{TRACE_NAME}.json", f"minitransformer/trace/{TRACE_NAME}.npz"):
        return True                      # the reference trace's numbers the export stores (trace/compare.py)
    return rel == "HOMEWORK.md" or ("/" not in rel and name.startswith("starter_") and name.endswith(".py")) \
        or "__pycache__/" in rel or name.endswith(".pyc")


def _as_handed_out(submission: Path, path: Path, rel: str) -> bool:
    """Whether the file is one of the student's copy, unchanged (no note for those): as the pristine
    copy has it (every assignment stubbed), or as this installation has it (a file the export shipped
    working, no assignment of the copy in it)."""
    installed = PACKAGE_DIR.parent
    for candidate in (pristine_copy() / rel, pristine_copy() / "minitransformer" / rel,
                      installed / rel, installed / "minitransformer" / rel):
        try:
            if candidate.is_file() and os.lstat(path).st_size == candidate.stat().st_size <= MAX_BYTES:
                return candidate.read_bytes() == read_bytes(submission, path)
        except (OSError, Unreadable):
            return False
    return False


def _outside(tree, pristine_tree, qualnames) -> list:
    """The top-level statements of ``tree`` that neither hold a target nor stand as they are in
    ``pristine_tree``: what the student changed outside the graded bodies."""
    tops = {q.split(".")[0] for q in qualnames}
    kept = {ast.dump(n) for n in pristine_tree.body}
    return [n for n in tree.body if getattr(n, "name", None) not in tops and ast.dump(n) not in kept]


def _describe(node) -> str:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return f"{'class' if isinstance(node, ast.ClassDef) else 'def'} {node.name}"
    return f"line {node.lineno}: {ast.unparse(node).splitlines()[0][:40]}"


def _ignored(rel: str, entry, targets: list) -> list:
    if isinstance(entry, Unreadable):
        return [f"{rel}: {entry}; ignored"]
    if not targets:
        return [f"{rel}: holds none of the assignments' functions; ignored"]
    source, tree = entry
    pristine_file = (pristine_copy() / "minitransformer" / Path(*targets[0].module.split("."))).with_suffix(".py")
    qualnames = [t.qualname for t in targets]
    try:
        changed = _outside(tree, ast.parse(pristine_file.read_text(encoding="utf-8")), qualnames)
        shown = ", ".join(_describe(n) for n in changed[:4]) + (" ..." if len(changed) > 4 else "")
    except PARSE_ERRORS:
        changed, shown = [None], "code nested too deeply to show"
    if changed:
        return [f"{rel}: only the bodies of {', '.join(qualnames)} are graded; ignored: {shown}"]
    return []


SYNTAX_ERROR = "syntax error"


def syntax_error(submission: Path, assignment, parsed=None) -> str:
    """The first file at one of the assignment's places that is not valid Python: its path and line
    ("" when none): the grader stages the stub there, and the student should hear why."""
    parsed = Parsed(submission) if parsed is None else parsed
    for t in assignment.targets:
        for path in _places(submission, t):
            entry = parsed.get(path)
            if isinstance(entry, Unreadable) and "not valid Python" in str(entry):
                return f"{path.relative_to(submission).as_posix()}: {entry}"
    return ""
