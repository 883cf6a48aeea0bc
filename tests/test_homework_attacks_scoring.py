"""Attacks on the grader's scoring path: what crosses the channel, how it is compared and scored,
and the report it ends in. Each submission tries to earn what it does not compute, or to break
the trusted parent, and gets the honest grade (the style of tests/test_homework_attacks.py).

The student's code owns the child process: it can replace the child's ``write_frame`` or reach
the server's frames, so every reply is the student's to forge; the parent must judge any of them.
"""
from __future__ import annotations

import os
import struct
import sys
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from minitransformer.homework.classroom import cell
from minitransformer.homework.diagnose import compare
from minitransformer.homework.registry import get
from minitransformer.homework.report import format_notes, format_result
from minitransformer.homework.wire import read_frame

sys.path.insert(0, os.path.dirname(__file__))
from test_homework_attacks import CORRECT, CORRECT_BACKWARD, FALLBACK, honest, submission  # noqa: E402


def _rubric(result) -> dict:
    """{check name: passed} of the result's rubric."""
    return {m.name: m.passed for m in result.rubric}


# ------------------------------------------------------------------ what counts as a number
def test_a_bool_array_of_ones_is_not_every_nonzero_number(tmp_path):
    """True == any nonzero number: compared as masks, np.ones(bool) passed softmax's dx (and all of
    layernorm); a bool where numbers are expected is wrong, and said so."""
    result = honest(submission(tmp_path / "s", "import numpy as np\nreturn np.ones(x.shape, dtype=bool), None",
                               backward_body="import numpy as np\nreturn np.ones(dy.shape, dtype=bool)"))["softmax"]
    assert result.score == 0, result
    assert "a bool array where real numbers (float64) are expected" in format_result(result)


def test_compare_wants_real_numbers_for_numbers_and_a_bool_mask_for_a_mask():
    r = np.linspace(-1, 1, 12).reshape(3, 4)
    mask = np.tril(np.ones((3, 5), bool), 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                         # no ComplexWarning: refused before casting
        assert compare("dx", r + 1e-3j, r).diagnosis == "a complex128 array where real numbers (float64) are expected"
    assert not compare("out", mask.astype(np.float16), mask).ok  # a float 0/1 "mask": not the bool it promises
    assert compare("out", mask.copy(), mask).ok
    transposed = compare("out", mask.T, mask)                  # an honest mistake: diagnosed, no crash
    assert not transposed.ok and "(it is the transpose of the expected array)" in transposed.diagnosis
    assert compare("out", np.array([1, 0, -2]), np.array([1.0, 0.0, -2.0])).ok   # integers are numbers


# ------------------------------------------------------------------ exceptions and state between calls
def test_raising_after_a_right_first_example_fails_the_checks_it_skipped(tmp_path):
    """Right on the first call, then raising (a counter kept in the child): the first example's
    pass no longer stands for the examples that raised."""
    body = "import builtins\nbuiltins._calls = getattr(builtins, '_calls', 0) + 1\n" \
           "if builtins._calls > 1:\n    raise ValueError('only once')\n" + CORRECT
    result = honest(submission(tmp_path / "s", body, backward_body=CORRECT_BACKWARD))["softmax"]
    assert result.score == 0 and result.status == "exception", result
    assert not any(_rubric(result).values())


def test_a_dict_from_backward_is_a_wrong_gradient_not_a_grader_crash(tmp_path):
    """The numerical check runs the parent's gradcheck on what the student returns: a dict (an
    honest mistake) broke it with AttributeError, and the whole submission with it."""
    result = honest(submission(tmp_path / "s", CORRECT,
                               backward_body="y, axis = cache\nreturn {'dx': y * (dy - (dy * y).sum(axis, keepdims=True))}"
                               ))["softmax"]
    assert result.status == "fail" and _rubric(result)["softmax: rows of x (B, T, n) · forward"], result
    assert not _rubric(result)["softmax: rows of x (B, T, n) · dx"]
    text = format_result(result)
    assert "not an array: a dict" in text and "numerical check" in text and "could not run" in text


def test_an_input_changed_in_place_cannot_hide_by_dropping_the_echo(tmp_path):
    """A forward that computes into x in place and empties the echoed arguments (reached through the
    child's frames): an argument that does not come back is not shown unchanged."""
    body = CORRECT.replace("return y, (y, axis)", "x[...] = y\nimport sys\nsys._getframe(1).f_locals['kwargs'].clear()\n"
                           "return x, (x, axis)")
    result = honest(submission(tmp_path / "s", body, backward_body=CORRECT_BACKWARD))["softmax"]
    rubric = _rubric(result)
    assert not rubric["inputs and upstream gradient left unchanged"], result
    assert all(ok for name, ok in rubric.items() if name != "inputs and upstream gradient left unchanged")
    assert "`x` did not come back from the call as an array" in format_result(result)


# ------------------------------------------------------------------ a Module's parameters
def test_a_module_hiding_a_parameter_cannot_hide_its_wrong_gradient(tmp_path):
    """softmax (graded first, same child) patches Module.parameters to leave out W_o and b_o; mha's
    backward then never computes their gradients. Only the reference's parameters are accepted."""
    hide = """
    import minitransformer.layers.module as m
    shown = m.Module.parameters
    def parameters(self, prefix=""):
        return (item for item in shown(self, prefix) if not item[0].endswith(("W_o", "b_o")))
    m.Module.parameters = parameters
    """ + FALLBACK
    target = get("mha").targets[0]
    backward = reference_source(target).replace('self._accumulate_pair("W_o", dW_o, "b_o", db_o)', "pass")
    assert backward.count("pass") == 1
    folder = submission(tmp_path / "s", hide, extra={"minitransformer/layers/attention.py":
                                                     "class MultiHeadAttention:\n" + _indent(backward)})
    mha = honest(folder, ("softmax", "mha"))["mha"]
    assert mha.score == 0 and mha.status == "exception", mha
    assert "the module's parameters differ from the given ones: expected W_o (8, 8), b_o (8,)" in mha.message


def reference_source(target) -> str:
    """The reference's source of one target, dedented (the test writes a submission from it)."""
    import ast
    import textwrap
    from minitransformer.homework.export import PACKAGE_DIR, _find
    source = (PACKAGE_DIR / Path(*target.module.split("."))).with_suffix(".py").read_text(encoding="utf-8")
    node = _find(ast.parse(source), target.qualname)
    return textwrap.dedent("".join(source.splitlines(keepends=True)[node.lineno - 1:node.end_lineno]))


def _indent(text: str) -> str:
    return "".join("    " + line if line.strip() else line for line in text.splitlines(keepends=True))


# ------------------------------------------------------------------ the channel
def _frame(header: bytes) -> bytes:
    body = struct.pack("<I", len(header)) + header
    return struct.pack("<Q", len(body)) + body


@pytest.mark.parametrize("header, why", [
    (b'{"id": "1", "sizes": [], "value": ' + b"[" * 100_000 + b"]" * 100_000 + b"}", "nested too deeply"),
    (b'{"id": "1", "sizes": [], "value": {"tuple": [' + b"{}," * 1_000_000 + b"{}]}}", "a message header of"),
], ids=["deep", "large"])
def test_a_reply_too_deep_or_too_large_to_parse_is_malformed(header, why):
    """JSON nested past the parser's recursion, or 64 MB of "{}," (gigabytes as Python objects):
    refused before they cost the parent its stack or its memory."""
    r, w = os.pipe()
    writer = threading.Thread(target=_write_all, args=(w, _frame(header)))
    writer.start()
    try:
        with pytest.raises(ValueError, match=why):
            read_frame(r)
    finally:
        os.close(r)                                # a writer still blocked gets EPIPE and ends
        writer.join()
        os.close(w)


def _write_all(fd, data: bytes) -> None:
    try:
        while data:
            data = data[os.write(fd, data[:1 << 16]):]
    except BrokenPipeError:
        pass


def test_a_forged_reply_nested_too_deeply_costs_its_assignment_only(tmp_path):
    """The student's code replaces the child's write_frame: its reply crashed the parent
    (RecursionError out of json.loads); now it is a malformed message, and the next assignment runs."""
    body = """
    import __main__, json, os, struct
    def forged(fd, header, blobs):
        head = ('{"id": %s, "sizes": [], "value": ' % json.dumps(header["id"])).encode() + b"[" * 100000 + b"]" * 100000 + b"}"
        body = struct.pack("<I", len(head)) + head
        data = struct.pack("<Q", len(body)) + body
        while data:
            data = data[os.write(fd, data):]
    __main__.write_frame = forged
    """ + FALLBACK
    folder = submission(tmp_path / "s", body, extra={"activations.py": "def relu_forward(x):\n    return x * (x > 0)\n"})
    results = honest(folder, ("softmax", "relu"))
    assert results["softmax"].status == "crashed" and results["softmax"].score == 0, results["softmax"]
    assert "malformed message: a message nested too deeply" in results["softmax"].message
    assert results["relu"].status != "crashed", results["relu"]          # a fresh child for the next one


# ------------------------------------------------------------------ the report and the gradebook
def test_an_exception_message_or_a_file_name_cannot_forge_report_lines(tmp_path):
    forged = "\n== softmax: 5/5 (ok)\n   rubric: all ok\x1b[2K\u202e"          # a newline, a terminal escape, RLO
    folder = submission(tmp_path / "s", f"raise ValueError({forged!r})",
                        extra={"=HYPERLINK(1)\n== softmax: 5-5 (ok).py": "x = 1\n"})
    notes: list = []
    result = honest(folder, notes=notes)["softmax"]
    text = format_result(result) + "\n" + format_notes(notes)
    assert result.score == 0
    assert not any(line.startswith(("== softmax: 5/5", "   rubric: all ok")) for line in text.splitlines())
    assert "\x1b" not in text and "\u202e" not in text and "\\x1b[2K" in text
    assert len([n for n in notes if "HYPERLINK" in n]) == 1
    assert "\n" not in cell("; ".join(notes)) and cell("=HYPERLINK(1)").startswith("'=")
