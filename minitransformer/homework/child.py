"""The untrusted side of the grader: a small server inside the student's copy.

homework/sandbox.py starts it as ``python -I -S -c <this file's text> CONFIG``; it
needs only the standard library and NumPy and never imports the reference. In order:

    1. take the private channel (two pipe fds), cap what print() may write
    2. import NumPy and the standard library the copy needs, while they are readable
    3. set the limits (address space, CPU time, file size, no core), drop to the
       unprivileged user when started as root, forbid new processes and threads
    4. install the audit hook (PEP 578): no open outside the student's copy, NumPy and
       the standard library, nothing written, no process, socket, signal or ctypes
    5. sys.path = the student's copy + the standard library, then serve requests

A request names a function of the copy ("functional.norm:layernorm_forward"), a
method of an object it returned, or one of the few helpers below; the reply holds
arrays (.npy bytes) and, for anything else (a cache, a Module), a handle the
parent can send back. With ``echo`` the reply also holds the call's arguments as they
are after it, so the parent sees an input changed in place (the child compares
nothing). The same encoding serves both directions (``encode`` /
``decode``); the parent decodes the replies strictly: no pickle, numbers and
arrays of plain dtypes only, bounded sizes.
"""
import io
import json
import os
import struct
import sys

MAX_FRAME = 64 << 20          # bytes in one message
MAX_ITEMS = 4096              # values in one message
KEPT = 4096                   # handles kept in the child before the oldest go
DTYPES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
          "float16", "float32", "float64", "complex64", "complex128")   # never object, strings, records


class Handle:
    """An object that stays on the other side (a cache, a Module), named by a number."""

    def __init__(self, id, type_name=""):
        self.id, self.type_name = id, type_name

    def __repr__(self):
        return f"<{self.type_name or 'object'} #{self.id} in the student's process>"


# ------------------------------------------------------------------ the wire: frames of JSON + .npy
def write_frame(fd, header: dict, blobs: list) -> None:
    head = json.dumps(dict(header, sizes=[len(b) for b in blobs])).encode()
    body = struct.pack("<I", len(head)) + head + b"".join(blobs)
    data = struct.pack("<Q", len(body)) + body
    while data:
        data = data[os.write(fd, data):]


def _read_exact(fd, n: int, wait=None) -> bytes:
    parts, left = [], n
    while left:
        if wait is not None:
            wait()
        chunk = os.read(fd, min(left, 1 << 20))
        if not chunk:
            raise EOFError("the other side closed the channel")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def read_frame(fd, wait=None) -> tuple:
    """(header, blobs); ValueError on anything malformed or oversized."""
    (n,) = struct.unpack("<Q", _read_exact(fd, 8, wait))
    if n > MAX_FRAME or n < 4:
        raise ValueError(f"a message of {n} bytes (at most {MAX_FRAME})")
    body = _read_exact(fd, n, wait)
    (h,) = struct.unpack("<I", body[:4])
    if h > n - 4:
        raise ValueError("a message header longer than the message")
    header = json.loads(body[4:4 + h].decode())
    sizes = header.get("sizes") if isinstance(header, dict) else None
    if not isinstance(sizes, list) or len(sizes) > MAX_ITEMS or \
            not all(type(s) is int and s >= 0 for s in sizes) or 4 + h + sum(sizes) != n:
        raise ValueError("a message whose sizes do not add up")
    blobs, at = [], 4 + h
    for s in sizes:
        blobs.append(body[at:at + s])
        at += s
    return header, blobs


def encode(value, blobs: list, keep):
    """A JSON-able tree; arrays go to ``blobs``; ``keep(obj)`` -> Handle for anything else."""
    import numpy as np
    if value is None or type(value) in (bool, int, float, str):
        return value
    if isinstance(value, Handle):
        return {"handle": value.id}
    if isinstance(value, (np.ndarray, np.generic)) and np.asarray(value).dtype.name in DTYPES:
        array = np.asarray(value)
        blobs.append(array.astype(array.dtype.newbyteorder("<"), copy=False).tobytes(order="C"))
        return {"array": len(blobs) - 1, "dtype": array.dtype.name, "shape": list(array.shape)}
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return {"dtype": np.dtype(value).name}
    if type(value) in (tuple, list):
        return {"tuple": [encode(v, blobs, keep) for v in value]}
    if type(value) is dict and all(type(k) is str for k in value):
        return {"dict": {k: encode(v, blobs, keep) for k, v in value.items()}}
    handle = keep(value)
    return {"handle": handle.id, "type": handle.type_name}


def decode(tree, blobs: list, lookup, depth: int = 0):
    """The inverse of encode, strict: ValueError on any other shape; ``lookup(id, type)`` -> object."""
    import numpy as np
    if depth > 16:
        raise ValueError("a value nested too deeply")
    if tree is None or type(tree) in (bool, int, float, str):
        return tree
    if type(tree) is not dict or len(tree) not in (1, 2, 3):
        raise ValueError(f"not a value: {str(tree)[:80]}")
    if "array" in tree:
        return _array(tree, blobs)
    if "handle" in tree and type(tree["handle"]) is int:
        return lookup(tree["handle"], str(tree.get("type", ""))[:80])
    if "dtype" in tree and tree["dtype"] in ("float64", "float32", "float16", "int64"):
        return np.dtype(tree["dtype"]).type
    if "tuple" in tree and type(tree["tuple"]) is list:
        return tuple(decode(v, blobs, lookup, depth + 1) for v in tree["tuple"])
    if "dict" in tree and type(tree["dict"]) is dict:
        return {str(k): decode(v, blobs, lookup, depth + 1) for k, v in tree["dict"].items()}
    raise ValueError(f"not a value: {str(tree)[:80]}")


def _array(tree, blobs):
    """Raw little-endian bytes, a dtype named in DTYPES and a shape whose size matches them."""
    import numpy as np
    index, dtype, shape = tree.get("array"), tree.get("dtype"), tree.get("shape")
    if type(index) is not int or not 0 <= index < len(blobs):
        raise ValueError("an array index out of range")
    if dtype not in DTYPES or type(shape) is not list or len(shape) > 32 or \
            not all(type(n) is int and n >= 0 for n in shape):
        raise ValueError(f"an array of dtype {str(dtype)[:20]}, shape {str(shape)[:40]}")
    kind = np.dtype(dtype).newbyteorder("<")
    size = 1
    for n in shape:
        size *= n
    if size * kind.itemsize != len(blobs[index]):
        raise ValueError("an array whose bytes do not match its shape")
    return np.frombuffer(blobs[index], dtype=kind).astype(np.dtype(dtype)).reshape(shape)


# ------------------------------------------------------------------ the confinement
class _CappedText(io.TextIOBase):
    """print() into a file descriptor, up to ``cap`` bytes; the rest is dropped."""

    def __init__(self, fd, cap):
        self.fd, self.left = fd, cap

    def writable(self):
        return True

    def write(self, text):
        data = str(text).encode("utf-8", "replace")[:max(self.left, 0)]
        if data:
            self.left -= len(data)
            try:
                os.write(self.fd, data)
            except OSError:
                self.left = 0
        return len(text)


def _limits(config) -> None:
    try:
        import resource
        import signal
    except ImportError:                 # Windows: no rlimits
        return
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)            # a full output file: an error, not death
    mb = config["memory_mb"] << 20
    vm = _current_vm()
    pairs = ((resource.RLIMIT_AS, vm + mb), (resource.RLIMIT_CPU, config["cpu_s"]),
             (resource.RLIMIT_FSIZE, config["output_cap"]), (resource.RLIMIT_CORE, 0))
    for which, value in pairs:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass


def _current_vm() -> int:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 30


def _drop(config) -> None:
    """As root: become the unprivileged user; no process or thread can start after this."""
    if config.get("uid") is not None and hasattr(os, "setuid"):
        os.setgroups([])
        os.setgid(config["gid"])
        os.setuid(config["uid"])
        if os.getuid() != config["uid"] or os.geteuid() != config["uid"]:
            raise SystemExit("could not drop privileges")
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_NPROC, (0, 0))
    except (ImportError, AttributeError, ValueError, OSError):
        pass


REFUSED = ("subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
           "os.startfile", "os.kill", "os.killpg", "signal.pthread_kill", "socket.", "ctypes.",
           "resource.setrlimit", "resource.prlimit", "os.remove", "os.rename", "os.rmdir", "os.mkdir",
           "os.chmod", "os.chown", "os.symlink", "os.link", "os.truncate", "os.utime", "shutil.",
           "os.putenv", "os.unsetenv", "os.setxattr", "os.removexattr", "sys.addaudithook",
           "winreg.", "_winapi.", "mmap.", "pty.", "os.chroot", "os.mkfifo", "os.mknod")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_TRUNC", 0)


def install_hook(roots) -> None:
    """Refuse what a graded function has no need of; ``roots``: the folders it may read."""
    roots = tuple(os.path.join(os.path.realpath(r), "") for r in roots)

    def readable(path) -> bool:
        if isinstance(path, int):
            return True
        full = os.path.join(os.path.realpath(os.fsdecode(path)), "")
        return full.startswith(roots)

    def hook(event, args):
        if event.startswith(REFUSED):
            raise PermissionError(f"the grader does not allow {event} in graded code")
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None))[:3]
            writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
                (isinstance(flags, int) and flags & WRITE_FLAGS)
            if writes and not isinstance(path, int):
                raise PermissionError("the grader does not allow writing files in graded code")
            if path is not None and not readable(path):
                raise PermissionError(f"the grader does not allow opening {path!r} in graded code")
        elif event in ("os.listdir", "os.scandir") and args and args[0] is not None \
                and not readable(args[0] or "."):
            raise PermissionError(f"the grader does not allow listing {args[0]!r} in graded code")
        elif event == "import":
            bad = [p for p in (args[2] or ()) if isinstance(p, str) and not readable(p or ".")]
            if bad:
                raise ImportError(f"the grader does not allow imports from {bad[0]!r} in graded code")
    sys.addaudithook(hook)


# ------------------------------------------------------------------ the server
class Server:
    def __init__(self, package: str):
        self.package, self.objects, self.next_id = package, {}, 1

    def keep(self, obj) -> Handle:
        handle = Handle(self.next_id, type(obj).__name__)
        self.objects[handle.id] = obj
        self.next_id += 1
        if len(self.objects) > KEPT:
            self.objects.pop(next(iter(self.objects)))
        return handle

    def lookup(self, id, type_name=""):
        if id not in self.objects:
            raise ValueError(f"no object #{id} (released)")
        return self.objects[id]

    def resolve(self, target: str):
        import importlib
        module, qualname = target.split(":")
        obj = importlib.import_module(f"{self.package}.{module}")
        for part in qualname.split("."):
            obj = getattr(obj, part)
        return obj

    def op_call(self, target, args=(), kwargs=None, echo=False):
        return self._echo(self.resolve(target), args, kwargs, echo)

    # a Handle in a request arrives here as its object
    def op_method(self, handle, name, args=(), kwargs=None, echo=False):
        return self._echo(getattr(handle, name), args, kwargs, echo)

    @staticmethod
    def _echo(fn, args, kwargs, echo):
        """fn's value; with ``echo``, also the arguments as they are after the call (the parent
        compares them with what it sent: an argument changed in place)."""
        kwargs = kwargs or {}
        value = fn(*args, **kwargs)
        return {"value": value, "args": list(args), "kwargs": kwargs} if echo else value

    def op_params(self, handle):
        return {name: p for name, p, _ in handle.parameters()}

    def op_grads(self, handle):
        return {name: grad for name, _, grad in handle.parameters()}

    def op_set_params(self, handle, params):
        for name, p, _ in handle.parameters():
            p[...] = params[name]

    def op_install(self, pieces):
        """Replace functions of the copy by the given source (the reference of the assignments
        the graded one builds on); every name bound to the old function is rebound."""
        import importlib
        for module_name, qualname, source in pieces:
            module = importlib.import_module(f"{self.package}.{module_name}")
            namespace: dict = {}
            exec(compile(source, f"<reference {module_name}:{qualname}>", "exec"), module.__dict__, namespace)
            new = namespace[qualname.split(".")[-1]]
            if "." in qualname:
                cls, method = qualname.split(".")
                setattr(getattr(module, cls), method, new)
                continue
            old = getattr(module, qualname)
            for other in list(sys.modules.values()):
                if getattr(other, "__name__", "").startswith(self.package + "."):
                    for key, value in list(vars(other).items()):
                        if value is old:
                            setattr(other, key, new)

    def serve(self, rfd, wfd) -> None:
        while True:
            try:
                header, blobs = read_frame(rfd)
            except EOFError:
                return
            out: list = []
            try:
                op = getattr(self, "op_" + header["op"])
                params = decode(header.get("params", {"dict": {}}), blobs, self.lookup)
                reply = {"id": header["id"], "value": encode(op(**params), out, self.keep)}
            except BaseException as e:       # SystemExit and KeyboardInterrupt from graded code too
                out = []
                reply = {"id": header.get("id"), "error": describe(e)}
            write_frame(wfd, reply, out)


def describe(e: BaseException) -> dict:
    import traceback
    frames = traceback.extract_tb(e.__traceback__)
    where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else ""
    return {"type": type(e).__name__[:80], "message": str(e)[:500], "where": where[:300]}


def main(config: dict) -> None:
    rfd, wfd = os.dup(config["fds"][0]), os.dup(config["fds"][1])
    for fd in set(config["fds"]) - {0, 1, 2}:
        os.close(fd)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)        # fds 0 and 1 may have been the channel (Windows)
    os.dup2(2, 1)                                       # the capped output file, as fd 2
    sys.stdin = open(os.devnull)
    sys.stdout = sys.stderr = _CappedText(2, config["output_cap"])
    sys.path = [p for p in sys.path if p] + [config["numpy_site"]]
    import numpy                                        # noqa: F401  (while it is readable)
    for name in config["preload"]:
        try:
            __import__(name)
        except BaseException:
            pass
    sys.path = [config["student"]] + [p for p in sys.path if p and p != config["numpy_site"]]
    _limits(config)
    _drop(config)
    install_hook([config["student"], os.path.dirname(numpy.__file__)] + sys.path[1:])
    write_frame(wfd, {"id": "ready", "value": os.getpid()}, [])
    Server(config["package"]).serve(rfd, wfd)


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
