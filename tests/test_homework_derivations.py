"""`homework export --without-derivations`: an assignment handed out without its answer in plain sight.

For every assignment, a copy without the derivations holds none of its stubbed backwards'
formulas (homework/derivations.py names each passage; no stubbed docstring still reads like a
backward's formula), keeps each forward's equation, the Inputs/Returns and every cache field
with its comment, and leaves out exactly the lectures that derive those backwards. The default
export keeps them all, and each handout says which was handed out.
"""
from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

import minitransformer
from minitransformer.cli import main
from minitransformer.homework.registry import assignments

ASSIGNMENTS = assignments()
from minitransformer.homework.derivations import LECTURES, PASSAGES, passages
from minitransformer.homework.export import _find, _stubbed, export

PACKAGE = Path(minitransformer.__file__).resolve().parent
REFERENCE_LECTURES = PACKAGE.parent / "lectures"
# what a backward's formula looks like in a docstring: a gradient assigned (dx =, dW[v] =, dz_n =, dP̃ =),
# a partial derivative, a derivative's formula (gelu'(x) =, 2u' =), the Jacobian written out
FORMULA = re.compile(r"(?<![\w'])d[A-Za-zα-ωΑ-Ω][\w\u0303]*(?:\[[^\]]*\])?\s*=(?!=)|∂|'\(x\)\s*=|u'\s*=|J = |diag\(")
# how each lecture states a backward (LaTeX): every lecture that does is one LECTURES leaves out
STATED = {"softmax": r"dx = p \\odot \(dy", "cross_entropy": r"= p - q\$|q_s - q_t", "layernorm": r"\\partial \\hat x_j",
          "dropout": r"dx = dy \\odot m", "block": r"\$dx = dy \+", "embedding": r"gradient of a table row is a scatter-add"}


def _doc(package: Path, target) -> str:
    path = (package / Path(*target.module.split("."))).with_suffix(".py")
    return ast.get_docstring(_find(ast.parse(path.read_text(encoding="utf-8")), target.qualname)) or ""


def _flat(text: str) -> str:
    return " ".join(text.split())


def _cache_comments(path: Path) -> dict:
    """(class, field) -> its comment, for the NamedTuple caches of a module file."""
    found, lines = {}, path.read_text(encoding="utf-8").splitlines()
    for node in ast.parse("\n".join(lines)).body:
        if isinstance(node, ast.ClassDef) and node.name.endswith("Cache"):
            for item in node.body:
                if isinstance(item, ast.AnnAssign):
                    line = lines[item.lineno - 1]
                    found[(node.name, item.target.id)] = line.split("#", 1)[1].strip() if "#" in line else ""
    return found


@pytest.mark.parametrize("a", ASSIGNMENTS, ids=lambda a: a.id)
def test_a_copy_without_derivations_keeps_no_backward_formula(a, tmp_path):
    out = tmp_path / "hw"
    export([a.id], out, derivations=False, expectations=False)
    copy, handout = out / "minitransformer", (out / "HOMEWORK.md").read_text(encoding="utf-8")
    stubbed = list(_stubbed([a]))
    for p in passages(stubbed):
        assert p.old not in (copy / Path(*p.module.split("."))).with_suffix(".py").read_text(encoding="utf-8"), p
        assert "\n" in p.old or p.old not in handout, p
    for t in stubbed:
        before, after = _doc(PACKAGE, t), _doc(copy, t)
        if PASSAGES.get(str(t)):
            assert not [ln for ln in after.splitlines() if FORMULA.search(ln)], (str(t), after)
        for kept in ("Inputs:", "Returns:"):                      # the shapes, whole
            if kept in before:
                assert _flat(before[before.index(kept):]) in _flat(after), (str(t), kept, after)
        if t.qualname.endswith("_forward"):                       # the forward's equation
            equation = before.splitlines()[0].split(";")[0]
            assert equation in after, (str(t), after)
        comments = _cache_comments((copy / Path(*t.module.split("."))).with_suffix(".py"))
        for key, comment in _cache_comments((PACKAGE / Path(*t.module.split("."))).with_suffix(".py")).items():
            assert key in comments and bool(comments[key]) == bool(comment), (key, comments.get(key))
    for changed in {p.module for p in passages(stubbed)}:
        ast.parse((copy / Path(*changed.split("."))).with_suffix(".py").read_text(encoding="utf-8"))
    left = {p.name for p in (copy / "lectures").glob("[0-9][0-9]_*.py")}
    every = {p.name for p in REFERENCE_LECTURES.glob("[0-9][0-9]_*.py")}
    assert every - left == set(LECTURES.get(a.id, ())), every - left
    assert "Handed out without the derivations" in handout
    assert not [ln for ln in handout.splitlines()                              # its cache tables quote the comments
                if FORMULA.search(re.sub(r"`[^`]*`", "", ln))]                # (code spans: a Module's d_model=8)
    owners = {b.id for b in ASSIGNMENTS if set(b.targets) & set(stubbed)}
    for r in json.loads((copy / "homework" / "copy.json").read_text(encoding="utf-8"))["records"]:
        said = [m["message"] for m in r["mistakes"] if "out" not in m["tensors"]]   # what the local check prints
        assert r["id"] not in owners or not [m for m in said if FORMULA.search(m)], (r["id"], said)


def test_the_catalogues_backward_messages_state_formulas_the_copy_without_derivations_hides():
    """Not vacuous: the catalogue's messages of backward mistakes do name the right formula."""
    said = [m.message for a in ASSIGNMENTS for m in a.mistakes if "out" not in m.tensors]
    assert len([m for m in said if FORMULA.search(m)]) >= 20


def test_every_lecture_that_states_an_assigned_backward_is_left_out_with_it():
    """The lecture table against the lectures: each one stating a backward (in the form STATED
    knows) is listed for that assignment, and each listed one does state it."""
    texts = {p.name: p.read_text(encoding="utf-8") for p in REFERENCE_LECTURES.glob("[0-9][0-9]_*.py")}
    assert set(STATED) == set(LECTURES)
    for assignment, pattern in STATED.items():
        stating = {name for name, text in texts.items() if re.search(pattern, text)}
        assert stating == set(LECTURES[assignment]), (assignment, stating)


def test_the_formula_pattern_sees_every_derivation_the_table_cuts():
    """Not vacuous: in the reference, the docstrings the table changes read as formulas."""
    cut = dict.fromkeys(t for a in ASSIGNMENTS for t in _stubbed([a]) if PASSAGES.get(str(t)))
    reading = [str(t) for t in cut if FORMULA.search(_doc(PACKAGE, t))]
    assert len(reading) >= 10, reading          # the others' formulas are in their modules' docstrings


def test_the_default_copy_keeps_the_derivations_and_says_so(tmp_path, capsys):
    assert main(["homework", "export", "layernorm", "--out", str(tmp_path / "hw")]) == 0
    norm = (tmp_path / "hw" / "minitransformer" / "functional" / "norm.py").read_text(encoding="utf-8")
    assert all(p.old in norm for p in PASSAGES["functional.norm:layernorm_backward"])
    assert (tmp_path / "hw" / "minitransformer" / "lectures" / "03_layernorm_residual_ffn.py").is_file()
    assert "Handed out with the derivations" in (tmp_path / "hw" / "HOMEWORK.md").read_text(encoding="utf-8")
    assert main(["homework", "export", "layernorm", "--out", str(tmp_path / "sol"), "--with-solutions",
                 "--without-derivations"]) == 2
    assert "--without-derivations: goes with a student's copy" in capsys.readouterr().err


def test_every_assignment_at_once_and_the_copy_still_checks_itself(tmp_path, capsys):
    assert main(["homework", "export", "all", "--out", str(tmp_path / "hw"), "--without-derivations"]) == 0
    assert "stubbed, without the derivations" in capsys.readouterr().out
    copy = tmp_path / "hw" / "minitransformer"
    for t in _stubbed(ASSIGNMENTS):
        if PASSAGES.get(str(t)):
            assert not [ln for ln in _doc(copy, t).splitlines() if FORMULA.search(ln)], str(t)
    assert not (copy / "homework" / "derivations.py").exists()      # the table holds every formula
    done = subprocess.run([sys.executable, "-m", "minitransformer", "homework", "check", ".", "relu"],
                          cwd=tmp_path / "hw", capture_output=True, text=True, timeout=120)
    assert done.returncode == 1 and "local check of this copy" in done.stdout, done.stdout + done.stderr
    assert "== relu: 0/2 (not implemented)" in done.stdout, done.stdout
