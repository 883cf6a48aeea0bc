"""The whole grader on planted bugs: export, plant a bug in a target's body, `homework check`.

Every assignment gets a bug a student writes (the mistakes of tests/test_mistakes.py,
and the promises that are not a value: float32 kept, the upstream gradient left
alone, no NaN on a fully masked row). Bugs are grouped so that one `homework check`
grades many at once, and so that an assignment that needs another (attention needs
softmax and dropout, mha needs attention, block needs mha ...) is graded correct
while what it needs is buggy: each bug costs its own assignment only. The expected
messages are the catalogue's own (by name) or the promise's wording.
"""
from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from minitransformer.cli import main
from minitransformer.homework.export import _find, body_span, export
from minitransformer.homework.grade import grade
from minitransformer.homework.mistakes import catalogue
from minitransformer.homework.registry import by_id

BY_ID = by_id()


def plant(copy: Path, spec: str, *edits) -> None:
    """Replace text inside one target's body of the copy, each ``old`` exactly once there."""
    module, qualname = spec.split(":")
    path = copy / "minitransformer" / (module.replace(".", "/") + ".py")
    source = path.read_text()
    start, end = body_span(_find(ast.parse(source), qualname))
    lines = source.splitlines(keepends=True)
    body = "".join(lines[start:end])
    for old, new in edits:
        assert body.count(old) == 1, (spec, old)
        body = body.replace(old, new)
    path.write_text("".join(lines[:start]) + body + "".join(lines[end:]))


def _message(name):
    return next(m.message for m in catalogue() if m.name == name)


# assignment -> (target, edits, the case, the row's tensor, the expected diagnosis)
LEAF_BUGS = {
    "linear": ("functional.linear:linear_forward", [("        h += b ", "        h = h + 0 * b ")],
               "linear: x (B, T, d_in), d_in != d_out", "out", _message("linear-no-bias")),
    "relu": ("functional.activations:relu_backward", [("dx = dy * cache.positive ", "dx = cache.positive * 1.0 ")],
             "relu: x (B, T, C)", "dx", _message("relu-no-upstream")),
    "gelu": ("functional.activations:gelu_forward", [("dydx = Phi + x * phi ", "dydx = Phi ")],
             "gelu: exact (erf)", "dx", _message("gelu-phi-only")),
    "softmax": ("functional.softmax:softmax_backward", [("dy_y = dy * y ", "dy_y = dy ")],
                "softmax: rows of x (B, T, n)", "dx", _message("softmax-no-y-in-sum")),
    "cross_entropy": ("functional.cross_entropy:cross_entropy_forward",
                      [("smooth = -logp.mean(axis=-1) ", "smooth = (-logp.sum(axis=-1) - nll) / (V - 1) ")],
                      "cross_entropy: label smoothing 0.1 and ignored targets", "out",
                      _message("ce-smoothing-over-V-1")),
    "layernorm": ("functional.norm:layernorm_backward",
                  [("dx = rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat) ", "dx = rstd * (dxhat - mean_dxhat) ")],
                  "layernorm: x (B, T, C)", "dx", _message("layernorm-no-xhat-mean")),
    "rmsnorm": ("functional.norm:rmsnorm_backward", [("dx = rstd * (dxhat - xhat * mean_dxhat_xhat) ", "dx = rstd * dxhat ")],
                "rmsnorm: x (B, T, C)", "dx", _message("rmsnorm-rms-constant")),
    "embedding": ("functional.embedding:embedding_backward",
                  [("    if V <= ONE_HOT_MAX_V:\n        return _one_hot_scatter(ids_flat, dout2, V)\n"
                    "    return _sorted_scatter(ids_flat, dout2, V)\n",
                    "    dW = (dout2[:1] * 0).repeat(V, axis=0)\n    dW[ids_flat] += dout2\n    return dW\n")],
                  "embedding: repeated ids (their gradients add up)", "dW", _message("embedding-fancy-index-add")),
    "dropout": ("functional.dropout:dropout_backward", [("dx = dy * cache.mask * cache.scale ", "dx = dy * cache.mask ")],
                "dropout: training with a given keep-mask", "dx", _message("dropout-backward-unscaled")),
    "rope": ("functional.rope:rope_forward", [("_pairs(x, layout)", "_pairs(x, \"interleaved\")"),
                                              ("_pairs(y, layout)", "_pairs(y, \"interleaved\")")],
             "rope: half-split layout", "out", _message("rope-layout-ignored")),
    "causal_mask": ("functional.masks:causal_mask", [("return j <= i ", "return j < i ")],
                    "causal_mask: T = S", "out", _message("causal-diagonal-hidden")),
    "sinusoidal": ("functional.sinusoidal:sinusoidal_table",
                   [("PE[:, 0::2] = xp.sin(angle) ", "PE[:, 0::2] = xp.cos(angle) "),
                    ("PE[:, 1::2] = xp.cos(angle[:, : d // 2]) ", "PE[:, 1::2] = xp.sin(angle[:, : d // 2]) ")],
                   "sinusoidal: even d", "out", _message("sinusoidal-sin-cos-swapped")),
}

# what the handout promises beyond the values, and the Modules; graded beside the leaves done right
PROMISE_BUGS = {
    "attention": ("functional.attention:attention_forward",
                  [("dropout_forward(P, p_drop, rng, training, drop_mask)", "dropout_forward(P, 0.0)")],
                  "attention: dropout on P with a given drop_mask", "out", _message("attention-dropout-ignored")),
    "block": ("layers.residual:Residual.backward", [("            dx += dy ", "            dx = dx + 0 * dy ")],
              "block: pre-norm decoder block", "dx", _message("residual-identity-missing")),
    "relu": ("functional.activations:relu_backward",
             [("dx = dy * cache.positive ", "dx = (dy * cache.positive).astype(\"float64\") ")],
             "relu: float32 in, float32 out", "float32 kept", "dx is float64 for float32 inputs"),
    "gelu": ("functional.activations:gelu_backward", [("    dx = dy * cache.dydx ", "    dy *= cache.dydx\n    dx = dy ")],
             "gelu: exact (erf)", "inputs unchanged", "your function changed the upstream gradient `dy` in place"),
    "softmax": ("functional.softmax:softmax_forward",
                [("m = _safe_max(x, axis) ", "m = x.max(axis=axis, keepdims=True) "),
                 ("denom = xp.where(total == 0, xp.ones_like(total), total) ", "denom = total ")],
                "softmax: masked (-inf) entries and a fully masked row (0, never NaN)", "out",
                "NaN in out on the 1 row(s) where every entry is masked"),
    "rope": ("functional.rope:rope_forward", [("x.dtype, scale)", "x.dtype, 1.0)")],
             "rope: scale 2 (position interpolation)", "out", _message("rope-scale-ignored")),
}

MHA_BUG = {
    "mha": ("layers.attention:MultiHeadAttention.backward",
            [("dq = self.positions.rotate_backward(dq, rope)", "dq = dq"),
             ("dk = self.positions.rotate_backward(dk, rope)", "dk = dk")],
            "mha: RoPE, interleaved", "dx", _message("mha-rope-not-undone")),
}


def _graded(tmp_path_factory, name, bugs, ids=()):
    """Export with solutions, plant ``bugs``, run `homework check` once: (JSON tests by id, stdout)."""
    folder = tmp_path_factory.mktemp(name)
    export(["all"], folder, with_solutions=True)
    for target, edits, *_ in bugs.values():
        plant(folder, target, *edits)
    results = folder / "results.json"
    code = main(["homework", "check", str(folder), *(ids or ["all"]), "--json", str(results)])
    assert code == 1
    return {t["name"]: t for t in json.loads(results.read_text())["tests"]}


@pytest.fixture(scope="module")
def leaves(tmp_path_factory):
    return _graded(tmp_path_factory, "leaves", LEAF_BUGS)


@pytest.fixture(scope="module")
def promises(tmp_path_factory):
    return _graded(tmp_path_factory, "promises", PROMISE_BUGS)


@pytest.fixture(scope="module")
def mha(tmp_path_factory):
    return _graded(tmp_path_factory, "mha", MHA_BUG, ids=("mha", "block"))


def _row_line(output: str, case: str, tensor: str) -> str:
    prefix = f"{case} · {tensor} "
    found = [line for line in output.splitlines() if line.strip().startswith(prefix)]
    assert found, f"no row {prefix!r} in\n{output}"
    return found[0]


def _assert_diagnosed(tests, bugs):
    for a, (_, _, case, tensor, message) in bugs.items():
        test = tests[a]
        assert test["score"] < test["max_score"], test["output"]
        line = _row_line(test["output"], case, tensor)
        assert "NOT OK" in line and f"DIAGNOSIS: {message}" in line, line
        assert "case · tensor" in test["output"] and "tolerance: relative error" in test["output"]
        assert "FAIL" in test["output"] and "Traceback" not in test["output"]


def _assert_full(tests, ids):
    for a in ids:
        assert tests[a]["score"] == tests[a]["max_score"] == BY_ID[a].points, tests[a]["output"]


def test_a_bug_in_each_leaf_assignment_is_named_and_what_needs_it_keeps_full_marks(leaves):
    _assert_diagnosed(leaves, LEAF_BUGS)
    _assert_full(leaves, set(BY_ID) - set(LEAF_BUGS))        # attention, mha, block: the leaves' references


def test_the_promises_that_are_not_values_and_the_module_paths_cost_points_with_their_message(promises):
    _assert_diagnosed(promises, PROMISE_BUGS)
    _assert_full(promises, set(BY_ID) - set(PROMISE_BUGS))    # mha beside a buggy attention and rope


def _failed_checks(output: str) -> list:
    return [line.split(None, 2)[2] for line in output.splitlines() if line.strip().startswith("FAIL")]


def test_a_right_value_with_a_broken_promise_loses_that_check_only(promises):
    relu, gelu = promises["relu"], promises["gelu"]
    assert _failed_checks(relu["output"]) == ["relu: float32 in, float32 out"]      # float64 out of float32 in
    assert _failed_checks(gelu["output"]) == ["inputs and upstream gradient left unchanged"]   # dy overwritten
    lost = {a: BY_ID[a].points - promises[a]["score"] for a in ("relu", "gelu")}
    assert lost["relu"] == pytest.approx(2 / 3.5, abs=0.01) and lost["gelu"] == pytest.approx(5 / 5.5 / 2, abs=0.01)   # gelu: 5 checks and the half


def test_a_bug_in_mha_costs_mha_and_not_the_block_built_on_it(mha):
    _assert_diagnosed(mha, MHA_BUG)
    _assert_full(mha, ["block"])


# ------------------------------------------------------------------ the student's side: the local check
SOFTMAX_FORWARD = """
    import numpy as np
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - np.where(np.isfinite(m), m, 0.0))
    s = e.sum(axis=axis, keepdims=True)
    y = e / np.where(s == 0, 1.0, s)
    return y, SoftmaxCache(y, axis)
"""
SOFTMAX_BACKWARD_BUGGY = """
    y, axis = cache
    return y * dy
"""
SOFTMAX_BACKWARD = """
    y, axis = cache
    return y * (dy - (dy * y).sum(axis=axis, keepdims=True))
"""


def _write_body(copy: Path, spec: str, body: str) -> None:
    """A student's edit: the stub's raise replaced by ``body``."""
    module, qualname = spec.split(":")
    stub = f'    raise NotImplementedError("{qualname}: implement me")\n'
    plant(copy, spec, (stub, body.lstrip("\n")))


def _starter(copy: Path, a: str) -> str:
    done = subprocess.run([sys.executable, f"starter_{a}.py"], cwd=copy, capture_output=True, text=True,
                          timeout=120, env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_students_copy_checks_itself_with_the_graders_cases_diagnoses_and_rubric(tmp_path):
    """No reference in the copy: the stored expectations of the public seed stand in for it. The
    starter runs the handout's command afresh, so a fixed file is never graded stale."""
    export(["softmax"], tmp_path)
    assert (tmp_path / "minitransformer" / "homework" / "expected.npz").is_file()
    assert "    python -m minitransformer homework check . softmax" in (tmp_path / "HOMEWORK.md").read_text()
    _write_body(tmp_path, "functional.softmax:softmax_forward", SOFTMAX_FORWARD)
    _write_body(tmp_path, "functional.softmax:softmax_backward", SOFTMAX_BACKWARD_BUGGY)
    out = _starter(tmp_path, "softmax")
    assert "case · tensor" in out and "tolerance: relative error" in out
    line = _row_line(out, "softmax: rows of x (B, T, n)", "dx")
    assert "NOT OK" in line and f"DIAGNOSIS: {_message('softmax-no-sum-term')}" in line
    assert "FAIL  0.00/0.91  softmax: rows of x (B, T, n) · dx" in out    # 5 points over 5½ checks
    plant(tmp_path, "functional.softmax:softmax_backward", (SOFTMAX_BACKWARD_BUGGY.lstrip("\n"),
                                                            SOFTMAX_BACKWARD.lstrip("\n")))
    out = _starter(tmp_path, "softmax")
    assert "== softmax: 5/5 (ok)" in out and "NOT OK" not in out


def test_embedding_graded_on_a_vocabulary_that_takes_the_sorted_scatter(tmp_path):
    """The scatter for V > 128 is the student's to write too: left stubbed, it costs that case."""
    export(["embedding"], tmp_path, with_solutions=True)
    plant(tmp_path, "functional.embedding:_sorted_scatter",
          ("    xp = get_xp(dout2)\n", "    raise NotImplementedError('_sorted_scatter: implement me')\n"))
    result = grade(tmp_path, ["embedding"])[0]
    failed = [m.name for m in result.rubric if not m.passed]
    assert failed == ["embedding: a vocabulary above 128 (the sorted scatter)"], result.rubric


def test_the_same_grading_runs_in_process_on_the_students_own_package():
    """graded.Local: the student's code in this process, with the Sandbox's interface (here the
    installed package plays the student, so every check passes and an exception is the case's)."""
    from minitransformer.homework.graded import Local
    from minitransformer.homework.evaluate import run
    result = run("layernorm", Local(), examples=1)
    assert result.score == result.max_score == 10 and result.status == "ok", result
    assert result.rubric and all(m.passed for m in result.rubric)
