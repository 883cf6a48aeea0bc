"""What a student runs is what is graded: a fresh export trains, and runs its lectures, with the
student's own functions.

A probe is planted in a fresh export of `layernorm`: the reference's bodies laid in, each first
appending its name to a file. `train` run inside the copy, with `minitransformer.fast` importable
from elsewhere (as an editable install's finder makes it), must call both (the speed wing's twins
would replace them) and say at the start that each one is the student's; the copy's lectures,
with this repository installed, must import the copy.
"""
from __future__ import annotations

import ast
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import minitransformer
from minitransformer.homework.export import _find, body_span, export, source_lines

REPO_PACKAGE = Path(minitransformer.__file__).resolve().parent
LECTURES = REPO_PACKAGE.parent / "lectures"
TRAIN = ["train", "--steps", "3", "--n-layer", "1", "--n-head", "2", "--d-model", "16", "--block-size", "8",
         "--batch-size", "2", "--eval-interval", "3", "--out", "runs"]

# `python -m minitransformer ARGS` with a finder, like setuptools' editable one, that resolves
# minitransformer.fast from this repository whatever package minitransformer is
WING_ELSEWHERE = """
import importlib.abc, importlib.util, runpy, sys
WING = {wing!r}
class Wing(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "minitransformer.fast":
            return importlib.util.spec_from_file_location(name, WING + "/__init__.py", submodule_search_locations=[WING])
sys.meta_path.append(Wing())
assert importlib.util.find_spec("minitransformer.fast").origin.startswith(WING)
sys.argv = ["minitransformer"] + sys.argv[1:]
runpy.run_module("minitransformer", run_name="__main__", alter_sys=True)
"""


def plant(copy: Path, module: str, qualname: str, probe: Path) -> int:
    """Lay the reference's body of ``qualname`` into the copy, after a line appending its name to
    ``probe``; returns the line of its def in the copy."""
    rel = Path(*module.split(".")).with_suffix(".py")
    reference = (REPO_PACKAGE / rel).read_text(encoding="utf-8")
    start, end = body_span(_find(ast.parse(reference), qualname))
    body = source_lines(reference)[start:end]
    indent = re.match(r"\s*", body[0]).group(0)
    body.insert(0, f"{indent}open({str(probe)!r}, 'a').write({qualname!r} + '\\n')\n")
    path = copy / "minitransformer" / rel
    source = path.read_text(encoding="utf-8")
    func = _find(ast.parse(source), qualname)
    start, end = body_span(func)
    lines = source_lines(source)
    path.write_text("".join(lines[:start] + body + lines[end:]), encoding="utf-8")
    return func.lineno


def calls(probe: Path) -> dict:
    names = probe.read_text().split() if probe.exists() else []
    return {n: names.count(n) for n in set(names)}


def run(argv, cwd, **env) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300,
                          env=dict(os.environ, MPLBACKEND="Agg", OPENBLAS_NUM_THREADS="1", **env))


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    out = tmp_path_factory.mktemp("export") / "hw"
    export(["layernorm"], out)
    return out


@pytest.fixture()
def copy(exported, tmp_path):
    """A fresh export of `layernorm`, the student's own to change."""
    return Path(shutil.copytree(exported, tmp_path / "hw"))


def test_a_stubbed_copy_says_so_and_training_stops_in_one_line(copy):
    done = run([sys.executable, "-c", WING_ELSEWHERE.format(wing=str(REPO_PACKAGE / "fast")), *TRAIN], copy)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "the speed wing stays off" in done.stdout
    assert re.search(r"layernorm_backward: yours, minitransformer/functional/norm\.py:\d+, still the stub", done.stdout)
    assert done.stderr.startswith("error: layernorm_forward: implement me") and "Traceback" not in done.stderr


def test_training_a_copy_runs_the_students_functions_though_the_wing_is_importable(copy, tmp_path):
    probe = tmp_path / "calls.txt"
    lines = {q: plant(copy, "functional.norm", q, probe) for q in ("layernorm_forward", "layernorm_backward")}
    done = run([sys.executable, "-c", WING_ELSEWHERE.format(wing=str(REPO_PACKAGE / "fast")), *TRAIN,
                "--overwrite"], copy)
    assert done.returncode == 0, done.stdout + done.stderr
    counted = calls(probe)
    # 3 steps of a 1-layer GPT: three LayerNorms (two in the block, the final one) each step's backward
    assert counted.get("layernorm_backward", 0) >= 3 * 3, counted
    assert counted["layernorm_forward"] > counted["layernorm_backward"], counted     # + evaluation, sampling
    for name, line in lines.items():
        assert f"  {name}: yours, minitransformer/functional/norm.py:{line}\n" in done.stdout
    assert "data parallel" not in done.stdout                       # the wing's DataParallel never started
    refused = run([sys.executable, "-m", "minitransformer", *TRAIN, "--overwrite", "--data-parallel", "2"], copy)
    assert refused.returncode == 2 and "never in a homework copy" in refused.stderr


def test_the_copys_lectures_import_the_copy_though_the_package_is_installed(copy, tmp_path):
    assert (REPO_PACKAGE / "homework" / "expected.py").is_file()     # this repository is the installed one
    listed = run([sys.executable, "-m", "minitransformer", "lectures", "--out", "lectures"], copy)
    assert listed.returncode == 0 and "they import this copy's minitransformer" in listed.stdout, listed.stderr
    probe = tmp_path / "lecture-calls.txt"
    for qualname in ("layernorm_forward", "layernorm_backward"):
        plant(copy, "functional.norm", qualname, probe)
    done = run([sys.executable, "03_layernorm_residual_ffn.py"], copy / "lectures", MINITRANSFORMER_FAST="1")
    assert done.returncode == 0, done.stderr[-2000:]
    assert calls(probe)["layernorm_backward"] >= 1                  # the lecture called the copy's code
    elsewhere = run([sys.executable, "-m", "minitransformer", "lectures", "--out", str(tmp_path / "lec")], copy)
    assert "is outside your homework copy" in elsewhere.stdout


def test_every_lecture_imports_its_helper_first_and_the_helper_knows_the_mark():
    """The helper puts the copy on sys.path: a minitransformer imported before it would be another one."""
    from minitransformer.homework.expected import MARKER
    sys.path.insert(0, str(LECTURES))
    try:
        import _lecture
    finally:
        sys.path.remove(str(LECTURES))
    assert _lecture.COPY_MARK == Path("minitransformer", "homework", MARKER) and _lecture.COPY is None
    for lecture in sorted(LECTURES.glob("[0-9][0-9]_*.py")):
        lines = lecture.read_text(encoding="utf-8").splitlines()
        helper = next(i for i, ln in enumerate(lines) if ln.startswith("from _lecture import"))
        first = next(i for i, ln in enumerate(lines) if re.match(r"(from|import) minitransformer", ln))
        assert helper < first, lecture.name
