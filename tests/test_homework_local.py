"""The local check is the grader: a student's copy checks itself as the instructor's `check` grades it.

One fresh export of softmax, layernorm and attention (attention builds on softmax, which the
copy also assigns) is filled with the solutions' bodies, then four folders are graded both
ways: `python -m minitransformer homework check .` inside the copy (its own code, the public
seed's numbers it stores), and the installed grader's `homework check FOLDER IDS --seed-file F`
with F holding that public seed. A correct copy, a buggy one and one whose backward calls a
module-level helper score the same both ways; a buggy softmax costs attention its points only
in the local check (it runs the student's softmax, the grader the reference's), and the report
says why under attention.
"""
from __future__ import annotations

import ast
import contextlib
import io
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from minitransformer.cli import main
from minitransformer.homework.export import _find, body_span, export
from minitransformer.homework.local import walls_line
from minitransformer.homework.outside import outside
from minitransformer.homework.submission import take_body

IDS = ("softmax", "layernorm", "attention")
TARGETS = {"functional/softmax.py": ("softmax_forward", "softmax_backward"),
           "functional/norm.py": ("layernorm_forward", "layernorm_backward"),
           "functional/attention.py": ("attention_forward", "attention_backward")}
SCORE = re.compile(r"^== (\w+): ([0-9.]+|-)/([0-9.]+) \(([a-z ]+)\)$", re.M)
HELPER = "def _my_helper(dy, xhat):\n    return dy * xhat\n\n\n"


@pytest.fixture(scope="module")
def handed_out(tmp_path_factory) -> Path:
    """A fresh export, every assigned body written as the solutions have it (a student who is done)."""
    base = tmp_path_factory.mktemp("local")
    export(IDS, base / "copy")
    export(IDS, base / "solutions", with_solutions=True)
    for rel, names in TARGETS.items():
        path, solved = base / "copy" / "minitransformer" / rel, base / "solutions" / "minitransformer" / rel
        source, text = path.read_text(), solved.read_text()
        for name in names:
            source = take_body(source, name, text, _find(ast.parse(text), name))
        path.write_text(source)
    (base / "seed.json").write_text('{"seed": 0}\n')       # the public seed, whose numbers the copy stores
    return base


def _copy(handed_out: Path, folder: Path) -> Path:
    shutil.copytree(handed_out / "copy", folder)
    return folder


def _edit(copy: Path, rel: str, old: str, new: str, in_body: str = "") -> None:
    """Replace ``old`` (exactly once) in the copy's file, inside the body of ``in_body`` if named."""
    path = copy / "minitransformer" / rel
    source = path.read_text()
    if in_body:
        start, end = body_span(_find(ast.parse(source), in_body))
        lines = source.splitlines(keepends=True)
        body = "".join(lines[start:end])
        assert body.count(old) == 1, (in_body, old)
        source = "".join(lines[:start]) + body.replace(old, new) + "".join(lines[end:])
    else:
        assert source.count(old) == 1, old
        source = source.replace(old, new)
    path.write_text(source)


def local_check(copy: Path) -> subprocess.CompletedProcess:
    """`homework check .` run inside the copy: its own package, as the student runs it."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run([sys.executable, "-m", "minitransformer", "homework", "check", "."], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=180)


def grader_check(folder: Path, seed_file: Path) -> str:
    """The instructor's `homework check FOLDER IDS --seed-file F`, run from the installed package."""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        main(["homework", "check", str(folder), *IDS, "--seed-file", str(seed_file)])
    return out.getvalue()


def scores(output: str) -> dict:
    return {m[0]: (m[1], m[2], m[3]) for m in SCORE.findall(output)}


@pytest.fixture(scope="module")
def folders(handed_out, tmp_path_factory) -> dict:
    """The four folders of the comparison, each a fresh export the student worked in."""
    base = tmp_path_factory.mktemp("folders")
    made = {name: _copy(handed_out, base / name) for name in ("correct", "buggy", "helper", "needed")}
    _edit(made["buggy"], "functional/norm.py", "dxhat - mean_dxhat - xhat * mean_dxhat_xhat", "dxhat - mean_dxhat",
          in_body="layernorm_backward")
    _edit(made["helper"], "functional/norm.py", "def layernorm_backward(", HELPER + "def layernorm_backward(")
    _edit(made["helper"], "functional/norm.py", "_sum_rows(dy * xhat)", "_sum_rows(_my_helper(dy, xhat))",
          in_body="layernorm_backward")
    _edit(made["needed"], "functional/softmax.py", "dy_y = dy * y ", "dy_y = dy ", in_body="softmax_backward")
    return made


@pytest.fixture(scope="module")
def both_ways(folders, handed_out) -> dict:
    """name -> (the local check's run, the grader's output)."""
    return {name: (local_check(folder), grader_check(folder, handed_out / "seed.json"))
            for name, folder in folders.items()}


def test_the_local_check_scores_as_the_grader_a_correct_a_buggy_and_a_helper_copy(both_ways):
    for name in ("correct", "buggy", "helper"):
        local, grader = both_ways[name]
        assert "Traceback" not in local.stdout + local.stderr, local.stderr
        assert local.stdout.startswith("local check of this copy"), local.stdout[:300]
        assert scores(local.stdout) == scores(grader) and set(scores(grader)) == set(IDS), (name, local.stdout, grader)
    assert {a: s[0] for a, s in scores(both_ways["correct"][1]).items()} == {"softmax": "5", "layernorm": "10",
                                                                                "attention": "15"}
    assert scores(both_ways["buggy"][1])["layernorm"][2] == "fail"
    helper = scores(both_ways["helper"][1])["layernorm"]
    assert helper[2] == "exception" and float(helper[0]) < 10, helper        # NameError: the helper is not staged


def test_a_buggy_softmax_costs_attention_only_here_and_the_report_says_why(both_ways):
    local, grader = both_ways["needed"]
    mine, theirs = scores(local.stdout), scores(grader)
    assert mine["softmax"] == theirs["softmax"] and mine["softmax"][2] == "fail"
    assert mine["layernorm"] == theirs["layernorm"]
    assert theirs["attention"][0] == "15" and float(mine["attention"][0]) < 15, (mine, theirs)
    softmax = f"{mine['softmax'][0]}/5 fail"
    said = (f"   attention used your softmax_forward and softmax_backward; the grader uses the reference: a softmax "
            f"bug shows here, not in your attention grade (softmax: {softmax} here)")
    attention = local.stdout[local.stdout.index("== attention:"):]
    assert attention.splitlines()[1] == said, attention[:600]
    correct = both_ways["correct"][0].stdout                        # said also when softmax is right
    assert "attention used your softmax_forward and softmax_backward" in correct and "(softmax: 5/5 here)" in correct


def test_code_outside_the_bodies_is_warned_before_grading_and_nothing_else_is_listed(both_ways, folders):
    out = both_ways["helper"][0].stdout
    line = _line(folders["helper"], "functional/norm.py", "_my_helper")
    warning = (f"warning: _my_helper at minitransformer/functional/norm.py:{line} is outside layernorm_backward: the "
               "grader ignores it; move it inside")
    lines = out.splitlines()
    assert warning in lines and lines.index(warning) < min(i for i, ln in enumerate(lines) if ln.startswith("== "))
    assert [ln for ln in lines if ln.startswith("ignored:")] == [
        "ignored: 1 change(s) outside the bodies you write (the warnings above): the grader does not see them"]
    correct = both_ways["correct"][0].stdout
    assert "warning:" not in correct and "ignored" not in correct, correct


def test_the_walls_the_local_check_stood_behind_are_said_once(both_ways):
    from minitransformer.homework.walls import missing
    out = both_ways["correct"][0].stdout
    said = [ln for ln in out.splitlines() if ln.startswith("local check: your code ran")]
    assert len(said) == 1, out
    if not missing():                        # this machine raises every wall: the check says each
        assert said[0].startswith("local check: your code ran walled in as the grader walls it (Landlock ABI")
        assert "seccomp allow-list" in said[0] and "without" not in said[0], said


def test_where_a_wall_cannot_be_raised_the_check_goes_on_and_says_why_that_is_fine_here():
    report = {"landlock": 0, "seccomp": True, "netns": False, "nofile": 32, "user": "the grader's own user"}
    line = walls_line(report)
    assert line.startswith("your code ran behind only some of the grader's walls (no Landlock, seccomp allow-list, "
                           "no network namespace, 32 open files, your own user): without Landlock and a network "
                           "namespace"), line
    assert "The grader refuses to grade without Landlock or seccomp" in line
    assert "your own machine and nothing secret is in this copy" in line


def test_a_raise_in_a_students_function_is_a_line_of_the_report(handed_out, tmp_path):
    copy = _copy(handed_out, tmp_path / "copy")
    _edit(copy, "functional/norm.py", "xhat, rstd, gamma = cache", "raise ValueError('not yet')",
          in_body="layernorm_backward")
    done = local_check(copy)
    assert done.returncode == 1 and "Traceback" not in done.stdout + done.stderr, done.stderr
    assert scores(done.stdout)["layernorm"][2] == "exception"
    line = next(i for i, text in enumerate((copy / "minitransformer/functional/norm.py").read_text().splitlines(), 1)
                if "raise ValueError('not yet')" in text)
    assert f"ValueError: not yet (at minitransformer/functional/norm.py:{line} in layernorm_backward)" in done.stdout


def test_a_helper_the_grader_does_not_see_fails_at_the_students_own_line(both_ways, folders):
    """The staged copy has no helper, so its lines are not the student's: the report says theirs."""
    line = next(i for i, text in enumerate((folders["helper"] / "minitransformer/functional/norm.py").read_text()
                                           .splitlines(), 1) if "_sum_rows(_my_helper(dy, xhat))" in text)
    said = (f"NameError: name '_my_helper' is not defined (at minitransformer/functional/norm.py:{line} in "
            "layernorm_backward)")
    assert said in both_ways["helper"][0].stdout, both_ways["helper"][0].stdout[:2000]


def test_what_the_student_never_touched_and_training_outputs_are_not_listed(handed_out, tmp_path):
    """Only code the student changed or added outside the bodies is named: every kind of it once, and
    nothing for an untouched file, a checkpoint, a figure, a lecture copied out, a changed data file."""
    copy = _copy(handed_out, tmp_path / "copy")
    (copy / "runs").mkdir()
    (copy / "runs" / "checkpoint.npz").write_bytes(b"\0" * 64)
    (copy / "figures").mkdir()
    (copy / "figures" / "loss.png").write_bytes(b"\x89PNG")
    (copy / "lectures").mkdir()
    (copy / "lectures" / "01_attention.py").write_text("x = 1\n")
    (copy / "minitransformer" / "trace" / "page.css").write_text("body {}\n")
    assert outside(copy, copy / "minitransformer") == []
    norm = "minitransformer/functional/norm.py"
    _edit(copy, "functional/norm.py", "def layernorm_backward(dy, cache: LayerNormCache):",
          "import math\nEPS = 1e-5\n\n\ndef layernorm_backward(dy, cache: LayerNormCache, scale=1.0):")
    _edit(copy, "functional/norm.py", "def _sum_rows(", "def _sum_rows(dy):\n    return dy\n\n\ndef _unused_sum_rows(")
    _edit(copy, "functional/linear.py", "def linear_forward(", "def _mine():\n    return 1\n\n\ndef linear_forward(")
    (copy / "minitransformer" / "functional" / "my_utils.py").write_text("X = 1\n")
    source = (copy / "minitransformer" / "functional" / "softmax.py").read_text()
    (copy / "minitransformer" / "functional" / "softmax.py").write_text(
        source + "\n\ndef softmax_forward(x, mask=None, axis=-1):\n    return x\n")
    lines = outside(copy, copy / "minitransformer")
    line_of = {n.name if hasattr(n, "name") else ast.unparse(n): n.lineno
               for n in ast.parse((copy / norm).read_text()).body}
    expected = [
        f"_mine at minitransformer/functional/linear.py:{_line(copy, 'functional/linear.py', '_mine')} is not in a "
        "body you hand in: the grader ignores it (it uses the copy's own)",
        "minitransformer/functional/my_utils.py is not in the copy as handed out: the grader ignores it; move what "
        "your functions use of it inside them",
        f"_sum_rows at {norm}:{line_of['_sum_rows']} differs from the copy as handed out: the grader uses its own; "
        "make the change inside layernorm_backward",                      # the body that calls it
        f"_unused_sum_rows at {norm}:{line_of['_unused_sum_rows']} is outside layernorm_forward and "
        "layernorm_backward: the grader ignores it; move it inside",
        f"import math at {norm}:{line_of['import math']} is outside layernorm_forward and layernorm_backward: the "
        "grader ignores it; move it inside",
        f"EPS at {norm}:{line_of['EPS = 1e-05']} is outside layernorm_forward and layernorm_backward: the grader "
        "ignores it; move it inside",
        f"the signature of layernorm_backward at {norm}:{line_of['layernorm_backward']} differs from the copy as "
        "handed out: the grader keeps its own (it takes the body only)",
    ]
    defs = [n.lineno for n in ast.parse((copy / "minitransformer/functional/softmax.py").read_text()).body
            if getattr(n, "name", "") == "softmax_forward"]
    expected.append(f"softmax_forward is defined 2 times in minitransformer/functional/softmax.py (lines {defs[0]} "
                    f"and {defs[1]}): the grader takes the first one's body; Python, and so your training, runs the "
                    "last")
    assert lines == expected, "\n".join(lines)


def _line(copy: Path, rel: str, name: str) -> int:
    return next(n.lineno for n in ast.parse((copy / "minitransformer" / rel).read_text()).body
                if getattr(n, "name", "") == name)


def test_a_method_helper_in_a_module_class_is_named_with_its_class(tmp_path):
    export(["mha"], tmp_path / "copy")
    copy = tmp_path / "copy"
    _edit(copy, "layers/attention.py", "    def backward(self", "    def _split(self, x):\n        return x\n\n"
          "    def backward(self")
    where = _line(copy, "layers/attention.py", "MultiHeadAttention")
    [line] = outside(copy, copy / "minitransformer")
    assert line.startswith("MultiHeadAttention._split at minitransformer/layers/attention.py:") and \
        line.endswith("is outside MultiHeadAttention.backward: the grader ignores it; move it inside"), line
    assert int(line.split(":")[1].split()[0]) > where


def test_a_copy_without_its_handed_out_sources_says_it_is_staged_over_the_students_files(handed_out, tmp_path):
    copy = _copy(handed_out, tmp_path / "copy")
    (copy / "minitransformer" / "homework" / "copy.zip").unlink()
    done = local_check(copy)
    assert done.stdout.splitlines()[1].startswith("warning: this copy has no minitransformer/homework/copy.zip"), \
        done.stdout[:600]
    assert scores(done.stdout) == {"softmax": ("5", "5", "ok"), "layernorm": ("10", "10", "ok"),
                                   "attention": ("15", "15", "ok")}, done.stdout


def test_what_an_assignment_builds_on_is_the_copys_reference_unless_the_copy_stubs_it_unasked(tmp_path):
    """cross_entropy and attention: softmax, which attention builds on, is not assigned. Where the copy
    ships it working, the local check runs it as handed out and scores as the grader; where the export
    stubbed it (it computes cross_entropy), the report says it raises here and not in the grader."""
    export(["cross_entropy", "attention"], tmp_path / "copy")
    export(["cross_entropy", "attention"], tmp_path / "solutions", with_solutions=True)
    copy = tmp_path / "copy"
    for rel, names in {"functional/attention.py": TARGETS["functional/attention.py"],
                       "functional/softmax.py": ("log_softmax_forward", "log_softmax_backward"),
                       "functional/cross_entropy.py": ("cross_entropy_forward", "cross_entropy_backward")}.items():
        path, text = copy / "minitransformer" / rel, (tmp_path / "solutions" / "minitransformer" / rel).read_text()
        source = path.read_text()
        for name in names:
            source = take_body(source, name, text, _find(ast.parse(text), name))
        path.write_text(source)
    (tmp_path / "seed.json").write_text("0\n")
    local = local_check(copy)
    with contextlib.redirect_stdout(io.StringIO()) as out:
        main(["homework", "check", str(copy), "cross_entropy", "attention", "--seed-file", str(tmp_path / "seed.json")])
    mine, theirs = scores(local.stdout), scores(out.getvalue())
    assert mine["cross_entropy"] == theirs["cross_entropy"] and theirs["attention"][0] == "15"
    softmax = (copy / "minitransformer" / "functional" / "softmax.py").read_text()
    stubbed = 'raise NotImplementedError("softmax_forward: computes the cross_entropy' in softmax
    said = ("attention calls softmax_forward and softmax_backward, which this copy holds stubbed though no "
            "assignment of it asks for them: they raise here; the grader uses the reference")
    assert (said in local.stdout) == stubbed, local.stdout[:1500]
    assert (mine["attention"] == theirs["attention"]) != stubbed, (mine, theirs)
