"""Run an elementwise kernel block by block over the rows of large arrays.

    in_row_blocks(kernel, x, y, dydx)      # kernel(x_block, y_block, dydx_block) for every block

Why. A NumPy expression such as GELU's is a dozen passes (``x * x``, ``+=``, ``tanh``...),
each reading and writing the whole array. For the (B, T, 4C) activations and the
(B, H, T, S) attention scores of a training step those arrays are tens of megabytes:
every pass goes out to main memory. Running the same kernel on blocks of a few
hundred kilobytes keeps a block in the core's L2 cache for all the passes (one trip
to memory instead of a dozen). The kernel is the plain array code: it does not know
it runs on a block. The tanh GELU gains most (a dozen passes), softmax a little,
and LayerNorm was slower in blocks, so it does not use them (timings:
benchmarks/RESULTS.md, "Kernel timings").

Why not threads. NumPy releases the GIL in its loops, so the blocks could go to one
thread per core; inside training steps it was no faster and sometimes slower:
OpenBLAS's worker thread keeps spinning on the second core for a while after each
matrix product, exactly when the elementwise kernels run. A kernel alone runs faster
on two threads; the training step does not (benchmarks/RESULTS.md).

Rules for a kernel: it reduces over the last axis only, so that it gives the same
result on the whole arrays as on any block of their rows (a row: the last axis;
the rows: everything before it, flattened); row i of an output depends only on row
i of the inputs; outputs are written in place (``out=``, ``[...] =``). When an
array's rows are not a view of it (a non-contiguous input), the kernel runs once
on the whole arrays (writing into a copy would lose an output). Small arrays, and
arrays of any other module than NumPy (CuPy runs the whole array as one kernel
launch on the GPU already), go to the kernel in one call, unblocked: the result is
the same either way, to the last bit (the kernels only do elementwise work and row
reductions, which do not depend on how the rows are grouped).
"""
from __future__ import annotations

import numpy

BLOCK_BYTES = 256 * 1024      # one block of one array: comfortably inside a 1-2 MiB L2 cache
MIN_BYTES = 1024 * 1024       # below this, one call: blocking would cost more than it saves


def in_row_blocks(kernel, *arrays):
    """Call ``kernel(*blocks)`` on consecutive blocks of rows of ``arrays``; returns None.

    ``arrays``: arrays of shapes (..., n_i) with the same leading shape (...): their
    rows are the last axis, the R = prod(...) rows are cut into blocks.
    """
    if not isinstance(arrays[0], numpy.ndarray) or max(a.nbytes for a in arrays) < MIN_BYTES:
        kernel(*arrays)
        return
    views = [a.reshape(-1, a.shape[-1]) for a in arrays]  # (R, n_i): views of contiguous arrays
    if not all(numpy.may_share_memory(v, a) for v, a in zip(views, arrays)):
        kernel(*arrays)                                    # a reshape copied: blocks would write a copy
        return
    R = views[0].shape[0]
    rows = max(1, int(R * BLOCK_BYTES // max(v.nbytes for v in views)))  # rows per block, by the widest
    for start in range(0, R, rows):
        kernel(*(v[start:start + rows] for v in views))
