"""`gradcheck FILE.py:FORWARD:BACKWARD`: package files, inputs of the right rank, one line per bad target."""
from __future__ import annotations

import textwrap

import pytest

from minitransformer.cli import main

SOFTMAX = """
import numpy as np
from {dots}helpers import row_max

def softmax_forward(x, axis=-1):
    e = np.exp(x - row_max(x))
    y = e / e.sum(-1, keepdims=True)
    return y, y

def softmax_backward(dy, y):
    return y * (dy - dy.sum(-1, keepdims=True))      # planted: y missing inside the sum
"""


def _write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


def _package(root, name):
    _write(root / name / "__init__.py", "")
    _write(root / name / "functional" / "__init__.py", "")
    _write(root / name / "functional" / "helpers.py", "def row_max(x):\n    return x.max(-1, keepdims=True)\n")
    return _write(root / name / "functional" / "softmax.py", SOFTMAX.format(dots="."))


@pytest.mark.parametrize("name", ["minitransformer", "coursework"])
def test_a_file_inside_a_package_copy_is_imported_as_its_package_module(tmp_path, capsys, name):
    path = _package(tmp_path, name)                # relative import: a lone-file load would fail
    assert main(["gradcheck", f"{path}:softmax_forward:softmax_backward"]) == 1
    out = capsys.readouterr().out
    assert "the sum in dx = y ⊙ (dy - Σ_j dy_j y_j) is missing its y" in out
    assert "numerical dx" in out and "Traceback" not in out


def test_attention_gets_four_dimensional_inputs_and_the_reference_comparison(tmp_path, capsys):
    path = _write(tmp_path / "attn.py", """
        from minitransformer.functional.attention import attention_forward, attention_backward
        """)
    assert main(["gradcheck", f"{path}:attention_forward:attention_backward"]) == 0
    out = capsys.readouterr().out
    for tensor in ("dq", "dk", "dv", "numerical dq"):
        assert f"   {tensor} " in out


def test_shapes_option_draws_the_named_inputs(tmp_path, capsys):
    path = _write(tmp_path / "mine.py", """
        def project_forward(x, W):
            return x @ W, (x, W)
        def project_backward(dy, cache):
            x, W = cache
            return dy @ W.T, x.reshape(-1, x.shape[-1]).T @ dy.reshape(-1, dy.shape[-1])
        """)
    assert main(["gradcheck", f"{path}:project_forward:project_backward", "--shapes", "x=2,5;W=5,3"]) == 0
    out = capsys.readouterr().out
    assert "(5, 3)" in out and "no reference for this name" in out


GOOD = """
def f_forward(x):
    return x * 2, None
def f_backward(dy, cache):
    return dy * 2
NOT_A_FUNCTION = 3
def f_backward_one_arg(dy):
    return dy
def f_forward_raises(x):
    raise RuntimeError("not yet")
def f_backward_three(dy, cache):
    return dy * 2, dy * 2, dy * 2
def f_forward_no_cache(x):
    return x * 2
def f_backward_none(dy, cache):
    return None
def f_backward_str(dy, cache):
    return "dx"
def f_backward_wrong_shape(dy, cache):
    return dy[0]
def f_forward_int(x):
    return (x > 0).astype(int), None
def f_forward_three(x):
    return x * 2, None, None
def layernorm_forward(x, gamma, beta, eps=1e-5):
    return x * gamma + beta, None
def layernorm_backward(dy, cache):
    return dy, dy.sum((0, 1))
"""


@pytest.mark.parametrize("target, shapes, expected", [
    ("{d}/missing.py:f_forward:f_backward", None, "missing.py: no such file"),
    ("{d}/good.py", None, "expected FILE.py:FORWARD:BACKWARD"),
    ("{d}/good.py:f_forward", None, "expected FILE.py:FORWARD:BACKWARD"),
    ("{d}/good.py:f_forward:", None, "expected FILE.py:FORWARD:BACKWARD"),
    ("{d}/good.py:f_forwrd:f_backward", None, "no forward named 'f_forwrd' (functions defined there:"),
    ("{d}/good.py:f_forward:f_backwrd", None, "no backward named 'f_backwrd'"),
    ("{d}/good.py:f_forward:NOT_A_FUNCTION", None, "'NOT_A_FUNCTION' is not a function (it is a int)"),
    ("{d}/good.py:f_forward:f_backward_one_arg", None, "must take (dout, cache)"),
    ("{d}/good.py:f_forward_raises:f_backward", None, "running the pair raised RuntimeError: not yet (at"),
    ("{d}/good.py:f-forward:f_backward", None, "'f-forward' is not a Python name"),
    ("{d}/broken.py:f_forward:f_backward", None, "broken.py:2: syntax error"),
    ("{d}/raises.py:f_forward:f_backward", None, "importing it raised ImportError: no"),
    ("{d}/notes.txt:f_forward:f_backward", None, "not a Python file (.py)"),
    ("{d}:f_forward:f_backward", None, "not a Python file (.py)"),
    ("{d}/good.py:f_forward:f_backward", "x=2,a", "--shapes: expected NAME=D1,D2,..."),
    ("{d}/good.py:f_forward:f_backward", "y=2,3", "--shapes: f_forward has no parameter y"),
    # the pair's form, which the numerical check took on trust
    ("{d}/good.py:f_forward:f_backward_three", None,
     "f_backward_three returned 3 gradients for the 1 input x of f_forward: expected one per input"),
    ("{d}/good.py:f_forward_no_cache:f_backward", None,
     "f_forward_no_cache must return (out, cache), got ndarray of shape (2, 3, 4)"),
    ("{d}/good.py:f_forward_three:f_backward", None, "f_forward_three must return (out, cache), got a tuple of 3"),
    ("{d}/good.py:f_forward:f_backward_none", None, "f_backward_none's dx: expected an array of x's shape"),
    ("{d}/good.py:f_forward:f_backward_str", None, "f_backward_str's dx: expected an array of x's shape (2, 3, 4), got str"),
    ("{d}/good.py:f_forward:f_backward_wrong_shape", None, "expected an array of x's shape (2, 3, 4), got shape (3, 4)"),
    ("{d}/good.py:f_forward_int:f_backward", None, "f_forward_int's out: expected floating point numbers"),
    ("{d}/good.py:layernorm_forward:layernorm_backward", None,     # a graded name: the grader's inputs
     "layernorm_backward returned 2 gradients for the 3 inputs x, gamma, beta"),
    ("{d}/good.py:f_forward:f_backward:extra", None, "(three parts separated by ':', got 4)"),
    ("{d}/good.py:f_forward:f_backward", "x=2,3;x=4", "--shapes: x is given twice"),
    ("{d}/good.py:f_forward:f_backward", "x=100000,100000", "--shapes: expected at most 4194304 entries per input"),
    ("{d}/good.py:f_forward:f_backward", "", "--shapes: expected NAME=D1,D2,...;NAME=..., got ''"),
])
def test_every_bad_target_is_one_line_and_exit_2(tmp_path, capsys, target, shapes, expected):
    _write(tmp_path / "good.py", GOOD)
    _write(tmp_path / "broken.py", "def f_forward(x):\n    return x +\n")
    _write(tmp_path / "raises.py", "raise ImportError('no')\n")
    _write(tmp_path / "notes.txt", "")
    argv = ["gradcheck", target.format(d=tmp_path)] + (["--shapes", shapes] if shapes is not None else [])
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("gradcheck: ") and expected in lines[0], captured.err
