"""What every lecture shares: the fast-mode switch, the figure folder, and showing figures.

    FAST   MINITRANSFORMER_FAST=1: smaller models, fewer steps (the tests run this way)
    OUT    MINITRANSFORMER_LECTURE_OUT, else _out/ beside this file (lectures/_out/, git-ignored;
           DIR/_out/ in a copy from `python -m minitransformer lectures --out DIR`), created here
    COPY   the student's homework copy this file lies in (None elsewhere): its folder goes first
           on sys.path, so the lecture imports the student's minitransformer, never an installed
           one; every lecture imports this helper before minitransformer for that reason

    save_figure(fig, name)   writes OUT/name; opened as a notebook, also shows it inline
    show_png(path)           shows a PNG a plotting function wrote (notebook only)
"""
import os
import sys
from pathlib import Path

# The mark a homework export leaves in its copy (homework/expected.py, MARKER). Read as a path, not
# through the package: this helper must find the copy before any minitransformer is imported.
COPY_MARK = Path("minitransformer", "homework", "copy.json")


def copy_root(start: Path):
    """The folder holding a student's copy of the package (its mark) at or above ``start``; else None."""
    for folder in (start, *start.parents):
        if (folder / COPY_MARK).is_file():
            return folder
    return None


COPY = copy_root(Path(__file__).resolve().parent)
if COPY is not None and sys.path[:1] != [str(COPY)]:
    sys.path.insert(0, str(COPY))      # before site-packages and an editable install's finder

FAST = os.environ.get("MINITRANSFORMER_FAST") == "1"
OUT = Path(os.environ.get("MINITRANSFORMER_LECTURE_OUT", Path(__file__).parent / "_out"))
OUT.mkdir(parents=True, exist_ok=True)


def in_notebook() -> bool:
    """True when an IPython kernel runs this code (Jupyter, nbconvert), False for a script."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and "IPKernelApp" in getattr(shell, "config", {})


def show_png(path) -> Path:
    """Show the PNG at ``path`` inline in a notebook; as a script the file is the figure."""
    path = Path(path)
    if in_notebook():
        from IPython.display import Image, display
        display(Image(filename=str(path)))
    return path


def save_figure(fig, name: str) -> Path:
    """Write the matplotlib Figure ``fig`` to OUT/name (PNG, 100 dpi) and show it in a notebook."""
    path = OUT / name
    fig.savefig(path, dpi=100)
    return show_png(path)
