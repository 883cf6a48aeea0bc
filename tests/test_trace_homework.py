"""The trace in a student's homework copy: the student's code beside the stored reference numbers.

One export (layernorm and mha assigned); the copy's `trace` command runs in a fresh
process inside it, first with the stubs, then with the reference's own bodies written
in (everything matches), then with a planted bug in each assignment: the page and the
printed line name the first step where the student's trace departs.
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from minitransformer.homework.export import export

PACKAGE = Path(__file__).resolve().parents[1] / "minitransformer"
LAYERNORM_DX = "    dx = rstd * (dxhat - mean_dxhat - xhat * mean_dxhat_xhat) "
MHA_MERGE = "twin(merge_heads)(dq, dk, dv)"


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("hw")
    export(["layernorm", "mha"], out)
    return out


def _trace(copy: Path, name: str) -> tuple:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-m", "minitransformer", "trace", "--out", name], cwd=copy, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    text = (copy / name).read_text(encoding="utf-8")
    data = json.loads(re.search(r'application/json">(.*?)</script>', text, re.S).group(1).replace("<\\/", "</"))
    return done.stdout, data


def _solve(copy: Path, relative: str, old: str = "", new: str = "") -> None:
    """The reference's file written into the copy, with ``old`` replaced by ``new`` (a planted bug)."""
    source = (PACKAGE / relative).read_text(encoding="utf-8")
    assert old in source
    (copy / "minitransformer" / relative).write_text(source.replace(old, new, 1), encoding="utf-8")


def test_the_copy_holds_numbers_of_the_reference_trace_and_no_code(copy):
    folder = copy / "minitransformer" / "trace"
    document = json.loads((folder / "reference_trace.json").read_text())
    assert set(document) == {"meta", "targets", "steps"} and len(document["steps"]) > 40
    assert "functional.norm:layernorm_backward" in document["targets"]
    assert "layers.attention:MultiHeadAttention.backward" in document["targets"]
    text = (folder / "reference_trace.json").read_text()
    assert "def " not in text and "return" not in text and "mean_dxhat" not in text


def test_stubs_stop_the_trace_at_the_first_routine_to_write(copy):
    said, data = _trace(copy, "stubs.html")
    assert "stops at step 3, layernorm_forward in blocks.0.attn.norm (your code)" in said
    assert "NotImplementedError" in said and data["compare"]["first"] == 2


def test_the_reference_bodies_match_every_step(copy):
    _solve(copy, "functional/norm.py")
    _solve(copy, "layers/attention.py")
    said, data = _trace(copy, "solved.html")
    assert said.splitlines()[-1].startswith("All ") and "steps match the reference" in said
    assert data["compare"]["complete"] and data["compare"]["first"] is None
    ops = {data["steps"][i]["op"] for i in data["compare"]["yours"]}
    assert {"layernorm_forward", "layernorm_backward", "attention_backward", "merge_heads"} <= ops
    assert "linear_forward" not in ops                                     # called by no target


def test_a_wrong_layernorm_backward_is_found_in_its_own_step(copy):
    _solve(copy, "layers/attention.py")
    _solve(copy, "functional/norm.py", LAYERNORM_DX, "    dx = rstd * dxhat ")
    said, data = _trace(copy, "layernorm_bug.html")
    first = data["compare"]["first"]
    assert data["steps"][first]["op"] == "layernorm_backward" and data["steps"][first]["scope"] == "norm_f"
    assert "its inputs match, its dx differs" in said
    values = data["compare"]["steps"][str(first)]["values"]
    assert values["result/dx"]["differs"] and not values["result/dgamma"]["differs"]
    assert values["result/dx"]["diff"]                                     # yours - reference, for the page


def test_a_wrong_order_in_the_mha_backward_is_found_between_two_routines(copy):
    _solve(copy, "functional/norm.py")
    _solve(copy, "layers/attention.py", MHA_MERGE, "twin(merge_heads)(dk, dq, dv)")
    said, data = _trace(copy, "mha_bug.html")
    first = data["compare"]["first"]
    assert data["steps"][first]["op"] == "merge_heads" and first in data["compare"]["yours"]
    assert "already differ" in said and "MultiHeadAttention.backward" in said
    assert re.search(r"parts\[0\] is dk of step (\d+) where the reference passes dq of step \1;", said), said


def test_the_trace_compares_within_the_graders_float64_tolerance():
    """trace/ sits below homework/ (the export stores a trace), so it keeps its own constant: the same."""
    from minitransformer.homework.diagnose import TOLERANCE
    from minitransformer.trace.compare import RTOL
    assert RTOL == TOLERANCE["float64"]
