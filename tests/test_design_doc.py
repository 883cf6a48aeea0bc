"""docs/DESIGN.md describes the tree as it is: every path it names exists.

A path is a backticked token with a slash or a file extension (``layers/attention.py``,
``fast/``, ``backend.py``). It is looked up from the repository root, from the package,
and from the folder its table row is about (the first cell, ``layers/``); a bare file
name may also sit anywhere below that folder. A removed file that the page still names
fails here, as ``layers/flat_parameters.py`` once would have.
"""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "minitransformer"
TOKEN = re.compile(r"`([^`\s<>()=,]+)`")
EXTENSIONS = (".py", ".md", ".sh", ".json", ".toml", ".npz")


def _is_path(token: str) -> bool:
    """A file or folder: a slash or an extension, not a bare extension (``.py``) or a flag."""
    if token.startswith(("-", "http")) or (token.startswith(".") and "/" not in token):
        return False
    return "/" in token or token.endswith(EXTENSIONS)


def _exists(token: str, folder: Path | None) -> bool:
    bases = [ROOT, PACKAGE] + ([folder] if folder else [])
    if any((base / token).exists() for base in bases):
        return True
    if "/" not in token.rstrip("/"):
        below = folder or ROOT
        return any(p.name == token.rstrip("/") for p in below.rglob(token.rstrip("/")) if ".venv" not in p.parts)
    return False


def _named_paths():
    """(line number, token, the row's folder or None) for every path token of the page."""
    text = (ROOT / "docs" / "DESIGN.md").read_text(encoding="utf-8")
    for number, line in enumerate(text.splitlines(), 1):
        folder = None
        first = re.match(r"\|\s*`([^`]+/)`", line)            # a table row about a folder
        if first:
            for base in (ROOT, PACKAGE):
                if (base / first.group(1)).is_dir():
                    folder = base / first.group(1)
        for token in TOKEN.findall(line):
            if _is_path(token):
                yield number, token, folder


def test_every_path_the_design_page_names_exists():
    missing = [f"line {n}: {token}" for n, token, folder in _named_paths() if not _exists(token, folder)]
    assert missing == []


def test_the_page_names_paths_at_all():
    """The check above is not vacuous: the page names the files a reader starts from."""
    names = {token for _, token, _ in _named_paths()}
    assert {"models/gpt_reference.py", "functional/attention.py", "functional/repeat_kv.py"} <= names
