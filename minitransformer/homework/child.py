"""The untrusted side of the grader: a small server inside the student's copy.

homework/sandbox.py starts it as ``python -I -S -c <wire.py's text, then this file's>
CONFIG``; it needs only the standard library and NumPy and never imports the
reference. In order:

    1. take the private channel (two pipe fds), cap what print() may write
    2. a network namespace of its own (unshare; in a user namespace when not root), while
       the process still has one thread
    3. import NumPy and the standard library the copy needs, while they are readable
    4. set the limits (address space, CPU time, file size, no core, a few dozen open files)
    5. on Linux, Landlock: the kernel lets this process read only the student's copy,
       NumPy and the standard library (not site-packages inside it), and create, write,
       remove nothing, irrevocably; then drop to the unprivileged user when started as
       root, forbid new processes
    6. seccomp: the syscall allow-list homework/walls.py builds (no socket at all, no
       memfd, fallocate, ptrace, process_vm_*, new process or thread, namespace, mount,
       io_uring, file opened to write ...), irrevocably
    7. install the audit hook (PEP 578), the same rules checked in Python, with a
       message that names them (a tripwire: code in the process can reach past it,
       through NumPy's raw memory access if nothing else, never past the kernel)
    8. sys.path = the student's copy + the standard library; say which walls stand (the
       ready message: the parent refuses to grade behind fewer than it requires), serve

A request names a function of the copy ("functional.norm:layernorm_forward"), a
method of an object it returned, or one of the few helpers below; the reply holds
arrays (.npy bytes) and, for anything else (a cache, a Module), a handle the
parent can send back. With ``echo`` the reply also holds the call's arguments as they
are after it, so the parent sees an input changed in place (the child compares
nothing). The parent decodes the replies strictly (homework/wire.py).

``need`` turns each function of the assignments the graded one builds on (attention
calls softmax) into a question to the parent, which answers it with the reference and
sends back arrays only (homework/needs.py): no reference code ever enters this process.
"""
import io
import json
import os
import struct
import sys

if __name__ != "__main__":        # imported by the parent; the child runs wire.py's text before this one
    from .wire import LENT, Handle, Whole, apply_state, decode, encode, read_frame, write_frame

KEPT = 4096                   # handles kept in the child before the oldest go
NOFILE = 32                   # open files: the channel, the output, an import at a time


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


def _limits(config) -> int:
    """The rlimits; returns the open-file limit set (0 where there is none)."""
    try:
        import resource
        import signal
    except ImportError:                 # Windows: no rlimits
        return 0
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)            # a full output file: an error, not death
    mb = config["memory_mb"] << 20
    vm = _current_vm() or 1 << 30
    pairs = ((resource.RLIMIT_AS, vm + mb), (resource.RLIMIT_CPU, config["cpu_s"]),
             (resource.RLIMIT_FSIZE, config["output_cap"]), (resource.RLIMIT_CORE, 0),
             (resource.RLIMIT_NOFILE, NOFILE))
    for which, value in pairs:
        try:
            resource.setrlimit(which, (value, value))
        except (ValueError, OSError):
            pass
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if 0 < soft <= NOFILE else 0


def _current_vm() -> int:
    """This process's address space in bytes (VmSize), 0 where /proc says nothing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


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


# ------------------------------------------------------------------ Landlock (Linux >= 5.13)
LANDLOCK_SYSCALLS = (444, 445, 446)   # create_ruleset, add_rule, restrict_self: one number on every arch
READ_FILE, READ_DIR = 1 << 2, 1 << 3
FS_RIGHTS = {1: 13, 2: 14, 3: 15, 4: 15}  # ABI -> how many filesystem rights it knows (16 from ABI 5)
PR_SET_NO_NEW_PRIVS = 38


def _syscall():
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    libc.syscall.restype = ctypes.c_long
    return ctypes, libc


def landlock_abi() -> int:
    """The kernel's Landlock ABI version; 0 where there is none (not Linux, older than 5.13, or off)."""
    if not sys.platform.startswith("linux"):
        return 0
    try:
        ctypes, libc = _syscall()
        abi = libc.syscall(LANDLOCK_SYSCALLS[0], None, ctypes.c_size_t(0), ctypes.c_uint32(1))
    except (ImportError, OSError, AttributeError):
        return 0
    return max(int(abi), 0)


def landlock(roots) -> int:
    """Confine this process for good: read only under ``roots``; every other filesystem right
    (write, create, remove, rename, truncate, device ioctl) refused everywhere; from ABI 4 no
    TCP bind or connect; from ABI 6 no signal to, and no abstract socket of, a process outside
    this one (ptrace is refused outside from ABI 1). Files already open stay usable (the
    channel, the capped output). Returns the ABI used, 0 where the kernel has no Landlock;
    OSError when it has one and refuses the rules (then nothing is graded unconfined)."""
    abi = landlock_abi()
    if abi == 0:
        return 0
    ctypes, libc = _syscall()
    create, add_rule, restrict = LANDLOCK_SYSCALLS
    handled = (1 << FS_RIGHTS.get(abi, 16)) - 1
    attr = struct.pack("=QQQ", handled, 0b11 if abi >= 4 else 0, 0b11 if abi >= 6 else 0)
    size = 8 if abi < 4 else 16 if abi < 6 else 24           # the struct as this ABI defines it
    ruleset = libc.syscall(create, ctypes.create_string_buffer(attr[:size], size), ctypes.c_size_t(size),
                           ctypes.c_uint32(0))
    if ruleset < 0:
        raise OSError(ctypes.get_errno(), "landlock_create_ruleset")
    try:
        for root in dict.fromkeys(os.path.realpath(r) for r in roots):
            if not os.path.exists(root):
                continue
            fd = os.open(root, os.O_PATH | os.O_CLOEXEC)
            try:
                rights = READ_FILE | (READ_DIR if os.path.isdir(root) else 0)
                rule = ctypes.create_string_buffer(struct.pack("=Qi", rights, fd), 12)   # packed
                if libc.syscall(add_rule, ctypes.c_int(ruleset), ctypes.c_int(1), rule, ctypes.c_uint32(0)):
                    raise OSError(ctypes.get_errno(), f"landlock_add_rule {root}")
            finally:
                os.close(fd)
        if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or \
                libc.syscall(restrict, ctypes.c_int(ruleset), ctypes.c_uint32(0)):
            raise OSError(ctypes.get_errno(), "landlock_restrict_self")
    finally:
        os.close(ruleset)
    return abi


# ------------------------------------------------------------------ no network, few syscalls
CLONE_NEWNET, CLONE_NEWUSER = 0x40000000, 0x10000000
PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 22, 2


def network_namespace(root: bool) -> bool:
    """A network namespace of this process's own (only a loopback, down): as root directly, else
    inside a new user namespace where the kernel permits one. While the process has one thread."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        ctypes, libc = _syscall()
        return libc.unshare(CLONE_NEWNET if root else CLONE_NEWUSER | CLONE_NEWNET) == 0
    except (ImportError, OSError, AttributeError):
        return False


def seccomp(program: bytes) -> bool:
    """Install the seccomp filter ``program`` (struct sock_filter bytes, homework/walls.py) for good;
    False where it cannot be (no program for this machine, or the kernel refuses it)."""
    if not program or not sys.platform.startswith("linux"):
        return False
    ctypes, libc = _syscall()

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    code = ctypes.create_string_buffer(program, len(program))
    fprog = SockFprog(len(program) // 8, ctypes.addressof(code))
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) or \
            libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(fprog), 0, 0):
        return False
    return True


INSTALLED = ("site-packages", "dist-packages")     # where pip installs: the grader itself may be there


def read_roots(student, numpy_dir, stdlib) -> list:
    """What the child may read: the student's copy, NumPy, and the standard library without the
    packages installed beside it (site-packages lies inside the standard library's folder in
    many installations, with this grader's own reference in it)."""
    roots = [student, numpy_dir]
    for path in stdlib:
        if os.path.isdir(path) and any(os.path.isdir(os.path.join(path, name)) for name in INSTALLED):
            roots += [os.path.join(path, entry) for entry in sorted(os.listdir(path)) if entry not in INSTALLED]
        else:
            roots.append(path)
    return roots


REFUSED = ("subprocess.", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "os.fork", "os.forkpty",
           "os.startfile", "os.kill", "os.killpg", "signal.pthread_kill", "socket.", "ctypes.",
           "resource.setrlimit", "resource.prlimit", "os.remove", "os.rename", "os.rmdir", "os.mkdir",
           "os.chmod", "os.chown", "os.symlink", "os.link", "os.truncate", "os.utime", "shutil.",
           "os.putenv", "os.unsetenv", "os.setxattr", "os.removexattr", "sys.addaudithook",
           "winreg.", "_winapi.", "mmap.", "pty.", "os.chroot", "os.mkfifo", "os.mknod")
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | getattr(os, "O_TRUNC", 0)


def install_hook(roots, search=(), refused=REFUSED + ("gc.get_",), write_flags=WRITE_FLAGS) -> None:
    """Refuse what a graded function has no need of; ``roots``: the folders it may read;
    ``search``: the folders imports may search besides (the standard library's, whose
    entries only are roots: read_roots).

    The rules live in the hook's closure, not in module globals the student's code can
    rebind, and the hook calls no method of a value the student made: a path, mode or
    flag must be exactly a str, bytes or int (a path object's __fspath__ or __repr__, or a
    str subclass's methods, would run the student's code inside the hook)."""
    roots = tuple(os.path.join(os.path.realpath(r), "") for r in roots)
    search = frozenset(os.path.realpath(p) for p in search)

    def readable(path) -> bool:
        if type(path) is int:
            return True
        if type(path) not in (str, bytes):
            return False
        full = os.path.join(os.path.realpath(os.fsdecode(path)), "")
        return full.startswith(roots)

    def searchable(path: str) -> bool:
        return readable(path or ".") or os.path.realpath(path) in search

    def named(path) -> str:
        return repr(path) if type(path) in (str, bytes, int) else f"a {type(path).__name__} path"

    def hook(event, args):
        if event.startswith(refused):
            raise PermissionError(f"the grader does not allow {event} in graded code")
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None))[:3]
            writes = (type(mode) is str and any(c in mode for c in "wax+")) or \
                (type(flags) is int and flags & write_flags)
            if writes and type(path) is not int:
                raise PermissionError("the grader does not allow writing files in graded code")
            if path is not None and not readable(path):
                raise PermissionError(f"the grader does not allow opening {named(path)} in graded code")
        elif event in ("os.listdir", "os.scandir") and args and args[0] is not None \
                and not readable(args[0] or "." if type(args[0]) in (str, bytes) else args[0]):
            raise PermissionError(f"the grader does not allow listing {named(args[0])} in graded code")
        elif event == "import":
            paths = args[2] if len(args) > 2 else None
            if paths is None:
                return
            bad = [p for p in paths if type(p) is not str or not searchable(p)] if type(paths) is list else [paths]
            if bad:
                raise ImportError(f"the grader does not allow imports from {named(bad[0])} in graded code")
    sys.addaudithook(hook)


# ------------------------------------------------------------------ a backward without its forward
BLOCKED = "ForwardCalledInBackward"      # the type name the parent sees (homework/evaluate.py flags it)
_INHERITED = object()                    # a method the class did not define itself: deleted again after
UNAVAILABLE = "_forward_unavailable"     # the stand-in's name: left out of where an exception was raised


def student_frames(tb) -> list:
    """The traceback's frames without the stand-in's own: the last is the student's line that called it."""
    import traceback
    return [f for f in traceback.extract_tb(tb) if f.name != UNAVAILABLE]


def bindings(package: str, old) -> list:
    """(module, name) of every name bound to ``old`` in the package's modules imported so far."""
    return [(other, key) for other in list(sys.modules.values())
            if getattr(other, "__name__", "").startswith(package + ".")
            for key, value in list(vars(other).items()) if value is old]


class ForwardCalledInBackward(RuntimeError):
    """A graded backward called its own forward: a backward derived by hand computes from its
    cache; one that reruns or differentiates the forward (central differences of it) is not."""


class blocked_forward:
    """``with blocked_forward(package, "functional.norm:layernorm_forward"):`` (or a Module's
    "layers.attention:MultiHeadAttention.forward"): for the duration, every name of the package
    bound to that forward raises ForwardCalledInBackward; put back after. Other functions, helpers
    the backward may call, stay as they are. A tripwire for the report, not a wall: code in the
    process could keep its own reference to the forward."""

    def __init__(self, package: str, target):
        self.package, self.target, self.undo = package, target, []

    def __enter__(self):
        if not self.target:
            return self
        import importlib
        module_name, qualname = self.target.split(":")
        module = importlib.import_module(f"{self.package}.{module_name}")
        name = qualname.split(".")[-1]
        message = (f"{name} was called by the backward: a backward computes its gradient from the cache "
                   f"(derived by hand), it does not rerun or differentiate {name}")

        def _forward_unavailable(*args, **kwargs):        # named UNAVAILABLE: left out of "where"
            raise ForwardCalledInBackward(message)
        if "." in qualname:                           # a Module's method: on its class
            cls = getattr(module, qualname.split(".")[0])
            self._rebind(cls, name, vars(cls).get(name, _INHERITED), _forward_unavailable)
            return self
        old = getattr(module, name)
        for other, key in bindings(self.package, old):
            self._rebind(other, key, old, _forward_unavailable)
        return self

    def _rebind(self, owner, key, old, new) -> None:
        setattr(owner, key, new)
        self.undo.append((owner, key, old))

    def __exit__(self, *exc):
        for owner, key, old in reversed(self.undo):
            if old is _INHERITED:
                delattr(owner, key)
            else:
                setattr(owner, key, old)
        self.undo = []
        return False


# ------------------------------------------------------------------ the server
ANSWERED = {"ValueError": ValueError, "TypeError": TypeError, "IndexError": IndexError, "KeyError": KeyError,
            "PermissionError": PermissionError, "RuntimeError": RuntimeError}   # raised here as they were there


class Server:
    def __init__(self, package: str, rfd: int, wfd: int):
        self.package, self.objects, self.next_id = package, {}, 1
        self.rfd, self.wfd, self.asked = rfd, wfd, 0
        self.echoed = []                 # the arguments of the last two echoed calls, as they are now

    def keep(self, obj) -> Handle:
        handle = Handle(self.next_id, type(obj).__name__)
        self.objects[handle.id] = obj
        self.next_id += 1
        if len(self.objects) > KEPT:
            self.objects.pop(next(iter(self.objects)))
        return handle

    def lookup(self, id, type_name=""):
        if type_name == LENT:                # a function of the grader's, for this call: asked about
            return self._needed(id, id.split(":")[1] if id.count(":") == 2 else "f", owner=False)
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

    def op_call(self, target, args=(), kwargs=None, echo=False, blocked=None):
        return self._echo(self.resolve(target), args, kwargs, echo, blocked)

    # a Handle in a request arrives here as its object
    def op_method(self, handle, name, args=(), kwargs=None, echo=False, blocked=None):
        return self._echo(getattr(handle, name), args, kwargs, echo, blocked)

    def _echo(self, fn, args, kwargs, echo, blocked=None):
        """fn's value; with ``echo``, also the arguments as they are after the call (the parent
        compares them with what it sent: an argument changed in place); ``blocked``: a forward
        that raises while fn runs (a graded backward's own)."""
        kwargs = kwargs or {}
        if blocked is not None and not isinstance(blocked, str):
            raise TypeError("blocked: expected a target name")
        with blocked_forward(self.package, blocked):
            value = fn(*args, **kwargs)
        if not echo:
            return value
        self.echoed = (self.echoed + [(args, kwargs)])[-2:]
        return {"value": value, "args": list(args), "kwargs": kwargs}

    def op_again(self):
        """The arguments of the echoed call before the last one, as they are now: a forward's
        inputs after its backward (which holds them through the cache)."""
        if len(self.echoed) < 2:
            raise ValueError("again: no earlier echoed call")
        args, kwargs = self.echoed[0]
        return {"value": None, "args": list(args), "kwargs": kwargs}

    def op_params(self, handle):
        return {name: p for name, p, _ in handle.parameters()}

    def op_grads(self, handle):
        return {name: grad for name, _, grad in handle.parameters()}

    def op_set_params(self, handle, params):
        for name, p, _ in handle.parameters():
            p[...] = params[name]

    def op_need(self, targets):
        """Turn each ``[module, qualname]`` (a function, or a Class.method) of the copy into a question
        to the parent (``ask``); every name bound to the old function is rebound."""
        import importlib
        for module_name, qualname in targets:
            module = importlib.import_module(f"{self.package}.{module_name}")
            spec = f"{module_name}:{qualname}"
            if "." in qualname:
                cls, method = qualname.split(".")
                setattr(getattr(module, cls), method, self._needed(spec, method, owner=True))
                continue
            new = self._needed(spec, qualname, owner=False)
            for other, key in bindings(self.package, getattr(module, qualname)):
                setattr(other, key, new)

    def _needed(self, spec, name, owner: bool):
        if owner:
            def needed(this, *args, **kwargs):
                return self.ask(spec, args, kwargs, this)
        else:
            def needed(*args, **kwargs):
                return self.ask(spec, args, kwargs)
        needed.__name__ = needed.__qualname__ = name
        return needed

    def ask(self, spec, args, kwargs, owner=None):
        """The parent's answer to a call of ``spec`` (a needed function), the arguments sent whole:
        the value; generators and the owner (a Module answering for its method) brought to their
        state after the call. An answer refused or failed raises here, in the student's call."""
        self.asked += 1
        whole, blobs = Whole(self.package), []
        tree = whole.encode({"args": list(args), "kwargs": dict(kwargs), "owner": owner}, blobs)
        write_frame(self.wfd, {"id": f"need-{self.asked}", "need": spec, "params": tree}, blobs)
        header, blobs = read_frame(self.rfd)
        if header.get("id") != f"need-{self.asked}":
            raise RuntimeError("the grader's answer to a needed call came out of turn")
        if "error" in header:
            error = header["error"]
            raise (RuntimeError if error.get("type") not in ANSWERED else ANSWERED[error["type"]])(
                f"{spec.split(':')[1]} (answered by the grader, not your code): {error.get('message', '')}")
        answer = Whole(self.package).decode(header["value"], blobs)
        for generator, state in zip(whole.generators, answer["generators"]):
            generator.bit_generator.state = state
        if owner is not None:
            apply_state(owner, answer["owner"])
        return answer["value"]

    def serve(self) -> None:
        while True:
            try:
                header, blobs = read_frame(self.rfd)
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
            write_frame(self.wfd, reply, out)


def describe(e: BaseException) -> dict:
    """The exception as the parent reads it: type, message, the place (the deepest frame outside
    NumPy: the student's line that called it, or the package's check it called) and the shapes of
    that frame's arrays, a cache's fields too ("cache.W"), so a shape error can be told in the
    docstring's symbols; the same for the deepest eight such frames (the parent finds the
    student's own line among them)."""
    tb, frames = e.__traceback__, []
    while tb is not None:
        code = tb.tb_frame.f_code
        if "numpy" not in code.co_filename.replace("\\", "/").split("/") and code.co_name != UNAVAILABLE:
            frames.append((tb.tb_frame, tb.tb_lineno))
        tb = tb.tb_next
    if not frames:
        return {"type": type(e).__name__[:80], "message": str(e)[:500], "where": ""}
    places = [(f"{f.f_code.co_filename}:{line} in {f.f_code.co_name}"[:300], _shapes(f.f_locals))
              for f, line in frames[-8:]]                # the deepest eight: the student's line among them
    return {"type": type(e).__name__[:80], "message": str(e)[:500], "where": places[-1][0],
            "shapes": places[-1][1], "frames": [[w, s] for w, s in places]}


def _shapes(names: dict, at_most: int = 32) -> dict:
    """{name: shape} of the arrays among ``names`` and one level into a NamedTuple or an object's
    attributes ("cache.W"); at most ``at_most``, shapes only."""
    import numpy
    found: dict = {}
    for name, value in list(names.items())[:64]:
        if isinstance(value, numpy.ndarray):
            found[name] = list(value.shape)
        elif isinstance(value, tuple) and hasattr(value, "_fields"):
            for field, item in zip(value._fields, value):
                if isinstance(item, numpy.ndarray):
                    found[f"{name}.{field}"] = list(item.shape)
        if len(found) >= at_most:
            break
    return {k[:60]: v[:8] for k, v in list(found.items())[:at_most]}


def main(config: dict) -> None:
    rfd, wfd = os.dup(config["fds"][0]), os.dup(config["fds"][1])
    for fd in set(config["fds"]) - {0, 1, 2}:
        os.close(fd)
    os.dup2(os.open(os.devnull, os.O_RDONLY), 0)        # fds 0 and 1 may have been the channel (Windows)
    os.dup2(2, 1)                                       # the capped output file, as fd 2
    sys.stdin = open(os.devnull)
    sys.stdout = sys.stderr = _CappedText(2, config["output_cap"])
    walls = {"netns": network_namespace(root=config.get("uid") is not None)}   # while one thread runs
    sys.path = [p for p in sys.path if p] + [config["numpy_site"]]
    import numpy                                        # noqa: F401  (while it is readable)
    for name in config["preload"]:
        try:
            __import__(name)
        except BaseException:
            pass
    sys.path = [config["student"]] + [p for p in sys.path if p and p != config["numpy_site"]]
    walls["nofile"] = _limits(config)
    roots = read_roots(config["student"], os.path.dirname(numpy.__file__), sys.path[1:])
    try:
        walls["landlock"] = landlock(roots)             # before the drop: root can still open every root
    except OSError:
        walls["landlock"] = 0
    _drop(config)
    walls["user"] = "nobody" if config.get("uid") is not None else "the grader's own user"
    walls["seccomp"] = seccomp(bytes.fromhex(config.get("seccomp") or ""))
    install_hook(roots, search=sys.path[1:])
    write_frame(wfd, {"id": "ready", "value": os.getpid(), "walls": walls}, [])
    Server(config["package"], rfd, wfd).serve()


if __name__ == "__main__":
    main(json.loads(sys.argv[1]))
