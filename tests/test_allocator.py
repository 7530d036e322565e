"""retain_freed_memory: large blocks come from glibc's heap and stay there once freed."""

from __future__ import annotations

import platform
import subprocess
import sys

import pytest

import baselines.cli
import harness.runner
from baselines.cli import main as baselines_main
from harness.cli import main as harness_main

glibc_only = pytest.mark.skipif(platform.libc_ver()[0] != "glibc", reason="glibc's malloc only")

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


@glibc_only
def test_glibc_maps_a_large_block_by_default():
    assert probe("default") == "mapped returned"


@glibc_only
def test_retained_memory_serves_large_blocks_from_the_heap_and_keeps_them():
    assert probe("retain") == "heap kept"


@pytest.fixture
def retained(monkeypatch) -> list[str]:
    """The commands' calls of ``retain_freed_memory`` (recorded, not made: the test process's
    allocator is left as it is)."""
    calls: list[str] = []
    for module in (harness.runner, baselines.cli):
        monkeypatch.setattr(module, "retain_freed_memory", lambda name=module.__name__: calls.append(name))
    return calls


def test_harness_eval_keeps_freed_memory_for_a_model_on_a_cpu(corpus, retained):
    command = ["eval", "harness.plugins.unigram", "--dataset", str(corpus), "--device", "cpu"]
    assert harness_main(command) == 0
    assert retained == ["harness.runner"]


def test_baselines_commands_keep_freed_memory_on_a_cpu(corpus, tmp_path, retained):
    toy = ["--preset", "tiny", "--model-args", "embedding_size=8,hidden_size=8", "--batch-size", "2"]
    command = ["train", "zoneout_lstm", "--dataset", str(corpus), *toy, "--bptt", "3", "--device", "cpu"]
    assert baselines_main([*command, "--output-dir", str(tmp_path / "run"), "--max-steps", "1"]) == 0
    assert retained == ["baselines.cli"]
