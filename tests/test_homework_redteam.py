"""Attacks of the red team after the walls, each a submission or a call anyone can rebuild, each
shown getting the honest grade (and measured against the grader before its fix, in the comment).

    a link in the submission to the grader's own reference      before: 95/95 from `check` and from
      (minitransformer -> /autograder/source/grader-lib/...)             the Gradescope zip; now 0
    a needed call that makes the grader compute gigabytes         before: the grader at 5.9 GB for a
      (repeat_kv's r, a cache whose arrays broadcast)                     4 KB question; now a MemoryError
                                                                          in the student's own call
    a needed call of 35,000 colliding dict keys                   before: seconds of the grader's CPU
                                                                          per call; now refused by size
    a student folder named "seed" in check-class                  before: the class's secret seed
                                                                          replaced by that student's JSON
    the report as an oracle on the zip's fixed seed: the inputs    before: softmax 5/5 after 7
      leaked through exception messages, a table of results               submissions, no softmax written;
      computed offline handed in                                          now every run draws new inputs
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from minitransformer.cli import main
from minitransformer.homework import classroom, needs
from minitransformer.homework.grade import grade
from minitransformer.homework.needs import Answers
from minitransformer.homework.sandbox import ChildGone, Isolated, Limits, can_isolate
from minitransformer.homework.wire import Whole

REFERENCE = Path(__file__).resolve().parents[1] / "minitransformer"
FAST = Limits(timeout=10.0, budget=40.0)
SECRET = 0x5B1E_93C2_07AF_64D8_E2C9_1B7F_40A3_D65C          # 128 bits


def scores(folder, ids, **kw) -> dict:
    notes = kw.pop("notes", None)
    return {r.id: r.to_dict() for r in grade(folder, ids, limits=kw.pop("limits", FAST), seed=SECRET, notes=notes, **kw)}


# ------------------------------------------------------------------ links in a submission
def test_a_link_in_a_submission_to_the_reference_is_not_followed(tmp_path):
    """A folder of the submission that is a link to the grader's installed package (on Gradescope
    /autograder/source/grader-lib/minitransformer; a GitHub upload keeps links) was read as the
    student's: every target body the reference's, 95/95. Links are not followed, anywhere on the way."""
    whole = tmp_path / "whole"
    whole.mkdir()
    (whole / "minitransformer").symlink_to(REFERENCE, target_is_directory=True)
    flat = tmp_path / "flat"
    flat.mkdir()
    (flat / "functional").symlink_to(REFERENCE / "functional", target_is_directory=True)
    nested = tmp_path / "nested" / "hw"
    nested.mkdir(parents=True)
    (nested / "minitransformer").symlink_to(REFERENCE, target_is_directory=True)
    for folder in (whole, flat, nested.parent):
        notes: list = []
        result = scores(folder, ["linear"], notes=notes)["linear"]
        assert result["score"] == 0 and result["status"] == "not implemented", (folder, result)
        assert any("a link" in n and "not followed" in n for n in notes), notes
    copied = tmp_path / "copied" / "minitransformer" / "functional"      # the same file, handed in as a file
    copied.mkdir(parents=True)
    (copied / "linear.py").write_bytes((REFERENCE / "functional" / "linear.py").read_bytes())
    assert scores(tmp_path / "copied", ["linear"])["linear"]["score"] == 5


def test_a_linked_file_or_a_fifo_at_a_package_path_is_named_and_never_waited_on(tmp_path):
    folder = tmp_path / "s" / "functional"
    folder.mkdir(parents=True)
    (folder / "norm.py").symlink_to(REFERENCE / "functional" / "norm.py")
    os.mkfifo(folder / "linear.py")                     # an open() of it would wait for a writer forever
    notes: list = []
    start = time.monotonic()
    results = scores(tmp_path / "s", ["layernorm", "linear"], notes=notes)
    assert time.monotonic() - start < 60
    assert results["layernorm"]["score"] == 0 and results["linear"]["score"] == 0
    assert any(n.startswith("functional/norm.py: a link") for n in notes), notes
    assert any(n.startswith("functional/linear.py: not a regular file") for n in notes), notes


# ------------------------------------------------------------------ the grader's answers to needed calls
LINUX_FORK = pytest.mark.skipif(not can_isolate(), reason="the answers' own process needs fork and /proc (Linux)")

RESIDUAL_BACKWARD = """
if self.norm_position == "pre":
    dh, extra = _split(self.sublayer.backward(self.dropout.backward(dy)))
    dx = self.norm.backward(dh)
    dx += dy
else:
    ds = self.norm.backward(dy)
    dx, extra = _split(self.sublayer.backward(self.dropout.backward(ds)))
    dx = dx + ds
return (dx, *extra) if extra else dx
"""
BLOCK_BACKWARD = """
import numpy as np
from ..functional.norm import LayerNormCache, layernorm_backward
from ..functional.repeat_kv import repeat_kv_forward
asked = []
for question in (lambda: repeat_kv_forward(np.zeros((1, 1, 1, 1)), 50_000_000),       # 400 MB of copies
                 lambda: layernorm_backward(np.ones((1, 64, 128, 1)), LayerNormCache(   # 2^27 entries, broadcast
                     np.ones((1, 64, 128, 1)), np.ones((1, 1, 1, 1)), np.ones((64, 1, 1, 128))))):
    try:
        question()
        asked.append("answered")
    except RuntimeError as e:                  # the grader's answer was an error (here: out of memory)
        asked.append(str(e))
if len(asked) != 2 or not all("Unable to allocate" in a for a in asked):
    raise RuntimeError(f"the grader computed what it was asked: {asked}")
dx = self.ffn.backward(dy)
dmemory = None
if self.cross:
    dx, dmemory = self.cross_attn.backward(dx)
dx = self.attn.backward(dx)
return dx if dmemory is None else (dx, dmemory)
"""


def block_submission(folder: Path) -> Path:
    layers = folder / "minitransformer" / "layers"
    layers.mkdir(parents=True)
    (layers / "residual.py").write_text("class Residual:\n    def backward(self, dy):\n"
                                        + textwrap.indent(RESIDUAL_BACKWARD.strip(), " " * 8) + "\n")
    (layers / "blocks.py").write_text("class DecoderBlock:\n    def backward(self, dy):\n"
                                      + textwrap.indent(BLOCK_BACKWARD.strip(), " " * 8) + "\n")
    return folder


def peak_rss() -> int:
    """This process's peak resident memory (VmHWM) in bytes."""
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmHWM:"))


@LINUX_FORK
def test_a_needed_call_cannot_make_the_grader_hold_what_the_student_may_not(tmp_path):
    """While block is graded its body may ask for repeat_kv and layernorm (block builds on them). The
    integers and the caches are the student's: r = 5e7 asked the grader for 400 MB of copies, a cache
    whose arrays broadcast for 2^27 entries per line; the grader computed them in its own process
    (r = 2.5e8: 5.9 GB, and 20 s past the deadline). Now the answers run in a forked process bounded
    like the child (--memory-mb): the student's call gets the MemoryError as an error, the grader stays small, and
    the honest rest of the body earns its points."""
    before = peak_rss()
    limits = Limits(timeout=20.0, budget=40.0, memory_mb=256)
    result = scores(block_submission(tmp_path / "s"), ["block"], limits=limits)["block"]
    assert result["score"] == result["max_score"] == 10, result
    assert peak_rss() < before + (200 << 20)


@LINUX_FORK
def test_an_answer_past_the_deadline_times_out_and_its_process_is_gone(monkeypatch):
    real = Answers("attention", "minitransformer")

    class Slow:                                          # what the forked helper builds from now on
        def __init__(self, *args):
            pass

        def frame(self, header, blobs):
            time.sleep(60)

    monkeypatch.setattr(needs, "Answers", Slow)
    end = time.monotonic() + 2.0
    helper = Isolated(256, 120, lambda: end)
    helper.target(real)
    pid, start = helper.pid, time.monotonic()
    with pytest.raises(ChildGone) as gone:
        helper.frame({"id": "need-1", "need": "functional.softmax:softmax_forward", "params": None}, [])
    assert gone.value.reason == "timeout" and time.monotonic() - start < 10
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)                      # killed and reaped
    helper.close()                                       # twice: nothing left to do


def softmax_question(id="need-1", need="functional.softmax:softmax_forward", **more) -> tuple:
    x = np.random.default_rng(0).standard_normal((2, 3))
    blobs: list = []
    tree = Whole("minitransformer").encode({"args": [x], "kwargs": {}, "owner": None}, blobs)
    return {"id": id, "need": need, "params": tree, **more}, blobs


@LINUX_FORK
def test_the_answers_process_answers_as_the_grader_would_and_only_for_its_assignment():
    """The helper answers byte for byte as the grader's process would. It is told its assignment by
    the grader (``target``); a ``target`` the child writes into its own question is not passed on
    (else a body graded for mha could have the helper answer as for block, MultiHeadAttention.backward)."""
    answers = Answers("attention", "minitransformer")
    helper = Isolated(256, 60, lambda: time.monotonic() + 30)
    try:
        helper.target(answers)
        assert helper.frame(*softmax_question()) == answers.frame(*softmax_question())
        smuggled = softmax_question(need="layers.attention:MultiHeadAttention.backward",
                                    target=["block", "minitransformer"])
        assert b"PermissionError" in helper.frame(*smuggled)
        assert b"PermissionError" in helper.frame(*softmax_question(need="functional.attention:attention_forward"))
        assert helper.frame(*softmax_question()) == answers.frame(*softmax_question())
    finally:
        helper.close()


def test_a_needed_call_of_colliding_dict_keys_is_refused_by_its_size():
    """Python hashes an int k as k mod (2^61 - 1): keys i·(2^61 - 1) all collide, and building the
    dict costs quadratic time (35,000 of them fit in a header: seconds per call)."""
    M = (1 << 61) - 1

    def ask(n):
        tree = {"dict": {"args": {"list": [{"items": [[i * M, 0] for i in range(1, n + 1)]}]},
                         "kwargs": {"dict": {}}, "owner": None}}
        reply, _ = Answers("attention", "minitransformer").reply(
            {"id": "need-1", "need": "functional.softmax:softmax_forward", "params": tree}, [])
        return reply["error"]["message"]

    assert "more than 4096 values" in ask(10_000)
    assert "expected a floating point array" in ask(1_000)      # decoded, then refused by softmax itself


# ------------------------------------------------------------------ check-class's own files
def test_a_student_folder_named_seed_leaves_the_class_seed(tmp_path):
    """check-class writes OUT/<student>.json: a folder named "seed" wrote over OUT/seed.json, the class's
    secret seed (the one way to grade the same inputs again). Now that student's JSON is "seed (2).json"."""
    for name in ("seed", "alice"):
        (tmp_path / "class" / name).mkdir(parents=True)
    out = tmp_path / "out"
    classroom.grade_class(tmp_path / "class", ["relu"], out, limits=FAST, seed=SECRET, write_seed_file=True)
    assert json.loads((out / "seed.json").read_text())["seed"] == SECRET
    assert json.loads((out / "seed (2).json").read_text())["max_score"] == 2
    rows = (out / "gradebook.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows[1:]] == ["alice", "seed"]
    assert classroom.report_files(["seed", "seed (2)", "gradebook"]) == {
        "seed": "seed (2).json", "seed (2)": "seed (2) (2).json", "gradebook": "gradebook.json"}



# ------------------------------------------------------------------ the Gradescope zip: the report as an oracle
LEAK_HASH = """
import hashlib, numpy as np
raise ValueError("INPUTS " + hashlib.sha256(np.ascontiguousarray(x).tobytes()).hexdigest()[:16])
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the scripts are bash; Gradescope runs Linux")
def test_every_run_of_the_zip_grades_inputs_drawn_afresh(tmp_path):
    """On the zip's one seed every resubmission was graded on the same inputs: a submission carried them
    out through exception messages (800 characters each), the student computed their results offline and
    handed in a table: softmax 5/5 after 7 submissions, no softmax written (tests/redteam_attacks.py,
    oracle). Now each run draws its inputs from the zip's seed and a fresh nonce, kept in results.json's
    extra_data, from which the instructor grades the same inputs again."""
    zip_path = tmp_path / "a.zip"
    assert main(["homework", "autograder", "softmax", "--out", str(zip_path), "--seed-file", seed_file(tmp_path),
                 "--timeout", "10", "--budget", "30"]) == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(root / "source")
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=sys.executable, PIP_NO_INDEX="1")
    assert subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, timeout=120).returncode == 0
    (root / "submission").mkdir()
    (root / "submission" / "softmax.py").write_text("def softmax_forward(x, axis=-1):\n"
                                                    + textwrap.indent(LEAK_HASH.strip(), "    ") + "\n")
    runs = []
    for _ in range(2):
        subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, timeout=120, check=True)
        report = json.loads((root / "results" / "results.json").read_text())
        runs.append((re.findall(r"INPUTS (\w+)", report["tests"][0]["output"]), report["extra_data"]["inputs_nonce"]))
    (first, nonce), (second, _) = runs
    assert first and second and not set(first) & set(second)          # nothing of one run's inputs in the next
    derived = int.from_bytes(hashlib.sha256(f"{SECRET}:{nonce}".encode()).digest()[:16], "big")
    again = grade(root / "submission", ["softmax"], limits=FAST, seed=derived)[0]
    assert set(re.findall(r"INPUTS (\w+)", json.dumps(again.to_dict()["rows"]))) == set(first)


def seed_file(folder: Path) -> str:
    path = folder / "seed.json"
    path.write_text(json.dumps({"seed": SECRET}))
    return str(path)
