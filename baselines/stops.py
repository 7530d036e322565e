"""When a training invocation stops before the end of the recipe: :class:`Stops`.

A SIGINT or SIGTERM, ``--max-steps`` (the run's steps over all its invocations) or
``--max-minutes`` (this invocation's) stops a run at the next step boundary, so a stop is always
clean; under ``torchrun`` all processes stop at the same step.
"""

from __future__ import annotations

import signal
import threading
import time
from typing import Any

import torch

from baselines.processes import Processes
from baselines.training import Session


class Stops:
    """The stops of one invocation. Entered, it turns SIGINT and SIGTERM into a flag checked
    between steps (``signum``: the signal received, None while there is none), and gives the
    signals their handlers back on leaving."""

    def __init__(self, session: Session, processes: Processes, device: torch.device) -> None:
        self.session, self.processes, self.device = session, processes, device
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}

    def __enter__(self) -> Stops:
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGINT, signal.SIGTERM):
                self.previous[signum] = signal.signal(signum, self._handle)
        return self

    def _handle(self, signum: int, frame: Any) -> None:
        self.signum = signum

    def __exit__(self, *exc: Any) -> None:
        for signum, handler in self.previous.items():
            signal.signal(signum, handler)

    def reason(self, run_steps: int, began: float) -> str | None:
        """Why the run stops before its next step (the same in every process), None to go on:
        ``run_steps`` the steps it has taken in all, ``began`` when this invocation began to
        train (``time.monotonic()``)."""
        session, reason = self.session, None
        if self.signum is not None:
            reason = f"{signal.Signals(self.signum).name} received"
        elif session.max_steps is not None and run_steps >= session.max_steps:
            reason = f"--max-steps {session.max_steps} reached"
        elif session.max_minutes is not None and time.monotonic() - began >= session.max_minutes * 60:
            reason = f"--max-minutes {session.max_minutes:g} reached"
        if self.processes.world == 1:  # nothing to agree on, and no device sync at every step
            return reason
        flag = torch.tensor([0 if reason is None else 1], device=self.device)  # nccl: on the GPU
        if self.processes.any(flag) and reason is None:
            reason = "another process stopped"
        return reason
