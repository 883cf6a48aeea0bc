"""Opt-in process settings that make NumPy training faster on Linux; nothing here runs on import.

``tune_malloc()``: keep freed memory for reuse instead of returning it to the kernel.
``blas_threads(n)``: run OpenBLAS's matrix products on n threads inside a ``with`` block
(data_parallel.py runs one model replica per core, each with one BLAS thread).

Why. A training step allocates and frees dozens of arrays of megabytes (the scores,
the FFN activations, their gradients). glibc serves every block above
``M_MMAP_THRESHOLD`` (128 KiB at start, adapting upwards to at most 32 MiB) with a
fresh ``mmap`` and unmaps it on ``free``, and it trims the top of the heap back to
the kernel past ``M_TRIM_THRESHOLD``. Either way the next array of that size arrives
as untouched pages, and the first write to each 4 KiB page is a page fault in which
the kernel zeroes it: a hidden extra pass over every new array. Raising both
thresholds keeps the freed blocks in the heap, so the next step reuses warm,
already-mapped memory.

The cost: the process keeps its peak heap mapped (its resident size stays near the
peak of one step instead of falling back between steps). Reversible with
``tune_malloc(restore=True)`` (glibc's defaults). Does nothing, and returns False,
where glibc's ``mallopt`` is not available (macOS, Windows, musl).
"""
from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import functools
import os

from ..validate import check_int

_M_TRIM_THRESHOLD = -1      # mallopt parameter numbers, from glibc's malloc.h
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 * 2**20     # glibc's upper limit on 64-bit systems (4 MiB · sizeof(long))
_DEFAULTS = {_M_TRIM_THRESHOLD: 128 * 2**10, _M_MMAP_THRESHOLD: 128 * 2**10}


def tune_malloc(restore: bool = False) -> bool:
    """Serve allocations up to 32 MiB from the heap and never trim it; True if glibc took it.

    ``restore=True`` sets glibc's defaults back (128 KiB for both thresholds; note that
    an explicit setting, default or not, turns off glibc's adaptive mmap threshold).
    """
    libc = _glibc()
    if libc is None:
        return False
    if restore:
        settings = _DEFAULTS
    else:
        settings = {_M_MMAP_THRESHOLD: _MMAP_THRESHOLD_MAX, _M_TRIM_THRESHOLD: 2**31 - 1}
    return all(libc.mallopt(param, value) == 1 for param, value in settings.items())


def release_free_heap() -> bool:
    """Give the free memory inside glibc's heap back to the system (``malloc_trim(0)``, which
    ``tune_malloc`` otherwise stops); True if some was given back. A forked data-parallel worker calls
    it first: the free pages it inherited would otherwise be copied when either process
    writes them (workers.py)."""
    libc = _glibc()
    return libc is not None and libc.malloc_trim(0) == 1


def _glibc():
    """glibc's libc through ctypes, or None elsewhere."""
    name = ctypes.util.find_library("c")
    if name is None:
        return None
    try:
        libc = ctypes.CDLL(name)
        libc.gnu_get_libc_version          # only glibc has it
        libc.mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
        libc.mallopt.restype = ctypes.c_int
        libc.malloc_trim.argtypes, libc.malloc_trim.restype = (ctypes.c_size_t,), ctypes.c_int
    except (OSError, AttributeError):
        return None
    return libc


# OpenBLAS's thread-count functions under the names its builds export: NumPy's wheels
# (scipy-openblas, 64-bit integers), a 64-bit-integer OpenBLAS, a plain OpenBLAS.
_BLAS_SYMBOLS = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                 ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                 ("openblas_get_num_threads", "openblas_set_num_threads"))


@contextlib.contextmanager
def blas_threads(n: int):
    """Inside the block, OpenBLAS runs each matrix product on ``n`` threads; after it, as before.

    The setting is process-wide (OpenBLAS has no per-thread count: its
    ``openblas_set_num_threads_local`` changed the global count too, when tried), so
    the block must not overlap with code that wants the old count.
    Raises RuntimeError where NumPy's BLAS is not an OpenBLAS this module can reach
    (``blas_thread_control()`` is None): check that first.
    """
    n = check_int("n", n, low=1)
    control = blas_thread_control()
    if control is None:
        raise RuntimeError("blas_threads: NumPy's BLAS is not an OpenBLAS whose thread count can be set "
                           "(check blas_thread_control() first)")
    get, set_ = control
    before = get()
    set_(n)
    try:
        yield
    finally:
        set_(before)


@functools.lru_cache(maxsize=1)
def blas_thread_control():
    """(get, set) of the thread count of the OpenBLAS that NumPy loaded, or None (another
    BLAS, or no way to find it: the loaded libraries are read from /proc/self/maps, Linux only).
    Looked up once: the process keeps the library it loaded."""
    import numpy  # noqa: F401  (loads NumPy's BLAS, if nothing has yet)
    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.rsplit("/", 1)[-1].lower()}
    except OSError:
        return None
    for path in sorted(p for p in paths if os.path.isfile(p)):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for get_name, set_name in _BLAS_SYMBOLS:
            get, set_ = getattr(lib, get_name, None), getattr(lib, set_name, None)
            if get is not None and set_ is not None:
                get.restype, get.argtypes = ctypes.c_int, ()
                set_.restype, set_.argtypes = None, (ctypes.c_int,)
                return get, set_
    return None
