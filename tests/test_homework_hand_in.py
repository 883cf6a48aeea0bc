"""Hand-in without ambiguity: a file handed in by its name alone must say which file it is.

`functional/attention.py` and `layers/attention.py` are both `attention.py`. Graded together
(attention and mha), a flat `attention.py` scored one of them 0 (not implemented) without a
word; now the hand-in is refused in one line naming both files, results.json says why (no
score, never 0), and the same files handed in with their paths get full marks.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from minitransformer.cli import main
from minitransformer.homework.classroom import _grade_one
from minitransformer.homework.export import export
from minitransformer.homework.handout import page
from minitransformer.homework.sandbox import Limits

FILES = ("functional/attention.py", "layers/attention.py", "functional/repeat_kv.py")


@pytest.fixture(scope="module")
def solutions(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("solutions")
    export(["attention", "mha"], out, with_solutions=True)
    return out / "minitransformer"


def hand_in(folder: Path, solutions: Path, files, *, flat: bool) -> Path:
    for rel in files:
        target = folder / (Path(rel).name if flat else rel)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(solutions / rel, target)
    return folder


def test_a_flat_name_two_graded_files_share_is_refused_in_one_line_never_scored(tmp_path, capsys, solutions):
    sub = hand_in(tmp_path / "alice", solutions, ["functional/attention.py", "functional/repeat_kv.py"], flat=True)
    results = tmp_path / "results.json"
    code = main(["homework", "check", str(sub), "attention", "mha", "--json", str(results)])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1, err
    assert err.startswith("homework: attention.py: is it minitransformer/functional/attention.py or "
                          "minitransformer/layers/attention.py?") and "nothing was graded" in err
    report = json.loads(results.read_text())
    assert report["score"] is None and [t["score"] for t in report["tests"]] == [None, None]
    assert "is it minitransformer/functional/attention.py" in report["output"]
    name, graded, _, said = _grade_one((sub, ["attention", "mha"], Limits(), 0, False))     # check-class's row
    assert [r.score for r in graded] == [None, None] and "both are graded" in graded[0].message
    assert said["attention"][0] == "not graded" and "both are graded" in said["attention"][1]


def test_the_same_name_is_no_question_where_one_file_of_that_name_is_graded(tmp_path, capsys, solutions):
    sub = hand_in(tmp_path / "bob", solutions, ["functional/attention.py"], flat=True)
    assert main(["homework", "check", str(sub), "attention"]) == 0
    assert "total 15/15" in capsys.readouterr().out


def test_the_files_with_their_paths_are_graded_in_full(tmp_path, capsys, solutions):
    sub = hand_in(tmp_path / "carol", solutions, FILES, flat=False)
    (sub / "attention.py").write_text("# a stray file by that name, ignored beside the files at their paths\n")
    assert main(["homework", "check", str(sub), "attention", "mha"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "total 25/25" in out and "attention.py: holds none of the assignments' functions; ignored" in out


def test_a_file_handed_in_twice_with_two_bodies_says_which_was_graded(tmp_path, capsys, solutions):
    """repeat_kv.py at its path and again by its name, the second with another body: the one at its
    path is graded, and the report and the gradebook say the other was not (never picked silently)."""
    sub = hand_in(tmp_path / "dan" / "dan", solutions, ["functional/repeat_kv.py"], flat=False)
    source = (sub / "functional" / "repeat_kv.py").read_text()
    assert "def repeat_kv_forward(x, r: int):" in source
    (sub / "repeat_kv.py").write_text(source.replace("def repeat_kv_forward(x, r: int):",
                                                     "def repeat_kv_forward(x, r: int):\n    x = x + 0", 1))
    assert main(["homework", "check", str(sub), "mha"]) in (0, 1)
    said = "two versions of repeat_kv_forward: graded functional/repeat_kv.py's, ignored repeat_kv.py's"
    assert said in capsys.readouterr().out
    main(["homework", "check-class", str(tmp_path / "dan"), "mha", "--out", str(tmp_path / "gb")])
    book = (tmp_path / "gb" / "gradebook.csv").read_text()
    assert said in book, book


def test_the_handout_says_to_keep_the_paths():
    text = page("mha")
    assert "with its path inside the package" in text and "a zip" in text
    assert "`functional/attention.py` and `layers/attention.py` are both `attention.py`" in text


def test_a_whole_copy_handed_in_lists_only_what_the_student_added_or_changed(tmp_path, capsys):
    """The instructor's check of a student's whole copy: the files the export wrote and the student
    never touched (the handout, the starters, the copy's homework/ and lectures, the files shipped
    working) are no note; a file the student added is one."""
    export(["attention"], tmp_path / "copy")
    (tmp_path / "seed.json").write_text("0\n")
    main(["homework", "check", str(tmp_path / "copy"), "attention", "--seed-file", str(tmp_path / "seed.json")])
    assert "ignored" not in capsys.readouterr().out
    (tmp_path / "copy" / "minitransformer" / "functional" / "mine.py").write_text("x = 1\n")
    main(["homework", "check", str(tmp_path / "copy"), "attention", "--seed-file", str(tmp_path / "seed.json")])
    ignored = [line for line in capsys.readouterr().out.splitlines() if line.startswith("ignored")]
    assert ignored == ["ignored: minitransformer/functional/mine.py: not a file of an assignment at its path; "
                       "ignored (not read)"], ignored


def test_a_file_that_is_not_valid_python_is_a_syntax_error_never_not_implemented(tmp_path, capsys, solutions):
    """The grader stages the stub where the student's file cannot be read: the report, results.json
    and the gradebook say it was a syntax error, with the file and the line."""
    sub = hand_in(tmp_path / "erin" / "erin", solutions, ["functional/attention.py"], flat=False)
    path = sub / "functional" / "attention.py"
    path.write_text("x = (\n" + path.read_text())
    main(["homework", "check", str(sub), "attention", "--json", str(tmp_path / "results.json")])
    said = "syntax error: functional/attention.py: not valid Python ('(' was never closed, line 1)"
    assert f"WHAT TO FIX: {said}" in capsys.readouterr().out
    assert json.loads((tmp_path / "results.json").read_text())["tests"][0]["output"].count(said) >= 1
    main(["homework", "check-class", str(tmp_path / "erin"), "attention", "--out", str(tmp_path / "gb")])
    assert "syntax error" in (tmp_path / "gb" / "gradebook.csv").read_text()
