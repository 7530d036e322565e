"""Keep freed memory in the process, so that a training step does not fault in its tensors anew.

glibc's ``malloc`` serves every block above its mmap threshold (32 MB at most) from a fresh
``mmap`` and returns it to the kernel when it is freed. A training step of the WikiText-2 medium
models allocates and frees the same large tensors every time (the ``[3200, 33278]`` logits alone
are 213 MB in bfloat16), so the kernel zeroes every one of their pages again in a page fault:
12% of the CPU time of the training runs was system time. :func:`retain_freed_memory` has glibc
serve all blocks from its heap and keep what is freed there: the next step reuses the same
pages. A process then holds on to its peak memory until it exits.

Evaluation allocates and frees large tensors at every chunk too (the WikiText-2 medium models'
``[100, 33278]`` logits and log-probabilities): without it, an audited evaluation of the
WikiText-2 pointer took 2.6 million page faults per 20,000 tokens and 7-16% longer.

``baselines`` commands call it on a CPU, and ``python -m harness eval`` for a plugin on a CPU;
``python benchmarks/baselines_speed.py --allocator`` times a training step with and without it
(docs/measurements.md). Standard library only (``ctypes``); where the C library is not glibc it
changes nothing.
"""

from __future__ import annotations

import ctypes
import platform

#: ``mallopt`` parameters, from glibc's ``<malloc.h>``.
M_TRIM_THRESHOLD = -1
M_MMAP_MAX = -4
#: The largest trim threshold ``mallopt`` takes (an ``int``): free memory at the top of the heap
#: is returned to the kernel only beyond 2 GiB.
LARGEST_TRIM_THRESHOLD = 2**31 - 1


def retain_freed_memory() -> bool:
    """Have glibc's ``malloc`` serve every block from its heap (no ``mmap``) and keep up to 2 GiB
    of freed memory at the heap's top; returns whether it took effect (``False`` where the C
    library is not glibc). Process-wide and for the rest of the process."""
    if platform.libc_ver()[0] != "glibc":
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_MMAP_MAX, 0)) and bool(libc.mallopt(M_TRIM_THRESHOLD, LARGEST_TRIM_THRESHOLD))
