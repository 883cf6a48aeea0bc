"""The instructor's commands grade what was set, and the gradebook says why a score is what it is.

Grading used to default to all of the course's assignments (an empty stub copy of a
3-assignment homework scored 55/95: the ones nobody set counted as done), the gradebook's
notes were full of "ignored: ..." lines and never said "timeout" or "not implemented", a
syntax error read as "not implemented", and the wrong folder scored 0 without a word.
Now: ids or ``--assigned-by`` (the export's folder, the autograder's grader.json or zip),
else one line and exit code 2; a status per assignment with its reason; "no files found".
"""
from __future__ import annotations

import csv
import json
import re
import secrets
import shutil
import zipfile
from pathlib import Path

import pytest

from minitransformer.cli import main
from minitransformer.homework.export import export

IDS = ["relu", "layernorm"]


@pytest.fixture(scope="module")
def solutions(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("solutions")
    export(IDS, out, with_solutions=True)
    return out / "minitransformer" / "functional"


@pytest.fixture(scope="module")
def handed_out(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hw") / "hw-student"
    export(IDS, out, expectations=False)
    return out


def _edit(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def _class(root: Path, solutions: Path, handed_out: Path) -> Path:
    """One student per status, each handing in flat files (as a Gradescope upload does) but gina."""
    norm, acts = (solutions / "norm.py").read_text(), (solutions / "activations.py").read_text()
    students = {
        "alice": {"norm.py": norm, "activations.py": acts},                                     # ok
        "bob": {"norm.py": _edit(norm, "    xhat = xc * rstd_s ", "    xhat = xc * rstd_s + ")},  # syntax error
        "dave": {"norm.py": _edit(norm, "std = xp.sqrt(var + eps_s) ", "std = xp.sqrt(var + eps_s + 0.1) ")},
        "eve": {"activations.py": _edit(acts, '    """y = max(x, 0).', '    raise ValueError("oops")\n    """y = max(x, 0).')},
        "frank": {"activations.py": _edit(acts, '    """y = max(x, 0).', '    while True:\n        pass\n    """y = max(x, 0).')},
        "hank": {"activations.py": _edit(acts, '    """y = max(x, 0).', '    import os\n    os._exit(3)\n    """y = max(x, 0).')},
        "carol": {"README.txt": "my notes\n"},                                                  # no files found
    }
    for name, files in students.items():
        for file, text in files.items():
            (root / name / file).parent.mkdir(parents=True, exist_ok=True)
            (root / name / file).write_text(text)
    shutil.copytree(handed_out, root / "gina")                                   # the whole copy, untouched
    return root


def _seed(tmp_path: Path) -> str:
    path = tmp_path / "seed.json"
    path.write_text(json.dumps({"seed": secrets.randbits(128)}))
    return str(path)


def test_the_gradebook_has_a_status_and_a_reason_per_assignment(tmp_path, solutions, handed_out):
    subs = _class(tmp_path / "subs", solutions, handed_out)
    out = tmp_path / "gb"
    assert main(["homework", "check-class", str(subs), "--assigned-by", str(handed_out), "--out", str(out),
                 "--seed-file", _seed(tmp_path), "--timeout", "3", "--jobs", "2"]) == 0
    rows = list(csv.DictReader((out / "gradebook.csv").read_text().splitlines()))
    assert list(rows[0]) == ["student", "relu", "layernorm", "total", "relu status", "layernorm status", "notes"]
    book = {r["student"]: r for r in rows}
    status = {n: (r["relu status"], r["layernorm status"]) for n, r in book.items()}
    assert status == {"alice": ("ok", "ok"), "bob": ("not implemented", "syntax error"),
                      "carol": ("no files found", "no files found"), "dave": ("not implemented", "wrong"),
                      "eve": ("exception", "not implemented"), "frank": ("timeout", "not implemented"),
                      "gina": ("not implemented", "not implemented"), "hank": ("crashed", "not implemented")}
    assert book["alice"]["total"] == "12.0" and book["alice"]["notes"] == ""
    assert "layernorm: syntax error: norm.py: not valid Python (invalid syntax, line 94)" in book["bob"]["notes"]
    assert "layernorm: wrong: layernorm: x (B, T, C) · out: relative error" in book["dave"]["notes"]
    assert re.search(r"relu: exception: ValueError: oops \(at \S*eve/activations\.py:\d+ in relu_forward\)",
                     book["eve"]["notes"]), book["eve"]["notes"]     # the student's own file, as handed in
    assert "relu: timeout: timed out after 3 s" in book["frank"]["notes"]
    assert "relu: crashed: the student's process ended (exit code 3)" in book["hank"]["notes"]
    assert book["carol"]["notes"].startswith("no files found: the folder holds none of ")
    assert book["gina"]["notes"] == ("relu: not implemented: relu_forward: implement me; layernorm: not "
                                     "implemented: layernorm_forward: implement me")
    for row in rows:                                  # what the grader ignored is in the student's JSON only
        assert "ignored" not in row["notes"], row
    assert "ignored" in json.loads((out / "gina.json").read_text())["output"]


def test_without_ids_the_instructors_commands_refuse_in_one_line(tmp_path, capsys, handed_out):
    subs = tmp_path / "subs"
    shutil.copytree(handed_out, subs / "gina")
    for argv in (["check-class", str(subs), "--out", str(tmp_path / "g")], ["check", str(subs / "gina")]):
        assert main(["homework", *argv]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and err.startswith(f"homework: {argv[0]}: which assignments? name them"), err
        assert "--assigned-by EXPORT" in err
    assert "the copy's own mark lists relu layernorm, but it is the student's file to change" in err
    assert not (tmp_path / "g").exists()


def test_the_assignments_an_export_set_are_read_from_its_folder_or_the_autograders_config(tmp_path, capsys,
                                                                                       handed_out):
    from minitransformer.cli.homework import Refused, assigned_by
    assert assigned_by(str(handed_out)) == IDS
    assert assigned_by(str(handed_out / "minitransformer" / "homework" / "copy.json")) == IDS
    config = tmp_path / "grader.json"
    config.write_text(json.dumps({"assignments": ["softmax", "attention"], "seed": 1}))
    assert assigned_by(str(config)) == ["softmax", "attention"]
    with zipfile.ZipFile(tmp_path / "autograder.zip", "w") as z:
        z.write(config, "grader.json")
    assert assigned_by(str(tmp_path / "autograder.zip")) == ["softmax", "attention"]
    for wrong, said in ((tmp_path, "no minitransformer/homework/copy.json"), (tmp_path / "nothing", "no such file"),
                        (tmp_path / "seed.txt", "not an export's copy.json")):
        if wrong.name == "seed.txt":
            wrong.write_text("12345")
        with pytest.raises(Refused, match=said):
            assigned_by(str(wrong))


def test_a_folder_with_no_file_of_the_package_says_so(tmp_path, capsys):
    (tmp_path / "wrong").mkdir()
    (tmp_path / "wrong" / "notes.txt").write_text("hello\n")
    results = tmp_path / "results.json"
    assert main(["homework", "check", str(tmp_path / "wrong"), "layernorm", "--json", str(results)]) == 1
    out = capsys.readouterr().out
    assert "no files found: the folder holds none of minitransformer/functional/norm.py" in out
    report = json.loads(results.read_text())
    assert report["score"] == 0 and "no files found" in report["tests"][0]["output"]
