"""The handout is enough: every command HOMEWORK.md gives runs, from a fresh export, as written.

A fresh export of `layernorm` and `relu` is solved the way a student solves it (the reference's
files laid over the stubs), then each command the handout shows is run in the copy, in a fresh
process, from the folder holding HOMEWORK.md: the local checks, the starters, the numerical
check, training (shortened: 3 steps of a tiny model), the lectures, the zip of the hand-in. The
zip is then graded as the instructor grades it, outside the copy, with the assignments the
export set. The setup line installs nothing here (the test runs offline): it must name the
Python and the packages this package's metadata requires.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import minitransformer
from minitransformer.cli import main
from minitransformer.homework.export import export

PACKAGE = Path(minitransformer.__file__).resolve().parent
IDS = ["layernorm", "relu"]
TINY = ["--n-layer", "1", "--n-head", "2", "--d-model", "16", "--block-size", "8", "--batch-size", "2",
        "--eval-interval", "3", "--out", "runs"]


def commands(handout: str) -> list:
    """The commands the handout gives: its indented lines and its `python ...` spans, placeholders left out."""
    found = re.findall(r"^    (python .+)$", handout, re.M) + re.findall(r"`(python [^`]+)`", handout)
    return [c for c in dict.fromkeys(found) if not re.search(r"\bID\b|FILE|\.\.\.", c)]


@pytest.fixture(scope="module")
def solved(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("handout") / "hw"
    export(IDS, out)
    for rel in ("functional/norm.py", "functional/activations.py"):         # the student's work, done
        shutil.copyfile(PACKAGE / rel, out / "minitransformer" / rel)
    return out


def test_every_command_of_the_handout_runs_in_a_fresh_export(solved, tmp_path, capsys):
    handout = (solved / "HOMEWORK.md").read_text(encoding="utf-8")
    found = commands(handout)
    assert {f"python -m minitransformer homework check . {i}" for i in IDS} <= set(found)
    assert "python -m minitransformer train --steps 300" in found and "python starter_relu.py" in found
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    env.update(MPLBACKEND="Agg", OMP_NUM_THREADS="1")
    for command in found:
        argv = command.split()
        if "pip" in argv or "venv" in argv or len(argv) < 4:
            continue                      # the setup line (offline: checked below), or prose naming the command
        if "train" in argv:
            argv = argv[:argv.index("--steps")] + ["--steps", "3"] + TINY
        argv = [a.strip('"') for a in argv]
        done = subprocess.run([sys.executable] + argv[1:], cwd=solved, env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, f"{command}\n{done.stdout[-1500:]}\n{done.stderr[-1500:]}"
        assert "Traceback" not in done.stderr, command
        if "homework" in argv:
            assert "not your grade" in done.stdout and re.search(r"total (\d+)/\1 ", done.stdout), command
        if "train" in argv:
            assert "layernorm_backward: yours, minitransformer/functional/norm.py:" in done.stdout
    assert (solved / "lectures" / "03_layernorm_residual_ffn.py").is_file()
    with zipfile.ZipFile(solved / "handin.zip") as z:                 # the hand-in, graded as the instructor does
        z.extractall(tmp_path / "handin")
    assert main(["homework", "check", str(tmp_path / "handin"), "--assigned-by", str(solved)]) == 0
    assert "total 12/12" in capsys.readouterr().out


def test_the_setup_line_names_the_python_and_the_packages_required(solved):
    from importlib.metadata import metadata
    handout = (solved / "HOMEWORK.md").read_text(encoding="utf-8")
    meta = metadata("minitransformer")
    version = meta["Requires-Python"].removeprefix(">=")
    assert f"Python {version} or newer" in handout
    for requirement in meta.get_all("Requires-Dist"):
        if "extra ==" not in requirement:
            assert f'"{requirement.replace(" ", "")}"' in handout, requirement
    assert handout.count("Setup: Python") == len(IDS)                  # and on every assignment's page


def test_the_handout_says_which_was_handed_out_and_how_to_hand_in(solved):
    handout = (solved / "HOMEWORK.md").read_text(encoding="utf-8")
    assert "Handed out with the derivations" in handout
    assert "python -m zipfile -c handin.zip minitransformer" in handout
    assert "`minitransformer/functional/norm.py`" in handout and "each with its path inside the package" in handout
    assert json.loads((solved / "minitransformer" / "homework" / "copy.json").read_text())["assignments"] == \
        ["relu", "layernorm"]
