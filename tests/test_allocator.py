"""retain_freed_memory: large blocks come from glibc's heap and stay there once freed."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

#: Allocates and frees a 64 MB block, then prints where it was (``mmap`` or the heap) and whether
#: the heap kept it; ``retain`` as the argument calls ``retain_freed_memory`` first.
PROBE = """
import ctypes, sys
from wikitext_toolkit_core.allocator import retain_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in (
        "arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks",
        "fordblks", "keepcost")]

libc = ctypes.CDLL("libc.so.6")
if not hasattr(libc, "mallinfo2"):
    print("no mallinfo2")
    sys.exit()
libc.mallinfo2.restype = MallInfo2
if sys.argv[1] == "retain":
    assert retain_freed_memory()
size = 64 << 20
block = bytearray(size)
mapped = libc.mallinfo2().hblkhd >= size
del block
print("mapped" if mapped else "heap", "kept" if libc.mallinfo2().arena >= size else "returned")
"""


def probe(mode: str) -> str:
    result = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True)
    if result.stdout.strip() == "no mallinfo2":
        pytest.skip("glibc older than 2.33 has no mallinfo2")
    return result.stdout.strip()


def test_glibc_maps_a_large_block_by_default():
    assert probe("default") == "mapped returned"


def test_retained_memory_serves_large_blocks_from_the_heap_and_keeps_them():
    assert probe("retain") == "heap kept"
