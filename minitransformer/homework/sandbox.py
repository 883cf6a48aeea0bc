"""The trusted side of the grader's channel: start the student's process, call into it, end it.

``Sandbox(copy_dir, limits)`` starts ``python -I -S`` running homework/child.py
with the student's copy on its path and nothing of this installation: its own
session (process group), a fresh empty working folder, stdin from /dev/null,
stdout and stderr into a capped file that is never parsed, and two pipes as the
private channel. On Linux the kernel confines it (homework/walls.py: Landlock,
seccomp, its own network namespace, rlimits); as root it runs as ``nobody``;
everywhere an audit hook names what it refuses (child.py). With ``required`` the
child must report every wall standing before anything is graded (``Unconfined``
otherwise). ``sandbox.function("functional.norm:layernorm_forward")`` is a callable
that runs the student's function there on the arrays it is given and returns
arrays (a cache or a Module comes back as a ``Handle``, to send back later).
``sandbox.module(...)`` wraps a Module living there in the interface
gradcheck.check_module uses. ``sandbox.answers`` (homework/needs.py) answers the
child's calls of the functions the graded assignment builds on, in the middle of a
request (in a process of its own where this machine can fork one: ``Isolated``, below).

The parent never waits on the child: every write and every read has the deadline
``sandbox.deadline`` (time.monotonic(); the pipes non-blocking, select); past it, or
when the child dies, the whole process group is killed and ``ChildGone`` raised. An
exception inside the student's code comes back as ``StudentError`` (its type,
message and place; no traceback object crosses). On an OS without ``resource``,
``setuid`` or ``select``, those limits are skipped, never the grading.
"""
from __future__ import annotations

import json
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import child, walls, wire
from .graded import KnownFunction
from .wire import Handle, decode, encode, frame_bytes, read_frame

CHILD_SOURCE = Path(wire.__file__).read_text(encoding="utf-8") + "\n\n" + Path(child.__file__).read_text(encoding="utf-8")
POSIX = os.name == "posix"


@dataclass(frozen=True)
class Limits:
    timeout: float = 20.0        # seconds of wall time per assignment
    budget: float = 120.0        # seconds per submission, all assignments together
    memory_mb: int = 1024        # address space above what Python and NumPy took
    output_cap: int = 1 << 16    # bytes of the child's printing that are kept


class ChildGone(Exception):
    """The child timed out, died, or broke the protocol; ``reason`` says which."""

    def __init__(self, reason: str, message: str):
        super().__init__(message)
        self.reason = reason


class Unconfined(Exception):
    """The student's process could not be walled in as required: nothing is graded behind it."""


class StudentError(Exception):
    """An exception raised by the student's code: its type name, message and place (as long as
    the child's own description allows: a child that lies about them cannot make them longer)."""

    def __init__(self, info: dict):
        self.type = str(info.get("type", "Exception"))[:80]
        self.where = str(info.get("where", ""))[:300]
        self.shapes = _shapes(info.get("shapes"))
        frames = info.get("frames") if isinstance(info.get("frames"), list) else []
        self.frames = [(str(f[0])[:300], _shapes(f[1])) for f in frames[-8:]
                       if isinstance(f, list) and len(f) == 2]     # (where, shapes), the deepest last
        super().__init__(str(info.get("message", ""))[:500])


def _shapes(sent) -> dict:
    """The shapes the child sent with an exception ({name: [ints]}), each field checked: at most 32
    names of at most 60 characters, at most 8 sizes each, each an int in [0, 2^31)."""
    if not isinstance(sent, dict):
        return {}
    found = {}
    for name, shape in list(sent.items())[:32]:
        if isinstance(name, str) and len(name) <= 60 and isinstance(shape, list) and len(shape) <= 8 and \
                all(type(n) is int and 0 <= n < 2 ** 31 for n in shape):
            found[name] = tuple(shape)
    return found


def child_user():
    """(uid, gid) of the user the child runs as: ``nobody`` when the grader is root, else None."""
    if not POSIX or os.geteuid() != 0:
        return None
    import pwd
    try:
        entry = pwd.getpwnam("nobody")
    except KeyError:
        return None
    return entry.pw_uid, entry.pw_gid


def stdlib_modules() -> list:
    """The standard library and NumPy modules loaded here: the child imports them before it drops its rights
    (the library may sit where the unprivileged user cannot read, e.g. under /root)."""
    names = getattr(sys, "stdlib_module_names", ())
    loaded = {n for n in list(sys.modules) if (n.split(".")[0] in names and n != "__main__")
              or (n.startswith("numpy.") and "._" not in n and "tests" not in n)}
    return sorted(loaded | set(ALWAYS_PRELOADED))


ALWAYS_PRELOADED = ("__future__", "abc", "collections", "contextlib", "copy", "dataclasses", "enum",
                    "functools", "importlib", "importlib.util", "inspect", "itertools", "linecache", "math",
                    "numbers", "operator", "re", "string", "textwrap", "traceback", "types", "typing",
                    "warnings", "weakref", "numpy.random", "numpy.linalg", "numpy.fft",
                    "numpy.lib.stride_tricks")


class Sandbox:
    def __init__(self, copy_dir, limits: Limits = Limits(), *, package: str = "minitransformer",
                 required: bool = True):
        self.limits, self.deadline, self.proc = limits, time.monotonic() + limits.timeout, None
        self.answers, self.walls, self.helper = None, {}, None
        self.private = Path(tempfile.mkdtemp(prefix="mt-grader-"))          # 0700: ours alone
        self.cwd = Path(tempfile.mkdtemp(prefix="mt-child-"))
        os.chmod(self.cwd, 0o755)                                            # readable, not writable
        self.output = open(self.private / "output.txt", "w+b")
        user = child_user()
        config = {"student": str(Path(copy_dir).resolve()), "package": package,
                  "numpy_site": str(Path(np.__file__).resolve().parents[1]), "preload": stdlib_modules(),
                  "uid": user and user[0], "gid": user and user[1], "memory_mb": limits.memory_mb,
                  "cpu_s": int(limits.budget) + 5, "output_cap": limits.output_cap, "seccomp": _program()}
        env = {"PATH": os.defpath, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1",
               "MKL_NUM_THREADS": "1", "MPLBACKEND": "Agg", "LANG": "C.UTF-8"}
        if os.name == "nt":
            env["SYSTEMROOT"] = os.environ.get("SYSTEMROOT", "")
        try:
            self._start(config, env)
        except BaseException:
            self.close()
            raise
        missing = walls.required(self.walls) if required and POSIX else []
        if missing:
            self.close()
            raise Unconfined(f"the student's process could not be walled in: no {', no '.join(missing)}")

    def _start(self, config, env) -> None:
        argv = [sys.executable, "-I", "-S", "-c", CHILD_SOURCE]
        if POSIX:
            to_child, self._w = os.pipe()
            self._r, from_child = os.pipe()
            config["fds"] = [to_child, from_child]
            self.proc = subprocess.Popen(argv + [json.dumps(config)], stdin=subprocess.DEVNULL,
                                         stdout=self.output, stderr=self.output, cwd=self.cwd, env=env,
                                         pass_fds=(to_child, from_child), start_new_session=True)
            os.close(to_child)
            os.close(from_child)
            os.set_blocking(self._w, False)            # every write waits on select, with the deadline
            os.set_blocking(self._r, False)
        else:                          # no fd passing: the pipes are stdin/stdout, moved away at once
            config["fds"] = [0, 1]
            self.proc = subprocess.Popen(argv + [json.dumps(config)], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, stderr=self.output, cwd=self.cwd, env=env,
                                         creationflags=getattr(subprocess, "CREATE_NEW_PROCESS_GROUP", 0))
            self._w, self._r = self.proc.stdin.fileno(), self.proc.stdout.fileno()
        self._call_id = 0
        header, _ = self._receive("ready")
        self.walls = header.get("walls") if isinstance(header.get("walls"), dict) else {}
        self.pid = self.proc.pid

    # ------------------------------------------------------------- the channel
    def _wait_readable(self) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            self.kill()
            raise ChildGone("timeout", "timed out (an infinite loop?)")
        if POSIX:
            import select
            ready, _, _ = select.select([self._r], [], [], left)
            if not ready:
                self.kill()
                raise ChildGone("timeout", "timed out (an infinite loop?)")

    def _send(self, data: bytes) -> None:
        """Write ``data`` to the child by the deadline, however slowly it reads (a pipe it shrank)."""
        if not POSIX:                                  # no select on pipes: the reader's timer kills a hang
            while data:
                data = data[os.write(self._w, data):]
            return
        import select
        while data:
            left = self.deadline - time.monotonic()
            if left <= 0:
                self.kill()
                raise ChildGone("timeout", "timed out (it stopped reading what the grader sends)")
            _, ready, _ = select.select([], [self._w], [], left)
            if not ready:
                continue
            try:
                data = data[os.write(self._w, data):]
            except BlockingIOError:
                continue
            except OSError as e:
                self.kill()
                raise ChildGone("crashed", "the student's process closed its channel") from e

    def _receive(self, expected_id):
        header, blobs = self._receive_any()
        if header.get("id") != expected_id:
            self.kill()
            raise ChildGone("protocol", "the student's process answered out of turn")
        return header, blobs

    def _receive_any(self):
        timer = None
        if not POSIX:
            import threading
            timer = threading.Timer(max(self.deadline - time.monotonic(), 0), self.kill)
            timer.start()
        try:
            header, blobs = read_frame(self._r, self._wait_readable)
        except (EOFError, OSError) as e:
            code = self.kill()
            if POSIX and code == -signal.SIGXCPU:
                raise ChildGone("timeout", "used up its CPU time") from e
            raise ChildGone("crashed", f"the student's process ended (exit code {code})") from e
        except ValueError as e:
            self.kill()
            raise ChildGone("protocol", f"the student's process sent a malformed message: {e}") from e
        finally:
            if timer is not None:
                timer.cancel()
        return header, blobs

    def _reply(self, expected_id):
        """The reply to request ``expected_id``, answering on the way every call the child makes of a
        function the graded assignment needs (``answers``; none while nothing is being graded)."""
        while True:
            header, blobs = self._receive_any()
            if "need" not in header:
                break
            if self.answers is None or expected_id == "ready":
                self.kill()
                raise ChildGone("protocol", "the student's process asked for a needed function out of turn")
            self._send(self.answers.frame(header, blobs))
        if header.get("id") != expected_id:
            self.kill()
            raise ChildGone("protocol", "the student's process answered out of turn")
        return header, blobs

    def request(self, op: str, **params):
        """Run one operation in the child; its value (arrays, numbers, Handles)."""
        if self.proc is None or self.proc.poll() is not None:
            raise ChildGone("crashed", "the student's process is not running")
        self._call_id += 1
        call_id = f"{self._call_id}-{os.urandom(6).hex()}"
        blobs: list = []
        tree = encode(params, blobs, _refuse)
        self._send(frame_bytes({"id": call_id, "op": op, "params": tree}, blobs))
        header, blobs = self._reply(call_id)
        try:
            if "error" in header:
                raise StudentError(header["error"] if isinstance(header["error"], dict) else {})
            return decode(header.get("value"), blobs, Handle)
        except (ValueError, RecursionError) as e:
            self.kill()
            raise ChildGone("protocol", f"the student's process sent a malformed value: {e}") from e

    def function(self, target: str):
        def remote(*args, **kwargs):
            return self.request("call", target=target, args=list(args), kwargs=kwargs)
        remote.__name__ = remote.__qualname__ = target.split(":")[1].split(".")[-1]
        return remote

    def call(self, target: str, args=(), kwargs=None, blocked: str | None = None) -> tuple:
        """(value, args after, kwargs after) of the student's function on these arguments. A known
        function among them (graded.KnownFunction: a gradient checker's ``f``) is lent to the child
        for this call only: it asks, and this process answers (homework/needs.py). ``blocked``: a
        forward that raises while the call runs (a graded backward's own: child.blocked_forward)."""
        kwargs = kwargs or {}
        lent = {k: v for k, v in kwargs.items() if isinstance(v, KnownFunction)}
        if lent and self.answers is None:
            raise TypeError("a known function can be lent only while an assignment is graded")
        try:
            sent = {k: self.answers.lend(k, v) if k in lent else v for k, v in kwargs.items()}
            more = {} if blocked is None else {"blocked": blocked}
            return _echoed(self.request("call", target=target, args=list(args), kwargs=sent, echo=True, **more))
        finally:
            if lent:
                self.answers.revoke()

    def again(self) -> tuple:
        """(args, kwargs) of the echoed call before the last, as the child holds them now."""
        return _echoed(self.request("again"))[1:]

    def module(self, target: str, *args, **kwargs) -> "RemoteModule":
        return RemoteModule(self, self.request("call", target=target, args=list(args), kwargs=kwargs))

    # ------------------------------------------------------------- the end
    def answer_with(self, answers, isolate: bool = True) -> None:
        """From now on the child's needed calls are answered as ``answers`` (needs.Answers) says: with
        ``isolate``, where this machine can, in the process of their own (``Isolated``, one per child,
        started at the first assignment that needs it and again after it is killed)."""
        if not (isolate and can_isolate()):
            self.answers = answers
            return
        if self.helper is None or self.helper.pid is None:
            self.helper = Isolated(self.limits.memory_mb, int(self.limits.budget) + 5, lambda: self.deadline)
        self.helper.target(answers)
        self.answers = self.helper

    def kill(self):
        """Kill the child's whole process group (and the answering process of its needed calls, if
        any: Isolated); the child's exit code (negative: the signal)."""
        if self.helper is not None:
            self.helper.close()
        if self.proc is None:
            return None
        if self.proc.poll() is None or POSIX:
            try:
                if POSIX:
                    os.killpg(self.proc.pid, signal.SIGKILL)
                else:
                    self.proc.kill()
            except (ProcessLookupError, PermissionError, OSError):
                pass
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        for fd in (self._r, self._w) if POSIX else ():
            try:
                os.close(fd)
            except OSError:
                pass
        self._r = self._w = -1
        return code

    def close(self) -> None:
        self.kill()
        self.output.close()
        shutil.rmtree(self.private, ignore_errors=True)
        shutil.rmtree(self.cwd, ignore_errors=True)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _echoed(reply) -> tuple:
    """An echo reply as (value, args, kwargs); a reply of another form is the child's fault."""
    if not (isinstance(reply, dict) and set(reply) == {"value", "args", "kwargs"}
            and isinstance(reply["args"], tuple) and isinstance(reply["kwargs"], dict)):
        raise ChildGone("protocol", "the student's process answered a call with something else")
    return reply["value"], reply["args"], reply["kwargs"]


def _refuse(obj):
    raise TypeError(f"the grader cannot send a {type(obj).__name__} to the student's process")


class RemoteModule:
    """A Module in the child, as gradcheck.check_module sees one: the parameters are kept here
    (check_module perturbs them in place) and sent before every forward."""

    def __init__(self, sandbox: Sandbox, handle: Handle):
        if not isinstance(handle, Handle):
            raise StudentError({"type": "TypeError", "message": "the constructor did not return an object"})
        self.sandbox, self.handle = sandbox, handle
        params = sandbox.request("params", handle=handle)
        if not isinstance(params, dict) or not all(isinstance(v, np.ndarray) for v in params.values()):
            raise StudentError({"type": "TypeError", "message": "the module's params are not arrays"})
        self.params = {k: np.array(v, dtype=np.float64) for k, v in params.items()}
        self.grads = {k: np.zeros_like(v) for k, v in self.params.items()}

    def _grads(self) -> dict:
        grads = self.sandbox.request("grads", handle=self.handle)
        if not isinstance(grads, dict) or not all(isinstance(v, np.ndarray) for v in grads.values()):
            raise StudentError({"type": "TypeError", "message": "the module's grads are not arrays"})
        return grads

    def load_state_dict(self, state: dict) -> None:
        """The reference's initial parameters; the Module must have exactly these (a parameter left
        out of ``parameters()`` would leave its gradient unchecked)."""
        mine = {k: v.shape for k, v in self.params.items()}
        expected = {k: np.shape(v) for k, v in state.items()}
        if mine != expected:
            wanted = [f"{k} {expected[k]}" for k in expected if mine.get(k) != expected[k]]
            found = [f"{k} {mine[k]}" for k in mine if expected.get(k) != mine[k]]
            raise StudentError({"type": "ValueError", "message": "the module's parameters differ from the "
                                f"given ones: expected {', '.join(wanted) or 'nothing more'}, found "
                                f"{', '.join(found) or 'nothing instead'} (the constructor and parameters() "
                                "are given: change only the graded bodies)"})
        for k in self.params:
            self.params[k][...] = state[k]

    def forward(self, *inputs, **kwargs):
        self.sandbox.request("set_params", handle=self.handle, params=self.params)
        return self.sandbox.request("method", handle=self.handle, name="forward", args=list(inputs),
                                    kwargs=kwargs)

    def call(self, name: str, args=(), kwargs=None, blocked: str | None = None) -> tuple:
        """(value, args after, kwargs after) of one method; the parameters are sent first and the
        grads read back after a backward; ``blocked`` as Sandbox.call's."""
        if name == "forward":
            self.sandbox.request("set_params", handle=self.handle, params=self.params)
        more = {} if blocked is None else {"blocked": blocked}
        reply = _echoed(self.sandbox.request("method", handle=self.handle, name=name, args=list(args),
                                             kwargs=kwargs or {}, echo=True, **more))
        if name == "backward":
            self.grads = self._grads()
        return reply

    def backward(self, dout):
        dx = self.sandbox.request("method", handle=self.handle, name="backward", args=[dout])
        self.grads = self._grads()
        return dx

    def zero_grad(self) -> None:
        self.sandbox.request("method", handle=self.handle, name="zero_grad")
        self.grads = {k: np.zeros_like(v) for k, v in self.params.items()}

    def parameters(self):
        for name, p in self.params.items():
            yield name, p, self.grads.get(name)

    def named_modules(self):
        return []


def _program() -> str:
    """The seccomp filter for this machine, hex (the child installs it); "" where none is known."""
    try:
        return walls.program().hex() if sys.platform.startswith("linux") else ""
    except ValueError:
        return ""


# ------------------------------------------------------------------ the answers in a process of their own
def can_isolate() -> bool:
    """Whether this machine can fork a process for the answers (Linux: fork and /proc)."""
    return hasattr(os, "fork") and os.path.exists("/proc/self/status")


class Isolated:
    """The grader's answers to the needed calls, computed in a forked copy of the grader: what the
    reference does with the student's arguments holds at most ``memory_mb`` more address space
    (RLIMIT_AS; past it, a MemoryError answered to the student's call) and ``cpu_s`` of CPU, and
    is due by ``deadline()`` (time.monotonic()), past which the copy is killed and the assignment
    times out: the student's arguments cost the student's time and memory, never the grader's.
    Trusted code only runs there (the reference, this module, needs.Answers); nothing the student
    wrote. One per child (a submission's), told which assignment it answers for (``target``)."""

    def __init__(self, memory_mb: int, cpu_s: int, deadline):
        self.deadline, self.answers = deadline, None
        to_helper, self._w = os.pipe()
        self._r, from_helper = os.pipe()
        pid = os.fork()
        if pid == 0:                                       # the helper: never returns
            code = 1
            try:
                _serve(to_helper, from_helper, memory_mb, cpu_s)
                code = 0
            finally:
                os._exit(code)
        self.pid = pid
        os.close(to_helper)
        os.close(from_helper)
        os.set_blocking(self._w, False)
        os.set_blocking(self._r, False)

    def target(self, answers) -> None:
        """From now on answer as ``answers`` (needs.Answers) would: its assignment, its package."""
        self._ask({"id": "target", "target": [answers.assignment.id, answers.package]}, [])
        self.answers = answers

    def frame(self, header: dict, blobs: list) -> bytes:
        """The helper's reply to the child's ``need`` message, as the bytes to send to the child (as they
        came). Only the message's id, name and arguments go on: a ``target`` of the child's making
        would make the helper answer for another assignment."""
        return self._ask({k: header.get(k) for k in ("id", "need", "params")}, blobs)

    def _ask(self, header: dict, blobs: list) -> bytes:
        try:
            self._send(frame_bytes(header, blobs))
            return self._receive()
        except TimeoutError:
            self.close()
            raise ChildGone("timeout", "timed out (the grader's answer to a needed call, computed from your "
                                       "arguments, took too long)") from None
        except (EOFError, OSError, ValueError) as e:
            self.close()
            raise ChildGone("crashed", "the grader could not answer a needed call from your arguments (its "
                                       f"answering process ended: {type(e).__name__})") from None

    def _receive(self) -> bytes:
        prefix = wire._read_exact(self._r, 8, self._wait)
        (n,) = struct.unpack("<Q", prefix)
        if n > wire.MAX_FRAME:
            raise ValueError(f"an answer of {n} bytes")
        return prefix + wire._read_exact(self._r, n, self._wait)

    def _left(self) -> float:
        left = self.deadline() - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left

    def _wait(self) -> None:
        if not select.select([self._r], [], [], self._left())[0]:
            raise TimeoutError

    def _send(self, data: bytes) -> None:
        while data:
            if select.select([], [self._w], [], self._left())[1]:
                try:
                    data = data[os.write(self._w, data):]
                except BlockingIOError:
                    continue

    def close(self) -> None:
        """Kill the helper (it holds nothing to save) and close the pipes; idempotent."""
        if self.pid is None:
            return
        try:
            os.kill(self.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            os.waitpid(self.pid, 0)
        except OSError:
            pass
        for fd in (self._r, self._w):
            try:
                os.close(fd)
            except OSError:
                pass
        self.pid = None


def _serve(rfd: int, wfd: int, memory_mb: int, cpu_s: int) -> None:
    """The helper's loop: one message in (``target``: answer for that assignment; else a ``need``), its
    reply out, until the grader closes the pipe."""
    from .needs import Answers
    _detach(keep=(rfd, wfd))
    _one_blas_thread()
    import resource
    vm = child._current_vm()
    for which, value in ((resource.RLIMIT_AS, vm + (memory_mb << 20) if vm else None),
                         (resource.RLIMIT_CPU, cpu_s), (resource.RLIMIT_CORE, 0)):
        if value is not None:
            hard = resource.getrlimit(which)[1]
            resource.setrlimit(which, (value if hard == resource.RLIM_INFINITY else min(value, hard), hard))
    answers = None
    while True:
        try:
            header, blobs = read_frame(rfd)
        except (EOFError, ValueError, OSError):
            return
        try:
            if "target" in header:
                answers = Answers(*header["target"])
                data = frame_bytes({"id": "target", "value": None}, [])
            else:
                data = answers.frame(header, blobs)
        except BaseException as e:                # noqa: BLE001 - even MemoryError while encoding: an answer
            data = frame_bytes({"id": header.get("id"), "error": {"type": type(e).__name__[:40],
                                                                  "message": str(e)[:300]}}, [])
        while data:
            data = data[os.write(wfd, data):]


def _detach(keep) -> None:
    """In the helper: stdin, stdout and stderr to /dev/null (nothing it says lands in the report),
    every other descriptor closed but ``keep`` (the grader's pipes to the child, a pool's queues),
    SIGINT left to the grader (a Ctrl-C ends the grader, which ends this)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2 and fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


BLAS_THREADS = ("scipy_openblas_set_num_threads64_", "scipy_openblas_set_num_threads",
                "openblas_set_num_threads64_", "openblas_set_num_threads", "MKL_Set_Num_Threads")


def _one_blas_thread() -> None:
    """One BLAS thread in the helper: the grader's BLAS pool does not survive the fork, and new
    threads would need stacks under the helper's address-space limit (OpenBLAS exits when it
    cannot start one). Best effort: the libraries NumPy's wheels and conda ship."""
    import ctypes
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "blas" in line.lower() or "mkl" in line.lower()}
    except OSError:
        return
    for path in sorted(p for p in paths if p.startswith("/")):
        try:
            library = ctypes.CDLL(path)
        except OSError:
            continue
        for name in BLAS_THREADS:
            if hasattr(library, name):
                getattr(library, name)(1)
                break
