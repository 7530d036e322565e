"""Progress on stderr that reads well on a terminal and in a log file.

On a terminal, :func:`progress_bar` is an ordinary tqdm bar, redrawn in place. When stderr is not
a terminal (``2>log``, ``nohup``, a batch job) it writes lines instead, each ending in a newline
(tqdm's in-place redraws, ``\\r``-separated, would run together in one line of the file): at most
one every :data:`LOG_INTERVAL_SECONDS`, with the description, the count (of the total, with the
percentage and the time left, when the total is known) and the rate, and a last line when the
work ends, e.g. ``zoneout_lstm ptb/test:  40% 33.0k/82.4k [01:00<01:30, 550tok/s]`` (done,
elapsed<left, rate). A run shorter than the interval prints none.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any, NoReturn, TextIO, TypeVar, overload

from tqdm import tqdm

#: The least time between two progress lines in a log file (and before the first), in seconds.
LOG_INTERVAL_SECONDS = 60.0

T = TypeVar("T")


class _Lines:
    """A file for tqdm that writes each of its redraws (``\\r``, the status, spaces to cover a
    longer previous one) to ``stream`` as a line of its own, and drops the writes that only move
    the cursor (a lone ``\\r`` or ``\\n``)."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        status = text.strip()
        if status:
            self.stream.write(status + "\n")
            self.stream.flush()

    def flush(self) -> None:
        self.stream.flush()


def _log_options() -> dict[str, Any]:
    """tqdm's options for lines in a log file: no bar glyphs (``ncols=0``), nothing before the
    first interval has passed (``delay``), then a line at most every interval, checked at each
    update (``miniters=1``: tqdm's monitor thread, which redraws early, never steps in), and the
    last line kept."""
    return {
        "file": _Lines(sys.stderr),
        "ncols": 0,
        "delay": LOG_INTERVAL_SECONDS,
        "mininterval": LOG_INTERVAL_SECONDS,
        "miniters": 1,
        "leave": True,
    }


@overload
def progress_bar(
    iterable: Iterable[T],
    *,
    total: float | None = ...,
    desc: str,
    unit: str,
    show: bool = ...,
    initial: int = ...,
    unit_scale: bool = ...,
    leave: bool = ...,
) -> tqdm[T]: ...


@overload
def progress_bar(
    iterable: None = ...,
    *,
    total: float | None = ...,
    desc: str,
    unit: str,
    show: bool = ...,
    initial: int = ...,
    unit_scale: bool = ...,
    leave: bool = ...,
) -> tqdm[NoReturn]: ...


def progress_bar(
    iterable: Iterable[Any] | None = None,
    *,
    total: float | None = None,
    desc: str,
    unit: str,
    show: bool = True,
    initial: int = 0,
    unit_scale: bool = False,
    leave: bool = False,
) -> tqdm[Any]:
    """Progress on stderr over ``iterable`` (or, without one, advanced by ``update``): a tqdm bar
    when stderr is a terminal (kept when done only with ``leave``), else lines for a log file
    (see the module docstring); nothing when not ``show``."""
    options: dict[str, Any] = {"leave": leave} if sys.stderr.isatty() else _log_options()
    return tqdm(
        iterable,
        total=total,
        desc=desc,
        unit=unit,
        initial=initial,
        unit_scale=unit_scale,
        disable=not show,
        **options,
    )
