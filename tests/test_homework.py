"""Homework: export, grade, diagnose.

Each grading test runs `homework check` once over a copy (one confined process per
submission) and asserts on its printed table and its Gradescope JSON. Bugs are
planted by replacing one line of the exported solution copy. The attacks on the
grader are in tests/test_homework_attacks.py.
"""
from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import numpy as np
import pytest

from minitransformer.cli import main
from minitransformer.homework.export import export, stub_source
from minitransformer.homework.handout import page
from minitransformer.homework.mistakes import catalogue
from minitransformer.homework.registry import assignments, by_id, case_table

ASSIGNMENTS, BY_ID, CASES = assignments(), by_id(), case_table()
EQUIVALENTS = {a.id: a.equivalents for a in ASSIGNMENTS if a.equivalents}
ALL_POINTS = sum(a.points for a in ASSIGNMENTS)

# assignment -> (file in the copy, the line as it is, the planted bug); each loses points in its assignment only
BUGS = {
    "attention": ("functional/attention.py", "    dk = dk_scaled * scale ", "    dk = dk_scaled * 1.0 "),
    "linear": ("functional/linear.py", "dW = x_rows.T @ dh ", "dW = dh.T @ x_rows "),
    "softmax": ("functional/softmax.py", "    dx = y * (dy - s) ", "    dx = y * dy "),
    "layernorm": ("functional/norm.py", "    dx = rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat) ",
                  "    dx = rstd * dxhat "),
    "cross_entropy": ("functional/cross_entropy.py", "total / max(n_kept, 1)", "total / y.shape[0]"),
    "relu": ("functional/activations.py", "    dx = dy * cache.positive ", "    while True:\n        pass\n    dx = dy * cache.positive "),
    "dropout": ("functional/dropout.py", "dx = dy * cache.mask ", "dx = dy * cache.keep "),
}


def _message(name):
    return next(m.message for m in catalogue() if m.name == name)


def _check(capsys, *argv):
    code = main(["homework", "check", *map(str, argv)])
    return code, capsys.readouterr().out


def _section(out: str, assignment_id: str) -> str:
    """The printed block of one assignment."""
    start = out.index(f"== {assignment_id}:")
    end = out.find("\n== ", start + 1)
    return out[start:end if end > 0 else None]


def test_every_assignment_with_solutions_gets_full_marks(tmp_path, capsys):
    assert main(["homework", "export", "all", "--out", str(tmp_path), "--with-solutions"]) == 0
    code, out = _check(capsys, tmp_path, "all", "--json", tmp_path / "results.json")
    results = json.loads((tmp_path / "results.json").read_text())
    assert code == 0, out
    assert results["score"] == results["max_score"] == ALL_POINTS
    assert {t["name"] for t in results["tests"]} == set(BY_ID)
    assert "NOT OK" not in out


def test_stubs_score_zero_as_not_implemented_without_traceback(tmp_path, capsys):
    export(["all"], tmp_path)
    code, out = _check(capsys, tmp_path, "all", "--json", tmp_path / "results.json")
    results = json.loads((tmp_path / "results.json").read_text())
    assert code == 1
    assert results["score"] == 0 and results["max_score"] == ALL_POINTS
    for test in results["tests"]:
        assert test["score"] == 0 and "not implemented" in test["output"], test
    assert "Traceback" not in out


def test_planted_bugs_lose_points_in_their_own_assignment_with_a_diagnosis(tmp_path, capsys):
    export(["all"], tmp_path, with_solutions=True)
    for path, line, bug in BUGS.values():
        file = tmp_path / "minitransformer" / path
        source = file.read_text()
        assert source.count(line) == 1, (path, line)
        file.write_text(source.replace(line, bug))
    ids = [*BUGS, "mha", "rope"]          # mha calls attention and linear: isolated, it still passes
    code, out = _check(capsys, tmp_path, *ids, "--timeout", "4", "--json", tmp_path / "r.json")
    scores = {t["name"]: (t["score"], t["max_score"]) for t in json.loads((tmp_path / "r.json").read_text())["tests"]}
    assert code == 1
    for a in BUGS:
        assert scores[a][0] < scores[a][1], (a, _section(out, a))
    assert scores["mha"][0] == scores["mha"][1] and scores["rope"][0] == scores["rope"][1], out
    main = {a: re.escape(CASES[a][0].name) for a in BUGS}
    expected = {
        "attention": main["attention"] + " · dk .*DIAGNOSIS: off by a factor 2.83 \\(≈ √D with D=8: forgot 1/√D\\?\\)",
        "linear": main["linear"] + " · dW .*DIAGNOSIS: wrong shape: expected \\(\\d, \\d\\), got \\(\\d, \\d\\) "
                  "\\(it is the transpose of the expected array\\)",
        "softmax": main["softmax"] + " · dx .*DIAGNOSIS: " + re.escape(_message("softmax-no-sum-term")),
        "layernorm": main["layernorm"] + " · dx .*DIAGNOSIS: " + re.escape(_message("layernorm-no-mean-terms")),
        "cross_entropy": "cross_entropy: ignored targets, no smoothing · out .*DIAGNOSIS: "
                         + re.escape(_message("ce-mean-over-all-targets")),
        "relu": "timed out after 4 s",
        "dropout": "exception: AttributeError: 'DropoutCache' object has no attribute 'keep' "
                   "\\(at .*dropout.py:\\d+ in dropout_backward\\)",
    }
    for a, pattern in expected.items():
        assert re.search(pattern, _section(out, a)), (a, _section(out, a))
    assert "Traceback" not in out


def test_gradescope_json_schema_and_exit_code_of_one_assignment(tmp_path, capsys):
    export(["causal_mask"], tmp_path, with_solutions=True)
    code, _ = _check(capsys, tmp_path, "causal_mask", "--json", tmp_path / "r.json")
    results = json.loads((tmp_path / "r.json").read_text())
    assert code == 0
    assert set(results) == {"score", "max_score", "tests", "output", "visibility", "execution_time"}
    (test,) = results["tests"]
    assert set(test) == {"name", "score", "max_score", "output", "visibility"}
    assert test == {**test, "name": "causal_mask", "score": 2, "max_score": 2}
    assert isinstance(test["output"], str) and "causal_mask: T = S · out" in test["output"]
    assert "case · tensor" in test["output"] and "tolerance: relative error" in test["output"]


def test_unknown_assignment_is_a_usage_error(tmp_path, capsys):
    assert main(["homework", "export", "no_such", "--out", str(tmp_path)]) == 2
    assert "unknown assignment" in capsys.readouterr().err


def test_a_grader_bug_is_a_bug_not_a_usage_error(monkeypatch):
    """Only a user's error is one line and exit 2 (registry.UnknownAssignment, Refused, ...): a
    KeyError inside the grader is its own bug and surfaces as one."""
    from minitransformer.homework import registry

    def broken():
        raise KeyError("a grader bug")
    monkeypatch.setattr(registry, "assignments", broken)
    with pytest.raises(KeyError, match="a grader bug"):
        main(["homework", "export", "relu", "--out", "unused"])


def test_stub_keeps_signature_docstring_and_everything_else_byte_identical():
    source = (Path(__file__).parents[1] / "minitransformer/functional/norm.py").read_text()
    stubbed = stub_source(source, "layernorm_backward")
    old, new = ast.parse(source), ast.parse(stubbed)
    f_old = next(n for n in old.body if getattr(n, "name", "") == "layernorm_backward")
    f_new = next(n for n in new.body if getattr(n, "name", "") == "layernorm_backward")
    assert ast.get_docstring(f_new) == ast.get_docstring(f_old)
    assert ast.unparse(f_new.args) == ast.unparse(f_old.args)
    assert ast.unparse(f_new.body[-1]) == "raise NotImplementedError('layernorm_backward: implement me')"
    lines_old, lines_new = source.splitlines(), stubbed.splitlines()
    assert lines_new[:f_old.body[0].end_lineno] == lines_old[:f_old.body[0].end_lineno]
    tail = len(lines_old) - f_old.end_lineno
    assert lines_new[-tail:] == lines_old[-tail:]


def test_export_writes_the_handout_pages_and_starters_that_check_afresh(tmp_path):
    export(["layernorm", "mha"], tmp_path)
    handout = (tmp_path / "HOMEWORK.md").read_text()
    assert page("layernorm") in handout and page("mha") in handout and "rstd" in handout
    assert "python -m minitransformer lectures --out lectures" in handout
    starter = (tmp_path / "starter_layernorm.py").read_text()
    assert "# %%" in starter and "importlib.reload(norm)" in starter
    assert '"-m", "minitransformer", "homework", "check", ".", "layernorm"' in starter
    compile(starter, "starter_layernorm.py", "exec")


# code that computes an assignment's function although it is not the target, by assignment
EQUIVALENT_CODE = {
    "softmax": ["functional.softmax:softmax_backward_jacobian", "functional.softmax:log_softmax_forward",
                "functional.softmax:log_softmax_backward"],
    "cross_entropy": ["functional.softmax:softmax_forward", "functional.softmax:softmax_backward",
                      "functional.softmax:softmax_backward_jacobian", "plots.training:_implied_target"],
    "attention": ["functional.shaw:shaw_attention_forward", "functional.shaw:shaw_attention_backward"],
    "causal_mask": ["functional.masks:sliding_window_mask", "functional.masks:dilated_window_mask",
                    "functional.masks:global_window_mask"],
    "block": ["layers.blocks:EncoderBlock.backward", "models.gpt_reference:gpt_loss_and_gradients"],
}


def _body_raises(copy, spec) -> bool:
    module, qualname = spec.split(":")
    tree = ast.parse((copy / module.replace(".", "/")).with_suffix(".py").read_text())
    node = tree
    for part in qualname.split("."):
        node = next(n for n in node.body if getattr(n, "name", None) == part)
    code = [n for n in node.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    return len(code) == 1 and isinstance(code[0], ast.Raise) and "NotImplementedError" in ast.unparse(code[0])


def test_export_leaves_no_solution_direct_or_equivalent(tmp_path):
    export(["all"], tmp_path)
    copy = tmp_path / "minitransformer"
    assert {a: [str(t) for t in ts] for a, ts in EQUIVALENTS.items()} == EQUIVALENT_CODE
    for spec in [s for specs in EQUIVALENT_CODE.values() for s in specs] + \
            [str(t) for a in ASSIGNMENTS for t in a.targets]:
        assert _body_raises(copy, spec), spec
    assert not (copy / "fast").exists()                                   # the speed wing, whole
    assert (copy / "functional" / "twins.py").is_file()                  # the hook stays, empty
    text = "".join(p.read_text() for p in copy.rglob("*.py"))
    assert "(dxhat - mean_dxhat - xhat * mean_dxhat_xhat)" not in text    # layernorm's backward line
    assert "dx = y * (dy - s)" not in text                                # softmax's


PACKAGE = Path(__file__).resolve().parents[1] / "minitransformer"
# Helpers a target calls that compute nothing of the answer: argument checks and bookkeeping.
UTILITIES = {"_check_x", "check_softmax_inputs", "_check_inputs", "check_dloss", "_check_norm_inputs",
             "_check_forward", "_check_backward", "_safe_max", "_sum_rows", "_sum_to_shape", "_keep_mask",
             "_split", "query_key_positions", "_sigmoid"}


def test_every_helper_a_target_calls_is_stubbed_too_or_a_named_utility():
    """A same-module function a target's body calls holds part of the answer unless it only checks
    or books: it must be a target itself (stubbed, graded) or listed above. _gelu_tanh_forward (the
    whole tanh GELU) and RoPE's _tables and _pairs once shipped whole in the students' copies."""
    stubbed = {str(t) for a in ASSIGNMENTS for t in a.targets} | \
        {s for specs in EQUIVALENT_CODE.values() for s in specs}
    unclassified = []
    for a in ASSIGNMENTS:
        for target in a.targets:
            module, qualname = str(target).split(":")
            tree = ast.parse((PACKAGE / module.replace(".", "/")).with_suffix(".py").read_text())
            functions = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
            node = tree
            for part in qualname.split("."):
                node = next(n for n in node.body if getattr(n, "name", None) == part)
            called = {n.func.id for n in ast.walk(node) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
            unclassified += [f"{a.id}: {qualname} calls {module}:{name}" for name in sorted(called & functions)
                             if f"{module}:{name}" not in stubbed and name not in UTILITIES]
    assert not unclassified, unclassified


def test_export_refuses_a_non_empty_folder_and_force_keeps_foreign_files(tmp_path, capsys):
    (tmp_path / "my_work.py").write_text("precious = 1\n")
    assert main(["homework", "export", "relu", "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not empty" in err and "--force" in err
    assert main(["homework", "export", "relu", "--out", str(tmp_path), "--force"]) == 0
    (tmp_path / "minitransformer" / "notes.txt").write_text("mine\n")
    assert main(["homework", "export", "linear", "--out", str(tmp_path), "--force"]) == 0
    assert (tmp_path / "my_work.py").read_text() == "precious = 1\n"
    assert (tmp_path / "minitransformer" / "notes.txt").read_text() == "mine\n"
    assert not (tmp_path / "starter_relu.py").exists()                   # the previous export's own file
    assert (tmp_path / "starter_linear.py").exists()


def test_list_names_every_assignment_and_its_lecture(capsys):
    assert main(["homework", "list"]) == 0
    out = capsys.readouterr().out
    for a in ASSIGNMENTS:
        assert a.id in out and a.lecture in out
        assert (Path(__file__).parents[1] / a.lecture).exists()
    assert "layers.attention:MultiHeadAttention.backward" in out


def test_gradcheck_cli_checks_a_students_own_pair_with_a_diagnosis(tmp_path, capsys):
    (tmp_path / "mine.py").write_text(
        "def softmax_forward(x):\n"
        "    import numpy as np\n"
        "    e = np.exp(x - x.max(-1, keepdims=True))\n"
        "    y = e / e.sum(-1, keepdims=True)\n"
        "    return y, y\n"
        "def softmax_backward(dy, y):\n"
        "    return -y * (dy - (dy * y).sum(-1, keepdims=True))\n")
    assert main(["gradcheck", f"{tmp_path / 'mine.py'}:softmax_forward:softmax_backward"]) == 1
    out = capsys.readouterr().out
    assert "DIAGNOSIS: wrong sign" in out and "numerical dx" in out and "NOT OK" in out


def test_diagnoses_of_common_mistakes_without_a_subprocess():
    from minitransformer.homework.diagnose import compare
    rng = np.random.default_rng(0)
    r = rng.standard_normal((3, 4, 5))
    assert compare("x", r + 1e-14, r).ok
    assert compare("x", -r, r).diagnosis == "wrong sign (off by a factor -1)"
    assert compare("x", r / 8 ** 0.5, r, factors={"1/√D with D=8": (8 ** -0.5, "applied 1/√D twice?")}
                   ).diagnosis == "off by a factor 0.354 (≈ 1/√D with D=8: applied 1/√D twice?)"
    assert compare("x", r.swapaxes(-1, -2), r).diagnosis.startswith(
        "wrong shape: expected (3, 4, 5), got (3, 5, 4) (it is the transpose")
    square = rng.standard_normal((4, 4))
    assert compare("W", square.T, square).diagnosis.startswith("transposed")
    summed = np.broadcast_to(r.sum(axis=1, keepdims=True), r.shape)
    assert compare("x", summed, r).diagnosis == "summed over axis 1 (size 4) where it should not be"
    ignored = np.zeros(r.shape, bool)
    ignored[0] = True
    wrong_there = np.where(ignored, 1.0, r)
    assert compare("x", wrong_there, r, masked=ignored).diagnosis == "correct except at the 20 masked/ignored positions"
    assert compare("x", np.where(ignored, np.nan, r), r).diagnosis == "NaN/inf present (20 NaN, 0 inf)"
    assert compare("db", np.ones((3, 5)), np.full(5, 3.0)).diagnosis.endswith("gives the expected one: sum over every row)")
