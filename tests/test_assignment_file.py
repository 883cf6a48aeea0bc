"""An assignment is one file: a toy one, written in a temporary folder, is exported and graded end to end.

The file is docs/grading.md's worked example ("Writing an assignment"), all a course writes: its
targets, points, one graded case with its drawer, one catalogue entry with its variant,
its handout text. Added to the course's folders (registry.FOLDERS), it is listed, exported
(its bodies stubbed, the file itself left out of the copy), and graded in the walled-in
child: the solutions get full marks, a planted bug loses points with the entry's message,
the bare stubs score 0.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from minitransformer.cli import main
from minitransformer.homework import registry
from minitransformer.homework.export import export
from minitransformer.homework.rubric import items

ROOT = Path(__file__).resolve().parents[1]


def toy_file() -> str:
    """The worked example of docs/grading.md ("Writing an assignment"), as the page shows it."""
    page = (ROOT / "docs" / "grading.md").read_text(encoding="utf-8")
    section = page.split("## Writing an assignment", 1)[1]
    return section.split("```python\n", 1)[1].split("```", 1)[0]


@pytest.fixture()
def course(tmp_path, monkeypatch):
    """The course with the toy file's folder added."""
    folder = tmp_path / "course"
    folder.mkdir()
    (folder / "toy_silu.py").write_text(toy_file())
    monkeypatch.setattr(registry, "FOLDERS", [*registry.FOLDERS, folder])
    return folder


def _check(capsys, folder, json_file):
    code = main(["homework", "check", str(folder), "toy_silu", "--json", str(json_file)])
    out = capsys.readouterr().out
    (test,) = json.loads(json_file.read_text())["tests"]
    return code, out, test


def test_a_toy_assignment_from_one_file_is_exported_and_graded_end_to_end(course, tmp_path, capsys):
    assert [a.id for a in registry.assignments()][-1] == "toy_silu"        # after the course's ORDER
    assert [i.name for i in items("toy_silu")] == ["toy_silu: x (2, 3) · forward", "toy_silu: x (2, 3) · dx",
                                                   "inputs and upstream gradient left unchanged"]
    assert main(["homework", "list"]) == 0 and "toy_silu" in capsys.readouterr().out

    export(["toy_silu"], tmp_path / "student")
    copy = tmp_path / "student" / "minitransformer"
    assert "## `toy_silu`: SiLU, a toy (2 points)" in (tmp_path / "student" / "HOMEWORK.md").read_text()
    assert "A toy: the whole assignment is one file" in (tmp_path / "student" / "HOMEWORK.md").read_text()
    assert 'raise NotImplementedError("silu_backward: implement me")' in (copy / "functional/activations.py").read_text()
    assert not list(tmp_path.joinpath("student").rglob("toy_silu.py"))     # the file is trusted: left out
    records = json.loads((copy / "homework" / "copy.json").read_text())["records"]
    assert {r["id"] for r in records} >= {"toy_silu", "softmax"}
    assert next(r for r in records if r["id"] == "toy_silu")["mistakes"][0]["variant"] is True

    code, out, test = _check(capsys, tmp_path / "student", tmp_path / "stubs.json")
    assert code == 1 and test["score"] == 0 and "not implemented" in test["output"]

    export(["toy_silu"], tmp_path / "solutions", with_solutions=True)
    code, out, test = _check(capsys, tmp_path / "solutions", tmp_path / "right.json")
    assert code == 0 and test["score"] == test["max_score"] == 2, out
    assert "toy_silu: x (2, 3) · numerical dx" in out

    activations = tmp_path / "solutions" / "minitransformer" / "functional" / "activations.py"
    source = activations.read_text()
    head, silu = source.split("def silu_backward(", 1)
    silu, tail = silu.split("\ndef ", 1)
    assert silu.count("    dx = dy * cache.dydx ") == 1
    activations.write_text(head + "def silu_backward(" + silu.replace("    dx = dy * cache.dydx ", "    dx = cache.dydx * 1.0 ")
                           + "\ndef " + tail)
    code, out, test = _check(capsys, tmp_path / "solutions", tmp_path / "wrong.json")
    assert code == 1 and 0 < test["score"] < 2, out
    dx = next(line for line in out.splitlines() if "toy_silu: x (2, 3) · dx" in line)
    assert "NOT OK" in dx and "DIAGNOSIS: dx is silu'(x) alone: multiply it by the upstream gradient dy" in dx
