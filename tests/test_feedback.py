"""The one explanation a student reads first: root cause, their own line, a crash in the math.

Bugs written by hand (benchmarks/handwritten_bugs.py) are graded by the real grader
(staged, the confined child, the cases, the diagnoses); each explanation must name the
mistake (keywords written with the bug), the student's path and never a staging folder,
and cost nothing in the other assignments of the file. Three right bodies written
differently keep full marks and get no explanation. The pure parts (a shape error told in
symbols, the constant-factor rule, the fallback's words, the line map) are tested alone.
"""
from __future__ import annotations

import ast
import os
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import handwritten_bugs as hb  # noqa: E402

from minitransformer.homework.diagnose import compare, scale_pattern  # noqa: E402
from minitransformer.homework.explain import shape_error  # noqa: E402
from minitransformer.homework.export import _find, body_span  # noqa: E402
from minitransformer.homework.places import Places  # noqa: E402
from minitransformer.homework.registry import select  # noqa: E402
from minitransformer.homework.report import format_result  # noqa: E402
from minitransformer.homework.sandbox import Limits  # noqa: E402
from minitransformer.homework.submission import stage  # noqa: E402

BUGS = {b.name: b for b in hb.BUGS}
SUBSET = ("linear-dx-no-transpose", "layernorm-unbiased-variance", "dropout-one-over-p", "log-softmax-no-sum",
          "layernorm-backward-crash-broadcast", "layernorm-step-by-step", "gelu-tanh-sech2",
          "attention-loop-over-heads")


@pytest.fixture(scope="module")
def graded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("bugs")
    os.chmod(folder, 0o755)
    return {name: hb.run_bug(BUGS[name], folder / name, Limits(timeout=60.0, budget=120.0)) for name in SUBSET}


@pytest.mark.parametrize("name", [n for n in SUBSET if BUGS[n].origin != "equivalent"])
def test_a_handwritten_bug_is_named_on_the_students_own_line(graded, name):
    row = graded[name]
    assert row["named"], row
    assert row["points_lost_elsewhere"] == 0 and row["score"] < row["max_score"], row
    assert "mt-staged-" not in row["message"] and f"{name}/minitransformer/" in row["message"], row["message"]


@pytest.mark.parametrize("name", [n for n in SUBSET if BUGS[n].origin == "equivalent"])
def test_a_right_body_written_differently_keeps_full_marks_and_no_explanation(graded, name):
    row = graded[name]
    assert row["score"] == row["max_score"] and row["message"] == "", row


def test_a_shape_error_of_a_students_line_is_told_in_the_docstrings_symbols(graded):
    text = graded["linear-dx-no-transpose"]["message"]
    assert "`dh @ W` is (N, d_out) @ (d_in, d_out)" in text and "did you mean `dh @ W.T`" in text, text
    assert "So dx, dW, db were never computed: one failure, at this line" in text, text
    assert ":55 (in linear_backward): `dx_rows = dh @ W`" in text, text     # the def is line 49, its import 50


def test_a_wrong_forward_is_said_first_and_the_backward_not_guessed_at(graded):
    text = graded["layernorm-unbiased-variance"]["message"]
    assert text.startswith("the forward is wrong (in layernorm_forward,") and "Fix it first" in text, text
    assert "per-row" not in text and "1/σ" not in text, text


def test_matmul_and_broadcast_errors_in_symbols():
    shapes = {"dout": (2, 2, 3, 8), "P": (2, 2, 3, 4)}
    said = shape_error("matmul: Input operand 1 has a mismatch in its core dimension 0, with gufunc signature "
                       "(n?,k),(k,m?)->(n?,m?) (size 3 is different from 4)", "dv = P @ dout", shapes,
                       {3: "T", 4: "S", 8: "Dv"})
    assert said == ("`P @ dout` is (2, 2, T, S) @ (2, 2, T, Dv): the inner sizes differ (S against T); did you "
                    "mean `P.swapaxes(-1, -2) @ dout` (the transpose)?")
    said = shape_error("operands could not be broadcast together with shapes (3,4,5) (3,4) ", "y = x - mu",
                       {"x": (3, 4, 5), "mu": (3, 4)}, {5: "C"})
    assert "`x` is (3, 4, C) and `mu` is (3, 4)" in said and "keepdims=True" in said, said
    assert shape_error("division by zero", "y = a / b", {}, {}) == ""


def test_the_constant_factor_rule_fires_anywhere_but_not_for_a_rounding():
    r = np.random.default_rng(0).standard_normal((3, 4))
    assert compare("dx", 1.7 * r, r).diagnosis.startswith("every entry is c = 1.7 = 17/10 times")
    assert compare("dx", 0.999 * r, r).diagnosis == ""
    assert compare("out", np.asarray(1.7), np.asarray(1.0)).diagnosis == ""     # one number: no factor


def test_the_fallback_borrows_no_other_assignments_words():
    rng = np.random.default_rng(1)
    r = rng.standard_normal((5, 4))
    per_feature = r * np.array([1.0, 2.0, 3.0, 4.0])
    assert "gamma" not in scale_pattern(per_feature, r) and "per feature" in scale_pattern(per_feature, r)
    assert "`gamma`" in scale_pattern(per_feature, r, ["gamma"])
    per_row = r * rng.uniform(1, 2, (5, 1))
    assert "σ" not in scale_pattern(per_row, r) and "rms" not in scale_pattern(per_row, r)


def test_a_staged_line_is_the_students_own(tmp_path):
    assignment = select(["relu"])[0]
    source = (hb._module_path("functional.activations")).read_text(encoding="utf-8")
    mine = "# my notes\n" * 7 + source                           # the student's file: 7 lines longer above
    path = tmp_path / "minitransformer" / "functional" / "activations.py"
    path.parent.mkdir(parents=True)
    path.write_text(mine, encoding="utf-8")
    places = Places(tmp_path)
    root, _ = stage(tmp_path, [assignment], places=places)
    try:
        staged = (root / "minitransformer" / "functional" / "activations.py").read_text(encoding="utf-8")
        target = places.of("functional.activations:relu_backward")
        assert target.path == f"{tmp_path.as_posix()}/minitransformer/functional/activations.py"
        line = next(i for i, t in enumerate(mine.splitlines(), 1) if t.startswith("def relu_backward"))
        assert target.line == line
        staged_start = body_span(_find(ast.parse(staged), "relu_backward"))[0]
        mine_start = body_span(_find(ast.parse(mine), "relu_backward"))[0]
        body = staged_start + 1                                   # the body's first line, 1-based
        spot = places.where(f"{root}/minitransformer/functional/activations.py:{body} in relu_backward")
        assert spot is not None and spot.path == target.path and spot.line == mine_start + 1
        assert spot.text == mine.splitlines()[mine_start].split("#")[0].strip() and spot.function == "relu_backward"
        assert "mt-staged-" not in places.scrub(f"at {root}/minitransformer/functional/activations.py:{body} in f")
    finally:
        import shutil
        shutil.rmtree(root, ignore_errors=True)


def test_a_report_is_the_score_then_the_explanation_then_the_table(graded):
    from minitransformer.homework.diagnose import Row
    from minitransformer.homework.result import Mark, Result
    said = "dx (in relu_backward), wrong in 2 cases: dx is relu'(x) alone: multiply it by the upstream gradient dy"
    result = Result("relu", 2, 0.86, "fail", rows=[Row("relu · dx", "(2, 3)", 1.0, 0.5, False,
                                                        "dx is relu'(x) alone: multiply it by the upstream gradient dy")],
                    rubric=[Mark("relu · dx", 1.14, False)], explanation=said)
    lines = format_result(result).splitlines()
    assert lines[0] == "== relu: 0.86/2 (fail)" and lines[1] == f"   WHAT TO FIX: {said}"
    assert lines[2].lstrip().startswith("tolerance:") and "NOT OK   DIAGNOSIS: dx is relu'(x) alone" in lines[4], lines


def test_the_quoted_line_is_the_code_without_its_comment():
    from minitransformer.homework.places import _code_of
    assert _code_of("    dx_rows = dh @ W      # (N, d_in)    reverses: h = x_rows @ W\n") == "dx_rows = dh @ W"
    assert _code_of('    s = "a # b"  # a comment\n') == 's = "a # b"'
    assert _code_of("    y = (x +\n") == "y = (x +"                      # a line a bracket leaves open
