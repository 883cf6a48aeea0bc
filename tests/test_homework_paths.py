"""`homework` at its entrance: every bad path is one line naming the flag and the path, exit 2.

Three classes of the fuzzing round: a missing path printed as an errno ("homework: 2"),
tracebacks on paths of the wrong kind, and check-class's seed and output folder (a seed
on the command line beside a seed file, an earlier gradebook replaced without a word, a
stale student's JSON left beside the new ones). Each test draws several bad values.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from minitransformer.cli import main

sys.path.insert(0, str(Path(__file__).parent))
from test_homework_attacks import CORRECT, CORRECT_BACKWARD, seed_file, submission  # noqa: E402


def one_line(capsys, argv) -> str:
    """The refusal of ``homework *argv``: exit 2, one line on stderr, no traceback."""
    assert main(["homework", *map(str, argv)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("homework: ") and "Traceback" not in err, err
    return err


@pytest.fixture()
def places(tmp_path):
    (tmp_path / "a-file").write_text("not a folder\n")
    (tmp_path / "a-folder").mkdir()
    (tmp_path / "binary").write_bytes(b"\x00\xff\xfe\x80")
    (tmp_path / "subs" / "alice").mkdir(parents=True)
    return tmp_path


def test_a_missing_path_is_named_never_an_errno(capsys, places):
    """`homework: 2` was all it said for an --out it cannot create, a --json in a missing folder,
    a missing --seed-file."""
    cases = {("export", "relu", "--out", "/proc/no-such/copy"): "--out /proc/no-such/copy: cannot write",
             ("check", places / "subs" / "alice", "relu", "--json", places / "missing" / "r.json"):
                 f"--json {places / 'missing' / 'r.json'}: the folder {places / 'missing'} does not exist",
             ("check", places / "subs" / "alice", "relu", "--seed-file", places / "nope.json"):
                 f"--seed-file {places / 'nope.json'}: no such file",
             ("check-class", places / "subs", "relu", "--out", "/proc/no-such/grades"):
                 "--out /proc/no-such/grades: cannot create it",
             ("check", places / "no-submission", "relu"): "not a folder"}
    for argv, said in cases.items():
        assert said in one_line(capsys, argv), argv


def test_a_path_of_the_wrong_kind_is_one_line_never_a_traceback(capsys, places):
    """export --out naming a file, check --json naming a folder (which also left DIR.tmp behind),
    check-class --out naming a file, autograder --out naming a folder or a path under a file,
    --seed-file naming a folder or a binary file: each a traceback before."""
    alice = places / "subs" / "alice"
    cases = {("export", "relu", "--out", places / "a-file"): "is a file; expected a folder",
             ("check", alice, "relu", "--json", places / "a-folder"): "is a folder; expected the file",
             ("check-class", places / "subs", "relu", "--out", places / "a-file"): "is a file; expected a folder",
             ("autograder", "relu", "--out", places / "a-folder"): "is a folder; expected the zip file",
             ("autograder", "relu", "--out", places / "a-file" / "a.zip"): f"{places / 'a-file'} is a file",
             ("check", alice, "relu", "--seed-file", places / "a-folder"): "is a folder; expected a file",
             ("check", alice, "relu", "--seed-file", places / "binary"): "got a file that is not text",
             ("autograder", "relu", "--out", places / "z.zip", "--seed-file", places / "a-file"):
                 "expected a non-negative integer"}
    for argv, said in cases.items():
        assert said in one_line(capsys, argv), argv
    assert not (places / "a-folder.tmp").exists() and not any((places / "a-folder").iterdir())


def test_check_class_refuses_a_seed_on_the_command_line_and_an_earlier_output(capsys, tmp_path):
    """--seed with --seed-file was taken (the file won, silently); an --out holding an earlier
    gradebook was replaced without a word, and the JSON of a student no longer in the class stayed
    beside the new ones. Now --seed is refused (a secret on the command line is no secret), a
    non-empty --out is refused unless --force, and --force removes what the earlier run wrote
    (its students' JSONs), keeping the instructor's own files and the seed file asked for."""
    subs, out = tmp_path / "subs", tmp_path / "grades"
    for name in ("alice", "bob"):
        submission(subs / name, CORRECT, backward_body=CORRECT_BACKWARD)
    secret = seed_file(tmp_path)
    for extra in (["--seed", "8613", "--seed-file", secret], ["--seed", "3"]):
        assert "--seed: a seed on the command line is readable" in one_line(
            capsys, ["check-class", subs, "softmax", "--out", out, *extra])
    assert "--seed-file" in one_line(capsys, ["check-class", subs, "softmax", "--out", out, "--seed-file",
                                              seed_file(tmp_path / "subs" / "alice", 8613)])    # 14 bits: guessable
    assert main(["homework", "check-class", str(subs), "softmax", "--out", str(out)]) == 0
    drawn = json.loads((out / "seed.json").read_text())["seed"]
    (out / "my-notes.txt").write_text("the instructor's own\n")
    assert "not empty" in one_line(capsys, ["check-class", subs, "softmax", "--out", out, "--seed-file", secret])
    (subs / "bob" / "softmax.py").unlink()
    (subs / "bob").rmdir()                                          # bob left the class
    assert main(["homework", "check-class", str(subs), "softmax", "--out", str(out), "--force",
                 "--seed-file", str(out / "seed.json")]) == 0
    assert sorted(p.name for p in out.iterdir() if not p.name.startswith(".")) == \
        ["alice.json", "gradebook.csv", "my-notes.txt", "seed.json"]
    assert json.loads((out / "seed.json").read_text())["seed"] == drawn        # the same inputs again
    assert "bob" not in (out / "gradebook.csv").read_text()
