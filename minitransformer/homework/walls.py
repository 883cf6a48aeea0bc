"""The kernel's walls around the student's process, and whether this machine can raise them.

The grader's child (homework/child.py) runs the student's code behind walls the
kernel enforces, so that nothing inside the process (NumPy's raw memory access
included) can reach past them:

    files       Landlock: read only under the staged copy, NumPy and the standard
                library; create, write, remove nothing (child.landlock)
    syscalls    seccomp-bpf: an allow-list of what a Python process doing NumPy needs;
                refused with EPERM: every socket call (no network at all: no TCP, no UDP,
                no Unix socket of the instructor's), memfd_create, fallocate, ptrace,
                process_vm_*, new processes and threads, execve, unshare/setns/mount,
                io_uring, signals to other processes, a pipe resized (F_SETPIPE_SZ),
                files opened for writing; any other architecture than the one the filter
                was built for: the process is killed (this module builds the program)
    network     besides, a network namespace of its own (unshare; with a user namespace
                where the grader is not root), where the kernel permits it
    limits      address space, CPU time, file size, no core file, a few dozen open files,
                no new process (rlimits); the user ``nobody`` when the grader is root

The filter is a classic BPF program built here with the standard library, installed by
the child with prctl(PR_SET_SECCOMP) after no_new_privs (bubblewrap, nsjail or
libseccomp would be a dependency; the grader needs none beyond NumPy). It knows the
syscall numbers of x86_64 and aarch64; on any other architecture no filter is built
and the wall is missing.

``missing()`` names the walls this machine cannot raise; the instructor's commands
refuse to grade without them unless told ``--unconfined`` (fail closed), and every
result then says so. A student's own local check runs with what there is, and a note.
"""
from __future__ import annotations

import errno
import platform
import struct
import sys

# ------------------------------------------------------------------ syscall numbers
# name -> (x86_64, aarch64); None where the architecture has no such call (aarch64 has only the *at forms)
SYSCALLS = {
    "read": (0, 63), "write": (1, 64), "readv": (19, 65), "writev": (20, 66), "pread64": (17, 67),
    "pwrite64": (18, 68), "close": (3, 57), "lseek": (8, 62), "fstat": (5, 80), "newfstatat": (262, 79),
    "statx": (332, 291), "readlinkat": (267, 78), "faccessat": (269, 48), "faccessat2": (439, 439),
    "getdents64": (217, 61), "getcwd": (79, 17), "dup": (32, 23), "dup3": (292, 24), "mmap": (9, 222),
    "munmap": (11, 215), "mprotect": (10, 226), "mremap": (25, 216), "brk": (12, 214), "madvise": (28, 233),
    "mincore": (27, 232), "msync": (26, 227), "rt_sigaction": (13, 134), "rt_sigprocmask": (14, 135),
    "rt_sigreturn": (15, 139), "sigaltstack": (131, 132), "restart_syscall": (219, 128), "futex": (202, 98),
    "set_robust_list": (273, 99), "get_robust_list": (274, 100), "rseq": (334, 293),
    "set_tid_address": (218, 96), "getpid": (39, 172), "gettid": (186, 178), "getppid": (110, 173),
    "getuid": (102, 174), "geteuid": (107, 175), "getgid": (104, 176), "getegid": (108, 177),
    "getresuid": (118, 148), "getresgid": (120, 150), "getgroups": (115, 158), "getpgid": (121, 155),
    "getsid": (124, 156), "clock_gettime": (228, 113), "clock_getres": (229, 114),
    "clock_nanosleep": (230, 115), "nanosleep": (35, 101), "gettimeofday": (96, 169), "times": (100, 153),
    "getrusage": (98, 165), "sysinfo": (99, 179), "uname": (63, 160), "getrandom": (318, 278),
    "getcpu": (309, 168), "sched_yield": (24, 124), "sched_getaffinity": (204, 123), "exit": (60, 93),
    "exit_group": (231, 94), "ppoll": (271, 73), "pselect6": (270, 72), "close_range": (436, 436),
    "getrlimit": (97, 163), "stat": (4, None), "lstat": (6, None), "access": (21, None), "poll": (7, None),
    "select": (23, None), "dup2": (33, None), "readlink": (89, None), "time": (201, None),
    "arch_prctl": (158, None), "getpgrp": (111, None),
    # allowed with their arguments checked (below)
    "openat": (257, 56), "open": (2, None), "fcntl": (72, 25), "ioctl": (16, 29), "prlimit64": (302, 261),
    # never allowed: named for the tests and the probe
    "seccomp": (317, 277), "socket": (41, 198), "memfd_create": (319, 279), "fallocate": (285, 47),
}
ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}   # machine -> (column, AUDIT_ARCH_*)
X32_BIT = 0x40000000                                               # x86_64's x32 ABI: refused whole
ALLOWED = tuple(n for n in SYSCALLS if n not in ("openat", "open", "fcntl", "ioctl", "prlimit64", "seccomp",
                                                 "socket", "memfd_create", "fallocate"))

O_WRITE = 0o1 | 0o2 | 0o100 | 0o1000 | 0o2000 | 0o20000000   # O_WRONLY|O_RDWR|O_CREAT|O_TRUNC|O_APPEND|__O_TMPFILE
IOCTLS = (0x5401, 0x541B, 0x5450, 0x5451)    # TCGETS (isatty), FIONREAD, FIONCLEX, FIOCLEX
FCNTLS = (0, 1, 2, 3, 4, 1030)               # F_DUPFD, F_GETFD, F_SETFD, F_GETFL, F_SETFL, F_DUPFD_CLOEXEC

# ------------------------------------------------------------------ classic BPF
LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
KILL_PROCESS, ALLOW = 0x80000000, 0x7FFF0000
NR, ARCH = 0, 4                                  # offsets in struct seccomp_data


def _errno(code: int) -> int:
    return 0x00050000 | code                     # SECCOMP_RET_ERRNO


def _arg(i: int, high: bool = False) -> int:
    return 16 + 8 * i + (4 if high else 0)      # args[i], little-endian halves


def _op(code, k, jt=0, jf=0) -> tuple:
    return (code, jt, jf, k)


def _allow_if_in(values, refused: int) -> list:
    """A (the loaded argument) in ``values``: allow; else refuse with errno ``refused``."""
    n = len(values)
    ops = [_op(JEQ, v, jt=n - i, jf=0) for i, v in enumerate(values)]   # jt lands on the ALLOW
    return ops + [_op(RET, _errno(refused)), _op(RET, ALLOW)]


def _checked(nr: int, body: list) -> list:
    """``body`` (it always returns) for syscall ``nr``; skipped for any other."""
    return [_op(JEQ, nr, jt=0, jf=len(body))] + body


def _argument_rules(column: int) -> list:
    rules = []
    for name, index in (("openat", 2), ("open", 1)):               # no file opened to write, create, truncate
        nr = SYSCALLS[name][column]
        if nr is not None:
            rules += _checked(nr, [_op(LD_W_ABS, _arg(index)), _op(JSET, O_WRITE, jt=0, jf=1),
                                   _op(RET, _errno(errno.EACCES)), _op(RET, ALLOW)])
    rules += _checked(SYSCALLS["ioctl"][column], [_op(LD_W_ABS, _arg(1))] + _allow_if_in(IOCTLS, errno.ENOTTY))
    rules += _checked(SYSCALLS["fcntl"][column], [_op(LD_W_ABS, _arg(1))] + _allow_if_in(FCNTLS, errno.EPERM))
    rules += _checked(SYSCALLS["prlimit64"][column],                # read a limit, never set one
                      [_op(LD_W_ABS, _arg(2)), _op(JEQ, 0, jt=0, jf=3), _op(LD_W_ABS, _arg(2, high=True)),
                       _op(JEQ, 0, jt=0, jf=1), _op(RET, ALLOW), _op(RET, _errno(errno.EPERM))])
    return rules


def program(machine: str | None = None) -> bytes:
    """The seccomp filter for ``machine`` (default: this one) as struct sock_filter bytes;
    ValueError for an architecture whose syscall numbers are not known here."""
    machine = machine or platform.machine()
    if machine not in ARCHES:
        raise ValueError(f"no seccomp filter for the architecture {machine!r} (known: {', '.join(ARCHES)})")
    column, audit_arch = ARCHES[machine]
    ops = [_op(LD_W_ABS, ARCH), _op(JEQ, audit_arch, jt=1, jf=0), _op(RET, KILL_PROCESS), _op(LD_W_ABS, NR)]
    if machine == "x86_64":
        ops += [_op(JGE, X32_BIT, jt=0, jf=1), _op(RET, _errno(errno.EPERM))]
    ops += _argument_rules(column)
    for name in ALLOWED:
        nr = SYSCALLS[name][column]
        if nr is not None:
            ops += [_op(JEQ, nr, jt=0, jf=1), _op(RET, ALLOW)]
    ops.append(_op(RET, _errno(errno.EPERM)))
    return b"".join(struct.pack("=HBBI", *op) for op in ops)


# ------------------------------------------------------------------ what this machine has
SECCOMP_GET_ACTION_AVAIL = 2


def seccomp_available() -> bool:
    """Whether this kernel takes a seccomp filter that returns errors (Linux 4.14+, CONFIG_SECCOMP_FILTER)
    on an architecture the filter knows."""
    machine = platform.machine()
    if not sys.platform.startswith("linux") or machine not in ARCHES:
        return False
    try:
        from .child import _syscall
        ctypes, libc = _syscall()
        action = ctypes.c_uint32(_errno(errno.EPERM) & 0xFFFF0000)
        return libc.syscall(SYSCALLS["seccomp"][ARCHES[machine][0]], SECCOMP_GET_ACTION_AVAIL, 0,
                            ctypes.byref(action)) == 0
    except (OSError, AttributeError):
        return False


def missing() -> list:
    """The walls this machine cannot raise around the student's process, in words; [] when it has
    them all (Linux, Landlock, seccomp on a known architecture)."""
    if not sys.platform.startswith("linux"):
        return [f"Linux's Landlock and seccomp (this is {platform.system() or sys.platform})"]
    from .child import landlock_abi
    found = []
    if landlock_abi() == 0:
        found.append("Landlock (Linux 5.13 or later, with the landlock LSM on)")
    if platform.machine() not in ARCHES:
        found.append(f"a seccomp filter for {platform.machine()!r} (known: {', '.join(ARCHES)})")
    elif not seccomp_available():
        found.append("seccomp filters (CONFIG_SECCOMP_FILTER)")
    return found


def required(report: dict) -> list:
    """The walls the child says it could not raise (its ready report), in words."""
    found = []
    if not report.get("landlock"):
        found.append("Landlock")
    if not report.get("seccomp"):
        found.append("seccomp")
    if not report.get("nofile"):
        found.append("the open-file limit")
    return found


def description(report: dict) -> str:
    """One line: the walls the child stands behind (for the report of an unconfined run too)."""
    parts = [f"Landlock ABI {report['landlock']}" if report.get("landlock") else "no Landlock",
             "seccomp allow-list" if report.get("seccomp") else "no seccomp",
             "own network namespace" if report.get("netns") else "no network namespace",
             f"{report.get('nofile') or '?'} open files", report.get("user") or "the grader's user"]
    return ", ".join(parts)
