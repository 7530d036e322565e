"""How many CPU threads a model may use: ``--threads N|auto`` of every command that runs one.

torch starts a thread per core and has them wait for each other at every operation: when another
process keeps one of those cores busy, every operation waits for the thread that shares it, and
a command that takes 66 s on quiet cores took 610 s beside one busy process on a 2-core machine,
against 159 s with one thread (issue 45, item 4; ``benchmarks/threads_under_load.py``).

``auto`` (the default) therefore looks at the CPUs this process may run on, samples
``/proc/stat`` for :data:`SAMPLE_SECONDS` and leaves out the CPUs that other processes keep busy
(this process's own work, from ``/proc/self/stat``, is not theirs). On quiet cores it changes
nothing: torch keeps its own choice. :func:`busy_cpus` is a pure function of two
:class:`CpuReading`, so the rule can be tested on made-up readings.

Standard library only, and torch is never imported here (the builder imports ``wikitext_toolkit_core``): the
commands hand their torch module to :func:`set_torch_threads`.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from wikitext_toolkit_core.cli import thread_count

logger = logging.getLogger(__name__)

#: ``--threads auto``: torch's own choice, but no more threads than CPUs no other process keeps busy.
AUTO: Literal["auto"] = "auto"
#: How long ``auto`` watches the CPUs: 20 clock ticks of each at the usual 100 a second.
SAMPLE_SECONDS = 0.2
#: The columns of a ``/proc/stat`` CPU line counted: user, nice, system, idle, iowait, irq,
#: softirq, steal (the guest columns after them are already in user and nice).
TICK_COLUMNS = 8
#: Those of them that count as idle: idle and iowait.
IDLE_COLUMNS = (3, 4)
#: The aggregate line's key in :attr:`CpuReading.cpus`.
ALL_CPUS = "cpu"

#: The value of ``--threads``: a thread count or :data:`AUTO`.
ThreadRequest = int | Literal["auto"]
#: ``--threads``' help, the same in every command.
THREADS_HELP = (
    "torch CPU threads: N, or auto, torch's own choice less the CPUs that other processes keep "
    "busy (default auto)"
)


def thread_request(text: str) -> ThreadRequest:
    """``--threads``: ``auto``, or a thread count as :func:`wikitext_toolkit_core.cli.thread_count`
    accepts it."""
    if text == AUTO:
        return AUTO
    if not text.strip().lstrip("+-").isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is neither a number of threads nor auto")
    return thread_count(text)


@dataclass(frozen=True)
class CpuTicks:
    """One CPU's clock ticks since boot: those it spent working and those in all."""

    busy: int
    total: int


@dataclass(frozen=True)
class CpuReading:
    """One look at the counters: ``cpus`` maps ``"cpu"`` (all CPUs together) and ``"cpu0"``,
    ``"cpu1"``, ... to their :class:`CpuTicks`; ``own`` is the ticks this process has run."""

    cpus: Mapping[str, CpuTicks]
    own: int


def parse_proc_stat(text: str) -> dict[str, CpuTicks]:
    """The CPU lines of a ``/proc/stat``: ``{"cpu": ..., "cpu0": ..., ...}``."""
    cpus = {}
    for line in text.splitlines():
        name, *columns = line.split() or [""]
        if not name.startswith(ALL_CPUS):
            continue
        ticks = [int(column) for column in columns[:TICK_COLUMNS]]
        idle = sum(ticks[column] for column in IDLE_COLUMNS if column < len(ticks))
        cpus[name] = CpuTicks(busy=sum(ticks) - idle, total=sum(ticks))
    return cpus


def parse_own_ticks(text: str) -> int:
    """The user and system ticks of a ``/proc/PID/stat`` (its name, in brackets, may hold spaces)."""
    fields = text.rpartition(")")[2].split()
    return int(fields[11]) + int(fields[12])  # utime and stime, fields 14 and 15 of the line


def read_cpu_counters(proc: Path = Path("/proc")) -> CpuReading:
    """The counters now (``OSError`` or ``ValueError`` where ``/proc`` cannot be read)."""
    cpus = parse_proc_stat((proc / "stat").read_text(encoding="ascii"))
    return CpuReading(cpus, parse_own_ticks((proc / "self" / "stat").read_text(encoding="utf-8")))


def busy_cpus(before: CpuReading, after: CpuReading, allowed: Collection[int]) -> int:
    """How many of the ``allowed`` CPUs other processes kept busy between two readings: their
    work (busy ticks less this process's own) in CPUs' worth, rounded to the nearest whole CPU.

    The CPUs' own lines are read where all of ``allowed`` have one, else (a container's
    ``/proc`` may number its CPUs its own way) the aggregate line of all the CPUs listed
    (``KeyError`` where there is none)."""
    names = [f"cpu{cpu}" for cpu in allowed]
    width = len(allowed)
    if not all(name in before.cpus and name in after.cpus for name in names):
        names, width = [ALL_CPUS], sum(1 for name in after.cpus if name != ALL_CPUS)
    busy = sum(after.cpus[name].busy - before.cpus[name].busy for name in names)
    total = sum(after.cpus[name].total - before.cpus[name].total for name in names)
    if total <= 0 or width == 0:
        return 0
    others = (busy - (after.own - before.own)) / (total / width)
    return min(len(allowed), max(0, int(others + 0.5)))


def allowed_cpus() -> set[int]:
    """The CPUs this process may run on (all of them where the platform cannot say)."""
    try:
        return os.sched_getaffinity(0)
    except (AttributeError, OSError):
        return set(range(os.cpu_count() or 1))


@dataclass(frozen=True)
class ThreadChoice:
    """What ``auto`` found: the CPUs this process may use and how many others keep busy."""

    cpus: int
    busy: int

    @property
    def threads(self) -> int:
        """The CPUs left for this process: at least 1."""
        return max(1, self.cpus - self.busy)


def choose_threads(
    read: Callable[[], CpuReading] = read_cpu_counters,
    sleep: Callable[[float], object] = time.sleep,
    cpus: Callable[[], set[int]] = allowed_cpus,
) -> ThreadChoice:
    """Watch the CPUs for :data:`SAMPLE_SECONDS`; unreadable counters count every CPU as free."""
    allowed = cpus()
    if len(allowed) == 1:  # one thread whatever the load: nothing to watch
        return ThreadChoice(cpus=1, busy=0)
    try:
        before = read()
        sleep(SAMPLE_SECONDS)
        busy = busy_cpus(before, read(), allowed)
    except (OSError, ValueError, LookupError):  # no /proc, or one this parser does not know
        busy = 0
    return ThreadChoice(cpus=len(allowed), busy=busy)


def resolve_threads(request: ThreadRequest, current: int) -> tuple[int, str | None]:
    """The thread count for ``--threads request`` when torch now uses ``current``, and the note to
    print when ``auto`` takes fewer because of other work (None: no note)."""
    if isinstance(request, int):
        return request, None
    if current == 1:  # nothing to take away
        return current, None
    choice = choose_threads()
    if choice.threads >= current:
        return current, None
    plural = "s" if choice.threads > 1 else ""
    note = (
        f"note: {choice.busy} of {choice.cpus} CPUs busy with other work: using {choice.threads} "
        f"torch thread{plural} (--threads to choose)"
    )
    return choice.threads, note


def set_torch_threads(request: ThreadRequest, torch: Any) -> int:
    """Give ``torch`` (the module) the threads that ``--threads request`` asks for, and say so
    in the log when ``auto`` leaves CPUs out and a person reads it there (a terminal: captured
    output and logs, which record the threads, stay as they were whatever the load); returns
    the count.

    ``torch`` is handed over by the caller: ``wikitext_toolkit_core`` never imports it (and its stubs lack
    ``get_num_threads``, hence ``Any``)."""
    threads, note = resolve_threads(request, torch.get_num_threads())
    if note is not None and sys.stderr.isatty():
        logger.info(note)
    torch.set_num_threads(threads)
    return threads
