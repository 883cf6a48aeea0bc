"""The grader as a trust boundary: each attack of the last red team, rebuilt, gets the honest grade.

One test per attack (the submissions are in tests/walls_attacks.py, so a script can run
them against any version of the grader): what the copy and the child hold (no
catalogue, no drawer, no reference source), the seed, the kernel's walls (seccomp,
the network namespace, open files) as root and as an ordinary user, failing closed,
the parent that never waits and never trusts a reply, staging that reads only the
package's paths, classmates who keep their grades, and the grader that never runs
from a student's copy. docs/grading.md, "The trust boundary", says what each wall is.
"""
from __future__ import annotations

import csv
import json
import os
import resource
import shutil
import socket
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(__file__))
import walls_attacks as W  # noqa: E402
from minitransformer.cli import main  # noqa: E402
from minitransformer.homework import child, classroom, walls  # noqa: E402
from minitransformer.homework.export import TRUSTED, export  # noqa: E402
from minitransformer.homework.registry import assignments  # noqa: E402
from minitransformer.homework.result import Result  # noqa: E402
from minitransformer.homework.sandbox import Limits  # noqa: E402
from test_homework_attacks import CORRECT, CORRECT_BACKWARD, SECRET, honest, seed_file, submission  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FAST = Limits(timeout=8.0, budget=30.0)
ATTENTION = "q, k, v, mask=None, bias=None, *, p_drop=0.0, rng=None, training=True, drop_mask=None"
USER = 4242                                   # an ordinary user for the tests that need one (no passwd entry)


def body(name: str, signature: str, text: str) -> str:
    return f"def {name}({signature}):\n{textwrap.indent(textwrap.dedent(text), '    ')}\n\n"


def files(folder: Path, named: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in named.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_text(text)
    return folder


def not_implemented(result) -> bool:
    return result.score == 0 and result.status == "not implemented"


# ------------------------------------------------------------------ running as an ordinary user
def _others_can_run(path: str, mode: int = 0o001) -> bool:
    """Whether a user other than the owner can execute (or with ``mode`` 0o004, read) ``path``,
    every folder above it searchable."""
    real = Path(os.path.realpath(path))
    try:
        return bool(os.stat(real).st_mode & mode) and all(os.stat(p).st_mode & 0o001 for p in real.parents)
    except OSError:
        return False


def user_python() -> str | None:
    """A Python of this version an ordinary user can run: this one, or the system's (a Python
    installed under /root, as pyenv does there, is out of their reach)."""
    candidates = [sys.executable, f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"]
    return next((p for p in candidates if _others_can_run(p)), None)


def can_switch_user() -> str:
    """Why the tests cannot run a grader as an ordinary user here ("" when they can)."""
    if os.geteuid() != 0:
        return ""                                             # already an ordinary user
    if shutil.which("setpriv") is None:
        return "no setpriv to switch to an ordinary user"
    if user_python() is None:
        return f"no Python {sys.version_info.major}.{sys.version_info.minor} an ordinary user may run here"
    if not all(_others_can_run(f, 0o004) for f in (np.__file__, str(ROOT / "minitransformer" / "__init__.py"))):
        return "NumPy or this checkout is out of an ordinary user's reach"
    return ""


@pytest.fixture()
def shared():
    """A fresh folder every user may work in (pytest's tmp_path is the owner's only), removed after."""
    folder = Path(tempfile.mkdtemp(prefix="mt-walls-"))
    os.chmod(folder, 0o777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def as_user(code: str, cwd: Path, timeout: int = 180) -> subprocess.CompletedProcess:
    """Run Python ``code`` as the ordinary user USER (or as this user, when it is not root)."""
    path = [str(ROOT), str(ROOT / "tests"), str(Path(np.__file__).parents[1])]
    env = {"PATH": os.defpath, "HOME": str(cwd), "TMPDIR": str(cwd), "PYTHONPATH": os.pathsep.join(path),
           "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"}
    argv = [user_python() or sys.executable, "-s", "-c", code]
    if os.geteuid() == 0:
        argv = ["setpriv", f"--reuid={USER}", f"--regid={USER}", "--clear-groups", "--inh-caps=-all",
                "--bounding-set=-all"] + argv
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


USERS = [pytest.param("root", marks=pytest.mark.skipif(os.geteuid() != 0, reason="not root here")),
         pytest.param("user", marks=pytest.mark.skipif(bool(can_switch_user()), reason=can_switch_user() or "-"))]


def grade_as(who: str, folder: Path, ids, work: Path) -> dict:
    """{id: result} of grading ``folder`` as root (in this process) or as the ordinary user."""
    if who == "root":
        return honest(folder, ids, limits=FAST)
    code = ("import json, sys\nfrom minitransformer.homework.grade import grade\n"
            "from minitransformer.homework.sandbox import Limits\n"
            f"r = grade({str(folder)!r}, {list(ids)!r}, limits=Limits(timeout=8.0, budget=30.0))\n"
            "print(json.dumps({x.id: x.to_dict() for x in r}))\n")
    done = as_user(code, work)
    assert done.returncode == 0, done.stderr[-2000:]
    return {k: Result.from_dict(v) for k, v in json.loads(done.stdout.splitlines()[-1]).items()}


# ------------------------------------------------------------------ row 1: the catalogue in the copy
def test_the_catalogue_the_drawers_and_the_reference_code_are_nowhere_the_student_reaches(tmp_path):
    """Stubs that call the catalogue shipped in the copy (with default options its variants ARE the
    reference) forged 21.4 of 23 points; the copy and the child now hold none of the trusted side."""
    sub = files(tmp_path / "s", {
        "attention.py": body("attention_forward", ATTENTION, W.CATALOGUE_ATTENTION_FORWARD)
        + body("attention_backward", "dout, cache", W.CATALOGUE_ATTENTION_BACKWARD),
        "dropout.py": body("dropout_forward", "x, p_drop, rng=None, training=True, mask=None", W.CATALOGUE_DROPOUT_FORWARD)
        + body("dropout_backward", "dy, cache", W.CATALOGUE_DROPOUT_BACKWARD),
        "masks.py": body("causal_mask", "T, S=None, xp=None", W.CATALOGUE_CAUSAL),
        "sinusoidal.py": body("sinusoidal_table", "max_len, d, dtype=None, xp=None", W.CATALOGUE_SINUSOIDAL)})
    results = honest(sub, ("attention", "dropout", "causal_mask", "sinusoidal"), limits=FAST)
    assert all(not_implemented(r) for r in results.values()), results
    export(["all"], tmp_path / "copy")
    home = tmp_path / "copy" / "minitransformer" / "homework"
    shipped = {p.relative_to(home).as_posix() for p in home.rglob("*.py")}
    assert shipped and not [s for s in shipped if s.split("/")[0] in TRUSTED], shipped
    assert "assignments" in TRUSTED and not (home / "assignments").exists()   # every assignment's own file
    assert (home / "copy.json").is_file()


# ------------------------------------------------------------------ row 2: the reference source sent to the child
def test_no_reference_source_ever_reaches_the_child(tmp_path):
    """linear's body hooks compile and exec; attention's shows what was caught. The grader sent the
    reference of softmax and dropout as source (4,466 characters leaked in one run); now the child
    asks the grader for them and gets arrays back: it compiles no reference code at all."""
    sub = files(tmp_path / "s", {"linear.py": body("linear_forward", "x, W, b=None", W.CATCH_SOURCE_LINEAR),
                                 "attention.py": body("attention_forward", ATTENTION, W.SHOW_SOURCE_ATTENTION)})
    results = honest(sub, ("linear", "attention"), limits=FAST)
    caught = results["attention"].message
    assert results["attention"].score == 0 and results["linear"].score == 0, results
    assert "def " not in caught and "return" not in caught and "np." not in caught, caught


def test_a_body_asking_the_grader_for_a_graded_target_is_refused(tmp_path):
    """The child's question channel answers only what the graded assignment builds on: attention's
    body asks for attention_forward itself (through the server behind the softmax proxy) and is
    refused; so is rope, graded after attention, calling softmax, which rope does not need."""
    ask = """
    from minitransformer.functional import softmax as S
    server = next(c.cell_contents for c in S.softmax_forward.__closure__ if hasattr(c.cell_contents, "ask"))
    try:
        out, cache = server.ask("functional.attention:attention_forward", (q, k, v, mask), {})
    except PermissionError as e:
        raise RuntimeError("refused: " + str(e))
    return out, cache
    """
    rope = """
    from minitransformer.functional.softmax import softmax_forward
    try:
        return softmax_forward(x)
    except PermissionError as e:
        raise RuntimeError("refused: " + str(e))
    """
    sub = files(tmp_path / "s", {"attention.py": body("attention_forward", ATTENTION, ask),
                                 "rope.py": body("rope_forward", "x, offset=0, base=10000.0, layout='interleaved', "
                                                 "scale=1.0", rope)})
    results = honest(sub, ("attention", "rope"), limits=FAST)
    assert results["attention"].score == 0 and "refused: attention_forward (answered by the grader, not your " \
        "code): attention_forward is graded in attention" in results["attention"].message, results["attention"]
    assert results["rope"].score == 0 and "refused: softmax_forward (answered by the grader, not your code): " \
        "softmax_forward: while rope is graded the grader answers only the functions it builds on (nothing)" \
        in results["rope"].message, results["rope"].message


def test_a_needed_call_too_large_is_refused_before_the_grader_computes_it(tmp_path):
    """The grader computes a needed function on whatever the student's code passes it: the arrays are
    bounded first (an attention's softmax over 1,000 keys would make the parent allocate for it)."""
    big = """
    import numpy as np
    from minitransformer.functional.softmax import softmax_forward
    try:
        softmax_forward(np.zeros((1, 1, 4, 1000)))
    except ValueError as e:
        raise RuntimeError("refused: " + str(e))
    raise NotImplementedError
    """
    sub = files(tmp_path / "s", {"attention.py": body("attention_forward", ATTENTION, big)})
    attention = honest(sub, ("attention",), limits=FAST)["attention"]
    assert attention.score == 0 and "refused: softmax_forward (answered by the grader, not your code): an " \
        "array of shape (1, 1, 4, 1000) (at most 128 along an axis)" in attention.message, attention.message


# ------------------------------------------------------------------ row 3: replaying the drawers
def test_the_drawers_cannot_be_replayed_to_find_the_seed(tmp_path):
    """linear replayed the copy's drawers from seed 0 up and found the secret 8613 in 0.4 s; the
    drawers are not in the child, and a secret seed has 128 bits."""
    sub = files(tmp_path / "s", {"linear.py": body("linear_forward", "x, W, b=None", W.REPLAY_LINEAR)})
    assert not_implemented(honest(sub, ("linear",), limits=FAST, seed=SECRET)["linear"])


def test_a_secret_seed_has_128_bits_and_never_goes_on_a_command_line(tmp_path, monkeypatch, capsys):
    """check-class without a seed draws one with secrets and writes it, readable by its owner only;
    --seed is refused; nothing the child is started with (argv, environment) holds the seed."""
    subs = tmp_path / "subs"
    submission(subs / "alice", CORRECT, backward_body=CORRECT_BACKWARD)
    assert main(["homework", "check-class", str(subs), "softmax", "--out", str(tmp_path / "g")]) == 0
    seed = json.loads((tmp_path / "g" / "seed.json").read_text())["seed"]
    assert seed.bit_length() > 64 and (tmp_path / "g" / "seed.json").stat().st_mode & 0o077 == 0
    assert "seed: a new 128-bit secret" in capsys.readouterr().out
    assert main(["homework", "check-class", str(subs), "softmax", "--out", str(tmp_path / "h"), "--seed", "8613"]) == 2
    assert capsys.readouterr().err.startswith("homework: --seed: a seed on the command line is readable by every")
    started = []
    real = subprocess.Popen

    def spy(argv, **kwargs):
        started.append((argv, kwargs.get("env")))
        return real(argv, **kwargs)
    monkeypatch.setattr(subprocess, "Popen", spy)
    honest(submission(tmp_path / "s", CORRECT, backward_body=CORRECT_BACKWARD), seed=SECRET)
    assert started and not any(str(SECRET) in json.dumps([argv, env]) for argv, env in started)


# ------------------------------------------------------------------ row 4: a child that stops reading
def test_a_child_that_stops_reading_cannot_stall_the_parent(tmp_path):
    """The child shrinks its request pipe to a page and stops reading at the first long request: the
    parent's write had no deadline (still running after 90 s). Now the assignment times out, the
    run ends and results.json is written."""
    sub = files(tmp_path / "s", {"embedding.py": body("embedding_forward", "ids, W", W.STALL_EMBEDDING)})
    start = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "minitransformer", "homework", "check", str(sub), "embedding",
                           "--timeout", "3", "--budget", "20", "--json", str(tmp_path / "r.json")],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert time.monotonic() - start < 60 and done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["score"] == 0 and "timed out" in report["tests"][0]["output"]


# ------------------------------------------------------------------ rows 5, 8: past the audit hook, the kernel
class Listeners:
    """A UDP port and a Unix socket of the instructor's (0600, in a folder of theirs), recording
    whatever reaches them."""

    def __init__(self, folder: Path, owner: int | None):
        self.udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.udp.bind(("127.0.0.1", 0))
        self.udp.settimeout(0.2)
        self.path = str(folder / "agent.sock")
        self.unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.unix.bind(self.path)
        os.chmod(self.path, 0o600)
        if owner is not None:
            os.chown(self.path, owner, owner)
        self.unix.listen(4)
        self.unix.settimeout(0.2)
        self.heard: list = []

    def collect(self) -> list:
        for sock, take in ((self.udp, lambda s: s.recv(100)), (self.unix, lambda s: s.accept()[0].recv(100))):
            try:
                self.heard.append(take(sock))
            except OSError:
                pass
        self.udp.close()
        self.unix.close()
        return self.heard


def _doors(result) -> dict:
    text = result.message.split("walls: ", 1)[1].split(" (at ")[0]
    return dict(item.split("=") for item in text.split())


@pytest.mark.skipif(not walls.seccomp_available(), reason="this kernel takes no seccomp filter")
@pytest.mark.parametrize("who", USERS)
def test_past_the_audit_hook_the_kernel_refuses_every_door(tmp_path, shared, who):
    """NumPy's __array_interface__ empties the hook's refusals; then plain syscalls. They put 2 GiB on
    disk with fallocate(KEEP_SIZE), sent UDP datagrams out and reached a Unix socket; now seccomp
    refuses them, and memfd, fork, ptrace, process_vm_readv, unshare and mount, as root and as an
    ordinary user."""
    work = shared if who == "user" else tmp_path
    listeners = Listeners(work, USER if who == "user" else None)
    sub = files(work / "s", {"softmax.py": body("softmax_forward", "x, axis=-1",
                                                W.syscalls_body(listeners.path, listeners.udp.getsockname()[1]))})
    try:
        result = grade_as(who, sub, ("softmax",), work)["softmax"]
    finally:
        heard = listeners.collect()
    doors = _doors(result)
    assert set(doors) == {"fallocate", "udp", "unix", "memfd", "fork", "ptrace", "process_vm_readv", "unshare",
                          "mount"}
    assert "ok" not in doors.values(), doors
    assert heard == [] and result.score == 0


@pytest.mark.skipif(not walls.seccomp_available(), reason="this kernel takes no seccomp filter")
@pytest.mark.skipif(bool(can_switch_user()), reason=can_switch_user() or "-")
def test_the_child_cannot_reach_the_instructors_own_unix_socket(shared):
    """Graded by an ordinary instructor, the child ran as that instructor and connected to their own
    0600 socket (a stand-in for an ssh agent), which ran the command it sent. No socket call passes
    the filter now, whoever grades."""
    work = shared
    private = work / "private"
    private.mkdir(mode=0o700)
    os.chown(private, USER, USER)
    listeners = Listeners(private, USER)
    sub = files(work / "s", {"softmax.py": body("softmax_forward", "x, axis=-1", W.syscalls_body(listeners.path))})
    try:
        result = grade_as("user", sub, ("softmax",), work)["softmax"]
    finally:
        heard = listeners.collect()
    assert _doors(result)["unix"] == "PermissionError" and heard == []


# ------------------------------------------------------------------ row 6: a fill during check-class
def small_disk(work: Path) -> Path | None:
    """A 48 MiB ext4 disk mounted at work/disk (where fallocate's KEEP_SIZE goes past RLIMIT_FSIZE, as
    on an instructor's disk; tmpfs refuses it by itself), or None where it cannot be made (not root)."""
    if os.geteuid() != 0 or not shutil.which("mkfs.ext4"):
        return None
    image, disk = work / "disk.img", work / "disk"
    disk.mkdir()
    made = [subprocess.run(argv, capture_output=True).returncode for argv in (
        ["truncate", "-s", "48M", str(image)], ["mkfs.ext4", "-q", "-F", str(image)],
        ["mount", "-o", "loop", str(image), str(disk)])]
    if any(made):
        return None
    os.chmod(disk, 0o1777)
    return disk


@pytest.mark.skipif(not walls.seccomp_available(), reason="this kernel takes no seccomp filter")
@pytest.mark.parametrize("who", USERS)
def test_a_disk_fill_during_check_class_leaves_classmates_their_grades(shared, who):
    """On a small disk that holds the grader's files, one submission fills it (fallocate(KEEP_SIZE)
    past the hook: 30 of 37 MiB before) while its classmates are graded beside it: they got 0 ("No
    space left on device"). The kernel refuses the fill now; the classmates keep their 5/5, as root
    and as an ordinary user."""
    work = shared
    disk = small_disk(work)
    if disk is None:
        pytest.skip("no small disk to fill: mounting one needs root and mkfs.ext4")
    try:
        subs = work / "subs"
        for name in ("alice", "nina", "zoe"):
            submission(subs / name, CORRECT, backward_body=CORRECT_BACKWARD)
        files(subs / "a-mallory", {"softmax.py": body("softmax_forward", "x, axis=-1", W.syscalls_body())})
        (work / "seed.json").write_text(json.dumps({"seed": SECRET}))
        argv = ["homework", "check-class", str(subs), "softmax", "--out", str(work / "grades"), "--jobs", "2",
                "--seed-file", str(work / "seed.json")]
        code = (f"import os, sys\nos.environ['TMPDIR'] = {str(disk)!r}\n"
                f"from minitransformer.cli import main\nsys.exit(main({argv!r}))\n")
        done = as_user(code, work) if who == "user" else subprocess.run(
            [sys.executable, "-c", code], cwd=work, capture_output=True, text=True, timeout=180,
            env=dict(os.environ, PYTHONPATH=str(ROOT)))
        assert done.returncode == 0, done.stderr[-2000:]
        rows = {row[0]: row for row in csv.reader((work / "grades" / "gradebook.csv").read_text().splitlines())}
        assert [float(rows[n][1]) for n in ("alice", "nina", "zoe", "a-mallory")] == [5, 5, 5, 0], rows
        mallory = json.loads((work / "grades" / "a-mallory.json").read_text())
        assert "fallocate=errno1" in mallory["tests"][0]["output"]
    finally:
        subprocess.run(["umount", str(work / "disk")], capture_output=True)


def test_a_grade_the_grader_could_not_compute_is_not_graded_never_zero(tmp_path, monkeypatch):
    """The disk full while a classmate's submission is staged: "not graded" with the reason in the
    JSON and the gradebook, for the instructor to re-run; the others are graded."""
    import errno
    from minitransformer.homework import grade as grading
    subs = tmp_path / "subs"
    for name in ("alice", "bob"):
        submission(subs / name, CORRECT, backward_body=CORRECT_BACKWARD)
    real = grading.stage

    def full(folder, *args):
        if Path(folder).name == "bob":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(folder, *args)
    monkeypatch.setattr(grading, "stage", full)
    gradebook = classroom.grade_class(subs, ["softmax"], tmp_path / "grades", limits=FAST, seed=SECRET)
    rows = {row[0]: row for row in csv.reader(gradebook.read_text().splitlines())}
    assert float(rows["alice"][1]) == 5 and rows["bob"][1:3] == ["not graded", "not graded"]
    assert rows["bob"][3] == "not graded" and "No space left on device" in rows["bob"][-1]
    bob = json.loads((tmp_path / "grades" / "bob.json").read_text())
    assert bob["score"] is None and bob["tests"][0]["score"] is None
    assert "No space left on device" in bob["extra_data"]["not_graded"]["softmax"]


# ------------------------------------------------------------------ row 7: memory held in memfds
def test_memfds_cannot_hold_memory_past_the_limit(tmp_path):
    """19,936 memfds of 64 KiB held 1.25 GiB past --memory-mb 1024 (no bypass needed): memfd_create is
    refused by the filter, and 32 open files are all the child may hold."""
    sub = files(tmp_path / "s", {"softmax.py": body("softmax_forward", "x, axis=-1", W.MEMFD_HOARD)})
    assert not_implemented(honest(sub, limits=FAST)["softmax"])


# ------------------------------------------------------------------ row 9: a missing wall
def test_without_a_wall_nothing_is_graded_unless_unconfined(tmp_path, monkeypatch, capsys):
    """A kernel without Landlock: the grader printed a note and graded anyway (the seed was then read
    from its command line, files written outside, classmates 0). Now check and check-class refuse in
    one line (results.json says why), and --unconfined grades with every result marked."""
    monkeypatch.setattr(walls, "missing", lambda: ["Landlock (Linux 5.13 or later, with the landlock LSM on)"])
    monkeypatch.setattr("minitransformer.homework.grade.missing", walls.missing)
    subs = tmp_path / "subs"
    submission(subs / "alice", CORRECT, backward_body=CORRECT_BACKWARD)
    secret = seed_file(tmp_path)
    assert main(["homework", "check-class", str(subs), "softmax", "--out", str(tmp_path / "g"),
                 "--seed-file", secret]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot wall in the student's code: no Landlock" in err and "--unconfined" in err
    assert not (tmp_path / "g").exists()
    assert main(["homework", "check", str(subs / "alice"), "softmax", "--json", str(tmp_path / "r.json")]) == 2
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["score"] is None and "no Landlock" in report["extra_data"]["not_graded"]["softmax"]
    assert main(["homework", "check-class", str(subs), "softmax", "--out", str(tmp_path / "g"),
                 "--seed-file", secret, "--unconfined"]) == 0
    rows = list(csv.reader((tmp_path / "g" / "gradebook.csv").read_text().splitlines()))
    assert float(rows[1][1]) == 5 and rows[1][-1].startswith("graded unconfined: no Landlock")
    alice = json.loads((tmp_path / "g" / "alice.json").read_text())
    assert alice["extra_data"]["confinement"] == ["graded unconfined: no Landlock (Linux 5.13 or later, with "
                                                  "the landlock LSM on)"]


def test_a_child_that_cannot_raise_its_walls_grades_nothing(tmp_path, monkeypatch):
    """Fail closed in the child too: a seccomp filter the kernel refuses (here: none for this machine)
    leaves every assignment "not graded", with the reason."""
    monkeypatch.setattr("minitransformer.homework.sandbox._program", lambda: "")
    result = honest(submission(tmp_path / "s", CORRECT, backward_body=CORRECT_BACKWARD))["softmax"]
    assert result.score is None and result.status == "not graded"
    assert "could not be walled in: no seccomp" in result.message


# ------------------------------------------------------------------ row 10: an echo emptied in the child
def test_an_echo_emptied_from_inside_the_child_costs_the_promise_not_the_run(tmp_path):
    """Right values, and the backward empties the tuple of its own arguments in the server's frame:
    the parent died (IndexError). Now the values earn their checks and only the promise that the
    inputs stayed unchanged (half a check) is lost: it cannot be shown."""
    result = honest(submission(tmp_path / "s", CORRECT, backward_body=W.EMPTY_ECHO_BACKWARD))["softmax"]
    assert result.score == pytest.approx(5 - 5 / 5.5 / 2, abs=0.01), result.rubric
    assert [m.name for m in result.rubric if not m.passed] == ["inputs and upstream gradient left unchanged"]


# ------------------------------------------------------------------ row 11: staging
RELU = ('def relu_forward(x):\n    note = "a"\n    return (x > 0) * x, ReluCache(x > 0)\n\n\n'
        'def relu_backward(dy, cache):\n    return dy * cache.positive\n')
PACKAGE_PATH = "minitransformer/functional/activations.py"


def _venv(s: Path):
    for i in range(600):
        files(s, {f".venv/lib/m{i:03d}.py": "x = 1\n"})
    files(s, {PACKAGE_PATH: RELU})


def _deep(s: Path):
    folder = s
    for _ in range(1200):
        folder = folder / "d"
        folder.mkdir()
    files(s, {PACKAGE_PATH: RELU})


def _huge(s: Path):
    files(s, {PACKAGE_PATH: RELU})
    with open(s / PACKAGE_PATH, "r+b") as f:
        f.truncate(1_500_000_000)                        # sparse: 1.5 GB to read, nothing on disk


STAGED = {
    "a UTF-8 BOM": lambda s: (s / "activations.py").write_bytes(b"\xef\xbb\xbf" + RELU.encode()),
    "a latin-1 coding cookie": lambda s: (s / "activations.py").write_bytes(
        ("# -*- coding: latin-1 -*-\n# café\n" + RELU).encode("latin-1")),
    "U+2028 in a string": lambda s: (s / "activations.py").write_text(RELU.replace('"a"', '"a\u2028b\u2029c"'),
                                                                       encoding="utf-8"),
    "CRLF line ends": lambda s: (s / "activations.py").write_bytes(RELU.replace("\n", "\r\n").encode()),
    "a .venv of 600 files": _venv,
    "a 1,200-deep folder": _deep,
}


@pytest.mark.parametrize("make", STAGED.values(), ids=STAGED.keys())
def test_staging_reads_the_body_as_python_does(tmp_path, make):
    """A correct relu upload scored 0: the body cut or never read, or the parent crashed. Only the
    package's paths are read, decoded and split into lines as Python does: 2/2."""
    make(tmp_path)
    assert honest(tmp_path, ("relu",), limits=FAST)["relu"].score == 2
    chain = [tmp_path / "d"]
    while (chain[-1] / "d").is_dir():                     # the deep folder, innermost first: no
        chain.append(chain[-1] / "d")                     # recursion for pytest's cleanup to run out of
    for folder in reversed(chain[1:] if not chain[0].is_dir() else chain):
        folder.rmdir()


@pytest.mark.parametrize("make, why", [
    (_huge, "1,500,000,000 bytes, more than 1,048,576; not read"),
    (lambda s: files(s, {PACKAGE_PATH: "X = " + "-" * 100_000 + "1\n" + RELU}), "cannot be parsed (MemoryError"),
], ids=["a 1.5 GB file at the package path", "a deeply nested expression"])
def test_a_file_the_grader_cannot_read_costs_its_assignment_and_says_so(tmp_path, make, why):
    """A file Python could not import either: 0 for its assignment with a line naming the file; the
    parent neither reads 1.5 GB nor dies of the parser's recursion, and the JSON is written."""
    make(tmp_path / "s")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    assert main(["homework", "check", str(tmp_path / "s"), "relu", "--json", str(tmp_path / "r.json")]) == 1
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["score"] == 0 and f"{PACKAGE_PATH}: {why}" in report["output"]
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024 < 200      # MiB


# ------------------------------------------------------------------ row 12: the grader in a student's copy
def test_the_grader_never_runs_from_a_students_copy(tmp_path):
    """Run inside a student's copy, `homework check .` was the copy's own code grading itself (7/7,
    as root, unconfined). A copy now checks itself only as what it is, a local check of its own
    assignments; the grader's commands and options refuse there, one line; and the installed
    grader, run outside, grades the same copy honestly even when its homework/ claims full marks."""
    export(["relu", "softmax"], tmp_path / "copy")
    copy = tmp_path / "copy"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}

    def in_copy(*argv):
        return subprocess.run([sys.executable, "-m", "minitransformer", "homework", *argv], cwd=copy, env=env,
                              capture_output=True, text=True, timeout=180)
    local = in_copy("check", ".")
    assert local.stdout.startswith("local check of this copy") and "== relu:" in local.stdout
    assert "== linear:" not in local.stdout                                # the copy's assignments only
    for argv in (("check-class", ".", "--out", "g"), ("autograder", "relu", "--out", "a.zip"),
                 ("check", ".", "--json", "r.json"), ("check", ".", "--seed-file", "s.json")):
        refused = in_copy(*argv)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, (argv, refused.stderr)
        assert "student's copy" in refused.stderr
    grade_py = copy / "minitransformer" / "homework" / "grade.py"
    grade_py.write_text(grade_py.read_text() + "\ndef grade(*a, **k):\n    raise SystemExit('7/7')\n")
    results = honest(copy, ("relu", "softmax"), limits=FAST)
    assert all(not_implemented(r) for r in results.values()), results


# ------------------------------------------------------------------ nothing in a copy computes a target
PROBE = r"""
import importlib, inspect, json, pkgutil, signal, sys
sys.path[:0] = [sys.argv[1], sys.argv[4]]           # the copy, then NumPy (no site: no installed package)
import numpy as np
import minitransformer
cases = np.load(sys.argv[2], allow_pickle=False)
table = json.loads(open(sys.argv[3]).read())
def arrays(value, depth=0):
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, (tuple, list)) and depth < 4:
        for v in value:
            yield from arrays(v, depth + 1)
    elif isinstance(value, dict) and depth < 4:
        for v in value.values():
            yield from arrays(v, depth + 1)
def alarm(*_):
    raise TimeoutError
signal.signal(signal.SIGALRM, alarm)
found, called = [], 0
ACTS = ("minitransformer.lectures", "minitransformer.cli", "minitransformer.__main__",
        "minitransformer.homework.child", "minitransformer.homework.sandbox")   # they confine or start processes
names = [m.name for m in pkgutil.walk_packages(minitransformer.__path__, "minitransformer.")
         if not m.name.startswith(ACTS)]
for name in names:
    try:
        module = importlib.import_module(name)
    except Exception:
        continue
    functions = [f for f in vars(module).values() if inspect.isfunction(f) and f.__module__ == name]
    for cls in [c for c in vars(module).values() if inspect.isclass(c) and c.__module__ == name]:
        functions += [f for f in vars(cls).values() if isinstance(f, staticmethod)]
    for f in functions:
        f = getattr(f, "__func__", f)
        for case, spec in table.items():
            inputs = {k[len(case) + 4:]: cases[k] for k in cases.files if k.startswith(case + "/in/")}
            options = spec["kwargs"]
            g = cases[case + "/g"] if case + "/g" in cases.files else None
            tries = [((), dict(inputs, **options)), (tuple(inputs.values()), options),
                     ((dict(inputs, **options, upstream=g),), {})]                  # the catalogue's way
            if g is not None:
                tries += [((g,) + tuple(inputs.values()), options), ((g,), dict(inputs, **options))]
            for args, kwargs in tries:
                try:
                    sig = inspect.signature(f)
                    kwargs = {k: v for k, v in kwargs.items() if k in sig.parameters}
                    sig.bind(*args, **kwargs)
                except (TypeError, ValueError):
                    continue
                called += 1
                try:                                # the alarm may also land in the inner finally
                    try:
                        signal.setitimer(signal.ITIMER_REAL, 1.0)
                        out = list(arrays(f(*[np.array(a, copy=True) if isinstance(a, np.ndarray) else a
                                              for a in args],
                                            **{k: np.array(v, copy=True) if isinstance(v, np.ndarray) else v
                                               for k, v in kwargs.items()})))
                    finally:
                        signal.setitimer(signal.ITIMER_REAL, 0)
                except BaseException:
                    out = []
                for tensor in spec["refs"]:
                    r = cases[case + "/ref/" + tensor]
                    for o in out:
                        if o.shape != r.shape or r.size < 2:
                            continue
                        if np.array_equal(o, r) if r.dtype == bool else \
                                o.dtype.kind == "f" and np.allclose(o, r, rtol=1e-6, atol=1e-9):
                            found.append(f"{name}.{f.__qualname__} reproduces {case} {tensor}")
print(json.dumps({"found": sorted(set(found)), "called": called, "modules": len(names)}))
"""


def _one_numpy_call_away(r, inputs: dict, g) -> bool:
    """A reference tensor NumPy itself gives from the case's own arrays in one call (constant, an
    input or the upstream gradient as it is, max(x, 0), the upstream summed over its rows: relu's
    out, a bias's gradient): no copy is needed to compute it, so finding it proves nothing."""
    r = np.asarray(r)
    if r.dtype == bool:
        return False
    if np.ptp(r) == 0:
        return True
    floats = [np.asarray(a) for a in list(inputs.values()) + [g] if a is not None and np.asarray(a).dtype.kind == "f"]
    candidates = [c for a in floats for c in [a, np.maximum(a, 0)] + ([a.reshape(-1, a.shape[-1]).sum(0)]
                                                                      if a.ndim > 1 else [])]
    return any(c.shape == r.shape and np.allclose(r, c) for c in candidates)


def test_no_callable_of_a_copy_reproduces_a_graded_target(tmp_path):
    """Every function (and static method) of every module of a student's copy of all assignments,
    called with each graded main case's inputs (drawn from a secret seed, as the grader would, and
    the upstream gradient for the backward's shape of call), by name and in order: none returns an
    array equal to what the reference computes for that case, unless NumPy gives that array in one
    call (_one_numpy_call_away). Left out: the lectures (teaching text, the handout's business),
    the command line, and the child's and the sandbox's code, which confine the calling process or
    start others (they compute nothing)."""
    from minitransformer.homework.reference import draw, reference_results
    export(["all"], tmp_path / "copy")
    arrays, table = {}, {}
    for a in assignments():
        graded = a.main
        case = draw(graded, SECRET, 0, 0)
        if graded.check.checker == "module":
            continue                                       # a Module's backward needs its own forward first
        ref, g = reference_results(graded, case, seed=SECRET)
        inputs = {k: v for k, v in case.inputs.items()}
        plain = {k: v for k, v in case.kwargs.items() if not isinstance(v, np.ndarray)}
        inputs.update({k: v for k, v in case.kwargs.items() if isinstance(v, np.ndarray)})
        trivial = [k for k, r in ref.items() if r is None or _one_numpy_call_away(np.asarray(r), inputs, g)]
        refs = [k for k in ref if k not in trivial]
        for k, v in inputs.items():
            arrays[f"{a.id}/in/{k}"] = v
        for k in refs:
            arrays[f"{a.id}/ref/{k}"] = np.asarray(ref[k])
        if g is not None:
            arrays[f"{a.id}/g"] = np.asarray(g)
        table[a.id] = {"kwargs": {k: v for k, v in plain.items() if type(v) in (int, float, bool, str)},
                       "refs": refs}
    np.savez(tmp_path / "cases.npz", **arrays)
    (tmp_path / "table.json").write_text(json.dumps(table))
    done = subprocess.run([sys.executable, "-I", "-S", "-c", PROBE, str(tmp_path / "copy"), str(tmp_path / "cases.npz"),
                           str(tmp_path / "table.json"), str(Path(np.__file__).parents[1])], capture_output=True,
                          text=True, timeout=300, cwd=tmp_path,
                          env={"PATH": os.defpath, "OPENBLAS_NUM_THREADS": "1", "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["modules"] > 50 and report["called"] > 500, report
    assert report["found"] == [], report["found"]


# ------------------------------------------------------------------ the walls themselves
SECCOMP_PROBE = r"""
import ctypes, fcntl, json, os, resource, socket, sys
import numpy                                                     # while threads may start (as the child does)
sys.path.insert(0, sys.argv[1])
from minitransformer.homework import child, walls
r, w = os.pipe()
assert child.seccomp(walls.program())
libc = ctypes.CDLL(None, use_errno=True)
seen = {}
def attempt(name, act):
    try:
        result = act()
        seen[name] = "allowed" if result is None or result >= 0 else "refused"
    except (OSError, ValueError):                                # setrlimit's EPERM is a ValueError
        seen[name] = "refused"
attempt("read a file", lambda: len(open(os.__file__).read()))
attempt("numpy", lambda: int(numpy.ones((64, 64)) @ numpy.ones(64) @ numpy.ones(64)))
attempt("write a new file", lambda: open(os.path.join(sys.argv[2], "new.txt"), "w").close())
attempt("socket", lambda: socket.socket(socket.AF_INET, socket.SOCK_DGRAM).close())
attempt("unix socket", lambda: socket.socket(socket.AF_UNIX).close())
attempt("memfd", lambda: os.memfd_create("x"))
attempt("fallocate", lambda: libc.fallocate(2, 1, ctypes.c_long(0), ctypes.c_long(1 << 20)))
attempt("fork", lambda: os.fork())
attempt("ptrace", lambda: libc.ptrace(16, os.getppid(), None, None))
attempt("unshare", lambda: libc.unshare(0x40000000))
attempt("signal the parent", lambda: os.kill(os.getppid(), 0))
attempt("shrink a pipe", lambda: fcntl.fcntl(r, 1031, 4096))          # F_SETPIPE_SZ
attempt("set a limit", lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
print(json.dumps(seen))
"""


@pytest.mark.skipif(not walls.seccomp_available(), reason="this kernel takes no seccomp filter")
@pytest.mark.parametrize("who", USERS)
def test_the_seccomp_filter_allows_python_and_numpy_and_refuses_the_rest(shared, who):
    """The filter alone (no Landlock, no hook), in a process of its own, as root and as an ordinary
    user: reading and NumPy work; sockets, memfd, fallocate, fork, ptrace, unshare, a signal out,
    a pipe resized, a limit set and a file opened to write are refused."""
    work = shared
    code = SECCOMP_PROBE
    if who == "user":
        done = as_user(f"import sys\nsys.argv = ['-', {str(ROOT)!r}, {str(work)!r}]\n" + code, work)
    else:
        done = subprocess.run([sys.executable, "-c", code, str(ROOT), str(work)], capture_output=True, text=True,
                              timeout=60, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.splitlines()[-1])
    allowed = {"read a file", "numpy"}
    assert seen == {k: "allowed" if k in allowed else "refused" for k in seen} and len(seen) == 13, seen
    assert not (work / "new.txt").exists()


def _userns_permitted() -> bool:
    try:
        return int(Path("/proc/sys/user/max_user_namespaces").read_text()) > 0 and \
            Path("/proc/sys/kernel/unprivileged_userns_clone").read_text().strip() != "0"
    except (OSError, ValueError):
        return True


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="network namespaces are Linux's")
@pytest.mark.parametrize("who", USERS)
def test_the_child_stands_behind_every_wall_and_says_so(tmp_path, shared, who):
    """The ready message: Landlock, seccomp, its own network namespace (in a user namespace when the
    grader is not root, where the kernel permits one), 32 open files, nobody as root."""
    if who == "user" and not _userns_permitted():
        pytest.skip("this kernel permits no user namespace to an ordinary user")
    work = shared if who == "user" else tmp_path
    code = ("import json\nfrom minitransformer.homework.sandbox import Sandbox\nfrom minitransformer.homework.submission "
            "import pristine_copy\nwith Sandbox(pristine_copy()) as s:\n    print(json.dumps(s.walls))\n")
    done = as_user(code, work) if who == "user" else subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=dict(os.environ, PYTHONPATH=str(ROOT)))
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads(done.stdout.splitlines()[-1])
    assert report["netns"] is True and report["nofile"] == child.NOFILE
    assert report["seccomp"] is walls.seccomp_available() and report["landlock"] == child.landlock_abi()
    assert report["user"] == ("nobody" if who == "root" else "the grader's own user")


def test_the_syscall_numbers_are_the_kernels():
    """The filter's table against this machine's headers, where they are installed."""
    import re
    headers = {"x86_64": "/usr/include/x86_64-linux-gnu/asm/unistd_64.h", "aarch64": "/usr/include/asm-generic/unistd.h"}
    checked = 0
    for machine, header in headers.items():
        if not Path(header).is_file():
            continue
        text = Path(header).read_text()
        numbers = {m.group(1): int(m.group(2)) for m in re.finditer(r"#define __NR(?:3264)?_(\w+) (\d+)", text)}
        numbers.setdefault("newfstatat", numbers.get("fstatat"))
        column = walls.ARCHES[machine][0]
        for name, pair in walls.SYSCALLS.items():
            if pair[column] is not None:
                assert numbers.get(name) == pair[column], (machine, name)
                checked += 1
    if not checked:
        pytest.skip("no kernel headers here to compare with")
    assert walls.program("aarch64") != walls.program("x86_64")
    with pytest.raises(ValueError, match="no seccomp filter for the architecture 'riscv64'"):
        walls.program("riscv64")


def test_a_message_may_build_only_the_packages_caches_and_plain_objects():
    """Whole, the by-value channel: a class outside functional/ and layers/, a class that is not a
    NamedTuple where one is named, an array past its bounds: a malformed message, nothing built."""
    from minitransformer.homework.wire import Whole
    whole = Whole("minitransformer", largest=(100, 50, 1000))
    blobs: list = []
    tree = whole.encode({"cache": __import__("minitransformer.functional.softmax", fromlist=["x"]).SoftmaxCache(
        np.ones(3), -1)}, blobs)
    assert type(Whole("minitransformer").decode(tree, blobs)["cache"]).__name__ == "SoftmaxCache"
    for bad in ({"named": "homework.assignment:GradedCase", "fields": []}, {"named": "layers.module:Module", "fields": []},
                {"object": "functional.softmax:SoftmaxCache", "state": {"dict": {}}},
                {"object": "os:system", "state": {"dict": {}}}):
        with pytest.raises(ValueError):
            Whole("minitransformer").decode(bad, [])
    big: list = []
    with pytest.raises(ValueError, match="at most 100"):
        whole.decode(Whole("minitransformer").encode(np.zeros((11, 11)), big), big)
