"""Attacks on the grader, one per class: each submission tries to forge its grade and gets the honest one.

A submission here is what a student hands in: a few files holding the bodies of
the softmax pair (or another assignment's). The honest grade of a body that does
not compute softmax is 0; every attack below falls back to NotImplementedError
when its trick fails, so "0 points" is the honest answer and anything more is a
forged grade. Each grades one assignment (a second or two).
"""
from __future__ import annotations

import csv
import hashlib
import json
import multiprocessing
import os
import resource
import signal
import subprocess
import sys
import textwrap
import time
import zipfile
from pathlib import Path

import pytest

from minitransformer.cli import main
from minitransformer.homework.grade import grade
from minitransformer.homework import child, classroom
from minitransformer.homework.rubric import items
from minitransformer.homework.sandbox import Limits

REFERENCE = Path(__file__).resolve().parents[1] / "minitransformer"
FAST = Limits(timeout=6.0, budget=20.0)
SECRET = 0x9F3C_5A2E_71D4_08B6_C3E1_4F7A_2D95_B0E8          # 128 bits, as secrets.randbits(128) draws them


def seed_file(folder: Path, seed: int = SECRET) -> str:
    """A --seed-file holding ``seed`` (a secret seed never goes on a command line)."""
    path = folder / "seed.json"
    path.write_text(json.dumps({"seed": seed}))
    return str(path)
FALLBACK = "raise NotImplementedError('the trick did not work')"
CORRECT = """
import numpy as np
m = x.max(axis, keepdims=True)
e = np.exp(x - np.where(np.isfinite(m), m, 0.0))    # a fully masked row: 0, never NaN
s = e.sum(axis, keepdims=True)
y = e / np.where(s == 0, 1.0, s)
return y, (y, axis)
"""
CORRECT_BACKWARD = "y, axis = cache\nreturn y * (dy - (dy * y).sum(axis, keepdims=True))"


def submission(folder: Path, forward_body: str, *, backward_body: str = FALLBACK, extra=None) -> Path:
    """A folder holding softmax.py with the two bodies (what a student uploads)."""
    folder.mkdir(parents=True, exist_ok=True)
    code = (f"def softmax_forward(x, axis=-1):\n{textwrap.indent(textwrap.dedent(forward_body), '    ')}\n\n"
            f"def softmax_backward(dy, cache):\n{textwrap.indent(textwrap.dedent(backward_body), '    ')}\n")
    (folder / "softmax.py").write_text(code)
    for name, text in (extra or {}).items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def honest(folder, ids=("softmax",), **kw):
    results = grade(folder, ids, limits=kw.pop("limits", FAST), **kw)
    return {r.id: r for r in results}


def test_a_correct_flat_upload_scores_full_marks(tmp_path):
    notes = []
    result = honest(submission(tmp_path / "s", CORRECT, backward_body=CORRECT_BACKWARD,
                               extra={"notes.txt": "hi\n"}), notes=notes)["softmax"]
    assert result.score == result.max_score == 5, result
    assert any("notes.txt" in n for n in notes)


def test_delegation_to_the_reference_finds_nothing(tmp_path):
    """sys.modules, sys.path, the call stack, the reference's file: none reaches a reference."""
    body = f"""
    import sys, importlib.util
    for name, module in list(sys.modules.items()):          # a second softmax loaded somewhere?
        f = getattr(module, "softmax_forward", None)
        if f is not None and getattr(f, "__code__", None) is not softmax_forward.__code__:
            return f(x, axis)
    frame = sys._getframe()
    while frame is not None:                                  # a reference on the call stack?
        for value in list(frame.f_globals.values()) + list(frame.f_locals.values()):
            f = getattr(value, "softmax_forward", None)
            if callable(f) and getattr(f, "__code__", None) is not softmax_forward.__code__:
                return f(x, axis)
        frame = frame.f_back
    try:                                                      # the installed reference, by path
        sys.path.insert(0, {str(REFERENCE.parent)!r})
        spec = importlib.util.spec_from_file_location("ref", {str(REFERENCE / "functional" / "softmax.py")!r})
        ref = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(ref)
        return ref.softmax_forward(x, axis)
    except (PermissionError, ImportError, OSError):
        pass
    {FALLBACK}
    """
    result = honest(submission(tmp_path / "s", body))["softmax"]
    assert result.score == 0 and result.status == "not implemented", result


def test_forged_reports_on_stdout_and_the_channel_are_not_read(tmp_path):
    """A fake result line, a patched json, writes to every fd and an exit: no points."""
    body = """
    import json, os, sys
    fake = {"id": "softmax", "max_score": 5, "score": 5.0, "status": "ok", "message": "", "rows": []}
    print("@@homework-result@@ " + json.dumps(fake))
    json.dumps = lambda *a, **k: '{"score": 95, "max_score": 95, "tests": []}'
    frame = b'{"id": "1", "value": 1, "sizes": []}'
    for fd in range(0, 64):
        try:
            os.write(fd, len(frame).to_bytes(8, "little") + frame)
        except OSError:
            pass
    os._exit(0)
    """
    result = honest(submission(tmp_path / "s", body))["softmax"]
    assert result.score == 0 and result.status == "crashed", result


def test_sitecustomize_and_package_files_beside_the_bodies_are_ignored(tmp_path):
    hack = "import builtins\nbuiltins.FORGED = True\nraise SystemExit(0)\n"
    folder = submission(tmp_path / "s", "import builtins\nif getattr(builtins, 'FORGED', False):\n    return x, x\n"
                        + FALLBACK, extra={"sitecustomize.py": hack, "minitransformer/__init__.py": hack,
                                           "usercustomize.py": hack})
    notes = []
    result = honest(folder, notes=notes)["softmax"]
    assert result.score == 0 and result.status == "not implemented", result
    assert any(n.startswith("sitecustomize.py") for n in notes)
    assert any(n.startswith("minitransformer/__init__.py") for n in notes)


def test_no_process_outlives_the_check_to_rewrite_results(tmp_path):
    """fork, subprocess, os.system: refused, so nothing is left to rewrite results.json later."""
    results = tmp_path / "results.json"
    writer = f"import time; time.sleep(1); open({str(results)!r}, 'w').write('{{\"score\": 95}}')"
    body = f"""
    import os, subprocess, sys
    for attempt in (lambda: subprocess.Popen([sys.executable, "-c", {writer!r}], start_new_session=True),
                    lambda: os.system("sleep 1; echo forged > {results}"),
                    lambda: os.fork()):
        try:
            attempt()
        except (PermissionError, OSError):
            pass
    {FALLBACK}
    """
    assert main(["homework", "check", str(submission(tmp_path / "s", body)), "softmax", "--json", str(results)]) == 1
    time.sleep(1.5)
    report = json.loads(results.read_text())
    assert report["score"] == 0 and "not implemented" in report["tests"][0]["output"]


def test_the_installed_reference_cannot_be_changed_for_the_next_student(tmp_path):
    checks = REFERENCE / "homework" / "assignments" / "softmax.py"          # the drawers of the graded inputs
    before = hashlib.sha256(checks.read_bytes()).hexdigest()
    body = f"""
    for path in ({str(checks)!r}, {str(REFERENCE / "functional" / "softmax.py")!r}):
        try:
            with open(path, "a") as f:
                f.write("\\nraise SystemExit('tampered')\\n")
        except OSError:
            pass
    {FALLBACK}
    """
    assert honest(submission(tmp_path / "a", body))["softmax"].score == 0
    assert hashlib.sha256(checks.read_bytes()).hexdigest() == before
    innocent = honest(submission(tmp_path / "b", FALLBACK))["softmax"]       # the next student: as before
    assert innocent.status == "not implemented", innocent


def test_reaching_past_the_audit_hook_writes_and_reads_nothing(tmp_path):
    """The hook's rules were module globals of the child (its __main__) and its closure was one
    gc.get_objects() away: rebinding them let graded code write where the OS user may. Now the
    rules sit in the closure, gc's walks are refused, and the kernel (Landlock) refuses anyway."""
    drop = tmp_path / "drop"
    drop.mkdir()
    os.chmod(drop, 0o777)                                         # even `nobody` may write here
    body = f"""
    import os, sys
    tried = []
    main = sys.modules.get("__main__")
    for name in ("REFUSED", "WRITE_FLAGS"):
        if hasattr(main, name):
            setattr(main, name, () if name == "REFUSED" else 0)
    try:
        import gc
        for f in [o for o in gc.get_objects() if getattr(o, "__name__", "") in ("hook", "readable")]:
            for cell in getattr(f, "__closure__", None) or ():
                if isinstance(cell.cell_contents, tuple):
                    cell.cell_contents = ("/",)
    except Exception as e:
        tried.append(type(e).__name__)
    for path in ({str(drop / "pwned")!r}, {str(REFERENCE / "functional" / "softmax.py")!r}):
        try:
            fd = os.open(path, os.O_CREAT | os.O_WRONLY, 0o666)
            os.write(fd, b"tampered")
            tried.append("wrote")
        except OSError as e:
            tried.append(type(e).__name__)
    raise RuntimeError(str(tried))
    """
    before = hashlib.sha256((REFERENCE / "functional" / "softmax.py").read_bytes()).hexdigest()
    result = honest(submission(tmp_path / "s", body, backward_body=CORRECT_BACKWARD))["softmax"]
    assert result.score == 0 and "wrote" not in result.message, result.message
    assert "PermissionError" in result.message
    assert not (drop / "pwned").exists()
    assert hashlib.sha256((REFERENCE / "functional" / "softmax.py").read_bytes()).hexdigest() == before


LANDLOCK_PROBE = """
import json, os, sys
from minitransformer.homework import child
allowed, outside, drop = sys.argv[1:4]
abi = child.landlock([allowed])
seen = {}
def attempt(name, act):
    try:
        act()
        seen[name] = "allowed"
    except PermissionError:
        seen[name] = "refused"
attempt("read inside", lambda: open(os.path.join(allowed, "in.txt")).read())
attempt("read outside", lambda: open(outside).read())
attempt("list outside", lambda: os.listdir(os.path.dirname(outside)))
attempt("write inside", lambda: open(os.path.join(allowed, "new.txt"), "w"))
attempt("write outside", lambda: open(os.path.join(drop, "new.txt"), "w"))
attempt("remove inside", lambda: os.remove(os.path.join(allowed, "in.txt")))
attempt("signal the parent", lambda: os.kill(os.getppid(), 0))
print(json.dumps({"abi": abi, "seen": seen}))
"""


@pytest.mark.skipif(child.landlock_abi() == 0, reason="this kernel has no Landlock (Linux >= 5.13)")
def test_the_kernel_confines_the_child_where_the_audit_hook_cannot(tmp_path):
    """Landlock, without the hook: read under the roots only; create, write, remove nothing,
    anywhere, even as root; no signal outside (ABI 6). A second process, so this one stays free."""
    allowed, drop = tmp_path / "allowed", tmp_path / "drop"
    allowed.mkdir(), drop.mkdir()
    (allowed / "in.txt").write_text("numbers")
    outside = tmp_path / "secret.txt"
    outside.write_text("the seed")
    done = subprocess.run([sys.executable, "-c", LANDLOCK_PROBE, str(allowed), str(outside), str(drop)],
                          capture_output=True, text=True, timeout=60, cwd=REFERENCE.parent)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["abi"] == child.landlock_abi() > 0
    expected = {"read inside": "allowed", "read outside": "refused", "list outside": "refused",
                "write inside": "refused", "write outside": "refused", "remove inside": "refused",
                "signal the parent": "refused" if report["abi"] >= 6 else "allowed"}
    assert report["seen"] == expected
    assert not (drop / "new.txt").exists() and (allowed / "in.txt").exists()


@pytest.mark.skipif(child.landlock_abi() == 0, reason="this kernel has no Landlock (Linux >= 5.13)")
def test_packages_installed_inside_the_standard_library_stay_out_of_reach(tmp_path):
    """A Python whose site-packages lies inside its standard library folder (python.org builds,
    pyenv) would expose an installed grader's reference: the roots leave it out, entry by entry."""
    stdlib = tmp_path / "lib" / "python3.x"
    (stdlib / "json").mkdir(parents=True)
    (stdlib / "os.py").write_text("# the standard library")
    (stdlib / "site-packages" / "minitransformer").mkdir(parents=True)
    reference = stdlib / "site-packages" / "minitransformer" / "softmax.py"
    reference.write_text("def softmax_forward(x): ...")
    roots = child.read_roots(str(tmp_path / "copy"), str(tmp_path / "numpy"), [str(stdlib)])
    assert str(stdlib / "os.py") in roots and str(stdlib / "json") in roots
    assert not any("site-packages" in root for root in roots)
    probe = ("import sys; from minitransformer.homework import child; child.landlock(sys.argv[3:])\n"
             "for path in sys.argv[1:3]:\n"
             "    try:\n        open(path).read(); print('read')\n"
             "    except PermissionError:\n        print('refused')")
    done = subprocess.run([sys.executable, "-c", probe, str(reference), str(stdlib / "os.py"), *roots],
                          capture_output=True, text=True,
                          timeout=60, cwd=REFERENCE.parent)
    assert done.stdout.split() == ["refused", "read"], done.stderr


def test_a_backward_that_changes_the_forwards_input_through_the_cache_loses_the_promise(tmp_path):
    """The cache (an object, as the package's caches are: it stays in the student's process)
    holds the caller's x itself: the backward zeroing it in place is caught after the backward
    (the forward left it alone), and only the promise's half check is lost."""
    forward = CORRECT.replace("return y, (y, axis)", "import types\nreturn y, types.SimpleNamespace(y=y, axis=axis, x=x)")
    backward = ("y, axis, x = cache.y, cache.axis, cache.x\nx[...] = 0.0\n"
                "return y * (dy - (dy * y).sum(axis, keepdims=True))")
    result = honest(submission(tmp_path / "s", forward, backward_body=backward))["softmax"]
    promise = [row for row in result.rows if row.name.endswith("inputs unchanged") and not row.ok]
    assert promise and "your backward changed the forward's input `x` in place through the cache" \
        in promise[0].diagnosis
    integrity = next(item for item in items("softmax") if item.name.startswith("inputs and"))
    assert result.score == pytest.approx(5 - integrity.points), result.rubric


def test_a_softmax_without_the_max_subtraction_loses_the_large_scores_case_only(tmp_path):
    body = """
    import numpy as np
    e = np.exp(x)
    s = e.sum(axis, keepdims=True)
    y = e / np.where(s == 0, 1.0, s)
    return y, (y, axis)
    """
    result = honest(submission(tmp_path / "s", body, backward_body=CORRECT_BACKWARD))["softmax"]
    failed = [m.name for m in result.rubric if not m.passed]
    assert failed == ["softmax: scores near ±1000 (subtract the row max: exp(1000) overflows)"], result.rubric
    row = next(r for r in result.rows if r.name.startswith("softmax: scores near") and not r.ok)
    assert "NaN" in row.diagnosis or "inf" in row.diagnosis, row


def test_memory_is_bounded(tmp_path):
    body = "import numpy as np\nhog = np.ones(3 * 2**30 // 8)\nhog[::4096] = 2\n" + FALLBACK
    result = honest(submission(tmp_path / "s", body), limits=Limits(timeout=6.0, budget=20.0, memory_mb=512))
    assert result["softmax"].score == 0
    assert "MemoryError" in result["softmax"].message, result


def test_fork_bombs_and_threads_are_refused(tmp_path):
    body = """
    import os, threading
    started = 0
    for _ in range(50):
        try:
            if os.fork() == 0:
                while True:
                    pass
            started += 1
        except (PermissionError, OSError):
            pass
        try:
            threading.Thread(target=lambda: None).start()
            started += 1
        except (PermissionError, RuntimeError, OSError):
            pass
    if started:
        return x, x
    """ + FALLBACK
    result = honest(submission(tmp_path / "s", body))["softmax"]
    assert result.status == "not implemented", result


def test_an_output_flood_is_capped_and_costs_the_grader_nothing(tmp_path):
    body = """
    import os, sys
    line = "x" * 10000
    for _ in range(20000):                      # 200 MB through print
        print(line)
    for fd in (1, 2):                           # and 64 MB straight to the descriptors
        try:
            os.write(fd, b"y" * (64 << 20))
        except OSError:
            pass
    """ + FALLBACK
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = honest(submission(tmp_path / "s", body))["softmax"]
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.status == "not implemented", result
    assert grown_mb < 100, grown_mb


def test_a_hang_is_killed_with_everything_it_started(tmp_path):
    marker = f"grandchild-{os.getpid()}-{time.time_ns()}"
    body = f"""
    import subprocess, sys
    try:
        subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", {marker!r}])
    except PermissionError:
        pass
    while True:
        pass
    """
    start = time.monotonic()
    result = honest(submission(tmp_path / "s", body), limits=Limits(timeout=2.0, budget=10.0))["softmax"]
    assert result.status == "timeout" and result.score == 0, result
    assert time.monotonic() - start < 10
    alive = [p for p in Path("/proc").glob("[0-9]*") if _cmdline(p).count(marker)]
    assert alive == []


def _cmdline(proc: Path) -> str:
    try:
        return (proc / "cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_a_dependency_is_graded_before_its_reference_enters_the_process(tmp_path):
    """attention runs the reference softmax; a softmax that stashed it would need it earlier."""
    body = """
    import builtins
    stash = getattr(builtins, "_stash", None)
    if stash is not None:
        return stash(x, axis)
    """ + FALLBACK
    attention_body = "import builtins, sys\n" \
        "builtins._stash = sys.modules['minitransformer.functional.softmax'].softmax_forward\n" + FALLBACK
    folder = submission(tmp_path / "s", body, extra={"attention.py": (
        "def attention_forward(q, k, v, mask=None, bias=None, *, p_drop=0.0, rng=None, training=True,\n"
        "                      scale=None):\n" + textwrap.indent(attention_body, "    ") + "\n")})
    results = honest(folder, ("attention", "softmax"))
    assert results["softmax"].status == "not implemented", results["softmax"]


def autograder_root(tmp_path: Path, *ids) -> Path:
    """The zip of ``ids`` (the test's seed, short limits), unpacked as Gradescope does: ROOT/source/."""
    zip_path = tmp_path / "autograder.zip"
    assert main(["homework", "autograder", *ids, "--out", str(zip_path), "--seed-file", seed_file(tmp_path),
                 "--timeout", "10", "--budget", "30"]) == 0
    root = tmp_path / "autograder"
    with zipfile.ZipFile(zip_path) as z:
        z.extractall(root / "source")
    for script in ("setup.sh", "run_autograder"):
        os.chmod(root / "source" / script, 0o755)
    return root


@pytest.mark.skipif(sys.platform != "linux", reason="the scripts are bash; Gradescope runs Linux")
def test_gradescope_zip_end_to_end(tmp_path):
    """Build the zip, set it up in a temporary root, grade a correct, a buggy and a hostile upload."""
    root = autograder_root(tmp_path, "softmax", "relu")
    env = dict(os.environ, AUTOGRADER_ROOT=str(root), PYTHON=sys.executable, PIP_NO_INDEX="1")
    setup = subprocess.run(["bash", str(root / "source" / "setup.sh")], env=env, capture_output=True, text=True,
                           timeout=120)
    assert setup.returncode == 0, setup.stderr
    correct = CORRECT
    uploads = {"correct": (correct, CORRECT_BACKWARD), "buggy": (correct, "y, axis = cache\nreturn y * dy"),
               "hostile": ("import os\nprint('{\"score\": 100}')\nos._exit(0)", FALLBACK)}
    scores = {}
    for name, (fwd, bwd) in uploads.items():
        sub = root / "submission"
        subprocess.run(["rm", "-rf", str(sub)], check=True)
        submission(sub, fwd, backward_body=bwd)
        done = subprocess.run([str(root / "source" / "run_autograder")], env=env, capture_output=True,
                              text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        report = json.loads((root / "results" / "results.json").read_text())
        assert {"score", "execution_time", "tests", "visibility"} <= set(report), report
        assert all({"output", "visibility"} <= set(t) for t in report["tests"])
        scores[name] = {t["name"]: t["score"] for t in report["tests"]}
    assert scores["correct"] == {"softmax": 5, "relu": 0}
    assert 0 < scores["buggy"]["softmax"] < 5
    assert scores["hostile"] == {"softmax": 0, "relu": 0}
    assert json.loads((root / "source" / "grader.json").read_text())["seed"] == SECRET
    assert os.stat(root / "source").st_mode & 0o077 == 0                 # root only: the seed, the reference


def test_run_autograder_reports_even_when_the_grader_cannot_start(tmp_path):
    root = tmp_path / "autograder"
    assert main(["homework", "autograder", "relu", "--out", str(tmp_path / "a.zip")]) == 0
    with zipfile.ZipFile(tmp_path / "a.zip") as z:
        z.extractall(root / "source")                                    # setup.sh never ran: no grader-lib
    (root / "submission").mkdir()
    env = dict(os.environ, AUTOGRADER_ROOT=str(root))                   # no venv: run_autograder takes no
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True,
                          text=True, timeout=60)                         # other Python in its place
    assert done.returncode == 0
    report = json.loads((root / "results" / "results.json").read_text())
    assert report["score"] == 0 and "stopped before it could report" in report["output"]
    assert "setup.sh did not finish" in report["output"]
    assert "execution_time" in report


def test_check_class_writes_a_gradebook_and_a_hang_costs_its_budget_once(tmp_path):
    subs = tmp_path / "subs"
    correct = CORRECT
    submission(subs / "alice", correct, backward_body=CORRECT_BACKWARD)
    submission(subs / "bob", "while True:\n    pass", backward_body="while True:\n    pass",
               extra={"activations.py": "def relu_forward(x):\n    while True:\n        pass\n"})
    start = time.monotonic()
    assert main(["homework", "check-class", str(subs), "softmax", "relu", "--out", str(tmp_path / "grades"),
                 "--jobs", "2", "--timeout", "2", "--budget", "3", "--seed-file", seed_file(tmp_path)]) == 0
    assert time.monotonic() - start < 20
    rows = (tmp_path / "grades" / "gradebook.csv").read_text().splitlines()
    assert rows[0] == "student,relu,softmax,total,relu status,softmax status,notes"      # the table's order
    assert rows[1].startswith("alice,0.0,5.0,5.0") and rows[2].startswith("bob,0.0,0.0,0")
    bob = json.loads((tmp_path / "grades" / "bob.json").read_text())
    assert [t["output"].splitlines()[1].strip()[:9] for t in bob["tests"]] == ["timed out", "timed out"]


@pytest.mark.skipif(multiprocessing.get_start_method() != "fork",
                    reason="the stand-in for a dying worker reaches the workers by fork")
def test_a_worker_that_dies_costs_only_its_own_submission_and_the_gradebook_is_written(tmp_path, monkeypatch):
    subs = tmp_path / "subs"
    for name in ("alice", "mallory", "zoe"):
        submission(subs / name, CORRECT, backward_body=CORRECT_BACKWARD)
    real = classroom.grade

    def dying(folder, *args, **kwargs):            # the worker grading mallory dies, as the OOM killer
        if Path(folder).name == "mallory":         # would have it, each time
            os.kill(os.getpid(), signal.SIGKILL)
        return real(folder, *args, **kwargs)
    monkeypatch.setattr(classroom, "grade", dying)
    gradebook = classroom.grade_class(subs, ["softmax"], tmp_path / "grades", jobs=2, limits=FAST, seed=SECRET)
    rows = list(csv.reader(gradebook.read_text().splitlines()))
    assert [row[0] for row in rows] == ["student", "alice", "mallory", "zoe"]
    assert float(rows[1][2]) == float(rows[3][2]) == 5                    # the others keep their grade
    assert rows[2][1:4] == ["not graded"] * 3                              # never a 0: to be re-run
    assert "softmax: not graded: the grading process died twice" in rows[2][-1]
    mallory = json.loads((tmp_path / "grades" / "mallory.json").read_text())
    assert mallory["score"] is None and mallory["tests"][0]["score"] is None
    assert "the grading process died twice" in mallory["extra_data"]["not_graded"]["softmax"]


def test_code_outside_the_bodies_is_named_and_not_run(tmp_path):
    body = "return _helper(x), None"
    folder = submission(tmp_path / "s", body, extra={})
    text = (folder / "softmax.py").read_text()
    (folder / "softmax.py").write_text("import os\nos.system('touch /tmp/pwned')\n\ndef _helper(x):\n    return x\n\n" + text)
    notes = []
    result = honest(folder, notes=notes)["softmax"]
    assert "NameError" in result.message, result                  # the helper was not taken
    assert notes == ["softmax.py: only the bodies of softmax_forward, softmax_backward are graded; "
                     "ignored: line 1: import os, line 2: os.system('touch /tmp/pwned'), def _helper"], notes
