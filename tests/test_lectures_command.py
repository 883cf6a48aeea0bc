"""`python -m minitransformer lectures`: the lectures ship in the package and run where they are copied.

The lecture sources live in the repository's lectures/; pyproject.toml maps them to
the package minitransformer.lectures, so a wheel holds them. Checked here: --list,
the export (every tracked file of lectures/, byte for byte), the refusal of a folder
that is not empty and what --force may touch, a copied-out lecture run as a script
from its folder (lectures/README.md's recipe) and from another one (figures under
the copy's _out/), and a wheel built from the tree: its files, and the command run
from the unpacked wheel alone.
"""
from __future__ import annotations

import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from minitransformer.cli import main
from minitransformer.homework.export import export

ROOT = Path(__file__).resolve().parents[1]
LECTURES_DIR = ROOT / "lectures"
LECTURES = sorted(LECTURES_DIR.glob("[0-9][0-9]_*.py"))
SHORT_LECTURE = "02_multihead_and_masks.py"         # among the quickest in fast mode
TIMEOUT_S = 180                                     # only stops a hang


def tracked_lecture_files() -> set[str]:
    """The files of lectures/ under version control (without git: those not ignored)."""
    if shutil.which("git") and (ROOT / ".git").exists():
        listed = subprocess.run(["git", "ls-files", "lectures"], cwd=ROOT, capture_output=True, text=True)
        if listed.returncode == 0 and listed.stdout.strip():
            return {Path(line).name for line in listed.stdout.split()}
    return {p.name for p in LECTURES_DIR.iterdir() if p.is_file() and p.suffix not in (".ipynb", ".pyc")}


def _run_cli(argv, capsys):
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_list_prints_every_lecture_with_its_title(capsys):
    code, out, _ = _run_cli(["lectures", "--list"], capsys)
    assert code == 0
    lines = out.strip().splitlines()
    assert len(lines) == len(LECTURES)
    assert [p.name[:2] for p in LECTURES] == [f"{i:02d}" for i in range(1, len(LECTURES) + 1)]   # 01, 02, ... none missing
    for line, path in zip(lines, LECTURES):
        heading = re.search(r"^# # (Lecture \d+: .+)$", path.read_text(encoding="utf-8"), re.M).group(1)
        assert line.split() == [path.name, *heading.split()], line


def test_export_copies_every_lecture_file_byte_for_byte(tmp_path, capsys):
    out = tmp_path / "new" / "lectures"                                   # created, parents too
    code, stdout, _ = _run_cli(["lectures", "--out", str(out)], capsys)
    assert code == 0 and "wrote" in stdout
    expected = tracked_lecture_files()
    assert {"_lecture.py", "_quiz.py", "README.md", *(p.name for p in LECTURES)} <= expected
    assert {p.name for p in out.iterdir()} == expected
    for name in expected:
        assert (out / name).read_bytes() == (LECTURES_DIR / name).read_bytes(), name


def test_a_folder_that_is_not_empty_is_refused_and_force_touches_only_the_lectures(tmp_path, capsys):
    mine = tmp_path / "notes.txt"
    mine.write_text("my notes")
    code, _, err = _run_cli(["lectures", "--out", str(tmp_path)], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "--out" in err and "--force" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]       # nothing written

    (tmp_path / "01_attention.py").write_text("my edited copy")
    (tmp_path / "_out").mkdir()
    (tmp_path / "_out" / "01_scaling.png").write_bytes(b"png")
    code, _, _ = _run_cli(["lectures", "--out", str(tmp_path), "--force"], capsys)
    assert code == 0
    assert mine.read_text() == "my notes" and (tmp_path / "_out" / "01_scaling.png").read_bytes() == b"png"
    assert (tmp_path / "01_attention.py").read_bytes() == (LECTURES_DIR / "01_attention.py").read_bytes()


@pytest.mark.parametrize("argv, flag", [(["lectures"], "--out"), (["lectures", "--list", "--force"], "--force"),
                                        (["lectures", "--out", "/proc/no_such/out"], "--out")])
def test_bad_arguments_end_in_one_line_naming_the_flag(argv, flag, capsys):
    try:
        code = main(argv)
    except SystemExit as exit_:
        code = exit_.code
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1 and flag in err, err


def test_the_homework_handout_lectures_are_there_once_copied_beside_it(tmp_path):
    """The handout's command, run in the student's copy (its own package, no repository)."""
    export(["linear", "dropout", "embedding"], tmp_path)
    handout = (tmp_path / "HOMEWORK.md").read_text(encoding="utf-8")
    folder = re.search(r"`python -m minitransformer lectures --out (\S+)`", handout).group(1)
    run = subprocess.run([sys.executable, "-m", "minitransformer", "lectures", "--out", folder],
                         cwd=tmp_path, capture_output=True, text=True, timeout=TIMEOUT_S)   # the student's copy
    assert run.returncode == 0, run.stderr[-2000:]
    named = set(re.findall(r"\blectures/\d\d_\w+\.py", handout))
    assert named and all((tmp_path / path).is_file() for path in named), named


def _lecture_env(pythonpath: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(pythonpath), "MINITRANSFORMER_FAST": "1", "MPLBACKEND": "Agg",
           "MINITRANSFORMER_QUIZ_SOLUTIONS": "1", "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    env.pop("MINITRANSFORMER_LECTURE_OUT", None)                           # the default: beside the lecture
    return env


def test_the_readme_recipe_runs_a_copied_lecture_in_its_folder(tmp_path):
    """lectures/README.md's bash block as written: --list, --out my_lectures, cd there and run lecture 1."""
    readme = (LECTURES_DIR / "README.md").read_text(encoding="utf-8")
    block = re.search(r"^## Without the repository.*?^```bash\n(.*?)^```", readme, re.S | re.M).group(1)
    run = subprocess.run(["bash", "-ec", block.replace("python ", f"{shlex.quote(sys.executable)} ")],
                         cwd=tmp_path, env=_lecture_env(ROOT), capture_output=True, text=True, timeout=TIMEOUT_S)
    assert run.returncode == 0, f"{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
    assert "Lecture 10:" in run.stdout and "all claims check out" in run.stdout
    assert list((tmp_path / "my_lectures" / "_out").glob("01_*.png"))      # its figures, beside it


def test_a_copied_lecture_runs_from_another_folder(tmp_path, capsys):
    copy, elsewhere = tmp_path / "my_lectures", tmp_path / "elsewhere"
    elsewhere.mkdir()
    assert main(["lectures", "--out", str(copy)]) == 0
    capsys.readouterr()
    run = subprocess.run([sys.executable, str(copy / SHORT_LECTURE)], cwd=elsewhere, env=_lecture_env(ROOT),
                         capture_output=True, text=True, timeout=TIMEOUT_S)
    assert run.returncode == 0, f"{run.stdout[-2000:]}\n{run.stderr[-2000:]}"
    assert "all claims check out" in run.stdout
    assert list((copy / "_out").glob("02_*.png"))                           # figures beside the lecture
    assert list(elsewhere.iterdir()) == []                                   # nothing in the working directory


def _wheel_backend_missing() -> str | None:
    """Why a wheel cannot be built offline here (None when it can): the build runs without
    isolation, so setuptools (>= 70.1, or an older one with the wheel package) must be installed."""
    if importlib.util.find_spec("setuptools") is None:
        return "setuptools is not installed, and an offline build (--no-build-isolation) needs it"
    if importlib.util.find_spec("setuptools.command.bdist_wheel") is None and importlib.util.find_spec("wheel") is None:
        return "this setuptools has no bdist_wheel and the wheel package is not installed"
    return None


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    """A wheel built from a copy of the tree (the build writes build/ and *.egg-info beside its sources)."""
    missing = _wheel_backend_missing()
    if missing:
        pytest.skip(f"cannot build a wheel offline: {missing}")
    src, dist = tmp_path_factory.mktemp("src"), tmp_path_factory.mktemp("dist")
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "_out", "*.ipynb", "*.egg-info", "build")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, src / name)
    for name in ("minitransformer", "lectures"):
        shutil.copytree(ROOT / name, src / name, ignore=ignore)
    built = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", str(src), "-w", str(dist)], capture_output=True, text=True, timeout=TIMEOUT_S)
    assert built.returncode == 0, built.stdout[-2000:] + built.stderr[-2000:]
    return next(dist.glob("minitransformer-*.whl"))


def test_the_wheel_holds_the_lectures_and_every_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    for name in tracked_lecture_files():
        assert f"minitransformer/lectures/{name}" in names, name
    for init in ROOT.glob("minitransformer/**/__init__.py"):           # pyproject lists the packages by hand
        assert init.relative_to(ROOT).as_posix() in names, f"{init.parent.name}: add it to pyproject's packages"
    assert not [n for n in names if "/_out/" in n or n.endswith(".ipynb")]
    assert {"minitransformer/trace/page.js", "minitransformer/trace/page.css"} <= names   # the trace page's package-data


def test_the_command_finds_the_lectures_inside_an_installed_wheel(wheel, tmp_path):
    site = tmp_path / "site"                        # a wheel unpacked is the installed package
    zipfile.ZipFile(wheel).extractall(site)
    assert not (site / "lectures").exists()         # the lectures can only come from the package
    run = subprocess.run([sys.executable, "-m", "minitransformer", "lectures", "--out", "copy"], cwd=tmp_path,
                         env={**os.environ, "PYTHONPATH": str(site)}, capture_output=True, text=True,
                         timeout=TIMEOUT_S)
    assert run.returncode == 0, run.stderr[-2000:]
    for name in tracked_lecture_files():
        assert (tmp_path / "copy" / name).read_bytes() == (LECTURES_DIR / name).read_bytes(), name
