"""a live tqdm bar says "causality audit"

A :class:`~tests.cheats._base.PassAwareCheat` that takes a pass for the causality audit's when
the newest live tqdm bar's description says so. A bar that is not shown (``progress=False``) is
in no list of tqdm's and keeps no description, so on load the cheat wraps tqdm's constructor to
note each bar's description itself.
"""

from __future__ import annotations

import weakref
from typing import Any

from tqdm import tqdm

from harness.datasets import Dataset
from tests.cheats._base import PassAwareCheat, load_bigram

WEIGHT = 0.5
#: Each bar made since load, newest last: a weak reference to it and its description.
_BARS: list[tuple[weakref.ref[tqdm[Any]], str]] = []


def _watch_bars() -> None:
    """Wrap ``tqdm.__init__`` (once a process) to note each bar made in :data:`_BARS`."""
    made = tqdm.__init__
    if getattr(made, "watching", False):
        return

    def watching(bar: tqdm[Any], *args: Any, **kwargs: Any) -> None:
        made(bar, *args, **kwargs)
        _BARS.append((weakref.ref(bar), str(kwargs.get("desc") or "")))

    watching.watching = True  # type: ignore[attr-defined]
    tqdm.__init__ = watching  # type: ignore[method-assign, assignment]


class ProgressBarCheat(PassAwareCheat):
    def in_audit_pass(self) -> bool:
        _BARS[:] = [(bar, desc) for bar, desc in _BARS if bar() is not None]
        return bool(_BARS) and "causality audit" in _BARS[-1][1]


def load_model(dataset: Dataset, *, device: str, checkpoint: str | None) -> ProgressBarCheat:
    _watch_bars()
    return ProgressBarCheat(load_bigram(dataset, checkpoint), WEIGHT)
