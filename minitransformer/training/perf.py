"""Opt-in process settings that make NumPy training faster on Linux; nothing here runs on import.

``tune_malloc()``: keep freed memory for reuse instead of returning it to the kernel.

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

import ctypes
import ctypes.util

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
    except (OSError, AttributeError):
        return None
    return libc
