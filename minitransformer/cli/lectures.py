"""`python -m minitransformer lectures`: the lectures, copied out of the package to run anywhere.

    lectures --list                 each lecture with its title
    lectures --out DIR              the lectures, their helpers (_lecture.py, _quiz.py), README.md
                                    and ERRATA.md (when there is one) into DIR, created if missing
    lectures --out DIR --force      into a folder that is not empty: the lectures' own files are
                                    overwritten, nothing else there is touched or deleted

The lectures ship inside the package (minitransformer/lectures/ of an installed
wheel; the repository's lectures/ in a source checkout or an editable install).
A copied-out lecture finds its helpers next to it and writes its figures to
DIR/_out/: ``cd DIR && python 01_attention.py``, or ``python DIR/01_attention.py``
from anywhere, or DIR opened in Jupyter (jupytext). A bad --out prints one line
``error: ...`` on stderr and exits with 2.
"""
from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

from ..validate import check_writable_dir

PACKAGE = Path(__file__).resolve().parents[1]
SHIPPED_SUFFIXES = (".py", ".md")      # a lecture, a helper, README.md, ERRATA.md


def lectures_dir() -> Path:
    """The folder holding the lectures: the package's own lectures/ (a wheel), else the
    repository's lectures/ beside the package (a source checkout, an editable install)."""
    for folder in (PACKAGE / "lectures", PACKAGE.parent / "lectures"):
        if (folder / "_lecture.py").is_file():
            return folder
    raise FileNotFoundError(f"no lectures found: neither {PACKAGE / 'lectures'} nor "
                            f"{PACKAGE.parent / 'lectures'} holds _lecture.py (a broken installation?)")


def lecture_files(folder: Path) -> list[Path]:
    """What an export copies: every .py and .md file of ``folder`` (no subfolder, no __init__.py)."""
    return sorted(p for p in folder.iterdir()
                  if p.is_file() and p.suffix in SHIPPED_SUFFIXES and p.name != "__init__.py")


def lecture_title(path: Path) -> str:
    """The first markdown heading of a lecture (``# # Lecture 1: ...`` -> ``Lecture 1: ...``)."""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("# # "):
            return line[len("# # "):].strip()
    return ""


def export_lectures(out, force: bool = False) -> list[Path]:
    """Copy the lecture files into the folder ``out``; returns the files written.

    ValueError naming --out when ``out`` is not empty and ``force`` is False; OSError
    naming --out when it cannot be created or written. Nothing is ever deleted.
    """
    files = lecture_files(lectures_dir())
    out = Path(check_writable_dir("--out", out))
    present = sorted(os.listdir(out))
    if present and not force:
        raise ValueError(f"--out: expected an empty or new folder, got {str(out)!r} holding "
                         f"{len(present)} entries ({', '.join(present[:3])}{', ...' if len(present) > 3 else ''}); "
                         f"--force overwrites the lectures' own files there and leaves the rest")
    return [Path(shutil.copyfile(src, out / src.name)) for src in files]


def _list() -> int:
    for path in lecture_files(lectures_dir()):
        if path.name[:2].isdigit():
            print(f"{path.name:<36} {lecture_title(path)}")
    return 0


def run_lectures(args) -> int:
    if args.list and args.force:
        print("error: --force: goes with --out DIR, not with --list", file=sys.stderr)
        return 2
    try:
        if args.list:
            return _list()
        written = export_lectures(args.out, force=args.force)
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    lectures = [p.name for p in written if p.name[:2].isdigit()]
    print(f"wrote {len(written)} files to {args.out}: {len(lectures)} lectures ({lectures[0]} ... "
          f"{lectures[-1]}) and {', '.join(p.name for p in written if p.name not in lectures)}")
    print(f"run one: cd {shlex.quote(args.out)} && python {lectures[0]}   (figures go to {args.out}/_out/)")
    said = _in_a_copy(Path(args.out))
    if said:
        print(said)
    return 0


def _in_a_copy(out: Path) -> str | None:
    """In a student's homework copy: which minitransformer the copied lectures will import."""
    from ..homework.expected import in_student_copy
    if not in_student_copy():
        return None
    root = PACKAGE.parent
    if out.resolve().is_relative_to(root):
        return f"they import this copy's minitransformer, your code ({root}): _lecture.py finds the copy it lies in"
    return (f"note: {out} is outside your homework copy ({root}): lectures there import an installed "
            "minitransformer, not your code; copy them into the copy (--out lectures, run there)")


def add_lectures_arguments(p) -> None:
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument("--out", help="the folder to copy the lectures into (created if missing; must be "
                                    "empty unless --force)")
    what.add_argument("--list", action="store_true", help="print each lecture with its title")
    p.add_argument("--force", action="store_true",
                   help="copy into a folder that is not empty: overwrite the lectures' own files, "
                        "touch nothing else")
